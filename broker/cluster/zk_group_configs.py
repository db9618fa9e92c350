"""A cluster member's group configs: /config/groups/<group> in ZooKeeper, followed by notification.

A change is written to the group's znode with a ``/config/changes`` notification
(as topic and client configs are); every broker, this one included, reads the
znode again when the notification reaches it (``reload``), so a change made
through any broker becomes every broker's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from broker.cluster.zk_admin import ZK_WRITE_TIMEOUT_S
from controller.zk.kafka_zk_client import KafkaZkClient
from controller.zk.zk_data import desanitize
from coordinator.group.group_configs import GroupConfigs


class ZkGroupConfigStore:
    def __init__(self, zk: KafkaZkClient, loop: asyncio.AbstractEventLoop) -> None:
        self.zk = zk
        self.loop = loop
        self._configs: GroupConfigs | None = None

    async def load(self, configs: GroupConfigs) -> None:
        self._configs = configs
        for group_id, group_configs in (await self.zk.get_group_configs()).items():
            configs.replace(group_id, group_configs)

    def write_blocking(self, group_id: str, configs: Mapping[str, str]) -> None:
        assert self._configs is not None, "ZkGroupConfigStore.load was not called"
        asyncio.run_coroutine_threadsafe(self.zk.set_group_configs(group_id, configs), self.loop).result(
            ZK_WRITE_TIMEOUT_S)
        self._configs.replace(group_id, configs)

    async def reload(self, sanitized_group_id: str) -> None:
        """A change notification named ``groups/<sanitized group id>``: its znode, read again."""
        if self._configs is not None:
            group_id = desanitize(sanitized_group_id)
            self._configs.replace(group_id, await self.zk.get_group_config(group_id))
