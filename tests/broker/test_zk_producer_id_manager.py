"""Producer ids from three brokers' ZkProducerIdManagers sharing one real ZooKeeper: never the same id twice."""

from __future__ import annotations

import asyncio
import json

from kazoo.client import KazooClient

from broker.cluster.zk_producer_id_manager import ZkProducerIdManager
from controller.zk.kafka_zk_client import KafkaZkClient, split_connect
from pytest_pafka.zookeeper import ZooKeeperProcess

TOTAL = 10_000


async def _generate_concurrently(connect: str) -> tuple[list[int], list[int]]:
    clients = [KafkaZkClient(connect, 6000, 10_000) for _ in range(3)]
    for client in clients:
        await client.start()
    try:
        managers = [ZkProducerIdManager(broker_id, client) for broker_id, client in enumerate(clients)]

        async def worker(manager: ZkProducerIdManager, count: int) -> list[int]:
            ids = []
            for _ in range(count):
                ids.append(await manager.generate_producer_id())
                if len(ids) % 97 == 0:
                    await asyncio.sleep(0)  # let the other brokers' requests interleave
            return ids
        # 3 brokers x 10 concurrent requesters each.
        per_worker = -(-TOTAL // 30)
        results = await asyncio.wait_for(
            asyncio.gather(*(worker(m, per_worker) for m in managers for _ in range(10))), 120)
        return [i for ids in results for i in ids], [m.blocks_claimed for m in managers]
    finally:
        for client in clients:
            await client.close()


def test_three_brokers_hand_out_distinct_producer_ids(zookeeper: ZooKeeperProcess, zk_connect: str) -> None:
    ids, claims = asyncio.run(_generate_concurrently(zk_connect))
    assert len(ids) >= TOTAL
    assert len(set(ids)) == len(ids)
    # Concurrent callers of one broker share a claim: each broker claimed only the blocks it used.
    per_broker = len(ids) // 3
    assert all(c == -(-per_broker // 1000) for c in claims), claims
    zk = KazooClient(hosts=zookeeper.connect_string)
    zk.start(timeout=10)
    try:
        data, stat = zk.get(split_connect(zk_connect)[1] + "/latest_producer_id_block")
    finally:
        zk.stop()
        zk.close()
    assert stat.version == sum(claims)
    assert int(json.loads(data)["block_end"]) == sum(claims) * 1000 - 1
    assert max(ids) < sum(claims) * 1000


def test_ids_continue_after_a_restart(zk_connect: str) -> None:
    async def scenario() -> tuple[int, int]:
        client = KafkaZkClient(zk_connect, 6000, 10_000)
        await client.start()
        try:
            first = await ZkProducerIdManager(1, client).generate_producer_id()
            # A restarted broker (a new manager) starts from a fresh block, never from its old one.
            second = await ZkProducerIdManager(1, client).generate_producer_id()
            return first, second
        finally:
            await client.close()
    first, second = asyncio.run(scenario())
    assert (first, second) == (0, 1000)
