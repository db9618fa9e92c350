"""The client quota configs this broker knows, and a lone broker's file of them.

A cluster member fills :class:`ClientQuotaConfigs` from ZooKeeper at start-up
and on each config change notification (Kafka's ClientIdConfigHandler,
UserConfigHandler and IpConfigHandler); a lone broker from its
``client-quotas.json``. Every change calls the listeners (the quota managers
drop their resolved quotas and re-resolve on the next request).

Threads: read and changed on the event loop only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

from broker.quota.client_quota_entity import (
    CLIENT_QUOTA_KEYS,
    IP_QUOTA_KEYS,
    ClientQuotaEntity,
    format_value,
    precedence,
)
from storage.checkpoints import write_atomically

CLIENT_QUOTAS_FILE: Final = "client-quotas.json"
_QUOTA_KEYS: Final = frozenset(CLIENT_QUOTA_KEYS) | frozenset(IP_QUOTA_KEYS)


def quota_values(config: Mapping[str, str]) -> dict[str, float]:
    """The quota keys of an entity's config (a user's znode holds its SCRAM credentials too)."""
    values: dict[str, float] = {}
    for key, value in config.items():
        if key in _QUOTA_KEYS:
            try:
                values[key] = float(value)
            except ValueError:
                continue  # written around the admin API's validation: no quota, as Kafka's parse failure
    return values


class ClientQuotaConfigs:
    def __init__(self) -> None:
        self._entities: dict[ClientQuotaEntity, dict[str, float]] = {}
        #: The keys some entity sets: a quota type nobody configured costs its manager one lookup.
        self._keys_in_use: frozenset[str] = frozenset()
        self._listeners: list[Callable[[], None]] = []

    def on_change(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def replace(self, entity: ClientQuotaEntity, config: Mapping[str, str]) -> None:
        """The entity's whole config as stored (quota keys are picked out of it)."""
        values = quota_values(config)
        if values:
            self._entities[entity] = values
        else:
            self._entities.pop(entity, None)
        self._keys_in_use = frozenset(key for values in self._entities.values() for key in values)
        for listener in self._listeners:
            listener()

    def uses(self, key: str) -> bool:
        return key in self._keys_in_use

    def get(self, entity: ClientQuotaEntity) -> dict[str, float]:
        return dict(self._entities.get(entity, {}))

    def items(self) -> list[tuple[ClientQuotaEntity, dict[str, float]]]:
        return [(entity, dict(values)) for entity, values in self._entities.items()]

    def resolve(self, key: str, user: str, client_id: str) -> tuple[ClientQuotaEntity, float] | None:
        """The most specific entity with a ``key`` quota for this client, and the quota."""
        for entity in precedence(user, client_id):
            value = self._entities.get(entity, {}).get(key)
            if value is not None:
                return entity, value
        return None

    def ip_quota(self, ip: str) -> float | None:
        """connection_creation_rate of the IP, else of the default IP entity."""
        for name in (ip, None):
            value = self._entities.get(ClientQuotaEntity.of({"ip": name}), {}).get("connection_creation_rate")
            if value is not None:
                return value
        return None


class ClientQuotasFile:
    """A lone broker's quotas: ``{"version": 1, "entities": [{"entity": {...}, "config": {...}}]}``."""

    def __init__(self, log_dir: str) -> None:
        self.path = Path(log_dir) / CLIENT_QUOTAS_FILE

    def load(self) -> dict[ClientQuotaEntity, dict[str, str]]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        loaded: dict[ClientQuotaEntity, dict[str, str]] = {}
        for item in data.get("entities", []) if isinstance(data, dict) else []:
            entity = ClientQuotaEntity.of({str(t): (None if n is None else str(n)) for t, n in item["entity"].items()})
            loaded[entity] = {str(k): str(v) for k, v in item["config"].items()}
        return loaded

    def save(self, entities: Mapping[ClientQuotaEntity, Mapping[str, float]]) -> None:
        """Written atomically (and synced) before the change is acknowledged."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        items = [{"entity": entity.as_dict(), "config": {k: format_value(k, v) for k, v in sorted(values.items())}}
                 for entity, values in sorted(entities.items(), key=lambda item: str(item[0])) if values]
        write_atomically(self.path, json.dumps({"version": 1, "entities": items}, indent=1))
