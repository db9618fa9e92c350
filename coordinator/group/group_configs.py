"""Each group's dynamic configs (resource type GROUP), and the timeouts a consumer group runs with.

Kafka's GroupConfigManager: a group's configs override the broker's
``group.consumer.session.timeout.ms`` and ``group.consumer.heartbeat.interval.ms``
for that group alone. The values are kept as stored (validated strings); a
config the group does not set, or a value that does not parse (written around
the admin API), falls back to the broker's.

Threads: :meth:`replace` may run on the append thread (where config changes are
made durable) while the event loop reads; each group's configs are swapped as one
dict, which readers see whole.
"""

from __future__ import annotations

from collections.abc import Mapping

CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"


class GroupConfigs:
    def __init__(self, session_timeout_ms: int, heartbeat_interval_ms: int) -> None:
        #: The broker's defaults for the consumer protocol.
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self._groups: dict[str, dict[str, str]] = {}

    def replace(self, group_id: str, configs: Mapping[str, str]) -> None:
        """The group's whole set of configs (empty: it has none)."""
        if configs:
            self._groups[group_id] = dict(configs)
        else:
            self._groups.pop(group_id, None)

    def get(self, group_id: str) -> dict[str, str]:
        return dict(self._groups.get(group_id, {}))

    def items(self) -> list[tuple[str, dict[str, str]]]:
        return sorted((group_id, dict(configs)) for group_id, configs in self._groups.items())

    def consumer_session_timeout_ms(self, group_id: str) -> int:
        return self._int(group_id, CONSUMER_SESSION_TIMEOUT_MS, self.session_timeout_ms)

    def consumer_heartbeat_interval_ms(self, group_id: str) -> int:
        return self._int(group_id, CONSUMER_HEARTBEAT_INTERVAL_MS, self.heartbeat_interval_ms)

    def _int(self, group_id: str, name: str, default: int) -> int:
        value = self._groups.get(group_id, {}).get(name)
        if value is None:
            return default
        try:
            return int(value)
        except ValueError:
            return default
