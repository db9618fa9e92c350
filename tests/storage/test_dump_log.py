"""``pafka dump-log``: batches, records, index entries, mismatches, sanity check."""

from __future__ import annotations

import struct

from click.testing import CliRunner

from storage.log import Log
from storage.log_config import LogConfig
from tests.storage.helpers import make_batch
from tools.cli import main

NOW = 1_700_000_000_000


def _segment(tmp_path):
    log = Log.open(tmp_path / "t-0", LogConfig.model_validate({"index.interval.bytes": 100}))
    for i in range(6):
        log.append_as_leader(make_batch(2, timestamp=NOW + 10 * i, seed=i, value_size=40), leader_epoch=3, now=NOW)
    log.close()
    return tmp_path / "t-0" / "00000000000000000000"


def _run(*args: str) -> str:
    result = CliRunner().invoke(main, ["dump-log", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_batches_and_records(checked_tmp_path) -> None:
    base = _segment(checked_tmp_path)
    out = _run("--files", f"{base}.log")
    lines = out.splitlines()
    assert lines[0] == f"Dumping {base}.log"
    assert lines[1] == "Log starting offset: 0"
    assert lines[2].startswith("baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 "
                               "producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 3 isTransactional: false "
                               "isControl: false deleteHorizonMs: OptionalLong.empty position: 0 "
                               f"CreateTime: {NOW + 1} size: ")
    assert lines[2].endswith("magic: 2 compresscodec: none crc: " + lines[2].split("crc: ")[1].split()[0] + " isvalid: true")
    assert len([line for line in lines if line.startswith("baseOffset:")]) == 6
    assert not any(line.startswith("| offset") for line in lines)
    deep = _run("--deep-iteration", "--files", f"{base}.log").splitlines()
    assert deep[3] == f"| offset: 0 CreateTime: {NOW} keySize: 1 valueSize: 40 sequence: -1 headerKeys: []"
    data = _run("--print-data-log", "--files", f"{base}.log").splitlines()
    assert data[4].startswith(f"| offset: 1 CreateTime: {NOW + 1} keySize: 1 valueSize: 40 sequence: -1 headerKeys: [] "
                              "key: k payload: 0:1:x")


def test_indexes_and_mismatches(tmp_path) -> None:
    base = _segment(tmp_path)
    out = _run("--files", f"{base}.index,{base}.timeindex").splitlines()
    entries = [line for line in out if line.startswith("offset: ")]
    assert entries and all("position: " in line for line in entries)
    assert not any("Mismatches" in line for line in out)
    assert any(line == f"timestamp: {NOW + 51} offset: 11" for line in out)  # the final max timestamp
    # An entry that does not point at a batch start is flagged.
    raw = bytearray((base.parent / (base.name + ".index")).read_bytes())
    struct.pack_into(">i", raw, 4, struct.unpack_from(">i", raw, 4)[0] + 1)
    (base.parent / (base.name + ".index")).write_bytes(raw)
    flagged = _run("--files", f"{base}.index").splitlines()
    assert f"Mismatches in :{base.resolve()}.index" in flagged
    assert any(line.startswith("  Index offset: ") and "is not the start of a batch" in line for line in flagged)
    assert _run("--index-sanity-check", "--files", f"{base}.index").strip().endswith("passed sanity check.")
    (base.parent / (base.name + ".index")).write_bytes(b"\x00\x00\x00\x00\x00\x00\x00\x05")
    assert "Found a corrupted index file" in _run("--index-sanity-check", "--files", f"{base}.index")


def test_corrupt_batch_is_reported_invalid(tmp_path) -> None:
    base = _segment(tmp_path)
    path = base.parent / (base.name + ".log")
    data = bytearray(path.read_bytes())
    data[80] ^= 0xFF
    path.write_bytes(data)
    out = _run("--files", str(path))
    assert "isvalid: false" in out.splitlines()[2]


def test_null_keys_and_header_keys_print_as_kafka_does(checked_tmp_path) -> None:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    builder.append(0, timestamp=NOW, key=None, value=b"v", headers=[("h1", b"x"), ("h2", None)])
    log = Log.open(checked_tmp_path / "t-0", LogConfig())
    log.append_as_leader(bytearray(builder.build()), 0, now=NOW)
    log.close()
    lines = _run("--print-data-log", "--files", str(checked_tmp_path / "t-0" / "00000000000000000000.log")).splitlines()
    assert lines[3] == f"| offset: 0 CreateTime: {NOW} keySize: -1 valueSize: 1 sequence: -1 headerKeys: [h1,h2] payload: v"


def test_offsets_decoder_prints_consumer_offsets_records_as_kafka(checked_tmp_path) -> None:
    import uuid

    from coordinator.common.coordinator_log import build_records_batch
    from coordinator.group.record_formats import (
        ClassicMemberMetadataValue,
        ConsumerGroupCurrentMemberAssignmentValue,
        ConsumerGroupMemberMetadataValue,
        ConsumerGroupMetadataValue,
        ConsumerGroupPartitionMetadataValue,
        ConsumerGroupRecordKey,
        ConsumerGroupTargetAssignmentMemberValue,
        GroupMetadataKey,
        GroupMetadataValue,
        MemberMetadataValue,
        OffsetCommitKey,
        OffsetCommitValue,
        TopicMetadata,
        encode_consumer_group_key,
        encode_consumer_group_value,
        encode_group_metadata_key,
        encode_group_metadata_value,
        encode_offset_commit_key,
        encode_offset_commit_value,
    )
    from protocol.consumer_protocol import encode_assignment, encode_subscription

    topic_id = uuid.UUID(bytes=bytes(range(16)))
    member = MemberMetadataValue("m", None, "c", "/h", 300, 100, encode_subscription(["t"]), encode_assignment({"t": [0]}))
    records = [
        (encode_offset_commit_key(OffsetCommitKey("g", "t", 0)), encode_offset_commit_value(OffsetCommitValue(5, "", 7))),
        (encode_group_metadata_key(GroupMetadataKey("g")),
         encode_group_metadata_value(GroupMetadataValue("consumer", 1, "range", "m", 9, [member]))),
        (encode_consumer_group_key(ConsumerGroupRecordKey(3, "cg")), encode_consumer_group_value(ConsumerGroupMetadataValue(2))),
        (encode_consumer_group_key(ConsumerGroupRecordKey(4, "cg")),
         encode_consumer_group_value(ConsumerGroupPartitionMetadataValue((TopicMetadata(topic_id, "t", 3),)))),
        (encode_consumer_group_key(ConsumerGroupRecordKey(5, "cg", "m1")), encode_consumer_group_value(
            ConsumerGroupMemberMetadataValue(None, None, "c", "/h", ("t",), None, 300, None))),
        (encode_consumer_group_key(ConsumerGroupRecordKey(5, "cg", "m2")), encode_consumer_group_value(
            ConsumerGroupMemberMetadataValue(None, None, "c", "/h", ("t",), None, 300, None,
                                             ClassicMemberMetadataValue(10000, (("range", b"\x00\x01"),))))),
        (encode_consumer_group_key(ConsumerGroupRecordKey(7, "cg", "m1")),
         encode_consumer_group_value(ConsumerGroupTargetAssignmentMemberValue({topic_id: frozenset({1, 0})}))),
        (encode_consumer_group_key(ConsumerGroupRecordKey(8, "cg", "m1")), encode_consumer_group_value(
            ConsumerGroupCurrentMemberAssignmentValue(2, 1, 0, {topic_id: frozenset({0})}, {}))),
        (encode_consumer_group_key(ConsumerGroupRecordKey(8, "cg", "m1")), None),
        (b"\x00\x63\x00\x01x", b""),
    ]
    log = Log.open(checked_tmp_path / "__consumer_offsets-0", LogConfig.model_validate({}))
    log.append_as_leader(bytes(build_records_batch(records, NOW)), leader_epoch=0, now=NOW)
    log.close()
    out = _run("--offsets-decoder", "--files", str(checked_tmp_path / "__consumer_offsets-0" / "00000000000000000000.log"))
    printed = [line.split("headerKeys: [] ", 1)[1] for line in out.splitlines() if line.startswith("| offset")]
    tid = "AAECAwQFBgcICQoLDA0ODw"
    assert printed == [
        ('key: {"type":"1","data":{"group":"g","topic":"t","partition":0}} '
        'payload: {"version":"3","data":{"offset":5,"leaderEpoch":-1,"metadata":"","commitTimestamp":7}}'),
        ('key: {"type":"2","data":{"group":"g"}} payload: {"version":"3","data":{"protocolType":"consumer",'
        '"generation":1,"protocol":"range","leader":"m","currentStateTimestamp":9,"members":[{"memberId":"m",'
        '"groupInstanceId":null,"clientId":"c","clientHost":"/h","rebalanceTimeout":300,"sessionTimeout":100,'
        '"subscription":{"topics":["t"],"userData":null},'
        '"assignment":{"assignedPartitions":[{"topic":"t","partitions":[0]}],"userData":null}}]}}'),
        'key: {"type":"3","data":{"groupId":"cg"}} payload: {"version":"0","data":{"epoch":2}}',
        'key: {"type":"4","data":{"groupId":"cg"}} payload: {"version":"0","data":{"topics":[{"topicId":"'
        + tid + '","topicName":"t","numPartitions":3,"partitionMetadata":[]}]}}',
        ('key: {"type":"5","data":{"groupId":"cg","memberId":"m1"}} payload: {"version":"0","data":{"instanceId":null,'
        '"rackId":null,"clientId":"c","clientHost":"/h","subscribedTopicNames":["t"],"subscribedTopicRegex":null,'
        '"rebalanceTimeoutMs":300,"serverAssignor":null}}'),
        ('key: {"type":"5","data":{"groupId":"cg","memberId":"m2"}} payload: {"version":"0","data":{"instanceId":null,'
        '"rackId":null,"clientId":"c","clientHost":"/h","subscribedTopicNames":["t"],"subscribedTopicRegex":null,'
        '"rebalanceTimeoutMs":300,"serverAssignor":null,"classicMemberMetadata":{"sessionTimeoutMs":10000,'
        '"supportedProtocols":[{"name":"range","metadata":"AAE="}]}}}'),
        'key: {"type":"7","data":{"groupId":"cg","memberId":"m1"}} payload: {"version":"0","data":{"topicPartitions":'
        '[{"topicId":"' + tid + '","partitions":[0,1]}]}}',
        'key: {"type":"8","data":{"groupId":"cg","memberId":"m1"}} payload: {"version":"0","data":{"memberEpoch":2,'
        '"previousMemberEpoch":1,"state":0,"assignedPartitions":[{"topicId":"' + tid + '","partitions":[0]}],'
        '"partitionsPendingRevocation":[]}}',
        'key: {"type":"8","data":{"groupId":"cg","memberId":"m1"}} payload: <DELETE>',
        "key: Unknown record type 99 at offset 9, skipping.",
    ]
