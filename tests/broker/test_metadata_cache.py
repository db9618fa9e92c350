"""ZkMetadataCache: what the controller's UpdateMetadata tells a broker, at every version.

Each request goes through the codec (encoded and decoded at its version), so a
field a version does not carry is seen as the broker would see it.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from broker.cluster.metadata_cache import LEADER_DURING_DELETE, ZkMetadataCache
from broker.metadata_view import NO_CONTROLLER_ID
from protocol.messages.update_metadata import (
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataTopicState,
)

TOPIC_ID = uuid.UUID("8f1e2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b")
VERSIONS = range(9)


def _broker(broker_id: int, rack: str | None = None) -> UpdateMetadataBroker:
    host = f"127.0.0.{broker_id}"
    return UpdateMetadataBroker(
        id=broker_id, v0_host=host, v0_port=9090 + broker_id, rack=rack,
        endpoints=[UpdateMetadataEndpoint(host=host, port=9090 + broker_id, listener="PLAINTEXT", security_protocol=0),
                   UpdateMetadataEndpoint(host=host, port=9190 + broker_id, listener="INTERNAL", security_protocol=0)])


def _state(topic: str, partition: int, leader: int, isr: list[int], replicas: list[int],
           offline: list[int] | None = None, epoch: int = 3) -> UpdateMetadataPartitionState:
    return UpdateMetadataPartitionState(topic_name=topic, partition_index=partition, controller_epoch=2, leader=leader,
                                        leader_epoch=epoch, isr=isr, zk_version=7, replicas=replicas,
                                        offline_replicas=offline or [])


def _request(version: int, states: list[UpdateMetadataPartitionState], brokers: list[UpdateMetadataBroker],
             controller_id: int = 1, controller_epoch: int = 2, topic_id: uuid.UUID = TOPIC_ID) -> UpdateMetadataRequest:
    request = UpdateMetadataRequest(controller_id=controller_id, controller_epoch=controller_epoch, broker_epoch=100,
                                    live_brokers=brokers)
    if version >= 5:
        topics: dict[str, UpdateMetadataTopicState] = {}
        for s in states:
            topics.setdefault(s.topic_name, UpdateMetadataTopicState(topic_name=s.topic_name, topic_id=topic_id,
                                                                     partition_states=[])).partition_states.append(s)
        request.topic_states = list(topics.values())
    else:
        request.ungrouped_partition_states = states
    # Through the wire, as the broker receives it.
    return UpdateMetadataRequest.decode(request.to_bytes(version), version)


@pytest.mark.parametrize("version", VERSIONS)
def test_brokers_controller_and_partitions_at_every_version(version: int) -> None:
    cache = ZkMetadataCache(broker_id=2, cluster_id="c1")
    brokers = [_broker(1, "r1"), _broker(2, "r2"), _broker(3, "r1")]
    if version < 3:  # one endpoint per security protocol before listener names
        for b in brokers:
            del b.endpoints[1:]
    states = [_state("orders", p, leader=p % 3 + 1, isr=[1, 2, 3], replicas=[p % 3 + 1, 1, 2, 3][:3],
                     offline=[3] if p == 1 else []) for p in range(4)]
    assert cache.update_metadata(_request(version, states, brokers), version) == []

    listener = "PLAINTEXT"
    assert [(b.node_id, b.host, b.port) for b in cache.alive_brokers(listener)] == [
        (1, "127.0.0.1", 9091), (2, "127.0.0.2", 9092), (3, "127.0.0.3", 9093)]
    # Listener names travel from v3; racks from v2.
    assert [b.node_id for b in cache.alive_brokers("INTERNAL")] == ([1, 2, 3] if version >= 3 else [])
    assert cache.rack_of(1) == ("r1" if version >= 2 else None)
    assert cache.controller_id() == 1 and cache.controller_epoch == 2
    node = cache.controller_node(listener)
    assert node is not None and node.node_id == 1 and node.port == 9091

    topic = cache.get("orders")
    assert topic is not None and "orders" in cache and cache.cluster_id == "c1"
    assert topic.partitions == {p: [p % 3 + 1, 1, 2, 3][:3] for p in range(4)}
    assert topic.topic_id == (TOPIC_ID if version >= 7 else uuid.UUID(int=0))
    assert (cache.by_id(TOPIC_ID) is topic) == (version >= 7)
    shown = cache.partition_states("orders")
    assert [p.partition_index for p in shown] == [0, 1, 2, 3]
    assert [(p.leader_id, p.leader_epoch, p.isr) for p in shown] == [(p % 3 + 1, 3, [1, 2, 3]) for p in range(4)]
    assert cache.offline_replicas(shown[1]) == ([3] if version >= 4 else [])
    state = cache.partition_state("orders", 2)
    assert state is not None and state.partition_epoch == 7


def test_a_broker_only_update_keeps_the_partitions() -> None:
    cache = ZkMetadataCache(broker_id=1)
    cache.update_metadata(_request(8, [_state("t", 0, 1, [1, 2], [1, 2])], [_broker(1), _broker(2)]), 8)
    version = cache.topics_version
    cache.update_metadata(_request(8, [], [_broker(1)]), 8)  # broker 2 died
    assert cache.topics_version == version  # the topics are as they were
    assert [b.node_id for b in cache.alive_brokers("PLAINTEXT")] == [1]
    assert cache.get("t") is not None and cache.partition_state("t", 0) is not None
    assert cache.leader_node(2, "PLAINTEXT") is None and cache.leader_node(1, "PLAINTEXT") is not None


def test_leader_during_delete_removes_partitions_then_the_topic() -> None:
    cache = ZkMetadataCache(broker_id=1)
    brokers = [_broker(1)]
    cache.update_metadata(_request(8, [_state("gone", p, 1, [1], [1]) for p in range(2)], brokers), 8)
    version = cache.topics_version
    deleted = cache.update_metadata(_request(8, [_state("gone", 0, LEADER_DURING_DELETE, [1], [1])], brokers), 8)
    assert deleted == [("gone", 0)] and cache.topics_version > version
    topic = cache.get("gone")
    assert topic is not None and list(topic.partitions) == [1] and cache.by_id(TOPIC_ID) is topic
    deleted = cache.update_metadata(_request(8, [_state("gone", 1, LEADER_DURING_DELETE, [1], [1])], brokers), 8)
    assert deleted == [("gone", 1)]
    assert cache.get("gone") is None and "gone" not in cache and cache.by_id(TOPIC_ID) is None
    assert cache.topics_version > version + 1
    assert list(cache) == [] and cache.partition_states("gone") == []


def test_states_are_replaced_not_changed_in_place() -> None:
    cache = ZkMetadataCache(broker_id=1)
    brokers = [_broker(1), _broker(2)]
    cache.update_metadata(_request(8, [_state("t", 0, 1, [1, 2], [1, 2])], brokers), 8)
    before = cache.partition_state("t", 0)
    cache.update_metadata(_request(8, [_state("t", 0, 2, [2], [1, 2], epoch=4)], brokers), 8)
    after = cache.partition_state("t", 0)
    assert before is not None and after is not None and before is not after
    assert (before.leader_id, before.isr) == (1, [1, 2]) and (after.leader_id, after.leader_epoch, after.isr) == (2, 4, [2])


def test_no_controller_and_topic_configs() -> None:
    cache = ZkMetadataCache(broker_id=1)
    cache.set_topic_configs("t", {"retention.ms": "1000"})
    cache.update_metadata(_request(8, [_state("t", 0, 1, [1], [1])], [_broker(1)], controller_id=-1), 8)
    assert cache.controller_id() == NO_CONTROLLER_ID and cache.controller_node("PLAINTEXT") is None
    topic = cache.get("t")
    assert topic is not None and topic.configs == {"retention.ms": "1000"} == cache.configs_of("t")
    cache.set_topic_configs("t", {})
    assert topic.configs == {} and cache.configs_of("unknown") == {}


def test_waiters_wake_on_the_update_that_satisfies_them() -> None:
    async def scenario() -> tuple[bool, bool]:
        cache = ZkMetadataCache(broker_id=1)
        waiting = asyncio.ensure_future(cache.wait_until(lambda: "late" in cache, 5.0))
        await asyncio.sleep(0)
        cache.update_metadata(_request(8, [_state("other", 0, 1, [1], [1])], [_broker(1)]), 8)
        await asyncio.sleep(0)
        assert not waiting.done()
        cache.update_metadata(_request(8, [_state("late", 0, 1, [1], [1])], [_broker(1)]), 8)
        woke = await asyncio.wait_for(waiting, 1.0)
        timed_out = await cache.wait_until(lambda: "never" in cache, 0.05)
        return woke, timed_out

    assert asyncio.run(scenario()) == (True, False)
