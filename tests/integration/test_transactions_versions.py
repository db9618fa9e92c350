"""Every version pafka serves of the transaction APIs, on the wire against a real broker process.

Each test runs whole transactions with one API at the version under test
(the others at a fixed one) and checks what a reader sees: the last stable
offset and aborted transactions of a ``read_committed`` Fetch, and the
group's committed offsets. Fencing is checked at every version, since the
error a fenced producer gets depends on it (INVALID_PRODUCER_EPOCH before
PRODUCER_FENCED existed).
"""

from __future__ import annotations

import random
import socket
import struct
import time
import uuid
from typing import Any

import pytest

from broker.handlers import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    end_txn,
    fetch,
    find_coordinator,
    init_producer_id,
    offset_fetch,
    produce,
    txn_offset_commit,
    write_txn_markers,
)
from protocol.api import encode_request
from protocol.buffers import join_chunks
from protocol.errors import ErrorCode
from protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from protocol.messages.end_txn import EndTxnRequest
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.init_producer_id import InitProducerIdRequest
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic
from protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from protocol.messages.write_txn_markers import WritableTxnMarker, WritableTxnMarkerTopic, WriteTxnMarkersRequest
from protocol.record_batch import iter_batch_headers
from protocol.records import Record, build_batch, read_batch
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.waiting import wait_until
from testing.sockets import send_request
from testing.topics import create_topic

#: After every test: `pafka transactions find-hanging` finds nothing on the broker (conftest).
pytestmark = pytest.mark.usefixtures("no_hanging_transactions")

RETRIABLE = {ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR,
             ErrorCode.COORDINATOR_NOT_AVAILABLE}


def _retry(call: Any, error_of: Any = lambda r: r.error_code, attempts: int = 100) -> Any:
    """``call()`` until its answer is not a retriable coordinator error (bounded)."""
    for _ in range(attempts):
        response = call()
        if error_of(response) not in RETRIABLE:
            return response
        time.sleep(0.05)
    raise AssertionError(f"still retriable after {attempts} attempts: {response}")


class WireProducer:
    """A transactional producer speaking the protocol by hand."""

    def __init__(self, broker: BrokerProcess, tid: str, topic: str) -> None:
        self.broker, self.tid, self.topic = broker, tid, topic
        self.producer_id, self.epoch = -1, -1
        self.sequences: dict[int, int] = {}

    def find_coordinator(self, version: int = 3) -> Any:
        request = (FindCoordinatorRequest(key_type=1, coordinator_keys=[self.tid]) if version >= 4
                   else FindCoordinatorRequest(key=self.tid, key_type=1))
        return send_request(self.broker, find_coordinator.API_KEY, version, request)

    def init(self, version: int = 4) -> Any:
        request = InitProducerIdRequest(transactional_id=self.tid, transaction_timeout_ms=60_000,
                                        producer_id=-1, producer_epoch=-1)
        response = _retry(lambda: send_request(self.broker, init_producer_id.API_KEY, version, request))
        if response.error_code == 0:
            self.producer_id, self.epoch = response.producer_id, response.producer_epoch
            self.sequences.clear()
        return response

    def add_partitions(self, partitions: list[int], version: int = 3, epoch: int | None = None) -> list[int]:
        request = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.tid, v3_and_below_producer_id=self.producer_id,
            v3_and_below_producer_epoch=self.epoch if epoch is None else epoch,
            v3_and_below_topics=[AddPartitionsToTxnTopic(name=self.topic, partitions=partitions)])

        def errors(response: Any) -> int:
            codes = {p.partition_error_code for t in response.results_by_topic_v3_and_below
                     for p in t.results_by_partition}
            assert len(codes) == 1, response
            return codes.pop()

        return [errors(_retry(lambda: send_request(self.broker, add_partitions_to_txn.API_KEY, version, request),
                              errors))]

    def produce(self, partition: int, values: list[bytes]) -> int:
        sequence = self.sequences.get(partition, 0)
        batch = build_batch([Record(i, 0, None, v) for i, v in enumerate(values)], producer_id=self.producer_id,
                            producer_epoch=self.epoch, base_sequence=sequence, is_transactional=True)
        self.sequences[partition] = sequence + len(values)
        response = send_request(self.broker, produce.API_KEY, 9, ProduceRequest(
            transactional_id=self.tid, acks=-1, timeout_ms=10_000, topic_data=[TopicProduceData(
                name=self.topic, partition_data=[PartitionProduceData(index=partition, records=batch)])]))
        (topic,) = response.responses
        (result,) = topic.partition_responses
        return int(result.error_code)

    def add_offsets(self, group: str, version: int = 3, epoch: int | None = None) -> int:
        request = AddOffsetsToTxnRequest(transactional_id=self.tid, producer_id=self.producer_id,
                                         producer_epoch=self.epoch if epoch is None else epoch, group_id=group)
        return int(_retry(lambda: send_request(self.broker, add_offsets_to_txn.API_KEY, version,
                                               request)).error_code)

    def commit_offsets(self, group: str, offsets: dict[int, int], version: int = 3) -> list[int]:
        request = TxnOffsetCommitRequest(
            transactional_id=self.tid, group_id=group, producer_id=self.producer_id, producer_epoch=self.epoch,
            generation_id=-1, member_id="", group_instance_id=None,
            topics=[TxnOffsetCommitRequestTopic(name=self.topic, partitions=[
                TxnOffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                                                committed_metadata="") for p, o in offsets.items()])])
        response = send_request(self.broker, txn_offset_commit.API_KEY, version, request)
        return [p.error_code for t in response.topics for p in t.partitions]

    def end(self, commit: bool, version: int = 3, epoch: int | None = None) -> int:
        request = EndTxnRequest(transactional_id=self.tid, producer_id=self.producer_id,
                                producer_epoch=self.epoch if epoch is None else epoch, committed=commit)
        return int(_retry(lambda: send_request(self.broker, end_txn.API_KEY, version, request)).error_code)


