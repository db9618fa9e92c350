"""Wire-format details checked against bytes written out by hand from Kafka's spec."""

from __future__ import annotations

import os
import struct
import tempfile
from uuid import UUID

import pytest

from protocol.api import (
    APIS,
    UnsupportedVersionError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from protocol.buffers import FileRange, join_chunks
from protocol.errors import ErrorCode, ProtocolError
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.describe_topic_partitions import Cursor, DescribeTopicPartitionsRequest
from protocol.messages.fetch import FetchableTopicResponse, FetchRequest, FetchResponse, PartitionData
from protocol.messages.metadata import MetadataRequest
from protocol.messages.produce import (
    LeaderIdAndEpoch,
    PartitionProduceData,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
    TopicProduceResponse,
)


def frame_of(chunks: list) -> bytes:
    """The frame without its size prefix, after checking the prefix."""
    data = join_chunks(chunks)
    (size,) = struct.unpack_from(">i", data)
    assert size == len(data) - 4
    return data[4:]


def produce_request(records: object = b"batch") -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=1000,
        topic_data=[TopicProduceData(name="t", partition_data=[PartitionProduceData(index=3, records=records)])],
    )


# -- headers ---------------------------------------------------------------


def test_request_header_v1_and_v2_keep_a_legacy_client_id() -> None:
    v8 = frame_of(encode_request(0, 8, 77, "cli", produce_request()))
    assert v8[:13] == struct.pack(">hhih", 0, 8, 77, 3) + b"cli"
    v9 = frame_of(encode_request(0, 9, 77, "cli", produce_request()))
    # v2 adds only the empty tagged-field section after the int16-length client id.
    assert v9[:14] == struct.pack(">hhih", 0, 9, 77, 3) + b"cli" + b"\x00"
    null_client = frame_of(encode_request(0, 9, 77, None, produce_request()))
    assert null_client[:11] == struct.pack(">hhih", 0, 9, 77, -1) + b"\x00"
    decoded = decode_request(null_client)
    assert decoded.client_id is None and decoded.correlation_id == 77


def test_response_header_v0_v1_and_api_versions_always_v0() -> None:
    body = ProduceResponse(responses=[], throttle_time_ms=0)
    assert frame_of(encode_response(0, 8, 5, body))[:8] == struct.pack(">ii", 5, 0)  # v0, array length 0
    assert frame_of(encode_response(0, 9, 5, body))[:6] == struct.pack(">i", 5) + b"\x00\x01"  # v1 tags, compact []
    api_versions = ApiVersionsResponse(error_code=0, api_keys=[], throttle_time_ms=0)
    wire = frame_of(encode_response(18, 3, 5, api_versions))
    # Response header v0 even though v3 is flexible: error code follows the correlation id.
    assert wire == struct.pack(">ih", 5, 0) + b"\x01" + struct.pack(">i", 0) + b"\x00"
    assert decode_response(18, 3, wire) == (5, api_versions)


def test_header_with_tagged_fields_decodes() -> None:
    wire = frame_of(encode_request(18, 3, 9, "c", ApiVersionsRequest(client_software_name="x", client_software_version="1")))
    header_end = 2 + 2 + 4 + 2 + 1
    assert wire[header_end] == 0
    tagged = wire[:header_end] + b"\x01\x05\x02hi" + wire[header_end + 1 :]
    decoded = decode_request(tagged)
    assert decoded.body.client_software_name == "x" and decoded.client_id == "c"


# -- tagged fields ---------------------------------------------------------


def test_unknown_tagged_fields_are_skipped() -> None:
    request = produce_request()
    wire = frame_of(encode_request(0, 9, 1, "c", request))
    assert wire[-1] == 0  # the request's (empty) tagged-field section ends the frame
    with_unknown = wire[:-1] + b"\x02" + b"\x63\x03abc" + b"\x80\x01\x00"  # tags 99 and 128
    assert decode_request(with_unknown).body == request


def test_tagged_fields_at_default_are_left_out() -> None:
    partition = PartitionProduceResponse(index=1, error_code=0, base_offset=42)
    body = ProduceResponse(responses=[TopicProduceResponse(name="t", partition_responses=[partition])])
    expected = (
        struct.pack(">i", 7)
        + b"\x00"  # response header v1: no tags
        + b"\x02"  # one topic
        + b"\x02t"
        + b"\x02"  # one partition
        + struct.pack(">ihqqq", 1, 0, 42, -1, -1)
        + b"\x01"  # record_errors: empty
        + b"\x00"  # error_message: null
        + b"\x00"  # partition tags: current_leader is at its default, so none
        + b"\x00"  # topic tags
        + struct.pack(">i", 0)  # throttle
        + b"\x00"  # node_endpoints is a tagged field at default: none
    )
    assert frame_of(encode_response(0, 10, 7, body)) == expected
    partition.current_leader = LeaderIdAndEpoch(leader_id=2, leader_epoch=5)
    with_leader = frame_of(encode_response(0, 10, 7, body))
    # One tag (0), 9 bytes: the struct's two int32s and its own empty tag section.
    assert b"\x01\x00\x09" + struct.pack(">ii", 2, 5) + b"\x00\x00" in with_leader
    assert decode_response(0, 10, with_leader)[1] == body


