"""Kafka's ControllerMutationQuotaManager (KIP-599): how fast a client may create and delete partitions.

``controller_mutation_rate`` is in partitions per second, per user / client id
with the other client quotas' precedence. Each client has a token bucket
holding at most ``rate × quota.window.num × quota.window.size.seconds`` tokens,
refilled at the rate; every partition created (CreateTopics,
CreatePartitions) or deleted (DeleteTopics) takes one. Clients that know the
quota (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+) are held
strictly: while their bucket is below zero each further topic is refused
THROTTLING_QUOTA_EXCEEDED (a topic admitted may take the bucket below zero).
Older clients are let through and only throttled. Either way the response's
throttle time is how long until the bucket is back at zero.

Threads: the event loop only.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from broker.quota.client_quota_configs import ClientQuotaConfigs
from broker.quota.client_quota_entity import CONTROLLER_MUTATION_RATE, metered_as

#: Kafka's ThrottlingQuotaExceededException message.
THROTTLING_QUOTA_EXCEEDED_MESSAGE = "The throttling quota has been exceeded."


@dataclass(slots=True)
class TokenBucket:
    rate: float
    burst: float
    tokens: float
    last_s: float

    def refill(self, now_s: float) -> float:
        self.tokens = min(self.burst, self.tokens + self.rate * (now_s - self.last_s))
        self.last_s = now_s
        return self.tokens

    def throttle_ms(self) -> int:
        return 0 if self.tokens >= 0 else math.ceil(-self.tokens / self.rate * 1000)


@dataclass(frozen=True, slots=True)
class Admission:
    #: Topics refused THROTTLING_QUOTA_EXCEEDED (strict clients only).
    refused: frozenset[str]
    throttle_time_ms: int


class ControllerMutationQuotaManager:
    def __init__(self, configs: ClientQuotaConfigs, num_samples: int, window_size_seconds: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._configs = configs
        self._burst_seconds = num_samples * window_size_seconds
        self._clock = clock
        self._buckets: dict[tuple[str, str], TokenBucket] = {}

    @property
    def enabled(self) -> bool:
        return self._configs.uses(CONTROLLER_MUTATION_RATE)

    def admit(self, user: str, client_id: str, mutations: Sequence[tuple[str, int]], strict: bool) -> Admission:
        """Take each topic's partition mutations from the client's bucket, in request order."""
        found = self._configs.resolve(CONTROLLER_MUTATION_RATE, user, client_id)
        if found is None:
            return Admission(frozenset(), 0)
        entity, rate = found
        bucket = self._bucket(metered_as(entity, user, client_id), rate)
        now = self._clock()
        refused = set()
        for topic, partitions in mutations:
            if strict and bucket.refill(now) < 0:
                refused.add(topic)
                continue
            bucket.refill(now)
            bucket.tokens -= partitions
        return Admission(frozenset(refused), bucket.throttle_ms())

    def _bucket(self, metered: tuple[str, str], rate: float) -> TokenBucket:
        bucket = self._buckets.get(metered)
        burst = rate * self._burst_seconds
        if bucket is None:
            bucket = self._buckets[metered] = TokenBucket(rate, burst, burst, self._clock())
        elif bucket.rate != rate:  # the quota changed: the new rate from now on
            bucket.refill(self._clock())
            bucket.rate, bucket.burst = rate, burst
            bucket.tokens = min(bucket.tokens, burst)
        return bucket