def read_committed(broker: BrokerProcess, topic: str, partition: int) -> tuple[int, int, list[int]]:
    """(high watermark, last stable offset, first offsets of aborted transactions) of a read_committed Fetch."""
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=1,
                           session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                           topics=[FetchTopic(topic=topic, partitions=[FetchPartition(
                               partition=partition, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                               log_start_offset=-1, partition_max_bytes=1 << 20)])])
    response = send_request(broker, fetch.API_KEY, 11, request)
    (result,) = response.responses[0].partitions
    assert result.error_code == 0, result
    aborted = [a.first_offset for a in result.aborted_transactions or []]
    return result.high_watermark, result.last_stable_offset, aborted


def _until_stable(broker: BrokerProcess, topic: str, partition: int) -> tuple[int, int, list[int]]:
    """The markers are written after EndTxn answers: wait (bounded) for the LSO to reach the high watermark."""
    for _ in range(200):
        hw, lso, aborted = read_committed(broker, topic, partition)
        if lso == hw:
            return hw, lso, aborted
        time.sleep(0.02)
    raise AssertionError(f"{topic}-{partition}: LSO {lso} never reached the high watermark {hw}")


def _new(broker: BrokerProcess, partitions: int = 2) -> WireProducer:
    topic = f"txnv-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, partitions)
    return WireProducer(broker, f"tid-{topic}", topic)


@pytest.mark.parametrize("version", range(1, find_coordinator.MAX_VERSION + 1))
def test_find_coordinator(broker: BrokerProcess, version: int) -> None:
    response = _new(broker).find_coordinator(version)
    if version >= 4:
        (response,) = response.coordinators
    assert (response.error_code, response.node_id, response.port) == (0, 0, broker.port)


@pytest.mark.parametrize("version", range(init_producer_id.MIN_VERSION, init_producer_id.MAX_VERSION + 1))
def test_init_producer_id_bumps_the_epoch_and_fences(broker: BrokerProcess, version: int) -> None:
    p = _new(broker)
    first = p.init(version)
    assert (first.error_code, first.producer_epoch) == (0, 0)
    second = p.init(version)
    assert (second.error_code, second.producer_id, second.producer_epoch) == (0, first.producer_id, 1)
    if version >= 3:  # KIP-360: a producer recovering with a stale epoch is fenced
        stale = InitProducerIdRequest(transactional_id=p.tid, transaction_timeout_ms=60_000,
                                      producer_id=first.producer_id, producer_epoch=7)
        fenced = send_request(broker, init_producer_id.API_KEY, version, stale)
        expected = ErrorCode.PRODUCER_FENCED if version >= 4 else ErrorCode.INVALID_PRODUCER_EPOCH
        assert fenced.error_code == expected
        recover = InitProducerIdRequest(transactional_id=p.tid, transaction_timeout_ms=60_000,
                                        producer_id=first.producer_id, producer_epoch=1)
        recovered = send_request(broker, init_producer_id.API_KEY, version, recover)
        assert (recovered.error_code, recovered.producer_epoch) == (0, 2)
    too_long = InitProducerIdRequest(transactional_id=p.tid, transaction_timeout_ms=900_001, producer_id=-1,
                                     producer_epoch=-1)
    assert send_request(broker, init_producer_id.API_KEY, version, too_long).error_code == \
        ErrorCode.INVALID_TRANSACTION_TIMEOUT


