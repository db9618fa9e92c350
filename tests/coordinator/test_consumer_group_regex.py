"""Regular-expression subscriptions of consumer-protocol groups on a fake clock: resolution, refresh as topics are
created or deleted, a bad expression, names and an expression together, group epochs."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest

from broker.coordinator_wiring import RegistryTopicImage
from broker.handlers import consumer_group_describe
from broker.metadata_store import MetadataStore, TopicMetadata
from coordinator.common.scheduler import ManualScheduler
from coordinator.group.consumer_group import ConsumerGroupMember, TopicInfo
from coordinator.group.consumer_group_regex import (
    RESOLUTION_CHUNK,
    TOPIC_IMAGE_CHECK_INTERVAL_MS,
    InvalidRegularExpression,
    RegexResolver,
    compile_regex,
)
from protocol.errors import ErrorCode
from tests.coordinator.test_consumer_group_heartbeat import TOPIC, Harness, Member, settle

ORDERS_1 = uuid.UUID(int=0x0101)
ORDERS_2 = uuid.UUID(int=0x0102)
ORDERS_NEW = uuid.UUID(int=0x0103)


def orders_harness() -> Harness:
    h = Harness()
    h.topics.topics.update({"orders-1": TopicInfo(ORDERS_1, 2), "orders-2": TopicInfo(ORDERS_2, 2),
                            "__consumer_offsets": TopicInfo(uuid.UUID(int=0x50), 50)})
    return h


def regex_member(h: Harness, member_id: str, regex: str = "^orders-.*", **fields: object) -> Member:
    """A member joined with ``regex`` and heartbeated once more: the group takes a new expression's resolution
    from the heartbeat after the one that brought it."""
    member = Member(h, member_id, topics=(), subscribed_topic_regex=regex, **fields)
    member.beat()
    return member


def resubscribe(h: Harness, member: Member, regex: str) -> None:
    result = h.heartbeat(member.member_id, member.epoch, member.owned, subscribed_topic_regex=regex)
    assert result.error == ErrorCode.NO_ERROR, result
    member.epoch = result.member_epoch
    member.owned = member.owned if result.assignment is None else result.assignment


def resolved_topics(h: Harness) -> dict[str, frozenset[str]]:
    return {regex: resolved.topics for regex, resolved in h.group.resolved_regexes.items()}


def later(h: Harness) -> None:
    """Past the interval at which the coordinator looks at the topic image again."""
    h.clock.advance(TOPIC_IMAGE_CHECK_INTERVAL_MS)


def test_a_regex_is_resolved_to_every_whole_matching_topic_but_the_internal_ones() -> None:
    h = orders_harness()
    h.topics.topics["xorders-3"] = TopicInfo(uuid.UUID(int=0x0104), 1)  # matches only partially
    a = regex_member(h, "a")
    assert a.owned == {ORDERS_1: frozenset({0, 1}), ORDERS_2: frozenset({0, 1})}
    assert resolved_topics(h) == {"^orders-.*": frozenset({"orders-1", "orders-2"})}
    assert h.group.members["a"].subscribed_topic_regex == "^orders-.*"
    catch_all = regex_member(h, "b", ".*")  # the internal topics stay out even of a catch-all
    settle([a, catch_all])
    assert "__consumer_offsets" not in resolved_topics(h)[".*"]


def test_a_topic_created_later_is_assigned_and_a_deleted_one_revoked() -> None:
    h = orders_harness()
    a, b = regex_member(h, "a"), regex_member(h, "b")
    settle([a, b])
    epoch = h.group.group_epoch
    h.topics.topics["orders-new"] = TopicInfo(ORDERS_NEW, 4)
    h.topics.topics["other"] = TopicInfo(uuid.UUID(int=0x0105), 4)
    settle([a, b])
    assert h.group.group_epoch == epoch, "the image is looked at again only after its interval"
    later(h)
    settle([a, b])
    assert h.group.group_epoch == epoch + 1
    owned = [(t, p) for m in (a, b) for t, parts in m.owned.items() for p in parts]
    assert sorted(owned) == sorted((t, p) for t, n in ((ORDERS_1, 2), (ORDERS_2, 2), (ORDERS_NEW, 4))
                                   for p in range(n))
    del h.topics.topics["orders-1"]
    later(h)
    settle([a, b])
    assert h.group.group_epoch == epoch + 2
    assert ORDERS_1 not in a.owned and ORDERS_1 not in b.owned
    assert resolved_topics(h)["^orders-.*"] == frozenset({"orders-2", "orders-new"})


def test_a_topic_the_regex_does_not_match_changes_no_epoch() -> None:
    h = orders_harness()
    a = regex_member(h, "a")
    epoch = h.group.group_epoch
    h.topics.topics["payments"] = TopicInfo(uuid.UUID(int=0x0106), 3)
    later(h)
    settle([a])
    assert h.group.group_epoch == epoch


def test_a_bad_regex_is_answered_with_kafkas_error_and_changes_nothing() -> None:
    h = orders_harness()
    result = h.heartbeat("a", 0, {}, subscribed_topic_names=(), subscribed_topic_regex="orders-(",
                         rebalance_timeout_ms=30000)
    assert (result.error, result.error_message) == (
        ErrorCode.INVALID_REGULAR_EXPRESSION,
        "SubscribedTopicRegex `orders-(` is not a valid regular expression: missing closing ).")
    assert "g" not in h.coordinator.consumer_groups.groups
    a = regex_member(h, "a")
    epoch = h.group.group_epoch
    bad = h.heartbeat("a", a.epoch, a.owned, subscribed_topic_regex="(?<=orders)-1")  # RE2 has no look-behind
    assert (bad.error, bad.error_message) == (
        ErrorCode.INVALID_REGULAR_EXPRESSION,
        "SubscribedTopicRegex `(?<=orders)-1` is not a valid regular expression: invalid or unsupported Perl syntax.")
    assert h.group.members["a"].subscribed_topic_regex == "^orders-.*" and h.group.group_epoch == epoch


@pytest.mark.parametrize(("regex", "description"), [
    ("[a", "missing closing ]"),
    ("a)", "unexpected )"),
    ("a**", "invalid nested repetition operator"),
    ("x{1001}", "invalid repeat count"),
    ("*", "missing argument to repetition operator"),
    ("\\", "trailing backslash at end of expression"),
    ("\\q", "invalid escape sequence"),
    ("[z-a]", "invalid character class range"),
])
def test_bad_regexes_are_described_as_re2j_describes_them(regex: str, description: str) -> None:
    with pytest.raises(InvalidRegularExpression) as raised:
        compile_regex(regex)
    assert raised.value.message == f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {description}."


def test_names_and_a_regex_together_subscribe_to_both() -> None:
    h = orders_harness()
    a = Member(h, "a", topics=("t",), subscribed_topic_regex="orders-2")
    assert set(a.owned) == {TOPIC}, "the names at once"
    a.beat()
    assert set(a.owned) == {TOPIC, ORDERS_2}, "the expression's topics from the next heartbeat"
    assert h.group.subscription_metadata.keys() == {"t", "orders-2"}
    b = Member(h, "b", topics=("u",))
    settle([a, b])
    assert h.group.subscription_metadata.keys() == {"t", "u", "orders-2"}
    assert set(a.owned) <= {TOPIC, ORDERS_2}, "a is never given b's topic"


def test_changing_or_dropping_the_regex_bumps_the_epoch() -> None:
    h = orders_harness()
    a = regex_member(h, "a")
    epoch = h.group.group_epoch
    resubscribe(h, a, "orders-1")
    settle([a])  # one epoch for the change, one for the new expression's resolution
    assert h.group.group_epoch == epoch + 2 and set(a.owned) == {ORDERS_1}
    resubscribe(h, a, "")  # an empty one unsubscribes
    settle([a])
    assert h.group.group_epoch == epoch + 3 and a.owned == {}
    assert h.group.members["a"].subscribed_topic_regex is None and h.group.resolved_regexes == {}


def test_the_last_member_of_a_regex_leaving_drops_its_resolution() -> None:
    h = orders_harness()
    a, b = regex_member(h, "a"), Member(h, "b")
    settle([a, b])
    h.heartbeat("a", -1)
    settle([b])
    assert h.group.resolved_regexes == {} and h.group.subscription_metadata.keys() == {"t"}


def test_a_large_image_is_resolved_a_chunk_at_a_time_and_the_next_heartbeat_assigns_it() -> None:
    h = Harness()
    for i in range(2 * RESOLUTION_CHUNK + 10):
        h.topics.topics[f"orders-{i}"] = TopicInfo(uuid.UUID(int=0x10000 + i), 1)
    a = regex_member(h, "a")
    assert a.owned == {} and h.group.resolved_regexes == {}, "resolving: nothing assigned from it yet"
    h.clock.advance(0)  # the next turns of the event loop
    h.clock.advance(0)
    settle([a], rounds=2)
    assert len(a.owned) == 2 * RESOLUTION_CHUNK + 10


def test_each_distinct_regex_is_compiled_once_and_resolved_once_for_every_group() -> None:
    clock = ManualScheduler()
    listed: list[int] = []
    names = ["orders-1", "orders-2", "x"]

    def topic_names() -> list[str]:
        listed.append(1)
        return names

    resolver = RegexResolver(topic_names, clock)
    first = resolver.resolved("orders-.*")
    assert first == frozenset({"orders-1", "orders-2"})
    assert resolver.resolved("orders-.*") is first and len(listed) == 1
    assert compile_regex("orders-.*") is compile_regex("orders-.*")
    names.append("orders-3")
    clock.advance(TOPIC_IMAGE_CHECK_INTERVAL_MS)
    assert resolver.resolved("orders-.*") == frozenset({"orders-1", "orders-2", "orders-3"}) and len(listed) == 2
    resolver.shutdown()


def test_describe_shows_the_members_regex() -> None:
    broker = SimpleNamespace(metadata=SimpleNamespace(by_id=lambda _topic_id: None))
    member = ConsumerGroupMember("a", subscribed_topic_names=("t",), subscribed_topic_regex="^orders-.*")
    described = consumer_group_describe._member(broker, member, {})  # type: ignore[arg-type]
    assert (described.subscribed_topic_names, described.subscribed_topic_regex) == (["t"], "^orders-.*")


def test_the_brokers_topics_are_what_regexes_are_resolved_against() -> None:
    store = MetadataStore.detached("cluster")
    for name in ("orders-1", "__consumer_offsets"):
        store.topics[name] = TopicMetadata(name, uuid.uuid4(), {0: [0]})
    resolver = RegexResolver(RegistryTopicImage(store).topic_names, ManualScheduler())
    assert resolver.resolved(".*") == frozenset({"orders-1"})


def test_matching_is_shared_out_a_chunk_per_turn_across_expressions() -> None:
    clock = ManualScheduler()
    names = [f"orders-{i}" for i in range(RESOLUTION_CHUNK)]
    resolver = RegexResolver(lambda: names, clock)
    assert resolver.resolved("orders-.*") == frozenset(names)  # one chunk: resolved at once
    assert len(resolver.resolved("orders-.*1") or ()) == RESOLUTION_CHUNK // 10
    names.extend(f"orders-x{i}" for i in range(RESOLUTION_CHUNK))  # a bulk creation
    clock.advance(TOPIC_IMAGE_CHECK_INTERVAL_MS)
    assert len(resolver.resolved("orders-.*") or ()) == 2 * RESOLUTION_CHUNK  # this turn's chunk
    assert len(resolver.resolved("orders-.*1") or ()) == RESOLUTION_CHUNK // 10, "its last answer until matched"
    assert clock.pending == 1
    clock.advance(0)  # the next turn
    assert len(resolver.resolved("orders-.*1") or ()) == 2 * RESOLUTION_CHUNK // 10 and clock.pending == 0
    names[:] = names[RESOLUTION_CHUNK:]  # a bulk deletion leaves at once
    clock.advance(TOPIC_IMAGE_CHECK_INTERVAL_MS)
    assert resolver.resolved("orders-.*") == frozenset(names)
    assert len(resolver.resolved("orders-.*1") or ()) == RESOLUTION_CHUNK // 10


def test_an_expression_new_to_the_group_is_assigned_from_the_next_heartbeat_as_kafka_does() -> None:
    """librdkafka's 0045_resubscribe_with_regex: after an unsubscribe, subscribing to an expression and a name
    assigns the name in the first heartbeat and the expression's topics in a later one."""
    h = orders_harness()
    a = regex_member(h, "a")
    assert set(a.owned) == {ORDERS_1, ORDERS_2}
    resubscribe(h, a, "")
    settle([a])
    assert a.owned == {} and h.group.resolved_regexes == {}
    result = h.heartbeat("a", a.epoch, a.owned, subscribed_topic_names=("t",), subscribed_topic_regex="^orders-.*")
    assert result.assignment == {TOPIC: frozenset(range(12))}, "the name only"
    a.epoch, a.owned = result.member_epoch, result.assignment
    a.beat()
    assert set(a.owned) == {TOPIC, ORDERS_1, ORDERS_2}


def test_an_expression_the_group_has_resolved_is_assigned_to_a_new_subscriber_at_once() -> None:
    h = orders_harness()
    a = regex_member(h, "a")
    b = Member(h, "b", topics=(), subscribed_topic_regex="^orders-.*")
    epoch = h.group.group_epoch
    settle([a, b])
    assert h.group.group_epoch == epoch, "no second epoch for an expression already resolved"
    assert b.owned and set(a.owned) | set(b.owned) == {ORDERS_1, ORDERS_2}
