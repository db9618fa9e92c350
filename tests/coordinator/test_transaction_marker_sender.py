"""The remote marker sender against a real broker process.

A coordinator on "another broker" (this test process, broker id 0) ends
transactions whose data sits on a real ``pafka broker`` process (broker id 1
here): WriteTxnMarkers v1 over the network, then a read_committed consumer
(confluent-kafka) reads back exactly the committed records. The broker runs
with ``transaction.partition.verification.enable=false`` so that the test's
producer ids, which its own coordinator never handed out, may write
transactional batches.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from coordinator.common.partition_leader import LeaderEndpoint
from coordinator.common.scheduler import AsyncioScheduler
from coordinator.transaction.transaction_coordinator import TransactionCoordinator
from coordinator.transaction.transaction_marker_channel_manager import TransactionMarkerChannelManager
from coordinator.transaction.transaction_marker_sender import ClusterLeaderLookup, RemoteMarkerSender
from coordinator.transaction.transaction_state_manager import TransactionResult, TransactionStateManager
from protocol.errors import ErrorCode
from protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from protocol.records import Record, build_batch
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.ports import free_port
from pytest_pafka.waiting import WaitTimeout, wait_until_async
from replication.replica_manager import TxnMarker
from testing.sockets import send_request
from testing.topics import create_topic
from tests.coordinator.fakes import MemoryCoordinatorLog

REMOTE = 1  # the broker id the real broker plays
PRODUCE_API_KEY = 0
WAIT_S = 20.0


pytestmark = pytest.mark.pafka_broker_config("transaction.partition.verification.enable=false")


class NoLocalPartitions:
    """This (test) broker leads nothing: every marker is remote."""

    def get_partition(self, topic: str, partition: int) -> None:
        return None


class NoLocalSender:
    async def send(self, destination: int, markers: Any, timeout_ms: int) -> Any:
        raise AssertionError(f"a marker went the local path: {markers}")


def _topic(broker: BrokerProcess, partitions: int = 2) -> str:
    name = f"markers-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, name, partitions)
    return name


def _producer_id() -> int:
    """An id the broker's own coordinator never hands out (its blocks start at 0)."""
    return random.randrange(10**12, 2 * 10**12)


def _produce(broker: BrokerProcess, topic: str, partition: int, producer_id: int, epoch: int,
             values: list[bytes]) -> None:
    batch = build_batch([Record(i, 0, None, v) for i, v in enumerate(values)], producer_id=producer_id,
                        producer_epoch=epoch, base_sequence=0, is_transactional=True)
    response = send_request(broker, PRODUCE_API_KEY, 9, ProduceRequest(
        transactional_id=f"tid-{producer_id}", acks=-1, timeout_ms=10_000, topic_data=[TopicProduceData(
            name=topic, partition_data=[PartitionProduceData(index=partition, records=batch)])]))
    assert response.responses[0].partition_responses[0].error_code == 0, response


