"""``pafka consumer-groups --describe`` of a consumer-protocol group, as Kafka 4's kafka-consumer-groups.sh.

A group whose type is ``consumer`` (ListGroups v5) is described with
ConsumerGroupDescribe: the offsets and lag of its partitions with the member
that owns each now (the default), its members (``--members``; with
``--verbose`` each member's epoch and current assignment, and the target
assignment with its epoch), or its state (``--state``; with ``--verbose`` the
group epoch and the target assignment's epoch). Partitions are written as
Kafka's tool writes them: ``topic:0,1;other:2``, ``-`` for none.
"""

from __future__ import annotations

from collections.abc import Callable

from client import TopicPartition
from client.consumer_groups import ConsumerGroupDescription
from client.groups import GroupAdmin

Table = Callable[[list[list[str]]], list[str]]
EndOffsets = Callable[[list[TopicPartition]], dict[TopicPartition, int]]


def assignment_text(partitions: list[TopicPartition]) -> str:
    """Kafka's getAssignmentString: per topic its sorted partitions, topics sorted, ``-`` for none."""
    if not partitions:
        return "-"
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ";".join(sorted(f"{topic}:{','.join(str(p) for p in sorted(ps))}" for topic, ps in by_topic.items()))


def _absent(description: ConsumerGroupDescription) -> list[str] | None:
    """The line Kafka prints instead of a table for a group that is gone or has nobody."""
    if description.state == "Dead":
        return [f"Consumer group '{description.group_id}' does not exist."]
    if not description.members:
        return [f"Consumer group '{description.group_id}' has no active members."]
    return None


def describe_consumer_offsets(admin: GroupAdmin, description: ConsumerGroupDescription, end_offsets: EndOffsets,
                              table: Table) -> list[str]:
    if description.state == "Dead":
        return [f"Consumer group '{description.group_id}' does not exist."]
    group = description.group_id
    committed = admin.fetch_offsets(group)
    owner = {tp: (m.member_id, m.host, m.client_id) for m in description.members for tp in m.assignment}
    partitions = sorted(set(committed) | set(owner))
    ends = end_offsets(partitions)
    lines = [] if description.members else [f"Consumer group '{group}' has no active members.", ""]
    rows = [["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
             "CLIENT-ID"]]
    for tp in partitions:
        current, end = committed.get(tp), ends.get(tp)
        lag = "-" if current is None or end is None else str(max(end - current.offset, 0))
        member, host, client_id = owner.get(tp, ("-", "-", "-"))
        rows.append([group, tp.topic, str(tp.partition), "-" if current is None else str(current.offset),
                     "-" if end is None else str(end), lag, member, host, client_id])
    return lines + table(rows)


def describe_consumer_members(description: ConsumerGroupDescription, verbose: bool, table: Table) -> list[str]:
    absent = _absent(description)
    if absent is not None:
        return absent
    instances = any(m.instance_id for m in description.members)
    header = ["GROUP", "CONSUMER-ID"] + (["GROUP-INSTANCE-ID"] if instances else []) + [
        "HOST", "CLIENT-ID", "#PARTITIONS"]
    if verbose:
        header += ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
    rows = [header]
    for m in description.members:
        row = [description.group_id, m.member_id] + ([m.instance_id or ""] if instances else []) + [
            m.host, m.client_id, str(len(m.assignment))]
        if verbose:
            row += [str(m.member_epoch), assignment_text(m.assignment), str(description.assignment_epoch),
                    assignment_text(m.target_assignment)]
        rows.append(row)
    return table(rows)


def describe_consumer_state(admin: GroupAdmin, description: ConsumerGroupDescription, verbose: bool,
                            table: Table) -> list[str]:
    if description.state == "Dead":
        return [f"Consumer group '{description.group_id}' does not exist."]
    coordinator = admin.coordinator(description.group_id)
    where = f"{coordinator.address.host}:{coordinator.address.port} ({coordinator.node_id})"
    strategy = description.assignor_name or "-"
    if verbose:
        return table([["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH",
                       "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"],
                      [description.group_id, where, strategy, description.state, str(description.group_epoch),
                       str(description.assignment_epoch), str(len(description.members))]])
    return table([["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                  [description.group_id, where, strategy, description.state, str(len(description.members))]])


def describe_consumer_group_lines(admin: GroupAdmin, description: ConsumerGroupDescription, view: str,
                                  verbose: bool, table: Table, end_offsets: EndOffsets) -> list[str]:
    """``view``: ``offsets``, ``members`` or ``state``."""
    if view == "members":
        return describe_consumer_members(description, verbose, table)
    if view == "state":
        return describe_consumer_state(admin, description, verbose, table)
    return describe_consumer_offsets(admin, description, end_offsets, table)
