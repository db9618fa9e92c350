"""Where groups' configs (resource type GROUP) are kept: a lone broker's file, or ZooKeeper.

The broker's mode hands out one :class:`GroupConfigStore` at start-up
(``Membership.group_config_store``): a lone broker keeps ``group-configs.json``
in its first log dir, a cluster member ``/config/groups/<group>`` with a change
notification every broker follows (``broker.cluster.zk_group_configs``).
:class:`GroupConfigAdmin` is what DescribeConfigs and IncrementalAlterConfigs
call, whatever the mode.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Final, Protocol

from broker.config.broker_config import BrokerConfig
from broker.config.group_config import group_config_entries, validate_group_configs
from broker.config.topic_config import ConfigEntry
from coordinator.group.group_configs import GroupConfigs
from storage.checkpoints import write_atomically

GROUP_CONFIGS_FILE: Final = "group-configs.json"


class GroupConfigStore(Protocol):
    async def load(self, configs: GroupConfigs) -> None:
        """Every group's configs into ``configs``, before the listeners open; a cluster member's
        store keeps ``configs`` current as other brokers change them."""
        ...

    def write_blocking(self, group_id: str, configs: Mapping[str, str]) -> None:
        """The group's whole new set of configs, durable before this returns (on the append thread),
        and live in the ``configs`` loaded."""
        ...


class GroupConfigsFile:
    """A lone broker's group configs: ``{"version": 1, "groups": {"<group>": {"<name>": "<value>"}}}``."""

    def __init__(self, log_dir: str) -> None:
        self.path = Path(log_dir) / GROUP_CONFIGS_FILE

    def load(self) -> dict[str, dict[str, str]]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        groups = data.get("groups", {}) if isinstance(data, dict) else {}
        return {str(group): {str(k): str(v) for k, v in configs.items()} for group, configs in groups.items()}

    def save(self, groups: Mapping[str, Mapping[str, str]]) -> None:
        """Written atomically (and synced) before the change is acknowledged."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        content = {group: dict(sorted(configs.items())) for group, configs in sorted(groups.items()) if configs}
        write_atomically(self.path, json.dumps({"version": 1, "groups": content}, indent=1))


class LocalGroupConfigStore:
    """The lone broker's: every change rewrites its file."""

    def __init__(self, log_dir: str) -> None:
        self.file = GroupConfigsFile(log_dir)
        self._configs: GroupConfigs | None = None

    async def load(self, configs: GroupConfigs) -> None:
        self._configs = configs
        for group_id, group_configs in (await asyncio.to_thread(self.file.load)).items():
            configs.replace(group_id, group_configs)

    def write_blocking(self, group_id: str, configs: Mapping[str, str]) -> None:
        assert self._configs is not None, "LocalGroupConfigStore.load was not called"
        groups = dict(self._configs.items())
        groups[group_id] = dict(configs)
        self.file.save(groups)
        self._configs.replace(group_id, configs)


class GroupConfigAdmin:
    """Groups' configs as the config APIs read and change them."""

    def __init__(self, configs: GroupConfigs, store: GroupConfigStore) -> None:
        self.configs = configs
        self.store = store

    def current(self, group_id: str) -> dict[str, str]:
        return self.configs.get(group_id)

    def entries(self, group_id: str, broker: BrokerConfig, synonyms: bool, docs: bool) -> list[ConfigEntry]:
        return group_config_entries(self.configs.get(group_id), broker, synonyms, docs)

    def replace_blocking(self, group_id: str, configs: Mapping[str, str], broker: BrokerConfig,
                         validate_only: bool) -> None:
        """Validate the group's new set (GroupConfigError), then make it durable and live (append thread)."""
        validated = validate_group_configs(configs, broker)
        if not validate_only:
            self.store.write_blocking(group_id, validated)
