"""Online migration between the classic and the consumer protocol on a fake clock: a classic group upgraded
by a consumer-protocol member, its classic members reconciling through JoinGroup/SyncGroup/Heartbeat, the
downgrade when the last consumer-protocol member leaves, and ``group.consumer.migration.policy``."""

from __future__ import annotations

import struct
from dataclasses import replace

import pytest

from coordinator.group.consumer_group_migration import decode_subscription
from coordinator.group.group_metadata import GroupState, OffsetAndMetadata
from coordinator.group.group_requests import HeartbeatRequest, LeaveGroupRequest, LeavingMember, SyncGroupRequest
from protocol.consumer_protocol import assigned_partitions, encode_assignment, encode_subscription
from protocol.errors import ErrorCode
from tests.coordinator.fakes import join_request
from tests.coordinator.test_consumer_group_heartbeat import TOPIC, Harness, Member


def subscription_v1(topics: list[str], owned: dict[str, list[int]]) -> bytes:
    """ConsumerProtocolSubscription v1: topics, null user data, owned partitions."""
    out = bytearray(struct.pack(">hi", 1, len(topics)))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    out += struct.pack(">ii", -1, len(owned))
    for topic, partitions in owned.items():
        out += struct.pack(">h", len(topic)) + topic.encode() + struct.pack(">i", len(partitions))
        out += b"".join(struct.pack(">i", p) for p in partitions)
    return bytes(out)


class ClassicClient:
    """A cooperative classic consumer of topic ``t``: it owns what its last SyncGroup gave it."""

    def __init__(self, h: Harness, member_id: str = "", protocol: str = "cooperative-sticky") -> None:
        self.h, self.member_id, self.protocol = h, member_id, protocol
        self.generation = -1
        self.owned: set[int] = set()

    def join_request(self, require_known_member_id: bool = True):  # type: ignore[no-untyped-def]
        metadata = subscription_v1(["t"], {"t": sorted(self.owned)} if self.owned else {})
        return join_request("g", member_id=self.member_id, protocols=[(self.protocol, metadata)],
                            require_known_member_id=require_known_member_id)

    def join(self) -> ErrorCode:
        """JoinGroup then SyncGroup, in a consumer group (answered at once)."""
        joined = self.h.coordinator.join_group(self.join_request())
        result = joined.result()
        if result.error == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = result.member_id
            return self.join()
        if result.error != ErrorCode.NO_ERROR:
            return result.error
        assert (result.leader_id, result.members) == ("", [])  # nobody assigns in a consumer group
        self.generation = result.generation_id
        synced = self.h.coordinator.sync_group(SyncGroupRequest("g", self.generation, self.member_id, None,
                                                                "consumer", self.protocol, {}))
        if synced.result().error == ErrorCode.NO_ERROR:
            self.owned = {p for _, p in assigned_partitions(synced.result().assignment)}
        return synced.result().error

    def beat(self) -> ErrorCode:
        answer = self.h.coordinator.heartbeat(HeartbeatRequest("g", self.generation, self.member_id, None))
        return answer.result()

    def poll(self) -> None:
        """Heartbeat, and rejoin when told to (as a client's poll loop does)."""
        if self.beat() in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION):
            assert self.join() in (ErrorCode.NO_ERROR, ErrorCode.REBALANCE_IN_PROGRESS)


def classic_rebalance(h: Harness, clients: list[ClassicClient], split: list[list[int]]) -> None:
    """One classic rebalance of ``clients`` (all rejoining at once); the leader hands out ``split``."""
    joins = [h.coordinator.join_group(c.join_request(require_known_member_id=False)) for c in clients]
    h.clock.advance(0)
    results = [j.result() for j in joins]
    for client, result in zip(clients, results, strict=True):
        assert result.error == ErrorCode.NO_ERROR, result
        client.member_id, client.generation = result.member_id, result.generation_id
    assignments = {c.member_id: encode_assignment({"t": parts}) for c, parts in zip(clients, split, strict=True)}
    syncs = [h.coordinator.sync_group(SyncGroupRequest(
        "g", c.generation, c.member_id, None, "consumer", c.protocol,
        assignments if c.member_id == results[0].leader_id else {})) for c in clients]
    h.clock.advance(0)
    for client, synced in zip(clients, syncs, strict=True):
        assert synced.result().error == ErrorCode.NO_ERROR
        client.owned = {p for _, p in assigned_partitions(synced.result().assignment)}


