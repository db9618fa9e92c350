"""Cluster-mode coordinator wiring: FindCoordinator names the partition leader, internal topics
are created with their replication factor and configs (and only with enough brokers), and
partition leaders verify transactions with a coordinator on another broker (a real one here)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from broker.add_partitions_to_txn_manager import AddPartitionsToTxnManager, LocalAddPartitionsToTxnManager
from broker.config.broker_config import BrokerConfig
from broker.coordinator_cluster import CoordinatorCluster, coordinator_cluster_from_cache
from broker.handlers import find_coordinator
from coordinator.common.internal_topics import GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME
from coordinator.common.partition_leader import LeaderEndpoint
from coordinator.common.partitioner import partition_for
from protocol.errors import ErrorCode
from protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from protocol.messages.end_txn import EndTxnRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.init_producer_id import InitProducerIdRequest
from protocol.request_constants import CoordinatorType
from testing.broker_process import BrokerProcess
from testing.sockets import free_port, send_request
from testing.topics import create_topic


class FakeMetadata:
    """The cluster's metadata as the broker's metadata cache would answer it."""

    def __init__(self, alive: int = 3) -> None:
        self.alive = alive
        self.partitions: dict[str, int] = {}
        self.leaders: dict[tuple[str, int], int] = {}
        self.created: list[tuple[str, int, int, dict[str, str]]] = []
        self.fail_creation = False

    def partition_leader(self, topic: str, partition: int, listener: str) -> LeaderEndpoint | None:
        node = self.leaders.get((topic, partition))
        if node is None:
            return None
        return LeaderEndpoint(node, f"127.0.0.{node + 1}", 9000 + (100 if listener == "INTERNAL" else 0) + node)

    async def create_topic(self, name: str, partitions: int, rf: int, configs: dict[str, str]) -> None:
        await asyncio.sleep(0.01)
        self.created.append((name, partitions, rf, configs))
        if self.fail_creation:
            raise RuntimeError("TopicExistsError")
        self.partitions[name] = partitions


def _cluster(metadata: FakeMetadata, **overrides: Any) -> CoordinatorCluster:
    config = BrokerConfig(**{"offsets.topic.num.partitions": 6, "transaction.state.log.num.partitions": 4,
                             **overrides})
    return CoordinatorCluster(
        broker_id=0, config=lambda: config, partition_leader=metadata.partition_leader,
        partition_count=metadata.partitions.get, alive_broker_count=lambda: metadata.alive,
        create_topic=metadata.create_topic, inter_broker_listener="INTERNAL")


def _broker(cluster: CoordinatorCluster) -> Any:
    """What FindCoordinator reads of the broker's services."""
    log = SimpleNamespace(is_local_leader=lambda p: False)
    return SimpleNamespace(
        coordinator_cluster=cluster,
        group_coordinator=SimpleNamespace(coordinator_log=log, manager=SimpleNamespace(
            partition_for=lambda key: partition_for(key, 6))),
        transaction_coordinator=SimpleNamespace(txn_manager=SimpleNamespace(
            coordinator_log=log, partition_for=lambda key: partition_for(key, 4))))


async def _find(cluster: CoordinatorCluster, key: str, key_type: int, listener: str = "PLAINTEXT") -> Any:
    ctx = SimpleNamespace(api_version=4, listener_name=listener)
    request = FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
    response = await find_coordinator.handle(ctx, _broker(cluster), request)  # type: ignore[arg-type]
    (coordinator,) = response.coordinators
    return coordinator


