"""``pafka share-groups``: kafka-share-groups.sh on pafka's client.

    --list [--state S[,S]]                    share group ids (with their state when --state is given)
    --describe --group G [--members | --state | --offsets] [--verbose]
                                              start offsets and lag per share partition (default; with the
                                              leader epoch when verbose), members, or state
    --reset-offsets --group G (--topic T[:P,P] ... | --all-topics)
        (--to-earliest | --to-latest | --to-datetime ISO | --by-duration PnDTnHnMnS)
        [--dry-run | --execute]               a dry run unless --execute, as in Kafka
    --delete --group G [--group G2 ...]
    --delete-offsets --group G --topic T [--topic T2 ...]

Kafka's option names, table layout and messages. START-OFFSET is the
share-partition start offset (``-`` when the partition has none yet), LAG the
records from it to the end of the partition not yet acknowledged (``-`` when the
broker cannot tell).
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable

import click

from client import KafkaClient, KafkaClientError, TopicPartition
from client.errors import KafkaApiError
from client.groups import GroupAdmin
from client.share_groups import (
    ShareGroupDescription,
    alter_share_group_offsets,
    delete_share_group_offsets,
    describe_share_group,
    describe_share_group_offsets,
    list_share_groups,
)
from protocol.errors import ErrorCode
from protocol.request_constants import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from tools.common import fail
from tools.consumer_groups_command import _parse_topics, _table, parse_datetime_ms

#: Errors the delete offsets command does not answer itself (the command fails with them).
_RETRIABLE_HERE = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                             ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})
_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


def parse_duration_ms(text: str) -> int:
    """Kafka's --by-duration: an ISO-8601 duration ``PnDTnHnMnS``."""
    match = _DURATION.match(text.strip().upper())
    if match is None or text.strip().upper() in ("P", "PT"):
        raise click.BadParameter(f"{text!r} is not PnDTnHnMnS", param_hint="--by-duration")
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return int((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)


def _describe(admin: GroupAdmin, group: str) -> ShareGroupDescription | None:
    """The group, or None when its coordinator does not have it."""
    try:
        return describe_share_group(admin, group)
    except KafkaApiError as exc:
        if exc.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
            return None
        raise


def describe_offsets(admin: GroupAdmin, group: str, verbose: bool) -> list[str]:
    """Kafka's printOffsets: START-OFFSET (``-`` while none) and LAG (``-`` while unknown); LEADER-EPOCH too
    with --verbose."""
    describe_share_group(admin, group)  # an absent group fails here, as Kafka's describeShareGroups
    offsets = describe_share_group_offsets(admin, group)
    head = ["GROUP", "TOPIC", "PARTITION", *(["LEADER-EPOCH"] if verbose else []), "START-OFFSET", "LAG"]
    rows = [head]
    for tp, o in sorted(offsets.items()):
        epoch = ["-" if o.leader_epoch < 0 else str(o.leader_epoch)] if verbose else []
        rows.append([group, tp.topic, str(tp.partition), *epoch, "-" if o.start_offset < 0 else str(o.start_offset),
                     "-" if o.lag < 0 else str(o.lag)])
    return _table(rows)


def _assignment(partitions: list[TopicPartition]) -> str:
    """Kafka's getAssignmentString: ``topic:0,1;other:2``."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ";".join(sorted(f"{t}:{','.join(str(p) for p in sorted(ps))}" for t, ps in by_topic.items()))


def describe_members(description: ShareGroupDescription, verbose: bool) -> list[str]:
    if not description.members:
        return [f"Share group '{description.group_id}' has no active members."]
    head = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    rows = [head + (["MEMBER-EPOCH"] if verbose else []) + ["ASSIGNMENT"]]
    for m in sorted(description.members, key=lambda m: m.member_id):
        assignment = _assignment(m.assignment)
        rows.append([description.group_id, m.member_id, m.host, m.client_id, str(len(m.assignment))]
                    + ([str(m.member_epoch)] if verbose else []) + [assignment])
    return _table(rows)


def describe_state(admin: GroupAdmin, description: ShareGroupDescription, verbose: bool) -> list[str]:
    coordinator = admin.coordinator(description.group_id)
    head = ["GROUP", "COORDINATOR (ID)", "STATE"]
    row = [description.group_id, f"{coordinator.address.host}:{coordinator.address.port}  ({coordinator.node_id})",
           description.state]
    if verbose:
        head += ["GROUP-EPOCH", "ASSIGNMENT-EPOCH"]
        row += [str(description.group_epoch), str(description.assignment_epoch)]
    return _table([[*head, "#MEMBERS"], [*row, str(len(description.members))]])


def describe_group(admin: GroupAdmin, group: str, view: str, verbose: bool) -> list[str]:
    if view == "offsets":
        return describe_offsets(admin, group, verbose)
    description = describe_share_group(admin, group)
    return describe_members(description, verbose) if view == "members" else describe_state(admin, description,
                                                                                          verbose)


def plan_reset(client: KafkaClient, partitions: list[TopicPartition], spec: str,
               value: str | None) -> dict[TopicPartition, int]:
    if spec in ("to_earliest", "to_latest"):
        ts = EARLIEST_TIMESTAMP if spec == "to_earliest" else LATEST_TIMESTAMP
        return {tp: r.offset for tp, r in client.list_offsets(dict.fromkeys(partitions, ts)).items()}
    at = parse_datetime_ms(value or "") if spec == "to_datetime" else int(time.time() * 1000) - parse_duration_ms(
        value or "")
    latest = {tp: r.offset for tp, r in client.list_offsets(dict.fromkeys(partitions, LATEST_TIMESTAMP)).items()}
    found = client.list_offsets(dict.fromkeys(partitions, at))
    return {tp: latest[tp] if found[tp].offset < 0 else found[tp].offset for tp in partitions}


def reset_offsets(client: KafkaClient, admin: GroupAdmin, group: str, topics: tuple[str, ...], all_topics: bool,
                  spec: str, value: str | None, execute: bool) -> list[str]:
    description = _describe(admin, group)  # an absent group is reset too: the broker creates it
    if description is not None and description.members:
        raise click.ClickException(f"Share group '{group}' is not empty.")
    partitions = (sorted(describe_share_group_offsets(admin, group)) if all_topics
                  else sorted(_parse_topics(client, topics)))
    plan = plan_reset(client, partitions, spec, value)
    if execute:
        failed = {tp: e for tp, e in alter_share_group_offsets(admin, group, plan).items() if e is not None}
        if failed:
            raise click.ClickException("; ".join(f"{tp.topic}-{tp.partition}: {e}" for tp, e in failed.items()))
    rows = [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]]
    rows += [[group, tp.topic, str(tp.partition), str(offset)] for tp, offset in sorted(plan.items())]
    return _table(rows)


def delete_groups(admin: GroupAdmin, groups: tuple[str, ...]) -> tuple[list[str], bool]:
    """Kafka's deleteShareGroups: only listed share groups that are empty are sent to DeleteGroups (so a
    consumer group of that name is never deleted by this tool)."""
    listed = {g.group_id: g.state for g in list_share_groups(admin)}
    failed: dict[str, str] = {}
    for group in dict.fromkeys(groups):
        state = listed.get(group)
        if state is None:
            failed[group] = f"Group '{group}' is not a share group."
        elif state == "Dead":
            failed[group] = f"Share group '{group}' group state is DEAD."
        elif state != "Empty":
            failed[group] = f"Share group '{group}' is not EMPTY."
    wanted = [g for g in dict.fromkeys(groups) if g not in failed]
    results = admin.delete_groups(wanted) if wanted else {}
    failed.update({g: e.message or str(e) for g, e in results.items() if e is not None})
    if not failed:
        names = ", ".join(f"'{g}'" for g in wanted)
        return [f"Deletion of requested share groups ({names}) was successful."], True
    lines = ["Error: Deletion of some share groups failed:"]
    lines += [f"* Group '{g}' could not be deleted due to: {e}" for g, e in failed.items()]
    ok = [g for g in wanted if g not in failed]
    if ok:
        lines.append("These share groups were deleted successfully: " + ", ".join(f"'{g}'" for g in ok))
    return lines, False


def delete_offsets(admin: GroupAdmin, group: str, topics: tuple[str, ...]) -> tuple[list[str], bool]:
    """Kafka's deleteOffsets: the group's error, else each topic's status."""
    try:
        results = delete_share_group_offsets(admin, group, [t.partition(":")[0] for t in topics])
    except KafkaApiError as exc:
        if exc.error_code in _RETRIABLE_HERE:
            raise
        return [f"Error: {exc.message or exc}"], False
    rows = [["TOPIC", "STATUS"]]
    rows += [[t, "Successful" if e is None else f"Error: {e.message or e}"] for t, e in sorted(results.items())]
    return _table(rows), all(e is None for e in results.values())


