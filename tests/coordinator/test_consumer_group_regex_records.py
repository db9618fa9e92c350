"""A consumer group's regular expressions in __consumer_offsets and under ACLs, on a fake clock: the
ConsumerGroupRegularExpression record (type 16) in Kafka's bytes, written at each refresh, tombstoned when no
member uses the expression, replayed when the coordinator moves; and resolutions that give a member only the
topics its principal may describe, refreshed at least every ``regex_refresh_max_interval_ms``."""

from __future__ import annotations

import json
import struct
import uuid
from collections.abc import Collection
from dataclasses import replace

from coordinator.common.partitioner import partition_for
from coordinator.group.consumer_group import Assignment, TopicInfo
from coordinator.group.consumer_group_regex import TOPIC_IMAGE_CHECK_INTERVAL_MS, ResolvedRegularExpression
from coordinator.group.record_formats import (
    CONSUMER_GROUP_METADATA,
    CONSUMER_GROUP_PARTITION_METADATA,
    CONSUMER_GROUP_REGULAR_EXPRESSION,
    ConsumerGroupRecordKey,
    ConsumerGroupRegularExpressionValue,
    decode_consumer_group_value,
    decode_key,
    encode_consumer_group_key,
    encode_consumer_group_value,
)
from protocol.errors import ErrorCode
from tests.coordinator.fakes import MemoryCoordinatorLog
from tests.coordinator.test_consumer_group_heartbeat import Harness, Member, settle
from tests.coordinator.test_consumer_group_migration import ClassicClient
from tests.coordinator.test_consumer_group_records import NO_TAGS, _reloaded, compact
from tests.coordinator.test_consumer_group_regex import ORDERS_1, ORDERS_2, ORDERS_NEW, orders_harness, regex_member
from tools.offsets_decoder import decode_record

REGEX = "^orders-.*"


def test_the_record_is_kafkas_key_16_and_flexible_value_0() -> None:
    key = ConsumerGroupRecordKey(CONSUMER_GROUP_REGULAR_EXPRESSION, "grp", regex="a.*")
    key_bytes = b"\x00\x10\x00\x03grp\x00\x03a.*"
    assert encode_consumer_group_key(key) == key_bytes and decode_key(key_bytes) == key
    value = ConsumerGroupRegularExpressionValue(("a1", "a2"), 7, 1_700_000_000_000)
    value_bytes = (b"\x00\x00" + b"\x03" + compact("a1") + compact("a2") + struct.pack(">qq", 7, 1_700_000_000_000)
                   + NO_TAGS)
    assert encode_consumer_group_value(value) == value_bytes
    assert decode_consumer_group_value(CONSUMER_GROUP_REGULAR_EXPRESSION, value_bytes) == value
    # dump-log --offsets-decoder prints it as kafka-dump-log.sh does.
    printed_key, payload = decode_record(0, key_bytes, value_bytes)
    assert json.loads(printed_key) == {"type": "16", "data": {"groupId": "grp", "regularExpression": "a.*"}}
    assert payload is not None and json.loads(payload) == {
        "version": "0", "data": {"topics": ["a1", "a2"], "version": 7, "timestamp": 1_700_000_000_000}}
    assert decode_record(1, key_bytes, None) == (printed_key, "<DELETE>")


def _records(h: Harness) -> list[tuple[ConsumerGroupRecordKey, bytes | None]]:
    log = h.coordinator.manager.coordinator_log
    assert isinstance(log, MemoryCoordinatorLog)
    out = []
    for _, key, value in log.records.get(partition_for("g", log.num_partitions), []):
        decoded = decode_key(key)
        if isinstance(decoded, ConsumerGroupRecordKey):
            out.append((decoded, value))
    return out


def _regex_records(h: Harness, since: int = 0) -> list[tuple[str | None, ConsumerGroupRegularExpressionValue | None]]:
    out: list[tuple[str | None, ConsumerGroupRegularExpressionValue | None]] = []
    for key, value in _records(h)[since:]:
        if key.record_type == CONSUMER_GROUP_REGULAR_EXPRESSION:
            decoded = None if value is None else decode_consumer_group_value(key.record_type, value)
            assert decoded is None or isinstance(decoded, ConsumerGroupRegularExpressionValue)
            out.append((key.regex, decoded))
    return out


