"""Kafka's ClientQuotaManager: one quota type's usage per client, and its throttle times.

Each request records its usage (produced bytes, fetched bytes, handler time) in
the Rate of the entity its quota comes from; when the rate is then above the
quota the client is throttled for Kafka's time (QuotaUtils.throttleTime):
``(rate - quota) / quota * window``, the delay after which the rate over the
window would be back at the quota if nothing more were recorded.

The rate is measured over ``quota.window.num`` samples (11) of
``quota.window.size.seconds`` (1 s): the sum of the live samples over the time
since the oldest began, never over less than one window. That is how Kafka
measures its replication quotas (SimpleRate); Kafka's client quotas use Rate,
which never measures over less than ten windows, so a new client may first
send ten seconds' worth at once, and a client sending as fast as it is let
then gets its quota in bursts each time that first sample leaves the window
(about every eleven seconds): a producer limited to 1 MB/s was measured at
1.21 MB/s over its first 30 s that way, and 1.01 MB/s with SimpleRate.

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
        self._rates: dict[tuple[str, str], SimpleRate] = {}
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
            rate = self._rates[metered] = SimpleRate(self._num_samples, self._window_ms)
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