def _reset_spec(reset_spec: str | None, to_datetime: str | None, by_duration: str | None) -> tuple[str, str | None]:
    chosen = [s for s, v in (("to_datetime", to_datetime), ("by_duration", by_duration)) if v is not None]
    if reset_spec:
        chosen.append(reset_spec)
    if len(chosen) != 1:
        fail("Option --reset-offsets needs exactly one of --to-earliest, --to-latest, --to-datetime, --by-duration")
    return chosen[0], {"to_datetime": to_datetime, "by_duration": by_duration}.get(chosen[0])


def _check_options(action: str | None, groups: tuple[str, ...], topics: tuple[str, ...], all_topics: bool,
                   execute: bool, dry_run: bool) -> None:
    if action is None:
        fail("Command must include exactly one action: --list, --describe, --delete, --reset-offsets, "
             "--delete-offsets")
    if action != "list" and not groups:
        fail(f"Option --{action} takes one of these options: --group")
    if action == "reset-offsets" and not topics and not all_topics:
        fail("Option --reset-offsets needs --topic or --all-topics")
    if action == "delete-offsets" and not topics:
        fail("Option --delete-offsets needs --topic")
    if execute and dry_run:
        fail("Option --execute and --dry-run cannot be used together")


@click.command("share-groups")
@click.option("--bootstrap-server", required=True, help="HOST:PORT[,HOST:PORT...] of the brokers to connect to.")
@click.option("--list", "action", flag_value="list", help="List all share groups.")
@click.option("--describe", "action", flag_value="describe", help="Describe a share group.")
@click.option("--reset-offsets", "action", flag_value="reset-offsets",
              help="Reset an empty share group's start offsets (dry run by default).")
