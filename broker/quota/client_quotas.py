"""The broker's client quota managers, and how a request's usage throttles its client.

Kafka's QuotaManagers (produce, fetch, request) and the part of KafkaApis that
records each request's usage: a Produce its size in bytes
(``producer_byte_rate``), a consumer's Fetch the bytes answered
(``consumer_byte_rate``), every client request the time its handler ran, in
percent of a second (``request_percentage``). A throttled request's response
carries ``throttle_time_ms`` and its connection reads nothing more for that
long (KIP-219: the broker mutes the channel). A client too old to throttle
itself (before KIP-219's versions) gets its response only after the delay.

One difference from Kafka: a consumer's Fetch that puts it over its quota still
carries its records (Kafka answers it empty and un-records the bytes, so the
client fetches them again after the delay); the mute that follows holds the
consumer to its rate all the same (1.02 MiB/s measured against 1 MiB/s), and
a fetch session never has to forget what it was sent.

With no quota configured anywhere, KafkaApis does not come here at all.
Requests between brokers (cluster actions, follower fetches) and the
authentication exchange are exempt, as in Kafka.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

from broker.quota.client_quota_configs import ClientQuotaConfigs
from broker.quota.client_quota_entity import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE
from broker.quota.client_quota_manager import ClientQuotaManager
from broker.quota.controller_mutation_quota import Admission, ControllerMutationQuotaManager
from protocol.primitives import Message

if TYPE_CHECKING:
    from broker.request_context import RequestContext

PRODUCE: Final = 0
FETCH: Final = 1
#: LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown, SaslHandshake, ApiVersions,
#: WriteTxnMarkers, SaslAuthenticate, AlterPartition: never throttled.
EXEMPT_API_KEYS: Final = frozenset({4, 5, 6, 7, 17, 18, 27, 36, 56})
#: KIP-219: from these versions a client throttles itself on throttle_time_ms, so the response
#: leaves at once; older versions get their response after the delay. APIs newer than Kafka 2.0
#: are not listed: every version of theirs throttles itself.
CLIENT_THROTTLES_FROM: Final = {
    0: 6, 1: 8, 2: 3, 3: 6, 8: 4, 9: 4, 10: 2, 11: 3, 12: 2, 13: 2, 14: 2, 15: 2, 16: 2, 19: 3, 20: 2,
    21: 1, 22: 1, 23: 2, 24: 1, 25: 1, 26: 1, 28: 1, 29: 1, 30: 1, 31: 1, 32: 2, 33: 1, 34: 1, 35: 1,
    37: 1, 42: 1, 43: 1,
}

Handler = Callable[["RequestContext", Any, Any], Any]


def client_throttles_itself(api_key: int, version: int) -> bool:
    return version >= CLIENT_THROTTLES_FROM.get(api_key, 0)


def response_bytes(response: Any) -> int:
    """The record bytes of a Fetch response (what a consumer quota counts)."""
    total = 0
    for topic in response.responses:
        for partition in topic.partitions:
            if partition.records is not None:
                total += len(partition.records)  # bytes, or a FileRange of the segment
    return total


class ClientQuotas:
    def __init__(self, configs: ClientQuotaConfigs, num_samples: int, window_size_seconds: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.configs = configs
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, configs, num_samples, window_size_seconds, clock)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, configs, num_samples, window_size_seconds, clock)
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, configs, num_samples, window_size_seconds, clock)
        self.controller_mutation = ControllerMutationQuotaManager(configs, num_samples, window_size_seconds, clock)

    @property
    def enabled(self) -> bool:
        return (self.produce.enabled or self.fetch.enabled or self.request.enabled
                or self.controller_mutation.enabled)

    def admit_mutations(self, ctx: RequestContext, mutations: list[tuple[str, int]], strict: bool) -> Admission:
        """CreateTopics, CreatePartitions and DeleteTopics: which topics the client's
        controller_mutation_rate refuses, and its throttle time (see controller_mutation_quota)."""
        if not self.controller_mutation.enabled:
            return Admission(frozenset(), 0)
        return self.controller_mutation.admit(ctx.principal.name, ctx.client_id or "", mutations, strict)

    def handle(self, ctx: RequestContext, handler: Handler, services: Any, body: Any) -> Any:
        """Run the handler, record the request's usage and throttle its client if over a quota."""
        api_key = ctx.request.api_key
        if api_key in EXEMPT_API_KEYS or (api_key == FETCH and _is_follower_fetch(ctx, body)):
            return handler(ctx, services, body)
        user, client_id = ctx.principal.name, ctx.client_id or ""
        started = time.perf_counter()
        result = handler(ctx, services, body)
        throttle_ms = 0
        if self.request.enabled:
            # Kafka's nanosToPercentage: one second of handler time is 100 (percent of one thread).
            throttle_ms = self.request.record_and_get_throttle_time_ms(
                user, client_id, (time.perf_counter() - started) * 100.0)
        if api_key == PRODUCE and self.produce.enabled:
            throttle_ms = max(throttle_ms, self.produce.record_and_get_throttle_time_ms(user, client_id, ctx.size))
        if result is not None and not isinstance(result, Message) and inspect.isawaitable(result):
            return self._when_answered(ctx, result, throttle_ms, user, client_id)
        return self._throttle(ctx, result, throttle_ms, user, client_id)

    async def _when_answered(self, ctx: RequestContext, answering: Awaitable[Any], throttle_ms: int, user: str,
                             client_id: str) -> Any:
        response = await answering
        throttled = self._throttle(ctx, response, throttle_ms, user, client_id)
        return (await throttled) if inspect.isawaitable(throttled) else throttled

    def _throttle(self, ctx: RequestContext, response: Any, throttle_ms: int, user: str, client_id: str) -> Any:
        if ctx.request.api_key == FETCH and response is not None and self.fetch.enabled:
            throttle_ms = max(throttle_ms, self.fetch.record_and_get_throttle_time_ms(
                user, client_id, response_bytes(response)))
        if response is not None and hasattr(response, "throttle_time_ms"):
            # A handler's own throttle (controller_mutation_rate) mutes the connection too.
            throttle_ms = max(response.throttle_time_ms, throttle_ms)
            response.throttle_time_ms = throttle_ms
        if throttle_ms <= 0:
            return response
        ctx.connection.throttle(throttle_ms)
        if response is None or client_throttles_itself(ctx.request.api_key, ctx.api_version):
            return response
        return _after(throttle_ms, response)


async def _after(delay_ms: int, response: Any) -> Any:
    await asyncio.sleep(delay_ms / 1000.0)
    return response


def _is_follower_fetch(ctx: RequestContext, body: Any) -> bool:
    replica_id = body.replica_state.replica_id if ctx.api_version >= 15 else body.replica_id
    return bool(replica_id >= 0)