@pytest.mark.parametrize("version", range(add_partitions_to_txn.MIN_VERSION, add_partitions_to_txn.BATCHED_VERSION))
def test_add_partitions_to_txn(broker: BrokerProcess, version: int) -> None:
    p = _new(broker)
    p.init()
    assert p.add_partitions([0, 1], version) == [0]
    assert p.produce(0, [b"a", b"b"]) == 0
    assert p.produce(1, [b"c"]) == 0
    assert p.end(True) == 0
    assert _until_stable(broker, p.topic, 0) == (3, 3, [])  # two records and the commit marker
    # A partition of a topic that does not exist fails the whole request.
    request = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=p.tid, v3_and_below_producer_id=p.producer_id,
        v3_and_below_producer_epoch=p.epoch, v3_and_below_topics=[
            AddPartitionsToTxnTopic(name=p.topic, partitions=[0]),
            AddPartitionsToTxnTopic(name="no-such-topic", partitions=[0])])
    response = send_request(broker, add_partitions_to_txn.API_KEY, version, request)
    codes = {t.name: [r.partition_error_code for r in t.results_by_partition]
             for t in response.results_by_topic_v3_and_below}
    assert codes == {p.topic: [ErrorCode.OPERATION_NOT_ATTEMPTED], "no-such-topic": [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]}
    fenced = ErrorCode.PRODUCER_FENCED if version >= 2 else ErrorCode.INVALID_PRODUCER_EPOCH
    assert p.add_partitions([0], version, epoch=p.epoch - 1 if p.epoch else 5) == [fenced]


def _batched(broker: BrokerProcess, version: int, *txns: tuple[WireProducer, bool, dict[str, list[int]], int | None]
             ) -> dict[str, dict[tuple[str, int], int]]:
    """AddPartitionsToTxn v4+: (producer, verify only?, partitions by topic, epoch or None) per transaction;
    each transaction's partition errors by transactional id."""
    request = AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnTransaction(
        transactional_id=p.tid, producer_id=p.producer_id, producer_epoch=p.epoch if epoch is None else epoch,
        verify_only=verify_only, topics=[AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in topics.items()])
        for p, verify_only, topics, epoch in txns])
    response = send_request(broker, add_partitions_to_txn.API_KEY, version, request)
    assert response.error_code == 0
    return {r.transactional_id: {(t.name, x.partition_index): x.partition_error_code for t in r.topic_results
                                 for x in t.results_by_partition} for r in response.results_by_transaction}


