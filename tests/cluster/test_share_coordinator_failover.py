"""The share coordinator in a three-broker cluster: the persister reaches it on another broker, and
the state survives a SIGKILL of the coordinator's broker (``__share_group_state`` with three replicas).

The broker's persister (``broker.share_persister.BrokerSharePersister``) runs here in the test process
as a broker that coordinates nothing (id -1): every call goes over the network to the leader of the
key's ``__share_group_state`` partition, which the placement reads from ZooKeeper as a broker's
metadata cache has it. Writes are answered once in the ISR (acks=all, min ISR 2), so the replica
that takes over loads every answered write.
"""

from __future__ import annotations

import asyncio
import uuid

from broker.inter_broker_channel import InterBrokerChannel, InterBrokerEndpoint
from broker.metadata_view import BrokerNode
from broker.share_persister import BrokerSharePersister
from coordinator.common.scheduler import ManualScheduler
from coordinator.share.persister import PersisterStateBatch, ShareGroupPartitionState
from coordinator.share.share_coordinator import ShareCoordinator, ShareCoordinatorConfig
from coordinator.share.share_coordinator_records import SharePartitionKey, kafka_uuid_string
from protocol.errors import ErrorCode
from protocol.messages.find_coordinator import FindCoordinatorRequest
from pytest_pafka.cluster import Cluster
from pytest_pafka.plugin import ClusterFactory
from testing.sockets import send_request
from tests.coordinator.fakes import MemoryCoordinatorLog

PARTITIONS = 3
OVERRIDES = ("group.coordinator.rebalance.protocols=classic,share",
             f"share.coordinator.state.topic.num.partitions={PARTITIONS}",
             "share.coordinator.state.topic.replication.factor=3", "share.coordinator.state.topic.min.isr=2",
             "share.coordinator.snapshot.update.records.per.snapshot=2")
TOPIC = uuid.UUID("1f0e6a52-3c1d-4d0b-8a9e-5b7c2d4e6f80")
STATE_TOPIC = "__share_group_state"
WAIT_S = 90.0


class ZkPlacement:
    """The leader of a partition as ZooKeeper's partition state names it (what UpdateMetadata carries),
    and where a running broker listens (the persister's channel connects there)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def coordinator_node(self, topic: str, partition: int, listener_name: str) -> BrokerNode | None:
        state = self.cluster.partition_state(topic, partition)
        leader = -1 if state is None else int(state["leader"])
        return self.leader_node(leader, listener_name)

    def leader_node(self, leader_id: int, listener_name: str) -> BrokerNode | None:
        if leader_id not in self.cluster.running_ids():
            return None
        broker = self.cluster.broker(leader_id)
        return BrokerNode(leader_id, broker.host, broker.port, None)


async def _topic_ready() -> ErrorCode:
    return ErrorCode.NO_ERROR


def persister(cluster: Cluster) -> tuple[BrokerSharePersister, ShareCoordinator]:
    # Only partition_for of this coordinator is used: it leads nothing.
    placement_only = ShareCoordinator(-1, MemoryCoordinatorLog(PARTITIONS), ManualScheduler(), ShareCoordinatorConfig())
    placement = ZkPlacement(cluster)
    channel = InterBrokerChannel(-1, "share-persister", InterBrokerEndpoint("PLAINTEXT"), placement)
    return BrokerSharePersister(-1, placement_only, placement, _topic_ready, channel,
                                timeout_s=WAIT_S), placement_only


def create_state_topic(cluster: Cluster) -> None:
    """FindCoordinator v6 (key type SHARE) creates __share_group_state, as a broker's persister does."""
    key = f"g:{kafka_uuid_string(TOPIC)}:0"

    def found() -> bool:
        response = send_request(cluster.broker(cluster.running_ids()[0]), 10, 6,
                                FindCoordinatorRequest(key_type=2, coordinator_keys=[key]))
        return bool(response.coordinators[0].error_code == ErrorCode.NO_ERROR)
    cluster.wait_for(found, WAIT_S, "a share coordinator")


def keys_per_partition(coordinator: ShareCoordinator) -> dict[int, SharePartitionKey]:
    keys: dict[int, SharePartitionKey] = {}
    n = 0
    while len(keys) < PARTITIONS:
        key = SharePartitionKey(f"group-{n}", TOPIC, 0)
        keys.setdefault(coordinator.partition_for(key), key)
        n += 1
    return keys


def state(acked_to: int) -> ShareGroupPartitionState:
    return ShareGroupPartitionState(1, acked_to - 2, 0, (PersisterStateBatch(acked_to - 2, acked_to, 2, 1),
                                                         PersisterStateBatch(acked_to + 1, acked_to + 4, 0, 3)))


def test_state_survives_a_sigkill_of_the_coordinators_broker(pafka_cluster_factory: ClusterFactory) -> None:
    cluster = pafka_cluster_factory(*OVERRIDES)
    create_state_topic(cluster)
    assignment = cluster.topic_assignment(STATE_TOPIC)
    assert len(assignment) == PARTITIONS and all(sorted(r) == cluster.broker_ids for r in assignment.values())
    configs = cluster.read_json(f"/config/topics/{STATE_TOPIC}")["config"]
    assert {k: configs[k] for k in ("cleanup.policy", "retention.ms", "min.insync.replicas")} == {
        "cleanup.policy": "delete", "retention.ms": "-1", "min.insync.replicas": "2"}

    async def scenario() -> None:
        client, coordinator = persister(cluster)
        keys = keys_per_partition(coordinator)
        written: dict[SharePartitionKey, ShareGroupPartitionState] = {}
        for key in keys.values():
            await client.initialize_state(key.group_id, TOPIC, 0, 1, 0)
            for acked_to in range(2, 12, 2):  # five writes: snapshots and updates
                await client.write_state(key.group_id, TOPIC, 0, state(acked_to))
            written[key] = state(10)
            assert await client.read_state(key.group_id, TOPIC, 0, 0) == written[key]
        leader_state = cluster.partition_state(STATE_TOPIC, 0)
        assert leader_state is not None
        killed = int(leader_state["leader"])
        cluster.kill(killed)
        for key, expected in written.items():
            assert await client.read_state(key.group_id, TOPIC, 0, 0) == expected, key
        moved = keys[0]
        await client.write_state(moved.group_id, TOPIC, 0, state(20))
        assert await client.read_state_summary(moved.group_id, TOPIC, 0, 0) == (1, 18, 0)
        new_state = cluster.partition_state(STATE_TOPIC, 0)
        assert new_state is not None and int(new_state["leader"]) != killed
        await client.shutdown()

    asyncio.run(scenario())
