"""``dump-log --offsets-decoder``: the records of ``__consumer_offsets`` as kafka-dump-log.sh prints them.

Kafka's OffsetsMessageParser: the key as ``{"type":"<key version or record
type>","data":{...}}`` and the value as ``{"version":"<value version>","data":{...}}``
(``<DELETE>`` for a tombstone), each message in Kafka's JSON form (field names
in camelCase, the fields of the record's version only, bytes in base64, topic
ids as Kafka writes a Uuid: URL-safe base64 without padding). A classic
group's member subscriptions and assignments are decoded too when its protocol
type is ``consumer``. A record that cannot be read prints what Kafka prints
for it ("Unknown record type ..." or "Error at offset ..."), with no payload.
"""

from __future__ import annotations

import base64
import json
import struct
import uuid
from collections.abc import Mapping
from typing import Any

from coordinator.group.record_formats import (
    CONSUMER_GROUP_REGULAR_EXPRESSION,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRecordKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerGroupValue,
    GroupMetadataKey,
    OffsetCommitKey,
    decode_consumer_group_value,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from coordinator.group.share_group_record_formats import SHARE_GROUP_TYPES
from protocol.errors import CorruptRecordError
from protocol.readable import Readable
from tools.share_group_records_decoder import decode_share_group_record

#: The key versions (record types) of the records this decoder reads.
_KNOWN_KEY_TYPES = (*range(9), CONSUMER_GROUP_REGULAR_EXPRESSION)
Json = dict[str, Any]


class _UnknownRecordType(Exception):
    def __init__(self, record_type: int) -> None:
        super().__init__(record_type)
        self.record_type = record_type


def _dumps(node: Json) -> str:
    return json.dumps(node, separators=(",", ":"), ensure_ascii=False)


def _binary(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def kafka_uuid(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def decode_record(offset: int, key: bytes | None, value: bytes | None) -> tuple[str, str | None]:
    """(key, payload) of one record as kafka-dump-log.sh --offsets-decoder prints them."""
    if key is None:
        raise ValueError(f"Failed to decode message at offset {offset} using offset topic decoder "
                         "(message had a missing key)")
    try:
        record_type = struct.unpack_from(">h", key)[0] if len(key) >= 2 else -1
        if record_type in SHARE_GROUP_TYPES:
            return decode_share_group_record(key, value)
        if record_type not in _KNOWN_KEY_TYPES:
            raise _UnknownRecordType(record_type)
        decoded = decode_key(key)
        key_json = _dumps({"type": str(record_type), "data": _key_data(decoded)})
        if value is None:
            return key_json, "<DELETE>"
        version, data = _value_data(decoded, value)
        return key_json, _dumps({"version": str(version), "data": data})
    except _UnknownRecordType as e:
        return f"Unknown record type {e.record_type} at offset {offset}, skipping.", None
    except (CorruptRecordError, ValueError, struct.error) as e:
        return f"Error at offset {offset}, skipping. {e}", None


def _key_data(key: OffsetCommitKey | GroupMetadataKey | ConsumerGroupRecordKey) -> Json:
    if isinstance(key, OffsetCommitKey):
        return {"group": key.group, "topic": key.topic, "partition": key.partition}
    if isinstance(key, GroupMetadataKey):
        return {"group": key.group}
    data: Json = {"groupId": key.group}
    if key.member_id is not None:
        data["memberId"] = key.member_id
    if key.regex is not None:
        data["regularExpression"] = key.regex
    return data


def _value_data(key: OffsetCommitKey | GroupMetadataKey | ConsumerGroupRecordKey, value: bytes) -> tuple[int, Json]:
    version: int = struct.unpack_from(">h", value)[0] if len(value) >= 2 else -1
    if isinstance(key, OffsetCommitKey):
        return version, _offset_commit(version, value)
    if isinstance(key, GroupMetadataKey):
        return version, _group_metadata(version, value)
    return version, _consumer_group_value(decode_consumer_group_value(key.record_type, value))


def _offset_commit(version: int, value: bytes) -> Json:
    v = decode_offset_commit_value(value)
    data: Json = {"offset": v.offset}
    if version >= 3:
        data["leaderEpoch"] = v.leader_epoch
    data["metadata"] = v.metadata
    data["commitTimestamp"] = v.commit_timestamp
    if version == 1:
        data["expireTimestamp"] = v.expire_timestamp
    return data


def _group_metadata(version: int, value: bytes) -> Json:
    v = decode_group_metadata_value(value)
    data: Json = {"protocolType": v.protocol_type, "generation": v.generation, "protocol": v.protocol,
                  "leader": v.leader}
    if version >= 2:
        data["currentStateTimestamp"] = v.current_state_timestamp
    members = []
    for m in v.members:
        member: Json = {"memberId": m.member_id}
        if version >= 3:
            member["groupInstanceId"] = m.group_instance_id
        member.update(clientId=m.client_id, clientHost=m.client_host)
        if version >= 1:
            member["rebalanceTimeout"] = m.rebalance_timeout
        member["sessionTimeout"] = m.session_timeout
        consumer = v.protocol_type == "consumer"
        member["subscription"] = (_subscription(m.subscription) if consumer else None) or _binary(m.subscription)
        member["assignment"] = (_assignment(m.assignment) if consumer else None) or _binary(m.assignment)
        members.append(member)
    data["members"] = members
    return data


def _embedded_reader(data: bytes) -> Readable:
    return Readable(data, CorruptRecordError, "consumer protocol data")


def _topic_partitions(r: Readable) -> list[Json]:
    out = []
    for _ in range(r.array_length()):
        topic = r.string()
        out.append({"topic": topic, "partitions": [r.int32() for _ in range(r.array_length())]})
    return out


def _nullable_bytes(r: Readable) -> bytes | None:
    n = r.int32()
    return None if n < 0 else r.take(n)


def _subscription(data: bytes) -> Json | None:
    """ConsumerProtocolSubscription in Kafka's JSON, or None when unreadable (its bytes are shown then)."""
    try:
        r = _embedded_reader(data)
        version = r.int16()
        out: Json = {"topics": [r.string() for _ in range(r.array_length())], "userData": _binary(_nullable_bytes(r))}
        if version >= 1:
            out["ownedPartitions"] = _topic_partitions(r)
        if version >= 2:
            out["generationId"] = r.int32()
        if version >= 3:
            out["rackId"] = r.nullable_string()
        return out
    except CorruptRecordError:
        return None


def _assignment(data: bytes) -> Json | None:
    try:
        r = _embedded_reader(data)
        r.int16()
        return {"assignedPartitions": _topic_partitions(r), "userData": _binary(_nullable_bytes(r))}
    except CorruptRecordError:
        return None


def _partitions(assignment: Mapping[uuid.UUID, frozenset[int]]) -> list[Json]:
    return [{"topicId": kafka_uuid(t), "partitions": sorted(p)} for t, p in assignment.items()]


def _consumer_group_value(v: ConsumerGroupValue) -> Json:
    if isinstance(v, ConsumerGroupMetadataValue):
        return {"epoch": v.epoch}
    if isinstance(v, ConsumerGroupPartitionMetadataValue):
        return {"topics": [{"topicId": kafka_uuid(t.topic_id), "topicName": t.topic_name,
                            "numPartitions": t.num_partitions,
                            "partitionMetadata": [{"partition": p, "racks": list(racks)}
                                                  for p, racks in t.partition_racks]} for t in v.topics]}
    if isinstance(v, ConsumerGroupMemberMetadataValue):
        return _member_metadata(v)
    if isinstance(v, ConsumerGroupTargetAssignmentMetadataValue):
        return {"assignmentEpoch": v.assignment_epoch}
    if isinstance(v, ConsumerGroupTargetAssignmentMemberValue):
        return {"topicPartitions": _partitions(v.partitions)}
    if isinstance(v, ConsumerGroupRegularExpressionValue):
        return {"topics": list(v.topics), "version": v.version, "timestamp": v.timestamp}
    assert isinstance(v, ConsumerGroupCurrentMemberAssignmentValue)
    return {"memberEpoch": v.member_epoch, "previousMemberEpoch": v.previous_member_epoch, "state": v.state,
            "assignedPartitions": _partitions(v.assigned), "partitionsPendingRevocation": _partitions(v.revoking)}


def _member_metadata(v: ConsumerGroupMemberMetadataValue) -> Json:
    data: Json = {"instanceId": v.instance_id, "rackId": v.rack_id, "clientId": v.client_id,
                  "clientHost": v.client_host, "subscribedTopicNames": list(v.subscribed_topic_names),
                  "subscribedTopicRegex": v.subscribed_topic_regex, "rebalanceTimeoutMs": v.rebalance_timeout_ms,
                  "serverAssignor": v.server_assignor}
    classic = v.classic_member_metadata
    # A tagged field whose default is null: Kafka's JSON leaves it out when it is null.
    if classic is not None:
        data["classicMemberMetadata"] = {
            "sessionTimeoutMs": classic.session_timeout_ms,
            "supportedProtocols": [{"name": name, "metadata": _binary(metadata)}
                                   for name, metadata in classic.supported_protocols]}
    return data
