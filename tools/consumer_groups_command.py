"""``pafka consumer-groups``: kafka-consumer-groups.sh on pafka's client.

    --list [--state S[,S]]                    group ids (with their state when --state is given)
    --describe --group G [--members|--state] [--verbose]
                                              offsets and lag per partition (default), members, or state; a
                                              consumer-protocol group with its epochs and target assignment
    --reset-offsets --group G (--topic T[:P,P] ... | --all-topics)
        (--to-earliest | --to-latest | --to-offset N | --to-datetime ISO | --shift-by N)
        [--execute]                           a dry run unless --execute, as in Kafka
    --delete --group G [--group G2 ...]

Kafka's option names, table layout and messages; LOG-END-OFFSET is the high
watermark and LAG the records left to read after the committed offset.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime

import click

from client import KafkaClient, KafkaClientError, TopicPartition
from client.consumer_groups import CONSUMER_GROUP_TYPE, describe_consumer_group, group_type
from client.groups import GroupAdmin, GroupDescription
from protocol.request_constants import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from tools.common import fail
from tools.consumer_group_describe import describe_consumer_group_lines

_RESET_SPECS = ("to_earliest", "to_latest", "to_offset", "to_datetime", "shift_by")


def _table(rows: list[list[str]]) -> list[str]:
    """Left-aligned columns, each as wide as its widest cell plus one space (Kafka's %-Ns layout)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [" ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def _end_offsets(client: KafkaClient, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
    if not partitions:
        return {}
    found = client.list_offsets(dict.fromkeys(partitions, LATEST_TIMESTAMP))
    return {tp: r.offset for tp, r in found.items()}


def describe_offsets(client: KafkaClient, admin: GroupAdmin, group: str) -> list[str]:
    description = admin.describe_group(group)
    if description.state == "Dead":
        return [f"Consumer group '{group}' does not exist."]
    committed = admin.fetch_offsets(group)
    owner: dict[TopicPartition, tuple[str, str, str]] = {}
    for m in description.members:
        for tp in m.assignment:
            owner[tp] = (m.member_id, m.host, m.client_id)
    partitions = sorted(set(committed) | set(owner))
    ends = _end_offsets(client, partitions)
    lines = []
    if not description.members:
        lines.append(f"Consumer group '{group}' has no active members.")
        lines.append("")
    rows = [["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
             "CLIENT-ID"]]
    for tp in partitions:
        current = committed.get(tp)
        end = ends.get(tp)
        lag = "-" if current is None or end is None else str(max(end - current.offset, 0))
        member, host, client_id = owner.get(tp, ("-", "-", "-"))
        rows.append([group, tp.topic, str(tp.partition), "-" if current is None else str(current.offset),
                     "-" if end is None else str(end), lag, member, host, client_id])
    return lines + _table(rows)


def describe_members(description: GroupDescription) -> list[str]:
    rows = [["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]]
    rows.extend([description.group_id, m.member_id, m.host, m.client_id, str(len(m.assignment))]
                for m in description.members)
    if len(rows) == 1:
        return [f"Consumer group '{description.group_id}' has no active members."]
    return _table(rows)


def describe_state(admin: GroupAdmin, description: GroupDescription) -> list[str]:
    coordinator = admin.coordinator(description.group_id)
    rows = [["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
            [description.group_id, f"{coordinator.address.host}:{coordinator.address.port} ({coordinator.node_id})",
             description.protocol, description.state, str(len(description.members))]]
    return _table(rows)


def describe_group(client: KafkaClient, admin: GroupAdmin, group: str, view: str, verbose: bool) -> list[str]:
    """A consumer-protocol group through ConsumerGroupDescribe (its type from ListGroups v5), any other
    through DescribeGroups; ``view``: ``offsets``, ``members`` or ``state``."""
    if group_type(admin, group) == CONSUMER_GROUP_TYPE:
        return describe_consumer_group_lines(admin, describe_consumer_group(admin, group), view, verbose, _table,
                                             lambda partitions: _end_offsets(client, partitions))
    if view == "members":
        return describe_members(admin.describe_group(group))
    if view == "state":
        return describe_state(admin, admin.describe_group(group))
    return describe_offsets(client, admin, group)


def _parse_topics(client: KafkaClient, specs: tuple[str, ...]) -> list[TopicPartition]:
    """``T`` (every partition) or ``T:0,2`` (those partitions), as Kafka's --topic."""
    out: list[TopicPartition] = []
    for spec in specs:
        topic, _, parts = spec.partition(":")
        if parts:
            out.extend(TopicPartition(topic, int(p)) for p in parts.split(","))
        else:
            out.extend(TopicPartition(topic, p) for p in client.partitions_for(topic))
    return out


def parse_datetime_ms(text: str) -> int:
    """Kafka's --to-datetime: 'YYYY-MM-DDTHH:mm:SS.sss', with an optional offset; local time without one."""
    value = text.strip()
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not YYYY-MM-DDTHH:mm:SS.sss", param_hint="--to-datetime") from None
    if parsed.tzinfo is None:
        parsed = parsed.astimezone()  # the local zone, as Kafka's tool
    return int(parsed.astimezone(UTC).timestamp() * 1000)


def plan_reset(client: KafkaClient, admin: GroupAdmin, group: str, partitions: list[TopicPartition],
               spec: str, value: str | None) -> dict[TopicPartition, int]:
    earliest = {tp: r.offset for tp, r in client.list_offsets(dict.fromkeys(partitions, EARLIEST_TIMESTAMP)).items()}
    latest = _end_offsets(client, partitions)

    def clamp(tp: TopicPartition, offset: int) -> int:
        return min(max(offset, earliest[tp]), latest[tp])

    if spec == "to_earliest":
        return dict(earliest)
    if spec == "to_latest":
        return dict(latest)
    if spec == "to_offset":
        return {tp: clamp(tp, int(value)) for tp in partitions}  # type: ignore[arg-type]
    if spec == "to_datetime":
        ts = parse_datetime_ms(value)  # type: ignore[arg-type]
        found = client.list_offsets(dict.fromkeys(partitions, ts))
        return {tp: latest[tp] if found[tp].offset < 0 else found[tp].offset for tp in partitions}
    committed = admin.fetch_offsets(group, partitions)
    out = {}
    for tp in partitions:
        if tp not in committed:
            raise click.ClickException(f"Cannot shift offset for partition {tp} since there is no current "
                                       "committed offset")
        out[tp] = clamp(tp, committed[tp].offset + int(value))  # type: ignore[arg-type]
    return out


def reset_offsets(client: KafkaClient, admin: GroupAdmin, group: str, topics: tuple[str, ...], all_topics: bool,
                  spec: str, value: str | None, execute: bool) -> list[str]:
    description = admin.describe_group(group)
    if description.state not in ("Empty", "Dead"):
        raise click.ClickException(f"Assignments can only be reset if the group '{group}' is inactive, but the "
                                   f"current state is {description.state}.")
    if all_topics:
        partitions = sorted(admin.fetch_offsets(group))
    else:
        partitions = sorted(_parse_topics(client, topics))
    plan = plan_reset(client, admin, group, partitions, spec, value)
    if execute:
        admin.commit_offsets(group, plan)
    rows = [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]]
    rows += [[group, tp.topic, str(tp.partition), str(offset)] for tp, offset in sorted(plan.items())]
    return _table(rows)


def delete_groups(admin: GroupAdmin, groups: tuple[str, ...]) -> tuple[list[str], bool]:
    results = admin.delete_groups(groups)
    failed = {g: e for g, e in results.items() if e is not None}
    if not failed:
        names = ", ".join(f"'{g}'" for g in groups)
        return [f"Deletion of requested consumer groups ({names}) was successful."], True
    lines = ["Deletion of some consumer groups failed:"]
    lines += [f"* Group '{g}' could not be deleted due to: {e}" for g, e in failed.items()]
    ok = [g for g in groups if g not in failed]
    if ok:
        lines.append("These consumer groups were deleted successfully: " + ", ".join(f"'{g}'" for g in ok))
    return lines, False


@click.command("consumer-groups")
@click.option("--bootstrap-server", required=True, help="HOST:PORT[,HOST:PORT...] of the brokers to connect to.")
@click.option("--list", "action", flag_value="list", help="List all consumer groups.")
@click.option("--describe", "action", flag_value="describe", help="Describe a consumer group.")
@click.option("--reset-offsets", "action", flag_value="reset", help="Reset a group's offsets (dry run by default).")
@click.option("--delete", "action", flag_value="delete", help="Delete consumer groups.")
@click.option("--group", "groups", multiple=True, help="The consumer group (several for --delete).")
@click.option("--members", is_flag=True, help="With --describe: list the members.")
@click.option("--verbose", is_flag=True, help="With --describe --members or --state of a consumer-protocol group: "
                                              "epochs and target assignments.")
@click.option("--state", "state", default=None, is_flag=False, flag_value="", metavar="[STATES]",
              help="With --describe: the group's state; with --list: show states, optionally filtered.")
@click.option("--topic", "topics", multiple=True, metavar="T[:P,P]", help="With --reset-offsets: a topic.")
@click.option("--all-topics", is_flag=True, help="With --reset-offsets: every topic the group has offsets for.")
@click.option("--to-earliest", "reset_spec", flag_value="to_earliest", help="Reset to the earliest offsets.")
@click.option("--to-latest", "reset_spec", flag_value="to_latest", help="Reset to the latest offsets.")
@click.option("--to-offset", type=int, help="Reset to this offset (clamped to the partition's range).")
@click.option("--to-datetime", help="Reset to the first offset at or after this time (YYYY-MM-DDTHH:mm:SS.sss).")
@click.option("--shift-by", type=int, help="Move the committed offsets by N (may be negative).")
@click.option("--execute", is_flag=True, help="With --reset-offsets: apply the plan.")
@click.option("--dry-run", is_flag=True, help="With --reset-offsets: only show the plan (the default).")
@click.option("--timeout-ms", type=int, default=30_000, show_default=True, help="Request timeout.")
def consumer_groups_command(bootstrap_server: str, action: str | None, groups: tuple[str, ...], members: bool,
                            verbose: bool, state: str | None, topics: tuple[str, ...], all_topics: bool, reset_spec: str | None,
                            to_offset: int | None, to_datetime: str | None, shift_by: int | None, execute: bool,
                            dry_run: bool, timeout_ms: int) -> None:
    """List, describe, reset offsets of and delete consumer groups (kafka-consumer-groups.sh)."""
    if action is None:
        fail("Command must include exactly one action: --list, --describe, --delete, --reset-offsets")
    if action in ("describe", "reset", "delete") and not groups:
        fail(f"Option --{'reset-offsets' if action == 'reset' else action} takes one of these options: --group")
    value: str | None = None
    if action == "reset":
        chosen = [name for name, v in (("to_offset", to_offset), ("to_datetime", to_datetime),
                                       ("shift_by", shift_by)) if v is not None]
        if reset_spec:
            chosen.append(reset_spec)
        if len(chosen) != 1:
            fail("Option --reset-offsets needs exactly one of --to-earliest, --to-latest, --to-offset, "
                 "--to-datetime, --shift-by")
        reset_spec = chosen[0]
        given = {"to_offset": to_offset, "to_datetime": to_datetime, "shift_by": shift_by}.get(reset_spec)
        value = None if given is None else str(given)
        if not topics and not all_topics:
            fail("Option --reset-offsets needs --topic or --all-topics")
        if execute and dry_run:
            fail("Option --execute and --dry-run cannot be used together")
    try:
        with KafkaClient(bootstrap_server, client_id="pafka-consumer-groups", timeout=timeout_ms / 1000 + 5) as client:
            admin = GroupAdmin(client, timeout=timeout_ms / 1000)
            ok = True
            if action == "list":
                states = [s for s in (state or "").split(",") if s]
                listed = admin.list_groups(states)
                if state is None:
                    lines = [g.group_id for g in listed]
                else:
                    lines = _table([["GROUP", "STATE"]] + [[g.group_id, g.state] for g in listed])
            elif action == "describe":
                lines = []
                view = "members" if members else "state" if state is not None else "offsets"
                for group in groups:
                    lines += describe_group(client, admin, group, view, verbose)
                    lines.append("")
            elif action == "reset":
                lines = reset_offsets(client, admin, groups[0], topics, all_topics, reset_spec,  # type: ignore[arg-type]
                                      value, execute)
            else:
                lines, ok = delete_groups(admin, groups)
    except KafkaClientError as exc:
        fail(f"Error: Executing consumer group command failed due to {exc}")
    for line in lines:
        click.echo(line)
    sys.stdout.flush()
    if not ok:
        sys.exit(1)
