"""No hanging transactions (KIP-890 part 1), against a real broker process.

A produce held in a TCP proxy (``pytest_pafka.tcp_proxy``) until its transaction
has been aborted, by EndTxn or by the coordinator's timeout, reaches the
partition leader afterwards: the leader asks the coordinator, finds the
partition outside any ongoing transaction of that producer and epoch, and
refuses it. Nothing is appended, the last stable offset is not held back, a
``read_committed`` reader sees nothing of it, and the producer's next
transaction (on other partitions) is not joined by it.

The producer is driven at wire level so the timing is exact: the held
request is in the proxy, verifiably, when the abort happens.

What part 1 alone cannot close (Kafka documents the same): with EndTxn v4
and older (transaction version 0/1) an abort does not bump the producer
epoch, so if the producer's *next* transaction adds the same partition
before the delayed produce arrives, the coordinator rightly answers that the
partition is in an ongoing transaction of that producer id and epoch, and
the late batch joins it. Only KIP-890 part 2's epoch bump on every EndTxn
(EndTxn v5) tells the two transactions apart.
"""

from __future__ import annotations

import socket
import uuid

import pytest

from broker.handlers import describe_producers, init_producer_id, list_offsets, produce
from protocol.api import decode_response, encode_request
from protocol.buffers import join_chunks
from protocol.errors import ErrorCode
from protocol.messages.describe_producers import DescribeProducersRequest, TopicRequest
from protocol.messages.init_producer_id import InitProducerIdRequest
from protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from protocol.messages.produce import PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData
from protocol.records import Record, build_batch
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.tcp_proxy import Direction, Mode, TcpProxy
from pytest_pafka.waiting import wait_until
from testing.sockets import read_frame, send_request
from testing.topics import create_topic
from tests.integration.test_transactions_versions import WireProducer, _retry, _until_stable, read_committed

#: After every test: `pafka transactions find-hanging` finds nothing on the broker (conftest).
#: A short cleanup interval: a test waits for the coordinator's timeout abort.
pytestmark = [pytest.mark.usefixtures("no_hanging_transactions"),
              pytest.mark.pafka_broker_config("transaction.abort.timed.out.transaction.cleanup.interval.ms=200")]

PRODUCE_VERSION = 9  # before TRANSACTION_ABORTABLE (v11): a refused partition answers INVALID_TXN_STATE


def _new(broker: BrokerProcess, partitions: int = 2) -> WireProducer:
    topic = f"hang-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, partitions)
    producer = WireProducer(broker, f"tid-{topic}", topic)
    assert producer.find_coordinator().error_code == 0  # creates __transaction_state on first use, as clients do
    return producer


def _produce_request(p: WireProducer, partition: int, values: list[bytes]) -> ProduceRequest:
    sequence = p.sequences.get(partition, 0)
    batch = build_batch([Record(i, 0, None, v) for i, v in enumerate(values)], producer_id=p.producer_id,
                        producer_epoch=p.epoch, base_sequence=sequence, is_transactional=True)
    p.sequences[partition] = sequence + len(values)
    return ProduceRequest(transactional_id=p.tid, acks=-1, timeout_ms=10_000, topic_data=[TopicProduceData(
        name=p.topic, partition_data=[PartitionProduceData(index=partition, records=batch)])])


class HeldProduce:
    """A produce sent through the proxy while its requests are held: its answer is read later."""

    def __init__(self, proxy: TcpProxy, request: ProduceRequest, version: int = PRODUCE_VERSION) -> None:
        self.version = version
        self.sock = socket.create_connection((proxy.host, proxy.port), timeout=15)
        self.sock.sendall(join_chunks(encode_request(produce.API_KEY, version, 7, "late-producer", request)))

    def answer(self) -> tuple[int, int]:
        """(error code, base offset) of the one partition produced to."""
        with self.sock:
            _, response = decode_response(produce.API_KEY, self.version, read_frame(self.sock))
        assert isinstance(response, ProduceResponse)
        (result,) = response.responses[0].partition_responses
        return int(result.error_code), int(result.base_offset)