def test_each_refresh_is_written_after_the_member_and_before_the_subscribed_topics() -> None:
    h = orders_harness()
    member = Member(h, "a", topics=(), subscribed_topic_regex=REGEX)  # its join asks for the expression
    joined = len(_records(h))
    assert _regex_records(h) == []
    member.beat()  # the group takes the resolution at the next heartbeat
    types = [key.record_type for key, _ in _records(h)[joined:]]
    assert types[:3] == [CONSUMER_GROUP_REGULAR_EXPRESSION, CONSUMER_GROUP_PARTITION_METADATA,
                         CONSUMER_GROUP_METADATA]
    [(regex, value)] = _regex_records(h)
    assert value is not None and regex == REGEX and value.topics == ("orders-1", "orders-2")
    assert value.timestamp == h.clock.now_ms() and value.version > 0
    # A matching topic created later: a new resolution, with a newer image version.
    written = len(_records(h))
    h.topics.topics["orders-new"] = TopicInfo(ORDERS_NEW, 1)
    h.clock.advance(TOPIC_IMAGE_CHECK_INTERVAL_MS)
    h.heartbeat("a", h.group.members["a"].member_epoch)
    [(_, refreshed)] = _regex_records(h, written)
    assert refreshed is not None and refreshed.topics == ("orders-1", "orders-2", "orders-new")
    assert refreshed.version > value.version


def test_a_regex_nobody_uses_any_more_is_tombstoned() -> None:
    h = orders_harness()
    a, b = regex_member(h, "a"), regex_member(h, "b")
    settle([a, b])
    written = len(_records(h))
    # b moves to another expression: the first is still a's, the new one is resolved and written.
    result = h.heartbeat("b", b.epoch, b.owned, subscribed_topic_regex="orders-1")
    assert result.error == ErrorCode.NO_ERROR
    b.epoch = result.member_epoch
    b.owned = b.owned if result.assignment is None else result.assignment
    b.beat()  # the group takes the new expression's resolution at the heartbeat after the one that brought it
    assert [(r, v is None) for r, v in _regex_records(h, written)] == [("orders-1", False)]
    written = len(_records(h))
    assert h.heartbeat("a", -1).error == ErrorCode.NO_ERROR  # the last member of ^orders-.* leaves
    assert _regex_records(h, written) == [(REGEX, None)]
    assert set(h.group.resolved_regexes) == {"orders-1"}
    written = len(_records(h))
    assert h.heartbeat("b", -1).error == ErrorCode.NO_ERROR
    assert _regex_records(h, written) == [("orders-1", None)] and h.group.resolved_regexes == {}


def test_a_deleted_group_tombstones_the_expressions_it_still_has() -> None:
    h = orders_harness()
    regex_member(h, "a")
    group = h.group
    group.remove_member("a")  # as a group whose last member left before its expression was dropped
    written = len(_records(h))
    h.coordinator.consumer_groups.delete_group("g")
    tail = _records(h)[written:]
    # Kafka's order: the expressions' tombstones, then the subscribed topics' metadata and the group epoch
    assert [(k.record_type, k.regex) for k, _ in tail[-3:]] == [
        (CONSUMER_GROUP_REGULAR_EXPRESSION, REGEX), (CONSUMER_GROUP_PARTITION_METADATA, None),
        (CONSUMER_GROUP_METADATA, None)]
    assert all(v is None for _, v in tail)


def test_a_coordinator_taking_the_group_over_starts_from_the_resolved_topics() -> None:
    h = orders_harness()
    a, b = regex_member(h, "a"), regex_member(h, "b")
    settle([a, b])
    before = dict(h.group.resolved_regexes)
    epoch = h.group.group_epoch
    moved = _reloaded(h)
    assert moved.group.resolved_regexes == before  # topics, version and time, before any heartbeat
    for member in (a, b):
        member.harness = moved
    settle([a, b])
    assert moved.group.group_epoch == epoch, "the same topics: no new epoch"
    owned = sorted((t, p) for m in (a, b) for t, parts in m.owned.items() for p in parts)
    assert owned == [(ORDERS_1, 0), (ORDERS_1, 1), (ORDERS_2, 0), (ORDERS_2, 1)]
    # A tombstoned expression does not come back.
    assert moved.heartbeat("a", -1).error == ErrorCode.NO_ERROR and moved.heartbeat("b", -1).error == ErrorCode.NO_ERROR
    assert _reloaded(moved).group.resolved_regexes == {}


class Principal:
    """The topics a member's principal may describe, as the broker's authorizer answers."""

    def __init__(self, *allowed: str) -> None:
        self.allowed = set(allowed)
        self.asked = 0

    def __call__(self, names: frozenset[str]) -> Collection[str]:
        self.asked += 1
        return names & self.allowed


def _beat(h: Harness, member_id: str, epoch: int, owned: Assignment, principal: Principal,
          **fields: object) -> tuple[int, Assignment]:
    result = h.heartbeat(member_id, epoch, owned, topic_authorizer=principal, **fields)
    assert result.error == ErrorCode.NO_ERROR, result
    return result.member_epoch, owned if result.assignment is None else result.assignment