@click.option("--delete", "action", flag_value="delete", help="Delete share groups.")
@click.option("--delete-offsets", "action", flag_value="delete-offsets",
              help="Delete an empty share group's offsets for some topics.")
@click.option("--group", "groups", multiple=True, help="The share group (several for --delete).")
@click.option("--members", "view", flag_value="members", help="With --describe: the members.")
@click.option("--offsets", "view", flag_value="offsets", help="With --describe: the start offsets (the default).")
@click.option("--state", "state", default=None, is_flag=False, flag_value="", metavar="[STATES]",
              help="With --describe: the group's state; with --list: show states, optionally filtered.")
@click.option("--verbose", is_flag=True, help="With --describe: the epochs.")
@click.option("--topic", "topics", multiple=True, metavar="T[:P,P]", help="With --reset-offsets/--delete-offsets.")
@click.option("--all-topics", is_flag=True, help="With --reset-offsets: every topic the group has offsets for.")
@click.option("--to-earliest", "reset_spec", flag_value="to_earliest", help="Reset to the earliest offsets.")
@click.option("--to-latest", "reset_spec", flag_value="to_latest", help="Reset to the latest offsets.")
@click.option("--to-datetime", help="Reset to the first offset at or after this time (YYYY-MM-DDTHH:mm:SS.sss).")
@click.option("--by-duration", help="Reset to the first offset at or after this long ago (PnDTnHnMnS).")
@click.option("--execute", is_flag=True, help="With --reset-offsets: apply the plan.")
@click.option("--dry-run", is_flag=True, help="With --reset-offsets: only show the plan (the default).")
@click.option("--timeout-ms", type=int, default=30_000, show_default=True, help="Request timeout.")
def share_groups_command(bootstrap_server: str, action: str | None, groups: tuple[str, ...], view: str | None,
                         state: str | None, verbose: bool, topics: tuple[str, ...], all_topics: bool,
                         reset_spec: str | None, to_datetime: str | None, by_duration: str | None, execute: bool,
                         dry_run: bool, timeout_ms: int) -> None:
    """List, describe, reset offsets of and delete share groups (kafka-share-groups.sh)."""
    _check_options(action, groups, topics, all_topics, execute, dry_run)
    spec, value = _reset_spec(reset_spec, to_datetime, by_duration) if action == "reset-offsets" else ("", None)
    try:
        with KafkaClient(bootstrap_server, client_id="pafka-share-groups", timeout=timeout_ms / 1000 + 5) as client:
            admin = GroupAdmin(client, timeout=timeout_ms / 1000)
            actions: dict[str, Callable[[], tuple[list[str], bool]]] = {
                "list": lambda: (_list(admin, state), True),
                "describe": lambda: (_describe_all(admin, groups, view or ("state" if state is not None
                                                                          else "offsets"), verbose), True),
                "reset-offsets": lambda: (reset_offsets(client, admin, groups[0], topics, all_topics, spec, value,
                                                        execute), True),
                "delete": lambda: delete_groups(admin, groups),
                "delete-offsets": lambda: delete_offsets(admin, groups[0], topics),
            }
            lines, ok = actions[action or "list"]()
    except KafkaClientError as exc:
        reason = exc.message if isinstance(exc, KafkaApiError) and exc.message else exc
        fail(f"Error: Executing share group command failed due to {reason}")
    for line in lines:
        click.echo(line)
    sys.stdout.flush()
    if not ok:
        sys.exit(1)


def _list(admin: GroupAdmin, state: str | None) -> list[str]:
    listed = list_share_groups(admin, [s for s in (state or "").split(",") if s])
    if state is None:
        return [g.group_id for g in listed]
    return _table([["GROUP", "STATE"]] + [[g.group_id, g.state] for g in listed])


def _describe_all(admin: GroupAdmin, groups: tuple[str, ...], view: str, verbose: bool) -> list[str]:
    lines: list[str] = []
    for group in groups:
        lines += describe_group(admin, group, view, verbose)
        lines.append("")
    return lines
