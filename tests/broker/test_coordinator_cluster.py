"""Cluster-mode coordinator wiring: the coordinators' view of the metadata cache, and partition
leaders verifying transactions with a coordinator on another broker (a real one here)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from broker.add_partitions_to_txn_manager import AddPartitionsToTxnManager, LocalAddPartitionsToTxnManager
from broker.cluster.coordinator_cluster import coordinator_cluster_from_cache
from broker.inter_broker_channel import InterBrokerChannel, InterBrokerEndpoint
from broker.metadata_view import BrokerNode
from coordinator.common.internal_topics import TRANSACTION_STATE_TOPIC_NAME
from coordinator.common.partition_leader import LeaderEndpoint
from coordinator.common.partitioner import partition_for
from protocol.errors import ErrorCode
from protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from protocol.messages.end_txn import EndTxnRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.init_producer_id import InitProducerIdRequest
from protocol.request_constants import CoordinatorType
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.ports import free_port
from testing.sockets import send_request
from testing.topics import create_topic


def test_the_cluster_reads_the_metadata_cache() -> None:
    """The adapter over the broker's metadata cache: a leader without the listener, or no leader, is none."""
    states = {("t", 0): SimpleNamespace(leader_id=2), ("t", 1): SimpleNamespace(leader_id=-1)}
    nodes = {(2, "INTERNAL"): SimpleNamespace(node_id=2, host="127.0.0.2", port=9092)}
    cache = SimpleNamespace(
        get=lambda name: SimpleNamespace(partition_count=2) if name == "t" else None,
        partition_state=lambda topic, partition: states.get((topic, partition)),
        leader_node=lambda leader_id, listener: nodes.get((leader_id, listener)))
    cluster = coordinator_cluster_from_cache(1, cache, "INTERNAL")  # type: ignore[arg-type]
    assert cluster.partition_leader("t", 0, "INTERNAL") == LeaderEndpoint(2, "127.0.0.2", 9092)
    assert cluster.partition_leader("t", 0, "EXTERNAL") is None
    assert cluster.partition_leader("t", 1, "INTERNAL") is None
    assert cluster.partition_leader("u", 0, "INTERNAL") is None
    assert (cluster.partition_count("t"), cluster.partition_count("u")) == (2, None)
    assert cluster.inter_broker_listener == "INTERNAL"


# -- transaction verification with a coordinator on another broker ---------------------------------
@pytest.fixture(scope="module")
def coordinator_broker() -> Iterator[BrokerProcess]:
    with BrokerProcess() as process:
        yield process


class NotLeaderHere:
    def get_partition(self, topic: str, partition: int) -> None:
        return None


class CoordinatorAt:
    """Names broker ``node`` at ``endpoint`` (None: no broker) the coordinator of every id, as the
    cluster's metadata does; the channel finds the broker there too."""

    def __init__(self, endpoint: tuple[str, int] | None, node: int) -> None:
        self.node = None if endpoint is None else BrokerNode(node, *endpoint, None)

    def coordinator_node(self, topic: str, partition: int, listener_name: str) -> BrokerNode | None:
        assert (topic, listener_name) == (TRANSACTION_STATE_TOPIC_NAME, "INTERNAL")
        return self.node

    def leader_node(self, leader_id: int, listener_name: str) -> BrokerNode | None:
        return self.node if self.node is not None and self.node.node_id == leader_id else None


def _remote_verifier(endpoint: tuple[str, int] | None, node: int = 1) -> AddPartitionsToTxnManager:
    txn_manager = SimpleNamespace(partition_for=lambda tid: partition_for(tid, 50))
    local = LocalAddPartitionsToTxnManager(0, NotLeaderHere(), SimpleNamespace(  # type: ignore[arg-type]
        txn_manager=txn_manager))
    metadata = CoordinatorAt(endpoint, node)
    return AddPartitionsToTxnManager(local, metadata, InterBrokerChannel(
        0, "txn-verifier", InterBrokerEndpoint("INTERNAL"), metadata))


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