def _join(h: Harness, member_id: str, principal: Principal) -> tuple[int, Assignment]:
    """``member_id`` joins with the expression, then heartbeats once more: the group takes a new expression's
    resolution at the heartbeat after the one that brought it."""
    epoch, owned = _beat(h, member_id, 0, {}, principal, subscribed_topic_names=(), subscribed_topic_regex=REGEX,
                         rebalance_timeout_ms=30000)
    return _beat(h, member_id, epoch, owned, principal)


def test_a_member_gets_only_the_matching_topics_it_may_describe_and_a_later_grant_at_the_next_refresh() -> None:
    h = orders_harness()
    # Sessions longer than the refresh interval, so the member can wait for it heartbeating now and then.
    config = h.coordinator.consumer_groups.config
    h.coordinator.consumer_groups.config = replace(config, regex_refresh_max_interval_ms=20_000)
    principal = Principal("orders-1", "t")
    epoch, owned = _join(h, "a", principal)
    assert owned == {ORDERS_1: frozenset({0, 1})}
    assert h.group.resolved_regexes[REGEX].topics == frozenset({"orders-1"})
    # Steady heartbeats do not ask the authorizer again.
    asked = principal.asked
    for _ in range(3):
        epoch, owned = _beat(h, "a", epoch, owned, principal)
    assert principal.asked == asked
    # DESCRIBE granted on orders-2: taken at the refresh the interval brings, not before.
    principal.allowed.add("orders-2")
    interval = h.coordinator.consumer_groups.config.regex_refresh_max_interval_ms
    h.clock.advance(interval - 1)
    epoch, owned = _beat(h, "a", epoch, owned, principal)
    assert ORDERS_2 not in owned
    h.clock.advance(1)
    epoch, owned = _beat(h, "a", epoch, owned, principal)
    assert owned == {ORDERS_1: frozenset({0, 1}), ORDERS_2: frozenset({0, 1})}
    [(_, written)] = _regex_records(h)[-1:]
    assert written is not None and written.topics == ("orders-1", "orders-2")
    # Revoked again: the next refresh takes the topic away.
    principal.allowed.discard("orders-1")
    h.clock.advance(interval)
    epoch, owned = _beat(h, "a", epoch, owned, principal)
    epoch, owned = _beat(h, "a", epoch, {ORDERS_2: frozenset({0, 1})}, principal)
    assert owned == {ORDERS_2: frozenset({0, 1})}


def test_a_topic_created_later_is_filtered_by_the_refreshing_members_acls() -> None:
    h = orders_harness()
    principal = Principal("orders-1", "orders-2")
    epoch, owned = _join(h, "a", principal)
    group_epoch = h.group.group_epoch
    h.topics.topics["orders-new"] = TopicInfo(ORDERS_NEW, 2)  # matches, but not describable
    h.clock.advance(TOPIC_IMAGE_CHECK_INTERVAL_MS)
    epoch, owned = _beat(h, "a", epoch, owned, principal)
    assert h.group.group_epoch == group_epoch and ORDERS_NEW not in owned
    assert h.group.resolved_regexes[REGEX].matched == frozenset({"orders-1", "orders-2", "orders-new"})


def test_without_an_authorizer_every_matching_topic_is_given() -> None:
    h = orders_harness()
    a = regex_member(h, "a")
    assert set(a.owned) == {ORDERS_1, ORDERS_2}
    resolved = h.group.resolved_regexes[REGEX]
    assert isinstance(resolved, ResolvedRegularExpression) and resolved.topics == resolved.matched
    assert uuid.UUID(int=0x50) not in a.owned


def test_a_classic_members_join_does_not_refresh_the_groups_expressions() -> None:
    """A classic member's JoinGroup carries no consumer-protocol context to filter with: only a heartbeat of the
    consumer protocol refreshes the group's expressions, with its member's ACLs."""
    h = orders_harness()
    h.topics.topics["t"] = TopicInfo(uuid.UUID(int=0xABC), 2)
    principal = Principal("orders-1")
    epoch, owned = _join(h, "a", principal)
    h.topics.topics["orders-new"] = TopicInfo(ORDERS_NEW, 2)
    h.clock.advance(TOPIC_IMAGE_CHECK_INTERVAL_MS)
    assert ClassicClient(h).join() == ErrorCode.NO_ERROR
    assert h.group.resolved_regexes[REGEX].topics == frozenset({"orders-1"}), "nothing unfiltered taken"
    epoch, owned = _beat(h, "a", epoch, owned, principal)
    assert h.group.resolved_regexes[REGEX].topics == frozenset({"orders-1"})
    assert h.group.resolved_regexes[REGEX].matched == frozenset({"orders-1", "orders-2", "orders-new"})
