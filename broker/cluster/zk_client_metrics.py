"""A cluster member's client-metrics subscriptions: /config/client-metrics/<name> in ZooKeeper.

A change is written to the subscription's znode with a ``/config/changes`` notification (as group
configs are); every broker, this one included, reads the znode again when the notification reaches
it (``reload``), so a subscription made through any broker reaches the clients of every broker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from broker.cluster.zk_admin import ZK_WRITE_TIMEOUT_S
from broker.telemetry.subscriptions import ClientMetricsSubscriptions
from controller.zk.kafka_zk_client import KafkaZkClient
from controller.zk.zk_data import desanitize


class ZkClientMetricsStore:
    def __init__(self, zk: KafkaZkClient, loop: asyncio.AbstractEventLoop) -> None:
        self.zk = zk
        self.loop = loop
        self._subscriptions: ClientMetricsSubscriptions | None = None

    async def load(self, subscriptions: ClientMetricsSubscriptions) -> None:
        self._subscriptions = subscriptions
        for name, configs in (await self.zk.get_client_metrics_configs()).items():
            subscriptions.replace(name, configs)

    def write_blocking(self, name: str, configs: Mapping[str, str]) -> None:
        assert self._subscriptions is not None, "ZkClientMetricsStore.load was not called"
        asyncio.run_coroutine_threadsafe(self.zk.set_client_metrics_configs(name, configs), self.loop).result(
            ZK_WRITE_TIMEOUT_S)
        self._subscriptions.replace(name, configs)

    async def reload(self, sanitized_name: str) -> None:
        """A change notification named ``client-metrics/<sanitized name>``: its znode, read again."""
        if self._subscriptions is not None:
            name = desanitize(sanitized_name)
            self._subscriptions.replace(name, await self.zk.get_client_metrics_config(name))
