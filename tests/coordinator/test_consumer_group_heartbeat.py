"""The consumer-protocol group (KIP-848) on a fake clock: joining, reconciling, leaving, fencing, expiring."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from coordinator.common.scheduler import ManualScheduler
from coordinator.group.consumer_group import Assignment, TopicInfo
from coordinator.group.consumer_group_heartbeat import ConsumerGroupConfig
from coordinator.group.consumer_group_requests import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResult
from coordinator.group.group_coordinator import GroupCoordinator
from coordinator.group.group_membership import GroupConfig
from coordinator.group.group_metadata import OffsetAndMetadata
from coordinator.group.group_metadata_manager import GroupMetadataManager
from protocol.errors import ErrorCode
from tests.coordinator.fakes import MemoryCoordinatorLog, join_request

TOPIC = uuid.UUID(int=0xABC)
OTHER = uuid.UUID(int=0xDEF)


class Topics:
    def __init__(self) -> None:
        self.topics = {"t": TopicInfo(TOPIC, 12), "u": TopicInfo(OTHER, 4)}

    def describe_topic(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return next((n for n, i in self.topics.items() if i.topic_id == topic_id), None)

    def topic_names(self) -> list[str]:
        return list(self.topics)

    @property
    def version(self) -> int:
        """The tests change ``topics`` in place: any change of it is a new version."""
        return hash(frozenset(self.topics.items()))


class Harness:
    def __init__(self, **config: object) -> None:
        self.clock = ManualScheduler()
        self.topics = Topics()
        manager = GroupMetadataManager(0, MemoryCoordinatorLog(), self.clock)
        self.coordinator = GroupCoordinator(0, GroupConfig(group_initial_rebalance_delay_ms=0), manager, self.clock,
                                            consumer_config=ConsumerGroupConfig(**config),  # type: ignore[arg-type]
                                            topics=self.topics)
        self.coordinator.startup(load_partitions=range(50))

    def heartbeat(self, member_id: str, epoch: int, owned: Assignment | None = None, **fields: object
                  ) -> ConsumerGroupHeartbeatResult:
        request = ConsumerGroupHeartbeatRequest(group_id="g", member_id=member_id, member_epoch=epoch,
                                                client_id="c", client_host="/127.0.0.1", owned=owned,
                                                **fields)  # type: ignore[arg-type]
        answer = self.coordinator.consumer_group_heartbeat(request)
        assert answer.done()
        return answer.result()

    def join(self, member_id: str, topics: tuple[str, ...] = ("t",), **fields: object) -> ConsumerGroupHeartbeatResult:
        return self.heartbeat(member_id, 0, {}, subscribed_topic_names=topics, rebalance_timeout_ms=30000, **fields)

    @property
    def group(self):  # type: ignore[no-untyped-def]
        return self.coordinator.consumer_groups.groups["g"]


class Member:
    """A client that revokes at once: it owns what the coordinator last told it."""

    def __init__(self, harness: Harness, member_id: str, **fields: object) -> None:
        self.harness, self.member_id = harness, member_id
        result = harness.join(member_id, **fields)
        assert result.error == ErrorCode.NO_ERROR, result
        self.epoch = result.member_epoch
        self.owned: Assignment = result.assignment or {}

    def beat(self) -> ConsumerGroupHeartbeatResult:
        result = self.harness.heartbeat(self.member_id, self.epoch, self.owned)
        assert result.error == ErrorCode.NO_ERROR, result
        self.epoch = result.member_epoch
        if result.assignment is not None:
            self.owned = result.assignment
        return result

    @property
    def partitions(self) -> set[int]:
        return set(self.owned.get(TOPIC, frozenset()))


def settle(members: list[Member], rounds: int = 6) -> None:
    """Heartbeat every member in turn; no partition is ever owned by two of them."""
    for _ in range(rounds):
        for member in members:
            member.beat()
            owned = [p for m in members for p in m.partitions]
            assert len(owned) == len(set(owned)), {m.member_id: m.partitions for m in members}


def test_first_member_gets_every_partition_with_the_brokers_interval() -> None:
    h = Harness(heartbeat_interval_ms=5000)
    result = h.join("a")
    assert (result.error, result.member_id, result.member_epoch, result.heartbeat_interval_ms) == (
        ErrorCode.NO_ERROR, "a", 1, 5000)
    assert result.assignment == {TOPIC: frozenset(range(12))}
    assert str(h.group.state) == "Stable"
    # An unchanged heartbeat carries no assignment.
    assert h.heartbeat("a", 1, None).assignment is None


def test_partitions_are_revoked_before_they_are_assigned() -> None:
    h = Harness()
    a = Member(h, "a")
    b = Member(h, "b")
    assert (b.epoch, b.partitions) == (2, set())  # all 12 still owned by a
    assert str(h.group.state) == "Reconciling"
    a.beat()  # told to give up half, still at epoch 1
    assert (a.epoch, len(a.partitions)) == (1, 6)
    b.beat()  # a has not said yet that it gave them up: nothing for b
    assert b.partitions == set()
    a.beat()  # now it has: a moves to epoch 2
    assert a.epoch == 2
    b.beat()
    assert b.partitions == set(range(12)) - a.partitions and b.epoch == 2
    settle([a, b])
    assert str(h.group.state) == "Stable"


def test_a_partition_stays_unreleased_while_its_owner_has_not_revoked() -> None:
    h = Harness()
    a = Member(h, "a")
    b = Member(h, "b")
    h.heartbeat("a", 1, a.owned)  # told to revoke; but "a" keeps owning them (never acknowledges)
    assert h.heartbeat("b", 2, {}).assignment is None  # nothing free yet for b
    assert b.beat().assignment is None and b.partitions == set()


def test_leaving_hands_the_partitions_to_the_others() -> None:
    h = Harness()
    a, b = Member(h, "a"), Member(h, "b")
    settle([a, b])
    epoch = h.group.group_epoch
    left = h.heartbeat("b", -1)
    assert (left.error, left.member_id, left.member_epoch) == (ErrorCode.NO_ERROR, "b", -1)
    assert h.group.group_epoch == epoch + 1
    settle([a])
    assert a.partitions == set(range(12)) and a.epoch == h.group.group_epoch


def test_static_member_leaves_for_a_while_and_its_next_instance_takes_its_place() -> None:
    h = Harness()
    a, s = Member(h, "a"), Member(h, "s1", instance_id="i1")
    settle([a, s])
    kept, epoch = s.partitions, h.group.group_epoch
    assert h.heartbeat("s1", -2, instance_id="i1").member_epoch == -2
    assert h.group.group_epoch == epoch  # no rebalance
    settle([a])
    assert a.partitions.isdisjoint(kept)
    s2 = Member(h, "s2", instance_id="i1")
    assert s2.partitions == kept and h.group.group_epoch == epoch
    assert "s1" not in h.group.members


def test_a_static_instance_id_in_use_is_not_released() -> None:
    h = Harness()
    Member(h, "s1", instance_id="i1")
    result = h.join("s2", instance_id="i1")
    assert result.error == ErrorCode.UNRELEASED_INSTANCE_ID
    assert result.error_message == ("Static member s2 with instance id i1 cannot join the group because the instance "
                                    "id is owned by s1 member.")
    assert h.heartbeat("s3", 1, {}, instance_id="i1").error == ErrorCode.FENCED_INSTANCE_ID
    assert h.heartbeat("s3", 1, {}, instance_id="i9").error == ErrorCode.UNKNOWN_MEMBER_ID


def test_fencing_errors_as_kafka_answers_them() -> None:
    h = Harness()
    a = Member(h, "a")
    too_new = h.heartbeat("a", 5, a.owned)
    assert too_new.error == ErrorCode.FENCED_MEMBER_EPOCH
    assert too_new.error_message == ("The consumer group member has a greater member epoch (5) than the one known by "
                                     "the group coordinator (1). The member must abandon all its partitions and "
                                     "rejoin.")
    unknown = h.heartbeat("x", 1, {})
    assert (unknown.error, unknown.error_message) == (ErrorCode.UNKNOWN_MEMBER_ID, "Member x is not a member of group g.")
    assert h.heartbeat("x", -1).error == ErrorCode.UNKNOWN_MEMBER_ID
    b = Member(h, "b")
    settle([a, b])
    # The previous epoch with a subset of its partitions (the answer that bumped it was lost) is accepted.
    assert h.heartbeat("a", a.epoch - 1, a.owned).error == ErrorCode.NO_ERROR
    assert h.heartbeat("a", a.epoch - 1, {TOPIC: frozenset(range(12))}).error == ErrorCode.FENCED_MEMBER_EPOCH
    # A group the coordinator does not have (its records outlive restarts and moves: it was deleted).
    nothing = Harness().heartbeat("a", 1, {})
    assert (nothing.error, nothing.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Consumer group g not found.")
    gone = Harness().heartbeat("a", -1)
    assert (gone.error, gone.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group g not found.")


@pytest.mark.parametrize(("fields", "message"), [
    ({"member_epoch": 0, "rebalance_timeout_ms": -1}, "RebalanceTimeoutMs must be provided in first request."),
    ({"member_epoch": 0, "owned": None}, "TopicPartitions must be empty when (re-)joining."),
    ({"member_epoch": 0, "subscribed_topic_names": None},
     "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
    ({"member_epoch": -2}, "InstanceId can't be null."),
    ({"member_epoch": -3}, "MemberEpoch is invalid."),
    ({"member_id": " "}, "MemberId can't be empty."),
    ({"instance_id": ""}, "InstanceId can't be empty."),
    ({"rack_id": ""}, "RackId can't be empty."),
])
def test_bad_fields_are_invalid_requests(fields: dict[str, object], message: str) -> None:
    h = Harness()
    values: dict[str, object] = {"group_id": "g", "member_id": "a", "member_epoch": 0, "client_id": "c",
                                 "client_host": "/h", "rebalance_timeout_ms": 1000, "subscribed_topic_names": ("t",),
                                 "owned": {}}
    values.update(fields)
    result = h.coordinator.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(**values)).result()  # type: ignore[arg-type]
    assert (result.error, result.error_message) == (ErrorCode.INVALID_REQUEST, message)


def test_unknown_server_assignor() -> None:
    result = Harness().join("a", server_assignor="sticky")
    assert (result.error, result.error_message) == (
        ErrorCode.UNSUPPORTED_ASSIGNOR, "ServerAssignor sticky is not supported. Supported assignors: uniform, range.")


def test_v0_member_without_id_is_given_one() -> None:
    h = Harness()
    result = h.heartbeat("", 0, {}, subscribed_topic_names=("t",), rebalance_timeout_ms=1000, member_id_required=False)
    assert result.error == ErrorCode.NO_ERROR and result.member_id and len(result.member_id) == 36


def test_session_expiry_removes_the_member_and_reassigns() -> None:
    h = Harness(session_timeout_ms=45000)
    a, b = Member(h, "a"), Member(h, "b")
    settle([a, b])
    for _ in range(5):  # a keeps heartbeating, b went silent
        h.clock.advance(10_000)
        a.beat()
    assert "b" not in h.group.members
    settle([a])
    assert a.partitions == set(range(12))


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced() -> None:
    h = Harness(session_timeout_ms=45000)
    a = Member(h, "a")
    h.heartbeat("b", 0, {}, subscribed_topic_names=("t",), rebalance_timeout_ms=30000)
    h.heartbeat("a", 1, a.owned)  # told to revoke
    for _ in range(4):
        h.clock.advance(9_000)
        h.heartbeat("a", 1, a.owned)  # still owning everything
        h.heartbeat("b", 2, {})
    assert "a" not in h.group.members
    assert h.heartbeat("a", 1, a.owned).error == ErrorCode.UNKNOWN_MEMBER_ID


def test_group_max_size() -> None:
    h = Harness(max_size=1)
    Member(h, "a")
    result = h.join("b")
    assert (result.error, result.error_message) == (
        ErrorCode.GROUP_MAX_SIZE_REACHED, "The consumer group has reached its maximum capacity of 1 members.")


def test_uniform_is_sticky_and_balanced() -> None:
    h = Harness()
    members = [Member(h, m) for m in ("a", "b", "c")]
    settle(members)
    before = {m.member_id: m.partitions for m in members}
    members.append(Member(h, "d"))
    settle(members)
    sizes = sorted(len(m.partitions) for m in members)
    assert sizes == [3, 3, 3, 3]
    for m in members[:3]:  # each kept what it still has out of its old share
        assert m.partitions <= before[m.member_id]


def test_range_gives_contiguous_shares_and_keeps_them() -> None:
    h = Harness()
    a = Member(h, "a", server_assignor="range")
    b = Member(h, "b", server_assignor="range")
    settle([a, b])
    assert a.partitions == set(range(6)) and b.partitions == set(range(6, 12))
    c = Member(h, "c", server_assignor="range")
    settle([a, b, c])
    assert [len(m.partitions) for m in (a, b, c)] == [4, 4, 4]
    assert a.partitions <= set(range(6)) and b.partitions <= set(range(6, 12))


def test_classic_and_consumer_groups_of_one_id_do_not_mix_without_migration() -> None:
    h = Harness(migration_policy="disabled")
    h.coordinator.join_group(join_request("g", member_id="", require_known_member_id=False))
    assert h.coordinator.manager.get_group("g").members  # type: ignore[union-attr]
    result = h.join("a")
    assert (result.error, result.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group g is not a consumer group")

    other = Harness(migration_policy="disabled")
    Member(other, "a")
    refused = other.coordinator.join_group(replace(join_request("g", member_id=""), protocol_type="connect"))
    assert refused.result().error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_members_commit_with_their_member_epoch() -> None:
    h = Harness()
    a = Member(h, "a")
    outcomes: list[dict[tuple[str, int], ErrorCode]] = []
    offsets = {("t", 0): OffsetAndMetadata(5, -1, "", 0)}
    h.coordinator.handle_commit_offsets("g", "a", None, a.epoch, offsets, outcomes.append)
    h.coordinator.handle_commit_offsets("g", "a", None, a.epoch + 1, offsets, outcomes.append)
    h.coordinator.handle_commit_offsets("g", "zz", None, a.epoch, offsets, outcomes.append)
    assert [o[("t", 0)] for o in outcomes] == [ErrorCode.NO_ERROR, ErrorCode.STALE_MEMBER_EPOCH,
                                               ErrorCode.UNKNOWN_MEMBER_ID]
    _, fetched, _ = h.coordinator.handle_fetch_offsets("g", False, [("t", 0)])
    assert fetched[("t", 0)] is not None and fetched[("t", 0)].offset == 5


def test_describe_and_shutdown_cancels_the_timers() -> None:
    h = Harness()
    Member(h, "a")
    described, missing = h.coordinator.consumer_group_describe(["g", "nope"])
    assert described.group is not None and described.assignor_name == "uniform"
    assert missing.error == ErrorCode.GROUP_ID_NOT_FOUND
    assert h.coordinator.consumer_groups.timeouts.pending == 1
    h.coordinator.shutdown_timers()
    assert h.coordinator.consumer_groups.timeouts.pending == 0



def test_listed_as_consumer_groups_and_deleted_only_when_empty() -> None:
    h = Harness()
    a = Member(h, "a")
    h.coordinator.handle_commit_offsets("g", "a", None, a.epoch, {("t", 0): OffsetAndMetadata(1, -1, "", 0)},
                                        lambda _: None)
    assert [(g.group_id, str(g.state)) for g in h.coordinator.list_consumer_groups(set())] == [("g", "Stable")]
    assert h.coordinator.list_consumer_groups({"empty"}) == []
    assert h.coordinator.handle_list_groups(set())[1] == []  # the classic holder of its offsets is not listed
    answers: list[dict[str, ErrorCode]] = []
    h.coordinator.handle_delete_groups(["g"], answers.append)
    assert answers == [{"g": ErrorCode.NON_EMPTY_GROUP}]
    h.heartbeat("a", -1)
    assert [str(g.state) for g in h.coordinator.list_consumer_groups({"EMPTY"})] == ["Empty"]
    h.coordinator.handle_delete_groups(["g"], answers.append)
    assert answers[-1] == {"g": ErrorCode.NO_ERROR}
    assert "g" not in h.coordinator.consumer_groups.groups
    assert h.coordinator.handle_fetch_offsets("g", False, [("t", 0)])[1][("t", 0)] is None


def test_offset_fetch_from_a_member_checks_its_epoch() -> None:
    h = Harness()
    a = Member(h, "a")
    check = h.coordinator.consumer_offset_fetch_error
    assert check("g", None, -1) is None  # an admin client
    assert check("g", "a", a.epoch) is None
    assert check("g", "a", a.epoch + 1) == ErrorCode.STALE_MEMBER_EPOCH
    assert check("g", "x", a.epoch) == ErrorCode.UNKNOWN_MEMBER_ID
    assert check("classic-or-absent", "x", 3) is None


def test_describe_groups_answers_a_consumer_group_as_no_classic_group() -> None:
    h = Harness()
    a = Member(h, "a")
    h.coordinator.handle_commit_offsets("g", "a", None, a.epoch, {("t", 0): OffsetAndMetadata(1, -1, "", 0)},
                                        lambda _: None)
    assert h.coordinator.handle_describe_group("g") == (ErrorCode.NO_ERROR, None)


def test_transactional_commits_check_the_member_and_answer_illegal_generation_for_another_epoch() -> None:
    h = Harness()
    a = Member(h, "a")
    outcomes: list[dict[tuple[str, int], ErrorCode]] = []
    offsets = {("t", 0): OffsetAndMetadata(5, -1, "", 0)}
    h.coordinator.handle_txn_commit_offsets("g", 7, 0, "a", None, a.epoch + 1, offsets, outcomes.append)
    h.coordinator.handle_txn_commit_offsets("g", 7, 0, "", None, -1, offsets, outcomes.append)
    assert [o[("t", 0)] for o in outcomes] == [ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID]


def test_a_member_must_commit_with_offset_commit_v9_or_later() -> None:
    h = Harness()
    a = Member(h, "a")
    outcomes: list[dict[tuple[str, int], ErrorCode]] = []
    h.coordinator.handle_commit_offsets("g", "a", None, a.epoch, {("t", 0): OffsetAndMetadata(5, -1, "", 0)},
                                        outcomes.append, member_epoch_api=False)
    assert outcomes == [{("t", 0): ErrorCode.UNSUPPORTED_VERSION}]


def test_a_member_the_group_still_has_is_fenced_when_it_joins_again_with_epoch_zero() -> None:
    h = Harness()
    a = Member(h, "a")
    assert h.join("a").error == ErrorCode.NO_ERROR  # just joined: epoch 0 is its previous epoch
    Member(h, "b")
    settle([a])
    rejoin = h.join("a")
    assert (rejoin.error, rejoin.error_message) == (ErrorCode.FENCED_MEMBER_EPOCH, (
        f"The consumer group member has a smaller member epoch (0) than the one known by the group coordinator "
        f"({a.epoch}). The member must abandon all its partitions and rejoin."))


def test_a_topic_that_grows_or_goes_changes_the_assignment() -> None:
    h = Harness()
    a = Member(h, "a", topics=("t", "u"))
    assert a.owned == {TOPIC: frozenset(range(12)), OTHER: frozenset(range(4))}
    epoch = h.group.group_epoch
    h.topics.topics["t"] = TopicInfo(TOPIC, 16)  # partitions added
    settle([a])
    assert a.owned[TOPIC] == frozenset(range(16)) and h.group.group_epoch == epoch + 1
    del h.topics.topics["u"]  # deleted
    settle([a])
    assert set(a.owned) == {TOPIC}