def classic_group_of_two(h: Harness) -> tuple[ClassicClient, ClassicClient]:
    """Two classic members, stable, sharing the 12 partitions of ``t`` (as the leader assigned them)."""
    a, b = ClassicClient(h), ClassicClient(h)
    classic_rebalance(h, [a, b], [list(range(6)), list(range(6, 12))])
    group = h.coordinator.manager.get_group("g")
    assert group is not None and group.is_(GroupState.STABLE) and len(group.members) == 2
    assert a.owned == set(range(6)) and b.owned == set(range(6, 12))
    return a, b


def run(classic: list[ClassicClient], members: list[Member], rounds: int = 8) -> None:
    """Everybody polls in turn; no partition is ever owned by two of them."""
    for _ in range(rounds):
        for client in classic:
            client.poll()
            check_no_overlap(classic, members)
        for member in members:
            member.beat()
            check_no_overlap(classic, members)


def check_no_overlap(classic: list[ClassicClient], members: list[Member]) -> None:
    owned = [p for c in classic for p in c.owned] + [p for m in members for p in m.partitions]
    assert len(owned) == len(set(owned)), owned


def test_subscription_versions_are_read_with_their_owned_partitions() -> None:
    assert decode_subscription(encode_subscription(["t", "u"])).topics == ("t", "u")
    read = decode_subscription(subscription_v1(["t"], {"t": [3, 1]}))
    assert (read.version, read.topics, read.owned) == (1, ("t",), (("t", 3), ("t", 1)))


def test_a_consumer_member_upgrades_a_classic_group_and_everyone_reconciles() -> None:
    h = Harness()
    a, b = classic_group_of_two(h)
    generation = h.coordinator.manager.get_group("g").generation_id  # type: ignore[union-attr]
    c = Member(h, "c")
    group = h.group
    assert group.group_epoch == generation + 1 and set(group.members) == {a.member_id, b.member_id, "c"}
    assert group.members[a.member_id].classic is not None and group.members["c"].classic is None
    assert c.partitions == set()  # everything still owned by the classic members
    assert h.coordinator.manager.get_group("g").is_(GroupState.EMPTY)  # type: ignore[union-attr]
    assert a.beat() == ErrorCode.REBALANCE_IN_PROGRESS
    run([a, b], [c])
    assert {len(a.owned), len(b.owned), len(c.partitions)} == {4}
    assert a.owned | b.owned | c.partitions == set(range(12))
    assert str(h.group.state) == "Stable"
    assert a.beat() == ErrorCode.NO_ERROR and a.generation == h.group.group_epoch


def test_classic_members_commit_with_their_generation() -> None:
    h = Harness()
    a, _b = classic_group_of_two(h)
    Member(h, "c")
    outcomes: list[dict[tuple[str, int], ErrorCode]] = []
    offsets = {("t", 0): OffsetAndMetadata(7, -1, "", 0)}
    h.coordinator.handle_commit_offsets("g", a.member_id, None, a.generation, offsets, outcomes.append,
                                        member_epoch_api=False)
    h.coordinator.handle_commit_offsets("g", a.member_id, None, a.generation + 5, offsets, outcomes.append,
                                        member_epoch_api=False)
    assert [o[("t", 0)] for o in outcomes] == [ErrorCode.NO_ERROR, ErrorCode.ILLEGAL_GENERATION]
    assert h.coordinator.consumer_offset_fetch_error("g", a.member_id, a.generation) is None
    assert h.coordinator.consumer_offset_fetch_error("g", a.member_id, a.generation + 5) == ErrorCode.ILLEGAL_GENERATION