def _open_transaction_of(broker: BrokerProcess, topic: str, partition: int, producer_id: int) -> int:
    """DescribeProducers: where the producer's transaction on the partition starts (-1: none open)."""
    request = DescribeProducersRequest(topics=[TopicRequest(name=topic, partition_indexes=[partition])])
    response = send_request(broker, describe_producers.API_KEY, 0, request)
    (result,) = response.topics[0].partitions
    assert result.error_code == 0, result
    starts = [s.current_txn_start_offset for s in result.active_producers if s.producer_id == producer_id]
    return starts[0] if starts else -1


def _committed_end(broker: BrokerProcess, topic: str, partition: int) -> int:
    """ListOffsets latest, read_committed: the last stable offset."""
    request = ListOffsetsRequest(replica_id=-1, isolation_level=1, topics=[ListOffsetsTopic(
        name=topic, partitions=[ListOffsetsPartition(partition_index=partition, timestamp=-1)])])
    response = send_request(broker, list_offsets.API_KEY, 5, request)
    (result,) = response.topics[0].partitions
    assert result.error_code == 0, result
    return int(result.offset)


def _abort_completely(p: WireProducer) -> None:
    """EndTxn abort, then again until the coordinator has written every marker and CompleteAbort
    (a retried abort answers CONCURRENT_TRANSACTIONS until then, which ``end`` retries)."""
    assert p.end(False, version=4) == 0
    assert p.end(False, version=4) == 0


def test_a_produce_delayed_past_end_txn_abort_is_refused_and_never_appended(broker: BrokerProcess) -> None:
    p = _new(broker)
    p.init()
    assert p.add_partitions([0]) == [0]
    with TcpProxy((broker.host, broker.port)) as proxy:
        proxy.set(Direction.UPSTREAM, Mode.HOLD)
        late = HeldProduce(proxy, _produce_request(p, 0, [b"late"]))
        proxy.wait_held(Direction.UPSTREAM)  # the produce is in the network, not at the broker
        _abort_completely(p)  # EndTxn v4: the epoch stays as it is
        # The producer's next transaction, on the other partition, begins before the late produce lands.
        assert p.add_partitions([1]) == [0]
        assert p.produce(1, [b"next"]) == 0
        proxy.release(Direction.UPSTREAM)
        assert late.answer() == (ErrorCode.INVALID_TXN_STATE, -1)
    assert p.end(True) == 0
    # Partition 0 holds the abort marker only: nothing hangs, nothing of the late produce is readable.
    assert _until_stable(broker, p.topic, 0) == (1, 1, [])
    assert _open_transaction_of(broker, p.topic, 0, p.producer_id) == -1
    assert _committed_end(broker, p.topic, 0) == 1
    assert _until_stable(broker, p.topic, 1) == (2, 2, [])  # the next transaction, not joined: committed alone


def test_a_produce_delayed_past_the_coordinators_timeout_abort_is_refused(broker: BrokerProcess) -> None:
    p = _new(broker, partitions=1)
    request = InitProducerIdRequest(transactional_id=p.tid, transaction_timeout_ms=1000, producer_id=-1,
                                    producer_epoch=-1)
    response = _retry(lambda: send_request(broker, init_producer_id.API_KEY, 4, request))
    p.producer_id, p.epoch = response.producer_id, response.producer_epoch
    assert p.add_partitions([0]) == [0]
    assert p.produce(0, [b"first"]) == 0  # the transaction is open on the partition...
    with TcpProxy((broker.host, broker.port)) as proxy:
        proxy.set(Direction.UPSTREAM, Mode.HOLD)
        late = HeldProduce(proxy, _produce_request(p, 0, [b"late"]))
        proxy.wait_held(Direction.UPSTREAM)
        # ... and its producer goes quiet: the coordinator aborts it (bumping the epoch to fence it).
        wait_until(lambda: read_committed(broker, p.topic, 0)[1] == 2, 15, "the abort marker stable")
        proxy.release(Direction.UPSTREAM)
        assert late.answer() == (ErrorCode.INVALID_PRODUCER_EPOCH, -1)
    assert read_committed(broker, p.topic, 0) == (2, 2, [0])  # "first" and the abort marker, nothing after
    assert _open_transaction_of(broker, p.topic, 0, p.producer_id) == -1