@pytest.mark.parametrize("version", range(add_partitions_to_txn.BATCHED_VERSION, add_partitions_to_txn.MAX_VERSION + 1))
def test_add_partitions_to_txn_batched_and_verify_only(broker: BrokerProcess, version: int) -> None:
    """v4+ (KIP-890 part 1, broker to broker): many transactions in one request, each added or only verified."""
    adder, verified = _new(broker), _new(broker)
    adder.init()
    verified.init()
    assert verified.add_partitions([0]) == [0]
    (t1, t2) = adder.topic, verified.topic
    errors = _batched(broker, version, (adder, False, {t1: [0, 1]}, None), (verified, True, {t2: [0, 1]}, None))
    # The v5 error for a partition outside the transaction; v4 callers predate it.
    outside = ErrorCode.TRANSACTION_ABORTABLE if version >= 5 else ErrorCode.INVALID_TXN_STATE
    assert errors == {adder.tid: {(t1, 0): 0, (t1, 1): 0}, verified.tid: {(t2, 0): 0, (t2, 1): outside}}
    # Verify-only added nothing: a produce to partition 1 is refused (Produce v9 knows no TRANSACTION_ABORTABLE).
    assert verified.produce(1, [b"never"]) == ErrorCode.INVALID_TXN_STATE
    assert verified.produce(0, [b"kept"]) == 0
    assert adder.produce(1, [b"added"]) == 0  # added by the batched request, as a client's v3 would
    # A stale epoch is fenced; a missing topic fails only its own transaction.
    errors = _batched(broker, version, (verified, True, {t2: [0]}, verified.epoch + 1),
                      (adder, False, {t1: [0], "no-such-topic": [0]}, None))
    assert errors == {verified.tid: {(t2, 0): ErrorCode.PRODUCER_FENCED},
                      adder.tid: {(t1, 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
                                  ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}}
    assert adder.end(True) == 0
    assert verified.end(False) == 0
    assert _until_stable(broker, t1, 1) == (2, 2, [])
    assert _until_stable(broker, t2, 0) == (2, 2, [0])
    assert read_committed(broker, t2, 1) == (0, 0, [])  # the refused produce left nothing
    # Once the transaction is over, no partition verifies.
    errors = _batched(broker, version, (verified, True, {t2: [0]}, None))
    assert errors == {verified.tid: {(t2, 0): outside}}


# v5 bumps the epoch on every EndTxn: test_transactions_admin_versions.py::test_end_txn_v5_bumps_the_epoch.
@pytest.mark.parametrize("version", range(end_txn.MIN_VERSION, end_txn.EPOCH_BUMP_VERSION))
def test_end_txn_commit_and_abort(broker: BrokerProcess, version: int) -> None:
    p = _new(broker, partitions=1)
    p.init()
    p.add_partitions([0])
    p.produce(0, [b"aborted"])
    assert p.end(False, version) == 0
    assert p.end(False, version) == 0  # a retry of a completed abort succeeds
    assert _until_stable(broker, p.topic, 0) == (2, 2, [0])
    p.add_partitions([0])
    p.produce(0, [b"committed"])
    assert p.end(True, version) == 0
    assert _until_stable(broker, p.topic, 0) == (4, 4, [0])
    assert p.end(False, version) == ErrorCode.INVALID_TXN_STATE  # nothing is ongoing
    fenced = ErrorCode.PRODUCER_FENCED if version >= 2 else ErrorCode.INVALID_PRODUCER_EPOCH
    assert p.end(True, version, epoch=p.epoch + 1) == fenced


def _send_and_reset(broker: BrokerProcess, api_key: int, version: int, body: Any, rng: random.Random) -> None:
    """``body`` on a fresh connection, reset (RST) 0-3 ms later without reading the answer: a client
    SIGKILLed just after sending it."""
    frame = join_chunks(encode_request(api_key, version, 1, "pafka-tests", body))
    sock = socket.create_connection((broker.host, broker.port), timeout=10)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.sendall(frame)
    time.sleep(rng.uniform(0, 0.003))
    sock.close()


def test_a_transaction_ends_when_its_client_resets_the_connection(broker: BrokerProcess) -> None:
    """EndTxn and a fencing InitProducerId whose client went away right after sending: once their
    prepare record is written the markers follow, so the next instance gets its producer id. (Cut off
    with the request, the id stayed prepared, answering CONCURRENT_TRANSACTIONS for good.)"""
    rng = random.Random(5)
    p = _new(broker, partitions=1)
    assert p.find_coordinator().error_code == 0  # as a client does first: creates __transaction_state
    assert p.init().error_code == 0
    for round_ in range(8):
        assert p.add_partitions([0]) == [0]
        assert p.produce(0, [f"r{round_}".encode()]) == 0
        if round_ % 2 == 0:
            _send_and_reset(broker, end_txn.API_KEY, 3, EndTxnRequest(
                transactional_id=p.tid, producer_id=p.producer_id, producer_epoch=p.epoch, committed=True), rng)
        else:
            _send_and_reset(broker, init_producer_id.API_KEY, 4, InitProducerIdRequest(
                transactional_id=p.tid, transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1), rng)
        # CONCURRENT_TRANSACTIONS while the markers are written, retried for 5 s at most.
        assert p.init().error_code == ErrorCode.NO_ERROR
    assert _until_stable(broker, p.topic, 0)[:2] == (16, 16)  # 8 records, 8 markers: nothing left open


@pytest.mark.parametrize("version", range(add_offsets_to_txn.MIN_VERSION, add_offsets_to_txn.MAX_VERSION + 1))
def test_add_offsets_to_txn(broker: BrokerProcess, version: int) -> None:
    p = _new(broker)
    p.init()
    group = f"g-{p.topic}"
    assert p.add_offsets(group, version) == 0
    assert p.commit_offsets(group, {0: 5, 1: 6}) == [0, 0]
    assert _committed(broker, group, p.topic) == {0: -1, 1: -1}  # pending until the marker
    assert p.end(True) == 0
    wait_until(lambda: _committed(broker, group, p.topic) == {0: 5, 1: 6}, 5.0, "the offsets committed")
    fenced = ErrorCode.PRODUCER_FENCED if version >= 2 else ErrorCode.INVALID_PRODUCER_EPOCH
    assert p.add_offsets(group, version, epoch=p.epoch + 3) == fenced


@pytest.mark.parametrize("version", range(txn_offset_commit.MIN_VERSION, txn_offset_commit.MAX_VERSION + 1))
def test_txn_offset_commit(broker: BrokerProcess, version: int) -> None:
    p = _new(broker)
    p.init()
    group = f"g-{p.topic}"
    for commit, offsets in ((False, {0: 1, 1: 2}), (True, {0: 3, 1: 4})):
        assert p.add_offsets(group) == 0
        assert p.commit_offsets(group, offsets, version) == [0, 0]
        assert p.end(commit) == 0
        time.sleep(0.1)
    wait_until(lambda: _committed(broker, group, p.topic) == {0: 3, 1: 4}, 5.0, "the offsets committed")
    request = TxnOffsetCommitRequest(
        transactional_id=p.tid, group_id=group, producer_id=p.producer_id, producer_epoch=p.epoch,
        generation_id=-1, member_id="", group_instance_id=None,
        topics=[TxnOffsetCommitRequestTopic(name="no-such-topic", partitions=[TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata=None)])])
    response = send_request(broker, txn_offset_commit.API_KEY, version, request)
    assert response.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("version", range(write_txn_markers.MIN_VERSION, write_txn_markers.MAX_VERSION + 1))