@pytest.mark.parametrize("policy", ["downgrade", "disabled"])
def test_no_upgrade_when_the_policy_forbids_it(policy: str) -> None:
    h = Harness(migration_policy=policy)
    classic_group_of_two(h)
    result = h.join("c")
    assert (result.error, result.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group g is not a consumer group")
    assert "g" not in h.coordinator.consumer_groups.groups


def test_no_upgrade_of_a_group_that_does_not_use_the_consumer_protocol() -> None:
    h = Harness()
    request = replace(join_request("g", member_id="", require_known_member_id=False), protocol_type="connect")
    h.coordinator.join_group(request)
    assert h.join("c").error == ErrorCode.GROUP_ID_NOT_FOUND


def test_the_last_consumer_member_leaving_downgrades_the_group() -> None:
    h = Harness()
    a, b = classic_group_of_two(h)
    c = Member(h, "c")
    run([a, b], [c])
    epoch = h.group.group_epoch
    assert h.heartbeat("c", c.epoch).error == ErrorCode.NO_ERROR
    assert h.heartbeat("c", -1).error == ErrorCode.NO_ERROR
    assert "g" not in h.coordinator.consumer_groups.groups
    classic = h.coordinator.manager.get_group("g")
    assert classic is not None and classic.is_(GroupState.PREPARING_REBALANCE)
    assert classic.generation_id == epoch and set(classic.members) == {a.member_id, b.member_id}
    assert {p for _, p in assigned_partitions(classic.members[a.member_id].assignment)} == a.owned
    # The classic members learn of the rebalance from their heartbeats and rejoin the classic way.
    assert a.beat() == ErrorCode.REBALANCE_IN_PROGRESS and b.beat() == ErrorCode.REBALANCE_IN_PROGRESS
    classic_rebalance(h, [a, b], [list(range(6)), list(range(6, 12))])
    assert classic.is_(GroupState.STABLE) and classic.generation_id == epoch + 1
    assert a.owned | b.owned == set(range(12))


def test_the_consumer_member_whose_session_expires_downgrades_the_group_too() -> None:
    h = Harness(session_timeout_ms=45_000)
    a, b = classic_group_of_two(h)
    c = Member(h, "c")
    for _ in range(12):  # c never heartbeats again; a and b do, until the group is a classic one
        h.clock.advance(5_000)
        if "g" not in h.coordinator.consumer_groups.groups:
            break
        a.poll()
        b.poll()
    assert c.member_id == "c" and "g" not in h.coordinator.consumer_groups.groups
    assert h.coordinator.manager.get_group("g").members.keys() == {a.member_id, b.member_id}  # type: ignore[union-attr]


def test_no_downgrade_when_the_policy_forbids_it() -> None:
    h = Harness(migration_policy="upgrade")
    a, b = classic_group_of_two(h)
    c = Member(h, "c")
    run([a, b], [c])
    assert h.heartbeat("c", -1).error == ErrorCode.NO_ERROR
    assert set(h.group.members) == {a.member_id, b.member_id}
    run([a, b], [])
    assert a.owned | b.owned == set(range(12)) and not a.owned & b.owned


def test_a_classic_member_leaving_does_not_downgrade() -> None:
    h = Harness()
    a, b = classic_group_of_two(h)
    c = Member(h, "c")
    run([a, b], [c])
    answer = h.coordinator.leave_group(LeaveGroupRequest("g", (LeavingMember(b.member_id), LeavingMember("nobody"))))
    assert (answer.result().error, answer.result().member_errors) == (
        ErrorCode.NO_ERROR, [ErrorCode.NO_ERROR, ErrorCode.UNKNOWN_MEMBER_ID])
    assert set(h.group.members) == {a.member_id, "c"}
    b.owned = set()
    run([a], [c])
    assert a.owned | c.partitions == set(range(12)) and len(c.partitions) == 6


def test_classic_clients_join_a_consumer_group_and_the_last_consumer_member_hands_it_over() -> None:
    """A classic consumer joining a group of consumer-protocol members becomes a classic member of it."""
    h = Harness()
    c = Member(h, "c")
    d = ClassicClient(h)
    assert d.join() == ErrorCode.NO_ERROR
    assert d.generation == h.group.group_epoch and d.owned == set()
    run([d], [c])
    assert len(d.owned) == len(c.partitions) == 6
    # A protocol the classic members do not all support is refused (Kafka's answer for such a mixed group).
    other = ClassicClient(h, protocol="range")
    assert other.join() == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h.heartbeat("c", -1).error == ErrorCode.NO_ERROR
    assert h.coordinator.manager.get_group("g").members.keys() == {d.member_id}  # type: ignore[union-attr]


def test_classic_member_errors() -> None:
    h = Harness()
    Member(h, "c")
    d = ClassicClient(h)
    d.join()
    stale = h.coordinator.heartbeat(HeartbeatRequest("g", d.generation + 1, d.member_id, None))
    assert stale.result() == ErrorCode.ILLEGAL_GENERATION
    unknown = h.coordinator.heartbeat(HeartbeatRequest("g", 1, "nobody", None))
    assert unknown.result() == ErrorCode.UNKNOWN_MEMBER_ID
    # A consumer-protocol member is no classic member.
    assert h.coordinator.heartbeat(HeartbeatRequest("g", 1, "c", None)).result() == ErrorCode.UNKNOWN_MEMBER_ID
    wrong = h.coordinator.sync_group(SyncGroupRequest("g", d.generation, d.member_id, None, "consumer", "range", {}))
    assert wrong.result().error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_a_classic_member_that_does_not_rejoin_is_fenced() -> None:
    h = Harness()
    a, b = classic_group_of_two(h)
    c = Member(h, "c")
    assert a.beat() == ErrorCode.REBALANCE_IN_PROGRESS  # it must rejoin within its rebalance timeout (30 s)
    for _ in range(8):
        h.clock.advance(5_000)
        a.beat()
        b.poll()
        c.beat()
    assert a.member_id not in h.group.members
    run([b], [c])
    assert b.owned | c.partitions == set(range(12))
    assert TOPIC in c.owned


def test_a_static_classic_member_keeps_its_instance_and_a_new_instance_takes_its_place() -> None:
    h = Harness()
    c = Member(h, "c")
    d = ClassicClient(h)
    request = replace(d.join_request(require_known_member_id=False), group_instance_id="d-1")
    joined = h.coordinator.join_group(request).result()
    assert joined.error == ErrorCode.NO_ERROR
    d.member_id, d.generation = joined.member_id, joined.generation_id
    assert h.group.static_member("d-1") is not None and h.group.static_member("d-1").member_id == d.member_id
    run([], [c])
    again = h.coordinator.join_group(replace(request, member_id=d.member_id)).result()
    d.generation = again.generation_id
    target = h.group.target[d.member_id]
    # A new instance (no member id) replaces it and inherits its target; the old one is fenced.
    replacement = h.coordinator.join_group(request).result()
    assert replacement.error == ErrorCode.NO_ERROR and replacement.member_id != d.member_id
    assert h.group.target[replacement.member_id] == target and d.member_id not in h.group.members
    old = h.coordinator.heartbeat(HeartbeatRequest("g", d.generation, d.member_id, "d-1"))
    assert old.result() == ErrorCode.FENCED_INSTANCE_ID


def test_a_classic_member_changing_its_subscription_bumps_the_group_epoch() -> None:
    h = Harness()
    c = Member(h, "c")
    d = ClassicClient(h)
    d.join()
    epoch = h.group.group_epoch
    metadata = subscription_v1(["t", "u"], {})
    joined = h.coordinator.join_group(join_request("g", member_id=d.member_id, protocols=[(d.protocol, metadata)]))
    assert joined.result().error == ErrorCode.NO_ERROR
    assert h.group.group_epoch == epoch + 1
    assert h.group.members[d.member_id].subscribed_topic_names == ("t", "u")
    assert c.beat().error == ErrorCode.NO_ERROR