def test_find_coordinator_creates_the_topic_then_names_the_leader() -> None:
    async def scenario() -> None:
        metadata = FakeMetadata()
        cluster = _cluster(metadata)
        first = await _find(cluster, "my-group", CoordinatorType.GROUP)
        assert first.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE  # creation started, as Kafka answers
        again = await _find(cluster, "my-group", CoordinatorType.GROUP)  # while it runs: not created twice
        assert again.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        await asyncio.sleep(0.05)
        assert metadata.created == [(GROUP_METADATA_TOPIC_NAME, 6, 3, {
            "cleanup.policy": "compact", "compression.type": "producer", "segment.bytes": "104857600"})]
        # Created, but its partitions have no leader yet.
        assert (await _find(cluster, "my-group", CoordinatorType.GROUP)).error_code == \
            ErrorCode.COORDINATOR_NOT_AVAILABLE
        partition = partition_for("my-group", 6)
        metadata.leaders[(GROUP_METADATA_TOPIC_NAME, partition)] = 2
        found = await _find(cluster, "my-group", CoordinatorType.GROUP)
        assert (found.error_code, found.node_id, found.host, found.port) == (0, 2, "127.0.0.3", 9002)
        # The endpoint is the one of the listener the client came in on.
        internal = await _find(cluster, "my-group", CoordinatorType.GROUP, listener="INTERNAL")
        assert (internal.node_id, internal.port) == (2, 9102)
        assert len(metadata.created) == 1

    asyncio.run(scenario())


def test_the_transaction_log_gets_its_own_settings() -> None:
    async def scenario() -> None:
        metadata = FakeMetadata(alive=2)
        cluster = _cluster(metadata, **{"transaction.state.log.replication.factor": 2,
                                        "transaction.state.log.min.isr": 2,
                                        "transaction.state.log.segment.bytes": 1048576})
        assert (await _find(cluster, "tid", CoordinatorType.TRANSACTION)).error_code == \
            ErrorCode.COORDINATOR_NOT_AVAILABLE
        await asyncio.sleep(0.05)
        assert metadata.created == [(TRANSACTION_STATE_TOPIC_NAME, 4, 2, {
            "cleanup.policy": "compact", "compression.type": "uncompressed",
            "unclean.leader.election.enable": "false", "min.insync.replicas": "2", "segment.bytes": "1048576"})]
        metadata.leaders[(TRANSACTION_STATE_TOPIC_NAME, partition_for("tid", 4))] = 1
        found = await _find(cluster, "tid", CoordinatorType.TRANSACTION)
        assert (found.error_code, found.node_id) == (0, 1)

    asyncio.run(scenario())


def test_no_internal_topic_with_fewer_live_brokers_than_its_replication_factor() -> None:
    async def scenario() -> None:
        metadata = FakeMetadata(alive=2)  # offsets.topic.replication.factor is 3 by default
        cluster = _cluster(metadata)
        for _ in range(3):
            assert (await _find(cluster, "g", CoordinatorType.GROUP)).error_code == \
                ErrorCode.COORDINATOR_NOT_AVAILABLE
        await asyncio.sleep(0.05)
        assert metadata.created == []
        metadata.alive = 3  # the third broker registered: created now
        await _find(cluster, "g", CoordinatorType.GROUP)
        await asyncio.sleep(0.05)
        assert [c[:3] for c in metadata.created] == [(GROUP_METADATA_TOPIC_NAME, 6, 3)]

    asyncio.run(scenario())


def test_a_failed_creation_is_tried_again_by_the_next_request() -> None:
    async def scenario() -> None:
        metadata = FakeMetadata()
        metadata.fail_creation = True
        cluster = _cluster(metadata)
        await _find(cluster, "g", CoordinatorType.GROUP)
        await asyncio.sleep(0.05)
        await _find(cluster, "g", CoordinatorType.GROUP)
        await asyncio.sleep(0.05)
        assert len(metadata.created) == 2
        await cluster.shutdown()

    asyncio.run(scenario())


def test_the_cluster_reads_the_metadata_cache() -> None:
    """The adapter over the broker's metadata cache: a leader without the listener, or no leader, is none."""
    states = {("t", 0): SimpleNamespace(leader_id=2), ("t", 1): SimpleNamespace(leader_id=-1)}
    nodes = {(2, "INTERNAL"): SimpleNamespace(node_id=2, host="127.0.0.2", port=9092)}
    cache = SimpleNamespace(
        get=lambda name: SimpleNamespace(partition_count=2) if name == "t" else None,
        partition_state=lambda topic, partition: states.get((topic, partition)),
        leader_node=lambda leader_id, listener: nodes.get((leader_id, listener)),
        alive_broker_ids=lambda: [1, 2])
    cluster = coordinator_cluster_from_cache(1, BrokerConfig, cache, FakeMetadata().create_topic,  # type: ignore[arg-type]
                                             "INTERNAL")
    assert cluster.partition_leader("t", 0, "INTERNAL") == LeaderEndpoint(2, "127.0.0.2", 9092)
    assert cluster.partition_leader("t", 0, "EXTERNAL") is None
    assert cluster.partition_leader("t", 1, "INTERNAL") is None
    assert cluster.partition_leader("u", 0, "INTERNAL") is None
    assert (cluster.partition_count("t"), cluster.partition_count("u")) == (2, None)
    assert cluster.alive_broker_count() == 2


