"""``dump-log --offsets-decoder`` for the share groups' records (types 9-15) in ``__consumer_offsets``.

As ``offsets_decoder`` prints the consumer groups' records: the key as
``{"type":"<record type>","data":{"groupId":...,"memberId":...}}`` and the value
as ``{"version":"0","data":{...}}`` in Kafka's JSON form of the record's schema
(``<DELETE>`` for a tombstone).
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Mapping
from typing import Any

from coordinator.group.record_formats import ConsumerGroupPartitionMetadataValue
from coordinator.group.share_group_record_formats import (
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataValue,
    ShareGroupValue,
    StateTopics,
    decode_share_group_key,
    decode_share_group_value,
)

Json = dict[str, Any]


def _dumps(node: Json) -> str:
    return json.dumps(node, separators=(",", ":"), ensure_ascii=False)


def _uuid(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString (as ``offsets_decoder.kafka_uuid``, which imports this module)."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def decode_share_group_record(key: bytes, value: bytes | None) -> tuple[str, str | None]:
    """(key, payload) of a share group's record; raises CorruptRecordError (or ValueError) when unreadable."""
    decoded = decode_share_group_key(key)
    if decoded is None:
        raise ValueError("not a share group record")
    data: Json = {"groupId": decoded.group}
    if decoded.member_id is not None:
        data["memberId"] = decoded.member_id
    key_json = _dumps({"type": str(decoded.record_type), "data": data})
    if value is None:
        return key_json, "<DELETE>"
    return key_json, _dumps({"version": "0", "data": _value(decode_share_group_value(decoded.record_type, value))})


def _partitions(assignment: Mapping[uuid.UUID, frozenset[int]]) -> list[Json]:
    return [{"topicId": _uuid(t), "partitions": sorted(p)} for t, p in assignment.items()]


def _state_topics(topics: StateTopics) -> list[Json]:
    return [{"topicId": _uuid(t), "topicName": name, "partitions": sorted(p)} for t, name, p in topics]


def _value(v: ShareGroupValue) -> Json:
    if isinstance(v, ShareGroupMetadataValue):
        return {"epoch": v.epoch}
    if isinstance(v, ConsumerGroupPartitionMetadataValue):
        return {"topics": [{"topicId": _uuid(t.topic_id), "topicName": t.topic_name,
                            "numPartitions": t.num_partitions, "partitionMetadata": []} for t in v.topics]}
    if isinstance(v, ShareGroupMemberMetadataValue):
        return {"rackId": v.rack_id, "clientId": v.client_id, "clientHost": v.client_host,
                "subscribedTopicNames": list(v.subscribed_topic_names)}
    if isinstance(v, ShareGroupTargetAssignmentMetadataValue):
        return {"assignmentEpoch": v.assignment_epoch}
    if isinstance(v, ShareGroupTargetAssignmentMemberValue):
        return {"topicPartitions": _partitions(v.partitions)}
    if isinstance(v, ShareGroupCurrentMemberAssignmentValue):
        return {"memberEpoch": v.member_epoch, "previousMemberEpoch": v.previous_member_epoch, "state": v.state,
                "assignedPartitions": _partitions(v.assigned)}
    assert isinstance(v, ShareGroupStatePartitionMetadataValue)
    return {"initializingTopics": _state_topics(v.initializing), "initializedTopics": _state_topics(v.initialized),
            "deletingTopics": [{"topicId": _uuid(t), "topicName": name} for t, name in v.deleting]}
