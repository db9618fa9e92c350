"""A blocking Kafka wire client built on pafka's own protocol code, for the scale benchmarks.

It times what a broker does without a client library's cost in the way: one Metadata round
trip, a pipelined stream of pre-built ProduceRequests, a Fetch. Versions are the highest
both pafka's codecs and the broker (from its ApiVersions answer) know, so the same client
drives pafka and the peer.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterable, Sequence

from protocol.api import APIS, decode_response, encode_request
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from protocol.primitives import Message
from protocol.records import Record, build_batch
from testing.sockets import read_frame

API_VERSIONS, METADATA, PRODUCE, FETCH, LIST_OFFSETS = 18, 3, 0, 1, 2
LATEST_TIMESTAMP = -1


def record_batch(records: int, value_size: int) -> bytearray:
    """One uncompressed RecordBatch v2 of ``records`` values of ``value_size`` bytes."""
    now = int(time.time() * 1000)
    value = b"v" * value_size
    return build_batch([Record(i, now, None, value) for i in range(records)])


def api_versions_v0_frame(client_id: str = "pafka-scale") -> bytes:
    """A whole ApiVersions v0 request frame: what every client sends first."""
    return b"".join(bytes(c) for c in encode_request(API_VERSIONS, 0, 1, client_id, ApiVersionsRequest()))


class WireClient:
    """One connection; requests are sent whole and answers read in order."""

    def __init__(self, host: str, port: int, client_id: str = "pafka-scale", timeout: float = 30.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id
        self._correlation_id = 0
        self.versions: dict[int, int] = {}

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- framing ----------------------------------------------------------
    def send(self, api_key: int, version: int, body: Message) -> int:
        self._correlation_id += 1
        chunks = encode_request(api_key, version, self._correlation_id, self.client_id, body)
        self.sock.sendall(b"".join(bytes(c) if not isinstance(c, (bytes, bytearray)) else c for c in chunks))
        return self._correlation_id

    def send_raw(self, frame: bytes) -> None:
        self.sock.sendall(frame)

    def receive_frame(self) -> bytearray:
        return read_frame(self.sock)

    def receive(self, api_key: int, version: int) -> Message:
        return decode_response(api_key, version, self.receive_frame())[1]

    def request(self, api_key: int, version: int, body: Message) -> Message:
        self.send(api_key, version, body)
        return self.receive(api_key, version)

    # -- APIs ---------------------------------------------------------------
    def negotiate(self) -> dict[int, int]:
        """ApiVersions v0 (every broker answers it); keeps the highest common version per API."""
        response = self.request(API_VERSIONS, 0, ApiVersionsRequest())
        for key in response.api_keys:
            spec = APIS.get(key.api_key)
            if spec is not None:
                common = min(key.max_version, spec.versions[-1])
                if common >= max(key.min_version, spec.versions[0]):
                    self.versions[key.api_key] = common
        return self.versions

    def metadata(self, topics: Sequence[str] | None = None) -> Message:
        return decode_response(METADATA, self.versions[METADATA], self.timed_metadata(topics)[0])[1]

    def timed_metadata(self, topics: Sequence[str] | None = None) -> tuple[bytearray, float]:
        """The response frame and the seconds from sending the request to its last byte
        (decoding it, the client's work, is left out of the time)."""
        body = MetadataRequest(topics=None if topics is None else [MetadataRequestTopic(name=t) for t in topics],
                               allow_auto_topic_creation=False)
        started = time.perf_counter()
        self.send(METADATA, self.versions[METADATA], body)
        frame = self.receive_frame()
        return frame, time.perf_counter() - started

    def produce_frame(self, topic: str, partition_batches: Iterable[tuple[int, bytes]], acks: int = 1,
                      correlation_id: int = 0) -> bytes:
        """A whole ProduceRequest frame (size prefix included) to send as many times as wanted."""
        version = min(self.versions[PRODUCE], 12)  # v13+ names topics by id
        body = ProduceRequest(acks=acks, timeout_ms=30000, topic_data=[TopicProduceData(
            name=topic, partition_data=[PartitionProduceData(index=p, records=b) for p, b in partition_batches])])
        chunks = encode_request(PRODUCE, version, correlation_id, self.client_id, body)
        return b"".join(bytes(c) for c in chunks)

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20) -> Message:
        version = min(self.versions[FETCH], 12)  # v13+ names topics by id
        body = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
                            session_id=0, session_epoch=-1, topics=[FetchTopic(topic=topic, partitions=[
                                FetchPartition(partition=partition, fetch_offset=offset,
                                               partition_max_bytes=max_bytes)])])
        return self.request(FETCH, version, body)

    def latest_offsets(self, partitions_by_topic: dict[str, Sequence[int]]) -> dict[tuple[str, int], int]:
        """ListOffsets(LATEST) for many partitions in one request."""
        version = self.versions[LIST_OFFSETS]
        body = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
            ListOffsetsTopic(name=topic, partitions=[
                ListOffsetsPartition(partition_index=p, timestamp=LATEST_TIMESTAMP) for p in parts])
            for topic, parts in partitions_by_topic.items()])
        response = self.request(LIST_OFFSETS, version, body)
        return {(t.name, p.partition_index): p.offset for t in response.topics for p in t.partitions}


def pipelined_produce(client: WireClient, frames: Sequence[bytes], in_flight: int = 8,
                      deadline: float | None = None) -> tuple[int, int]:
    """Send each frame (acks=1), keeping up to ``in_flight`` unanswered; returns (sent, errors).

    Frames reuse correlation id 0: answers come back in order, so counting them suffices.
    Stops early (bounded in time) once ``deadline`` (time.monotonic()) passes.
    """
    version = min(client.versions[PRODUCE], 12)
    sent = answered = errors = 0
    for frame in frames:
        if deadline is not None and time.monotonic() > deadline:
            break
        client.send_raw(frame)
        sent += 1
        if sent - answered >= in_flight:
            errors += _produce_errors(client.receive(PRODUCE, version))
            answered += 1
    while answered < sent:
        errors += _produce_errors(client.receive(PRODUCE, version))
        answered += 1
    return sent, errors


def _produce_errors(response: Message) -> int:
    return sum(1 for t in response.responses for p in t.partition_responses if p.error_code)