def test_write_txn_markers(broker: BrokerProcess, version: int) -> None:
    """A coordinator elsewhere ends a transaction here: the markers a WriteTxnMarkers request asks for."""
    p = _new(broker, partitions=2)
    p.init()
    p.add_partitions([0, 1])
    p.produce(0, [b"x"])
    p.produce(1, [b"y"])
    request = WriteTxnMarkersRequest(markers=[WritableTxnMarker(
        producer_id=p.producer_id, producer_epoch=p.epoch, transaction_result=False, coordinator_epoch=0,
        topics=[WritableTxnMarkerTopic(name=p.topic, partition_indexes=[0, 1]),
                WritableTxnMarkerTopic(name="no-such-topic", partition_indexes=[0])])])
    response = send_request(broker, write_txn_markers.API_KEY, version, request)
    (marker,) = response.markers
    codes = {(t.name, r.partition_index): r.error_code for t in marker.topics for r in t.partitions}
    assert codes == {(p.topic, 0): 0, (p.topic, 1): 0, ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert read_committed(broker, p.topic, 0) == (2, 2, [0])
    assert read_committed(broker, p.topic, 1) == (2, 2, [0])


def _committed(broker: BrokerProcess, group: str, topic: str) -> dict[int, int]:
    request = OffsetFetchRequest(group_id=group, topics=[OffsetFetchRequestTopic(name=topic,
                                                                                 partition_indexes=[0, 1])])
    response = send_request(broker, offset_fetch.API_KEY, 5, request)
    return {p.partition_index: p.committed_offset for p in response.topics[0].partitions}


def read_uncommitted(broker: BrokerProcess, topic: str, partition: int) -> list[tuple[int, bool, list[bytes | None]]]:
    """Every batch ``read_uncommitted`` Fetches return up to the high watermark: (producer epoch, is a
    control batch, values). One Fetch answers from one segment, and these records' timestamp 0 makes
    the next append with a real one roll a new segment: so fetch on from each batch's end."""
    batches: list[tuple[int, bool, list[bytes | None]]] = []
    offset, high_watermark = 0, 1
    while offset < high_watermark:
        request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                               session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                               topics=[FetchTopic(topic=topic, partitions=[FetchPartition(
                                   partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                                   last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)])])
        (result,) = send_request(broker, fetch.API_KEY, 11, request).responses[0].partitions
        assert result.error_code == 0, result
        high_watermark = result.high_watermark
        data = bytes(result.records or b"")
        headers = list(iter_batch_headers(data))
        assert headers or offset >= high_watermark, f"no batch at {offset} below the high watermark {high_watermark}"
        for pos, header in headers:
            values = [] if header.is_control else [r.value for r in read_batch(data, pos)[1]]
            batches.append((header.producer_epoch, header.is_control, values))
            offset = header.last_offset + 1
    return batches