def _read_committed(broker: BrokerProcess, topic: str, partitions: list[int], expected: int) -> dict[int, list[bytes]]:
    """Every record a read_committed consumer gets from the partitions (it stops at the expected count
    and then reads on briefly: a record beyond it would show)."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    got: dict[int, list[bytes]] = {p: [] for p in partitions}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        deadline = time.monotonic() + WAIT_S
        extra_until: float | None = None
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got[message.partition()].append(message.value())
            count = sum(len(v) for v in got.values())
            if count >= expected and extra_until is None:
                extra_until = time.monotonic() + 1.0
            if extra_until is not None and time.monotonic() > extra_until:
                break
    finally:
        consumer.close()
    return got


def _endpoint(broker: BrokerProcess) -> tuple[str, int]:
    return broker.host, broker.port


def test_markers_reach_a_remote_leader_in_one_request(broker: BrokerProcess) -> None:
    topic = _topic(broker)
    committer, aborter = _producer_id(), _producer_id()
    _produce(broker, topic, 0, committer, 0, [b"c0-a", b"c0-b"])
    _produce(broker, topic, 1, committer, 0, [b"c1"])
    _produce(broker, topic, 1, aborter, 0, [b"aborted"])

    requests = 0

    class CountingSender(RemoteMarkerSender):
        async def _send_request(self, dest: Any, batch: Any) -> Any:
            nonlocal requests
            requests += 1
            return await super()._send_request(dest, batch)

    async def scenario() -> list[Any]:
        sender = CountingSender(0, NoLocalSender(), lambda node: _endpoint(broker) if node == REMOTE else None)
        try:
            return await asyncio.gather(
                sender.send(REMOTE, [TxnMarker(committer, 0, 0, True, [(topic, 0), (topic, 1)])], 10_000),
                sender.send(REMOTE, [TxnMarker(aborter, 0, 0, False, [(topic, 1)])], 10_000))
        finally:
            await sender.shutdown()

    commit_answer, abort_answer = asyncio.run(scenario())
    assert commit_answer == [{(topic, 0): ErrorCode.NO_ERROR, (topic, 1): ErrorCode.NO_ERROR}]
    assert abort_answer == [{(topic, 1): ErrorCode.NO_ERROR}]
    assert requests == 1  # both markers queued for broker 1 went as one WriteTxnMarkers
    assert _read_committed(broker, topic, [0, 1], 3) == {0: [b"c0-a", b"c0-b"], 1: [b"c1"]}


def test_a_partition_the_leader_does_not_host_is_answered_not_acknowledged(broker: BrokerProcess) -> None:
    topic = _topic(broker, partitions=1)

    async def scenario() -> Any:
        sender = RemoteMarkerSender(0, NoLocalSender(), lambda node: _endpoint(broker))
        try:
            return await sender.send(REMOTE, [TxnMarker(_producer_id(), 0, 0, True, [(topic, 0), (topic, 5)])],
                                     10_000)
        finally:
            await sender.shutdown()

    (errors,) = asyncio.run(scenario())
    assert errors == {(topic, 0): ErrorCode.NO_ERROR, (topic, 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def test_a_dead_destination_fails_the_request_with_a_connection_error(broker: BrokerProcess) -> None:
    dead = free_port(broker.host)
    endpoint = {"port": dead}
    topic = _topic(broker, partitions=1)
    producer_id = _producer_id()
    _produce(broker, topic, 0, producer_id, 0, [b"late"])

    async def scenario() -> Any:
        sender = RemoteMarkerSender(0, NoLocalSender(), lambda node: (broker.host, endpoint["port"]))
        try:
            marker = TxnMarker(producer_id, 0, 0, True, [(topic, 0)])
            with pytest.raises(ConnectionError):
                await sender.send(REMOTE, [marker], 10_000)
            endpoint["port"] = broker.port  # the broker came back (or the leader moved): the retry gets through
            return await sender.send(REMOTE, [marker], 10_000)
        finally:
            await sender.shutdown()

    assert asyncio.run(scenario()) == [{(topic, 0): ErrorCode.NO_ERROR}]
    assert _read_committed(broker, topic, [0], 1) == {0: [b"late"]}


def test_the_coordinator_completes_a_transaction_only_once_every_remote_marker_is_written(
        broker: BrokerProcess) -> None:
    """A TransactionCoordinator (broker 0) whose partitions are led by broker 1: the first leader lookup
    finds no leader, the second an address nobody listens on, then the real one. CompleteCommit is
    written only after the markers are acknowledged, and the consumer sees the records."""
    topic = _topic(broker)
    dead = free_port(broker.host)
    lookups: list[tuple[str, int]] = []

    def partition_leader(t: str, p: int, listener: str) -> LeaderEndpoint | None:
        assert listener == "INTERNAL"
        lookups.append((t, p))
        if len(lookups) <= 2:
            return None  # no leader yet (one lookup per partition)
        if len(lookups) <= 4:
            return LeaderEndpoint(REMOTE, broker.host, dead)
        return LeaderEndpoint(REMOTE, broker.host, broker.port)

    producer_id = _producer_id()

    async def scenario() -> tuple[str, list[str]]:
        log = MemoryCoordinatorLog(num_partitions=4)
        scheduler = AsyncioScheduler()
        manager = TransactionStateManager(0, log, scheduler)
        for partition in range(log.num_partitions):
            manager.load_partition(partition, 3)
        lookup = ClusterLeaderLookup(0, NoLocalPartitions(), partition_leader,  # type: ignore[arg-type]
                                     lambda t: 2 if t == topic else None, "INTERNAL")
        sender = RemoteMarkerSender(0, NoLocalSender(), lookup.endpoint)
        channel = TransactionMarkerChannelManager(0, manager, sender, lookup, scheduler, retry_backoff_ms=50)

        async def generate() -> int:
            return producer_id

        coordinator = TransactionCoordinator(0, manager, channel, generate, scheduler, lambda group: 0)
        try:
            init = await coordinator.handle_init_producer_id("tid", 60_000)
            assert init.error == ErrorCode.NO_ERROR
            assert await coordinator.handle_add_partitions_to_transaction(
                "tid", init.producer_id, init.producer_epoch, {(topic, 0), (topic, 1)}) == ErrorCode.NO_ERROR
            await asyncio.to_thread(_produce, broker, topic, 0, producer_id, init.producer_epoch, [b"t0"])
            await asyncio.to_thread(_produce, broker, topic, 1, producer_id, init.producer_epoch, [b"t1"])
            assert await coordinator.handle_end_transaction(
                "tid", init.producer_id, init.producer_epoch, TransactionResult.COMMIT) == ErrorCode.NO_ERROR
            states: list[str] = []  # each state seen, once

            def state() -> str:
                found = manager.get_transaction_state("tid")[1]
                assert found is not None
                name = found.transaction_metadata.state.state_name
                if not states or states[-1] != name:
                    states.append(name)
                return name

            with contextlib.suppress(WaitTimeout):  # the caller's assertion shows the states seen
                await wait_until_async(state, WAIT_S, "CompleteCommit", until=lambda name: name == "CompleteCommit")
            return states[-1], states
        finally:
            await coordinator.shutdown()

    final, states = asyncio.run(scenario())
    assert final == "CompleteCommit", states
    assert states[0] == "PrepareCommit"  # held there until the markers were acknowledged
    assert len(lookups) >= 6  # no leader, a dead leader, then the live one, for each partition
    assert _read_committed(broker, topic, [0, 1], 2) == {0: [b"t0"], 1: [b"t1"]}