# -- versions, defaults, nullability -----------------------------------------


def test_non_ignorable_field_absent_from_version_refuses_to_encode() -> None:
    request = MetadataRequest(topics=None, allow_auto_topic_creation=False)  # 4+, not ignorable
    with pytest.raises(UnsupportedVersionError):
        encode_request(3, 3, 1, "c", request)
    request.allow_auto_topic_creation = True  # the default: fine in v3
    encode_request(3, 3, 1, "c", request)


def test_ignorable_field_absent_from_version_is_dropped() -> None:
    partition = PartitionProduceResponse(index=0, base_offset=1, log_start_offset=99)  # 5+, ignorable
    body = ProduceResponse(responses=[TopicProduceResponse(name="t", partition_responses=[partition])])
    _, decoded = decode_response(0, 3, frame_of(encode_response(0, 3, 1, body)))
    assert decoded.responses[0].partition_responses[0].log_start_offset == -1


def test_schema_defaults() -> None:
    fetch = FetchRequest()
    assert fetch.max_bytes == 0x7FFFFFFF  # "0x7fffffff"
    assert fetch.replica_id == -1  # "-1"
    assert MetadataRequest().allow_auto_topic_creation is True  # "true"
    assert ProduceRequest().transactional_id is None  # "null"
    assert DescribeTopicPartitionsRequest().cursor is None  # nullable struct, "null"
    assert FetchRequest().topics == [] and FetchRequest().topics is not FetchRequest().topics


def test_nullable_struct_marker() -> None:
    request = DescribeTopicPartitionsRequest(topics=[], response_partition_limit=5, cursor=None)
    null_wire = request.to_bytes(0)
    assert null_wire == b"\x01" + struct.pack(">i", 5) + b"\xff" + b"\x00"
    request.cursor = Cursor(topic_name="a", partition_index=2)
    wire = request.to_bytes(0)
    assert wire == b"\x01" + struct.pack(">i", 5) + b"\x01" + b"\x02a" + struct.pack(">i", 2) + b"\x00" + b"\x00"
    assert DescribeTopicPartitionsRequest.decode(wire, 0) == request


def test_uuid_and_nullable_string_round_trip() -> None:
    topic_id = UUID("12345678-1234-5678-1234-567812345678")
    request = produce_request()
    request.topic_data[0].topic_id = topic_id
    request.topic_data[0].name = ""
    decoded = ProduceRequest.decode(request.to_bytes(13), 13)
    assert decoded.topic_data[0].topic_id == topic_id
    assert decoded.transactional_id is None


# -- records -------------------------------------------------------------


def test_decoded_records_are_zero_copy_slices_of_the_frame() -> None:
    wire = bytearray(frame_of(encode_request(0, 9, 1, "c", produce_request(b"R" * 3000))))
    records = decode_request(wire).body.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records.obj is wire
    assert bytes(records) == b"R" * 3000


def test_null_records_round_trip() -> None:
    for version in (8, 9):
        decoded = decode_request(frame_of(encode_request(0, version, 1, "c", produce_request(None))))
        assert decoded.body.topic_data[0].partition_data[0].records is None


def test_fetch_response_sends_records_as_uncopied_chunks() -> None:
    big = memoryview(bytes(range(256)) * 256)
    with tempfile.TemporaryFile() as segment:
        segment.write(b"x" * 10_000)
        file_range = FileRange(segment, 100, 5000)
        partitions = [
            PartitionData(partition_index=0, high_watermark=10, records=big),
            PartitionData(partition_index=1, high_watermark=10, records=file_range),
            PartitionData(partition_index=2, high_watermark=10, records=[big[:2000], file_range, b"tail"]),
            PartitionData(partition_index=3, high_watermark=10, records=b"small"),
        ]
        body = FetchResponse(responses=[FetchableTopicResponse(topic="t", partitions=partitions)])
        chunks = encode_response(1, 12, 3, body)
        assert any(c is big for c in chunks)
        assert sum(c is file_range for c in chunks) == 2
        total = sum(c.length if isinstance(c, FileRange) else len(c) for c in chunks)
        assert struct.unpack_from(">i", chunks[0])[0] == total - 4
        # Materialise the file ranges the way a transport would, then decode.
        segment.seek(0)
        content = segment.read()
        flat = b"".join(
            content[c.offset : c.offset + c.length] if isinstance(c, FileRange) else bytes(c) for c in chunks
        )
        _, decoded = decode_response(1, 12, flat[4:])
        got = [bytes(p.records) for p in decoded.responses[0].partitions]
        piece = content[100:5100]
        assert got == [bytes(big), piece, bytes(big[:2000]) + piece + b"tail", b"small"]
    assert os.path.exists(tempfile.gettempdir())


def test_records_of_a_wrong_type_are_a_protocol_error() -> None:
    body = FetchResponse(responses=[FetchableTopicResponse(topic="t", partitions=[PartitionData(records="text")])])
    with pytest.raises(ProtocolError):
        encode_response(1, 12, 3, body)


