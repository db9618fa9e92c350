"""OffsetDelete for a consumer-protocol group on a fake clock: the partitions of a topic some member subscribes to
(by name or through its regular expression) are GROUP_SUBSCRIBED_TO_TOPIC and keep their offsets, as Kafka's
OffsetMetadataManager.deleteOffsets answers (librdkafka's 0081_admin, DeleteConsumerGroupOffsets with a
subscribing consumer, under the consumer protocol)."""

from __future__ import annotations

from coordinator.group.group_metadata import OffsetAndMetadata, TopicPartition
from protocol.errors import ErrorCode
from tests.coordinator.test_consumer_group_heartbeat import Harness, Member
from tests.coordinator.test_consumer_group_regex import orders_harness, regex_member


def commit(h: Harness, member: Member, partitions: list[TopicPartition]) -> None:
    outcomes: list[dict[TopicPartition, ErrorCode]] = []
    offsets = {tp: OffsetAndMetadata(5, -1, "", 0) for tp in partitions}
    h.coordinator.handle_commit_offsets("g", member.member_id, None, member.epoch, offsets, outcomes.append)
    assert outcomes == [dict.fromkeys(partitions, ErrorCode.NO_ERROR)]


def delete(h: Harness, partitions: list[TopicPartition]) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
    answers: list[tuple[ErrorCode, dict[TopicPartition, ErrorCode]]] = []
    h.coordinator.handle_delete_offsets("g", partitions, lambda error, errors: answers.append((error, errors)))
    assert len(answers) == 1
    return answers[0]


def committed(h: Harness, partitions: list[TopicPartition]) -> set[TopicPartition]:
    _, fetched, _ = h.coordinator.handle_fetch_offsets("g", False, partitions)
    return {tp for tp, offset in fetched.items() if offset is not None}


def test_a_subscribed_topics_offsets_stay_and_the_others_go() -> None:
    h = Harness()
    a = Member(h, "a")
    commit(h, a, [("t", 0), ("t", 1), ("u", 0)])
    assert delete(h, [("t", 0), ("u", 0)]) == (ErrorCode.NO_ERROR, {
        ("t", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): ErrorCode.NO_ERROR})
    assert committed(h, [("t", 0), ("t", 1), ("u", 0)]) == {("t", 0), ("t", 1)}
    h.heartbeat("a", -1)  # the group is empty: nothing is subscribed to any more
    assert delete(h, [("t", 0)]) == (ErrorCode.NO_ERROR, {("t", 0): ErrorCode.NO_ERROR})
    assert committed(h, [("t", 0), ("t", 1)]) == {("t", 1)}


def test_a_topic_matched_by_a_members_regex_is_subscribed() -> None:
    h = orders_harness()
    a = regex_member(h, "a")
    commit(h, a, [("orders-1", 0), ("payments", 0)])
    assert delete(h, [("orders-1", 0), ("payments", 0)]) == (ErrorCode.NO_ERROR, {
        ("orders-1", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ("payments", 0): ErrorCode.NO_ERROR})
    assert committed(h, [("orders-1", 0), ("payments", 0)]) == {("orders-1", 0)}
