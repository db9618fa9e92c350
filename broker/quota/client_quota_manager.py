"""Kafka's ClientQuotaManager: one quota type's usage per client, and its throttle times.

Each request records its usage (produced bytes, fetched bytes, handler time) in
the Rate of the entity its quota comes from; when the rate is then above the
quota the client is throttled for Kafka's time (QuotaUtils.throttleTime):
``(rate - quota) / quota * window``, the delay after which the rate over the
window would be back at the quota if nothing more were recorded.

The rate is Kafka's Rate over ``quota.window.num`` samples (11) of
``quota.window.size.seconds`` (1 s): the sum of the live samples over the time
since the oldest began, but never over fewer than ``quota.window.num - 1``
whole windows, so a client's first burst is measured against ten seconds.

Threads: the event loop only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from broker.quota.client_quota_configs import ClientQuotaConfigs
from broker.quota.client_quota_entity import metered_as
from replication.replication_quota_manager import SimpleRate

#: quota.window.num and quota.window.size.seconds defaults.
DEFAULT_NUM_QUOTA_SAMPLES: Final = 11
DEFAULT_QUOTA_WINDOW_SIZE_SECONDS: Final = 1


class Rate(SimpleRate):
    """Kafka's Rate: a SimpleRate measured over at least ``num_samples - 1`` whole windows."""

    __slots__ = ()

    def window_size_ms(self, now_ms: float) -> float:
        elapsed = now_ms - self._oldest_start_ms(now_ms)
        full_windows = int(elapsed // self.window_ms)
        minimum = self.num_samples - 1
        if full_windows < minimum:
            elapsed += (minimum - full_windows) * self.window_ms
        return elapsed


class ClientQuotaManager:
    def __init__(self, key: str, configs: ClientQuotaConfigs, num_samples: int = DEFAULT_NUM_QUOTA_SAMPLES,
                 window_size_seconds: float = DEFAULT_QUOTA_WINDOW_SIZE_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``key``: the quota config (producer_byte_rate, ...); ``clock``: seconds, monotonic."""
        self.key = key
        self._configs = configs
        self._num_samples = num_samples
        self._window_ms = window_size_seconds * 1000.0
        self._clock = clock
        #: (user, client id) → the metered (user, client id) and its quota, or None: no quota.
        self._resolved: dict[tuple[str, str], tuple[tuple[str, str], float] | None] = {}
        self._rates: dict[tuple[str, str], Rate] = {}
        configs.on_change(self._resolved.clear)

    @property
    def enabled(self) -> bool:
        """Some entity has this quota: otherwise nothing is recorded (Kafka's quotasEnabled)."""
        return self._configs.uses(self.key)

    def quota(self, user: str, client_id: str) -> float | None:
        found = self._resolve(user, client_id)
        return None if found is None else found[1]

    def record_and_get_throttle_time_ms(self, user: str, client_id: str, value: float) -> int:
        """Record ``value`` for the client; how long to throttle it (0: within its quota)."""
        found = self._resolve(user, client_id)
        if found is None:
            return 0
        metered, bound = found
        rate = self._rates.get(metered)
        if rate is None:
            rate = self._rates[metered] = Rate(self._num_samples, self._window_ms)
        now_ms = self._clock() * 1000.0
        rate.record(value, now_ms)
        observed = rate.measure(now_ms)
        if observed <= bound:
            return 0
        return round((observed - bound) / bound * rate.window_size_ms(now_ms))

    def max_value_in_quota_window(self, user: str, client_id: str) -> float:
        """Kafka's maxValueInQuotaWindow: the most one request may take without being throttled for sure."""
        bound = self.quota(user, client_id)
        if bound is None:
            return float("inf")
        return bound * (self._num_samples - 1) * self._window_ms / 1000.0

    def _resolve(self, user: str, client_id: str) -> tuple[tuple[str, str], float] | None:
        key = (user, client_id)
        try:
            return self._resolved[key]
        except KeyError:
            pass
        found = self._configs.resolve(self.key, user, client_id)
        resolved = None if found is None else (metered_as(found[0], user, client_id), found[1])
        self._resolved[key] = resolved
        return resolved