# -- errors ----------------------------------------------------------------


def test_unknown_api_key_or_version_is_unsupported_with_context() -> None:
    wire = frame_of(encode_request(18, 3, 41, "probe", ApiVersionsRequest()))
    future = struct.pack(">hhi", 18, 99, 41) + wire[8:]
    with pytest.raises(UnsupportedVersionError) as caught:
        decode_request(future)
    exc = caught.value
    assert (exc.api_key, exc.api_version, exc.correlation_id) == (18, 99, 41)
    assert exc.client_id == "probe" and exc.error_code == ErrorCode.UNSUPPORTED_VERSION
    with pytest.raises(UnsupportedVersionError) as caught:
        decode_request(struct.pack(">hhih", 9999, 0, 42, -1))
    assert caught.value.api_key == 9999 and caught.value.correlation_id == 42


def test_truncated_and_trailing_bytes_are_protocol_errors_with_context() -> None:
    wire = frame_of(encode_request(0, 9, 55, "c", produce_request(b"x" * 50)))
    for cut in (5, 9, 14, 20, len(wire) - 1):
        with pytest.raises(ProtocolError) as caught:
            decode_request(wire[:cut])
        if cut >= 8:
            assert caught.value.correlation_id == 55 and caught.value.api_key == 0
    with pytest.raises(ProtocolError):
        decode_response(0, 9, b"\x00\x00")


def test_trailing_bytes_ignored_after_requests_but_not_after_responses() -> None:
    # Requests: ignored, as Kafka's broker does (real clients send a few extra).
    request = produce_request(b"x" * 50)
    wire = frame_of(encode_request(0, 9, 55, "c", request))
    assert decode_request(wire + b"\x00\x01\x02").body == request
    # Responses come from brokers writing exactly their schema: extra bytes
    # mean we decoded with the wrong schema, so they are an error.
    response = frame_of(encode_response(0, 9, 55, ProduceResponse()))
    with pytest.raises(ProtocolError, match="unexpected bytes") as caught:
        decode_response(0, 9, response + b"\x00")
    assert caught.value.correlation_id == 55


def test_oversized_lengths_are_rejected_before_allocating() -> None:
    # Legacy array claiming 2**31-1 topics in a tiny frame.
    body = struct.pack(">hhi", 0, 8, 1) + struct.pack(">h", -1) + struct.pack(">hhii", -1, 1, 1000, 0x7FFFFFFF)
    with pytest.raises(ProtocolError):
        decode_request(body)
    # Varint longer than 5 bytes for a compact array length.
    flexible = struct.pack(">hhih", 0, 9, 1, -1) + b"\x00" + b"\x00" + struct.pack(">hi", 1, 1000) + b"\xff" * 6
    with pytest.raises(ProtocolError):
        decode_request(flexible)


def test_registry_covers_kafka_broker_apis() -> None:
    assert APIS[0].name == "Produce" and APIS[0].versions == range(14)  # Kafka 3.9 and 4.x
    assert APIS[0].flexible_min_version == 9 and APIS[17].flexible_min_version is None
    assert {68, 69}.issubset(APIS)


def test_records_in_a_non_byte_memoryview_are_sized_in_bytes() -> None:
    import array

    words = memoryview(array.array("i", range(1000)))  # 4000 bytes, itemsize 4
    body = FetchResponse(responses=[FetchableTopicResponse(topic="t", partitions=[PartitionData(records=words)])])
    chunks = encode_response(1, 12, 3, body)
    _, decoded = decode_response(1, 12, frame_of(chunks))
    assert bytes(decoded.responses[0].partitions[0].records) == words.tobytes()
    listed = FetchResponse(responses=[FetchableTopicResponse(topic="t", partitions=[PartitionData(records=[words, b"x"])])])
    _, decoded = decode_response(1, 12, frame_of(encode_response(1, 12, 3, listed)))
    assert bytes(decoded.responses[0].partitions[0].records) == words.tobytes() + b"x"


def test_header_objects_all_versions() -> None:
    from protocol.api import RequestHeader, ResponseHeader

    header = RequestHeader(request_api_key=3, request_api_version=1, correlation_id=9, client_id="c")
    with pytest.raises(UnsupportedVersionError):
        header.to_bytes(0)  # v0 has no client id, and ClientId is not ignorable
    v0 = RequestHeader(request_api_key=3, request_api_version=1, correlation_id=9)
    assert v0.to_bytes(0) == struct.pack(">hhi", 3, 1, 9)
    assert RequestHeader.decode(v0.to_bytes(0), 0) == v0
    assert header.to_bytes(1) == struct.pack(">hhih", 3, 1, 9, 1) + b"c"
    assert header.to_bytes(2) == struct.pack(">hhih", 3, 1, 9, 1) + b"c\x00"
    for version in (1, 2):
        decoded = RequestHeader.decode(header.to_bytes(version), version)
        assert decoded.correlation_id == 9
    assert ResponseHeader(correlation_id=4).to_bytes(0) == struct.pack(">i", 4)
    assert ResponseHeader(correlation_id=4).to_bytes(1) == struct.pack(">i", 4) + b"\x00"
