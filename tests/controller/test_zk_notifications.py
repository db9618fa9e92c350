"""Config change notifications (/config/changes/config_change_<seq>) reach a listening broker once each, in order."""

from __future__ import annotations

import asyncio

from controller.zk import zk_data as zd
from controller.zk.kafka_zk_client import KafkaZkClient
from controller.zk.zk_node_change_notification_listener import config_change_listener
from pytest_pafka.waiting import wait_until_async


def test_each_change_is_handled_once_in_order(zk_connect: str) -> None:
    async def scenario() -> None:
        writer, reader = KafkaZkClient(zk_connect, 6000, 10_000), KafkaZkClient(zk_connect, 6000, 10_000)
        await writer.start()
        await reader.start()
        seen: list[tuple[str, str]] = []

        async def on_change(entity_type: str, entity_name: str) -> None:
            seen.append((entity_type, entity_name))
        listener = config_change_listener(reader, on_change)
        try:
            await writer.set_topic_configs("before", {"retention.ms": "1"})  # there before the listener starts
            await listener.start()
            await wait_until_async(lambda: seen == [("topics", "before")], 15.0, "condition")
            await writer.set_topic_configs("t1", {"retention.ms": "2"})
            await writer.set_broker_configs(zd.DEFAULT_ENTITY, {"log.retention.ms": "3"})
            await writer.set_topic_configs("t1", {"retention.ms": "4"})
            await wait_until_async(lambda: len(seen) == 4, 15.0, "condition")
            assert seen == [("topics", "before"), ("topics", "t1"), ("brokers", "<default>"), ("topics", "t1")]
            await asyncio.sleep(0.3)
            assert len(seen) == 4  # nothing handled twice
        finally:
            await listener.close()
            await writer.close()
            await reader.close()
    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_expired_notifications_are_purged(zk_connect: str) -> None:
    async def scenario() -> None:
        client = KafkaZkClient(zk_connect, 6000, 10_000)
        await client.start()
        seen: list[tuple[str, str]] = []
        listener = config_change_listener(client, lambda t, n: seen.append((t, n)), change_expiration_ms=0)
        try:
            await client.set_topic_configs("a", {})
            await asyncio.sleep(0.05)
            await listener.start()
            await wait_until_async(lambda: seen == [("topics", "a")], 15.0, "condition")
            await client.set_topic_configs("b", {})
            await wait_until_async(lambda: len(seen) == 2, 15.0, "condition")
            await asyncio.sleep(0.05)
            await client.set_topic_configs("c", {})  # its processing purges a and b
            await wait_until_async(lambda: len(seen) == 3, 15.0, "condition")
            children = await client.get_children(zd.CONFIG_CHANGES_PATH)
            assert len(children) <= 1 and seen == [("topics", "a"), ("topics", "b"), ("topics", "c")]
        finally:
            await listener.close()
            await client.close()
    asyncio.run(asyncio.wait_for(scenario(), 60))