# -- transaction verification with a coordinator on another broker ---------------------------------
@pytest.fixture(scope="module")
def coordinator_broker() -> Iterator[BrokerProcess]:
    with BrokerProcess() as process:
        yield process


class NotLeaderHere:
    def get_partition(self, topic: str, partition: int) -> None:
        return None


def _remote_verifier(endpoint: tuple[str, int] | None, node: int = 1) -> AddPartitionsToTxnManager:
    txn_manager = SimpleNamespace(partition_for=lambda tid: partition_for(tid, 50))
    local = LocalAddPartitionsToTxnManager(0, NotLeaderHere(), SimpleNamespace(  # type: ignore[arg-type]
        txn_manager=txn_manager))

    def leader(topic: str, partition: int, listener: str) -> LeaderEndpoint | None:
        assert (topic, listener) == (TRANSACTION_STATE_TOPIC_NAME, "INTERNAL")
        return None if endpoint is None else LeaderEndpoint(node, *endpoint)

    return AddPartitionsToTxnManager(local, leader, "INTERNAL")


def test_a_partition_leader_verifies_with_the_coordinators_broker(coordinator_broker: BrokerProcess) -> None:
    topic = f"verify-{uuid.uuid4().hex[:8]}"
    create_topic(coordinator_broker.bootstrap, topic, 2)
    tid = f"tid-{topic}"
    found = send_request(coordinator_broker, 10, 4, FindCoordinatorRequest(
        key_type=CoordinatorType.TRANSACTION, coordinator_keys=[tid]))  # creates __transaction_state
    assert found.coordinators[0].error_code == 0
    init = send_request(coordinator_broker, 22, 4, InitProducerIdRequest(
        transactional_id=tid, transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1))
    assert init.error_code == 0
    added = send_request(coordinator_broker, 24, 3, AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid, v3_and_below_producer_id=init.producer_id,
        v3_and_below_producer_epoch=init.producer_epoch,
        v3_and_below_topics=[AddPartitionsToTxnTopic(name=topic, partitions=[0])]))
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    pid, epoch = init.producer_id, init.producer_epoch

    async def scenario() -> list[dict[tuple[str, int], int]]:
        verifier = _remote_verifier((coordinator_broker.host, coordinator_broker.port))
        dead = _remote_verifier((coordinator_broker.host, free_port(coordinator_broker.host)))
        leaderless = _remote_verifier(None)
        try:
            return [
                await verifier(tid, pid, epoch, [(topic, 0), (topic, 1)]),
                await verifier(tid, pid, epoch + 1, [(topic, 0)]),
                await dead(tid, pid, epoch, [(topic, 0)]),
                await leaderless(tid, pid, epoch, [(topic, 0)]),
            ]
        finally:
            for v in (verifier, dead, leaderless):
                await v.shutdown()

    in_txn, fenced, unreachable, no_leader = asyncio.run(scenario())
    assert in_txn == {(topic, 0): ErrorCode.NO_ERROR, (topic, 1): ErrorCode.TRANSACTION_ABORTABLE}
    assert fenced == {(topic, 0): ErrorCode.PRODUCER_FENCED}
    assert unreachable == {(topic, 0): ErrorCode.NETWORK_EXCEPTION}
    assert no_leader == {(topic, 0): ErrorCode.COORDINATOR_NOT_AVAILABLE}
    # The open transaction is aborted so the broker's hanging-transaction check stays clean.
    ended = send_request(coordinator_broker, 26, 3, EndTxnRequest(
        transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=False))
    assert ended.error_code == 0