def test_a_produce_to_a_partition_never_added_is_refused(broker: BrokerProcess) -> None:
    p = _new(broker)
    p.init()
    # No transaction at all yet.
    assert p.produce(0, [b"no-transaction"]) == ErrorCode.INVALID_TXN_STATE
    assert p.add_partitions([0]) == [0]
    # Partition 1 is not in the transaction: refused at every produce version, with the v11+ code from v11.
    for version, expected in ((9, ErrorCode.INVALID_TXN_STATE), (11, ErrorCode.TRANSACTION_ABORTABLE)):
        request = _produce_request(p, 1, [b"not-added"])
        p.sequences[1] = 0  # nothing was appended: the next try starts at the same sequence
        response = send_request(broker, produce.API_KEY, version, request)
        (result,) = response.responses[0].partition_responses
        assert (result.error_code, result.base_offset) == (expected, -1)
    assert p.produce(0, [b"added"]) == 0
    assert _open_transaction_of(broker, p.topic, 1, p.producer_id) == -1
    assert p.end(True) == 0
    assert _until_stable(broker, p.topic, 0) == (2, 2, [])  # "added" and the marker: the refused one left nothing
    assert read_committed(broker, p.topic, 1) == (0, 0, [])


def test_a_real_client_commits_through_verification(broker: BrokerProcess) -> None:
    """confluent-kafka's usual flow (AddPartitionsToTxn, then produce) passes verification on every
    transaction, and a produce pipelined behind a verification keeps its order."""
    from confluent_kafka import Producer

    topic = f"hang-client-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tid-{topic}",
                         "linger.ms": 0, "max.in.flight.requests.per.connection": 5})
    producer.init_transactions(20)
    for round_ in range(3):
        producer.begin_transaction()
        for i in range(50):
            producer.produce(topic, f"{round_}-{i}".encode(), partition=i % 2)
            producer.poll(0)
        producer.commit_transaction(20)
    for partition in (0, 1):
        hw, lso, aborted = _until_stable(broker, topic, partition)
        assert (hw, lso, aborted) == (3 * 25 + 3, 3 * 25 + 3, [])


def test_a_txn_offset_commit_after_its_transactions_abort_is_refused(broker: BrokerProcess) -> None:
    """TxnOffsetCommit's write to __consumer_offsets is verified too (Kafka verifies it since KIP-890
    part 1): arriving after its transaction's abort, it would otherwise open a transaction there that
    nothing ends, holding back that partition's last stable offset and the group's stable offsets."""
    from coordinator.common.internal_topics import GROUP_METADATA_TOPIC_NAME
    from coordinator.common.partitioner import partition_for

    p = _new(broker, partitions=1)
    p.init()
    group = f"g-{p.topic}"
    assert p.add_offsets(group) == 0
    assert p.commit_offsets(group, {0: 3}) == [0]  # in the transaction: accepted, pending
    _abort_completely(p)
    assert p.add_offsets(group) == 0
    _abort_completely(p)  # the offsets partition was added, then the transaction ended: nothing open
    # EndTxn v4 kept the epoch, so only the coordinator's state can tell this write is late.
    assert p.commit_offsets(group, {0: 7}) == [ErrorCode.INVALID_TXN_STATE]
    offsets_partition = partition_for(group, 50)
    assert _open_transaction_of(broker, GROUP_METADATA_TOPIC_NAME, offsets_partition, p.producer_id) == -1
    # The next transaction commits its offsets as usual.
    assert p.add_offsets(group) == 0
    assert p.commit_offsets(group, {0: 9}) == [0]
    assert p.end(True) == 0
