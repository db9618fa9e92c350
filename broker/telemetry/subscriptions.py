"""The client-metrics subscriptions, and where the broker's mode keeps them.

:class:`ClientMetricsSubscriptions` holds every subscription's configs and a version that moves on
each change, so that client instances evaluated against an older set are evaluated again. A lone
broker keeps ``client-metrics.json`` in its first log dir (:class:`LocalClientMetricsStore`); a
cluster member ``/config/client-metrics/<name>`` in ZooKeeper with a change notification every broker
follows (``broker.cluster.zk_client_metrics``). :class:`ClientMetricsConfigAdmin` is what
DescribeConfigs, IncrementalAlterConfigs and ListConfigResources call, whatever the mode.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Final, Protocol

from broker.config.client_metrics_config import (
    Subscription,
    client_metrics_config_entries,
    parse_subscription,
    validate_client_metrics_configs,
)
from broker.config.topic_config import ConfigEntry
from storage.checkpoints import write_atomically

CLIENT_METRICS_FILE: Final = "client-metrics.json"


class ClientMetricsSubscriptions:
    """Every subscription's configs (as stored) and parsed; written from the append thread, read on the
    event loop, so a change swaps whole dicts under a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._configs: dict[str, dict[str, str]] = {}
        self._parsed: dict[str, Subscription] = {}
        #: Moves on every change: client instances older than it are evaluated again.
        self.version = 0

    def replace(self, name: str, configs: Mapping[str, str]) -> None:
        """The subscription's whole new set; an empty set removes it (as deleting every config does)."""
        with self._lock:
            all_configs, parsed = dict(self._configs), dict(self._parsed)
            if configs:
                all_configs[name] = dict(configs)
                parsed[name] = parse_subscription(name, configs)
            elif name not in all_configs:
                return
            else:
                del all_configs[name], parsed[name]
            self._configs, self._parsed = all_configs, parsed
            self.version += 1

    def get(self, name: str) -> dict[str, str]:
        return dict(self._configs.get(name, {}))

    def items(self) -> list[tuple[str, dict[str, str]]]:
        return [(name, dict(configs)) for name, configs in self._configs.items()]

    def names(self) -> list[str]:
        return sorted(self._configs)

    def subscriptions(self) -> list[Subscription]:
        return list(self._parsed.values())


class ClientMetricsStore(Protocol):
    async def load(self, subscriptions: ClientMetricsSubscriptions) -> None:
        """Every subscription into ``subscriptions``, before the listeners open; a cluster member's store
        keeps them current as other brokers change them."""
        ...

    def write_blocking(self, name: str, configs: Mapping[str, str]) -> None:
        """The subscription's whole new set, durable before this returns (on the append thread), and live."""
        ...


class ClientMetricsFile:
    """A lone broker's subscriptions: ``{"version": 1, "subscriptions": {"<name>": {"<config>": "<value>"}}}``."""

    def __init__(self, log_dir: str) -> None:
        self.path = Path(log_dir) / CLIENT_METRICS_FILE

    def load(self) -> dict[str, dict[str, str]]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        found = data.get("subscriptions", {}) if isinstance(data, dict) else {}
        return {str(name): {str(k): str(v) for k, v in configs.items()} for name, configs in found.items()}

    def save(self, subscriptions: Mapping[str, Mapping[str, str]]) -> None:
        """Written atomically (and synced) before the change is acknowledged."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        content = {name: dict(sorted(c.items())) for name, c in sorted(subscriptions.items()) if c}
        write_atomically(self.path, json.dumps({"version": 1, "subscriptions": content}, indent=1))


class LocalClientMetricsStore:
    """The lone broker's: every change rewrites its file."""

    def __init__(self, log_dir: str) -> None:
        self.file = ClientMetricsFile(log_dir)
        self._subscriptions: ClientMetricsSubscriptions | None = None

    async def load(self, subscriptions: ClientMetricsSubscriptions) -> None:
        self._subscriptions = subscriptions
        for name, configs in (await asyncio.to_thread(self.file.load)).items():
            subscriptions.replace(name, configs)

    def write_blocking(self, name: str, configs: Mapping[str, str]) -> None:
        assert self._subscriptions is not None, "LocalClientMetricsStore.load was not called"
        everything = dict(self._subscriptions.items())
        everything[name] = dict(configs)
        self.file.save(everything)
        self._subscriptions.replace(name, configs)


class ClientMetricsConfigAdmin:
    """Subscriptions as the config APIs read and change them."""

    def __init__(self, subscriptions: ClientMetricsSubscriptions, store: ClientMetricsStore) -> None:
        self.subscriptions = subscriptions
        self.store = store

    def current(self, name: str) -> dict[str, str]:
        return self.subscriptions.get(name)

    def entries(self, name: str) -> list[ConfigEntry]:
        return client_metrics_config_entries(self.subscriptions.get(name))

    def names(self) -> list[str]:
        return self.subscriptions.names()

    def replace_blocking(self, name: str, configs: Mapping[str, str], validate_only: bool) -> None:
        """Validate the new set (ClientMetricsConfigError), then make it durable and live (append thread)."""
        validated = validate_client_metrics_configs(name, configs)
        if not validate_only:
            self.store.write_blocking(name, validated)