#: Versions of the fencing test: every one where an API's answer to a fenced producer differs.
FENCING_VERSIONS = range(max(end_txn.MAX_VERSION, add_partitions_to_txn.MAX_VERSION,
                             add_offsets_to_txn.MAX_VERSION, init_producer_id.MAX_VERSION) + 1)


@pytest.mark.parametrize("version", FENCING_VERSIONS)
def test_a_fenced_producer_is_refused_and_writes_nothing(broker: BrokerProcess, version: int) -> None:
    """A second producer with the same transactional id fences the first mid-transaction: the first's
    produce, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and InitProducerId (KIP-360 recovery) are refused
    with PRODUCER_FENCED where the version knows it, INVALID_PRODUCER_EPOCH before (as Kafka maps it),
    and nothing it sends after the fence is appended, so no reader at any isolation level sees it."""
    zombie = _new(broker)
    assert zombie.find_coordinator().error_code == 0  # as a client does first: creates __transaction_state
    zombie.init()
    assert zombie.add_partitions([0, 1]) == [0]
    assert zombie.produce(0, [b"before"]) == 0
    fresh = WireProducer(broker, zombie.tid, zombie.topic)
    fresh.init()  # CONCURRENT_TRANSACTIONS (retried) until the zombie's transaction is aborted
    # The abort marker carries the fence's bumped epoch; the new instance's is one past it.
    assert (fresh.producer_id, fresh.epoch) == (zombie.producer_id, zombie.epoch + 2)
    _until_stable(broker, zombie.topic, 0)

    def fenced(first_version_that_knows_it: int) -> ErrorCode:
        return (ErrorCode.PRODUCER_FENCED if version >= first_version_that_knows_it
                else ErrorCode.INVALID_PRODUCER_EPOCH)

    # A produce answers INVALID_PRODUCER_EPOCH at every version: the partition knows only epochs.
    assert zombie.produce(0, [b"after-0"]) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert zombie.produce(1, [b"after-1"]) == ErrorCode.INVALID_PRODUCER_EPOCH
    if version < add_partitions_to_txn.BATCHED_VERSION:  # v4+ (brokers' batched form): the batched test
        assert zombie.add_partitions([0, 1], version) == [fenced(add_partitions_to_txn.PRODUCER_FENCED_VERSION)]
    if version <= add_offsets_to_txn.MAX_VERSION:
        assert zombie.add_offsets(f"g-{zombie.topic}", version) == fenced(add_offsets_to_txn.PRODUCER_FENCED_VERSION)
    if version <= end_txn.MAX_VERSION:
        for commit in (True, False):
            assert zombie.end(commit, version) == fenced(end_txn.PRODUCER_FENCED_VERSION)
    if init_producer_id.RECOVERY_VERSION <= version <= init_producer_id.MAX_VERSION:
        recover = InitProducerIdRequest(transactional_id=zombie.tid, transaction_timeout_ms=60_000,
                                        producer_id=zombie.producer_id, producer_epoch=zombie.epoch)
        answer = send_request(broker, init_producer_id.API_KEY, version, recover)
        assert answer.error_code == fenced(init_producer_id.PRODUCER_FENCED_VERSION)
    # The fence moved nothing: the new instance's transaction still commits, and is all there is.
    assert fresh.add_partitions([1]) == [0]
    assert fresh.produce(1, [b"fresh"]) == 0
    assert fresh.end(True) == 0
    first, fence, latest = zombie.epoch, zombie.epoch + 1, fresh.epoch
    assert read_uncommitted(broker, zombie.topic, 0) == [(first, False, [b"before"]), (fence, True, [])]
    assert read_uncommitted(broker, zombie.topic, 1) == [(fence, True, []), (latest, False, [b"fresh"]),
                                                         (latest, True, [])]
    assert _until_stable(broker, zombie.topic, 0) == (2, 2, [0])
    assert _until_stable(broker, zombie.topic, 1)[:2] == (3, 3)
