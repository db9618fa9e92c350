"""The client instances of KIP-714: what GetTelemetrySubscriptions hands out and PushTelemetry checks.

A client without an instance id is given a fresh one; each instance is evaluated against the
subscriptions its attributes match (client instance id, client id, software name and version,
source address and port): the union of their metrics (``*`` when one asks for all) and the shortest of
their intervals, or nothing and five minutes when none matches. The subscription id names that
result, so a push made under an older subscription answers UNKNOWN_SUBSCRIPTION_ID and the client asks
again. Requests come at most once a push interval (THROTTLING_QUOTA_EXCEEDED otherwise, except a push
right after a GetTelemetrySubscriptions and the last, terminating, push). A payload larger than
``telemetry.max.bytes`` answers TELEMETRY_TOO_LARGE, one that is not OTLP INVALID_RECORD; the others
reach the :class:`ClientTelemetryCollector`. An instance not heard of for three push intervals (at least
a minute) is forgotten, as Kafka's broker forgets it.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final
from uuid import UUID
from weakref import WeakKeyDictionary

from crc32c import crc32c

from broker.config.client_metrics_config import (
    ALL_SUBSCRIBED_METRICS,
    CLIENT_ID,
    CLIENT_INSTANCE_ID,
    CLIENT_SOFTWARE_NAME,
    CLIENT_SOFTWARE_VERSION,
    CLIENT_SOURCE_ADDRESS,
    CLIENT_SOURCE_PORT,
    DEFAULT_INTERVAL_MS,
)
from broker.telemetry.collector import ClientTelemetryCollector
from broker.telemetry.otlp import InvalidTelemetryPayload, decode_metrics
from broker.telemetry.subscriptions import ClientMetricsSubscriptions
from protocol import compression
from protocol.errors import ErrorCode
from protocol.messages.get_telemetry_subscriptions import GetTelemetrySubscriptionsResponse
from protocol.messages.push_telemetry import PushTelemetryRequest, PushTelemetryResponse

if TYPE_CHECKING:
    from broker.request_context import ClientConnection, RequestContext

#: The compression types the broker accepts, in Kafka's order of preference.
ACCEPTED_COMPRESSION_TYPES: Final = (compression.ZSTD, compression.LZ4, compression.GZIP, compression.SNAPPY)
#: Client instance ids a client may not use (Kafka's Uuid.RESERVED: zero and the metadata topic's).
_RESERVED_IDS: Final = frozenset({UUID(int=0), UUID(int=1)})
_MIN_EXPIRY_MS: Final = 60_000
_GET_AT_ONCE_AFTER: Final = frozenset({ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE})
#: At most this many instances are kept (Kafka's cache size); the least recently heard of goes first.
_MAX_INSTANCES: Final = 16_384


@dataclass(frozen=True, slots=True)
class ClientInformation:
    """What the broker knows of the client a request came from."""

    client_id: str
    software_name: str
    software_version: str
    source_address: str
    source_port: str

    def attributes(self, instance_id: UUID) -> dict[str, str | None]:
        """The attributes a subscription's ``match`` selectors name."""
        return {CLIENT_INSTANCE_ID: str(instance_id), CLIENT_ID: self.client_id,
                CLIENT_SOFTWARE_NAME: self.software_name, CLIENT_SOFTWARE_VERSION: self.software_version,
                CLIENT_SOURCE_ADDRESS: self.source_address, CLIENT_SOURCE_PORT: self.source_port}

    def labels(self, instance_id: UUID) -> dict[str, str]:
        return {"client_id": self.client_id, "client_software_name": self.software_name,
                "client_software_version": self.software_version, "client_instance_id": str(instance_id)}


@dataclass(slots=True)
class ClientInstance:
    instance_id: UUID
    client: ClientInformation
    subscription_id: int
    subscription_version: int
    metrics: list[str]
    push_interval_ms: int
    last_get_ms: float = -math.inf
    last_push_ms: float = -math.inf
    last_seen_ms: float = -math.inf
    terminating: bool = False
    #: The error of the instance's last request: after UNKNOWN_SUBSCRIPTION_ID or
    #: UNSUPPORTED_COMPRESSION_TYPE the client may ask for its subscription at once.
    last_error: ErrorCode = ErrorCode.NO_ERROR
    #: Kafka's per-instance client-metrics counts: requests throttled, payloads exported, payloads refused.
    throttles: int = 0
    exports: int = 0
    export_errors: int = 0

    @property
    def expiry_ms(self) -> int:
        return max(_MIN_EXPIRY_MS, 3 * self.push_interval_ms)

    def may_get(self, now_ms: float) -> bool:
        """A push interval since the last request, or the last push was refused for a reason only a new
        subscription mends."""
        return (now_ms - max(self.last_get_ms, self.last_push_ms) >= self.push_interval_ms
                or self.last_error in _GET_AT_ONCE_AFTER)

    def accept_push(self, now_ms: float) -> bool:
        """A push right after a GetTelemetrySubscriptions is accepted whenever it comes: the client
        pushes its first metrics somewhere within the interval it was just given."""
        if self.last_get_ms > self.last_push_ms or now_ms - self.last_push_ms >= self.push_interval_ms:
            self.last_push_ms = now_ms
            return True
        return False


def subscription_id(metrics: list[str], interval_ms: int, instance_id: UUID) -> int:
    """A signed 32-bit id of (metrics, interval) for this instance: it changes when either does."""
    digest = crc32c(f"{sorted(metrics)}{interval_ms}".encode())
    id_hash = (instance_id.int >> 96) ^ (instance_id.int >> 64) ^ (instance_id.int >> 32) ^ instance_id.int
    value = (digest ^ id_hash) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


class ClientMetricsManager:
    def __init__(self, subscriptions: ClientMetricsSubscriptions, collector: ClientTelemetryCollector,
                 telemetry_max_bytes: Callable[[], int], clock: Callable[[], float] = time.monotonic) -> None:
        self.subscriptions = subscriptions
        self.collector = collector
        self._telemetry_max_bytes = telemetry_max_bytes
        self._clock = clock
        #: Instances by id, least recently heard of first.
        self._instances: dict[UUID, ClientInstance] = {}
        self._next_expiry_ms = -math.inf
        #: Pushes under an outdated subscription (Kafka's unknown-subscription-request count).
        self.unknown_subscription_requests = 0
        #: Each connection's client software (name, version), as its ApiVersions request named it.
        self._software: WeakKeyDictionary[ClientConnection, tuple[str, str]] = WeakKeyDictionary()

    def note_client_software(self, connection: ClientConnection, name: str, version: str) -> None:
        self._software[connection] = (name, version)

    def client_information(self, ctx: RequestContext) -> ClientInformation:
        name, version = self._software.get(ctx.connection, ("", ""))
        return ClientInformation(client_id=ctx.client_id or "", software_name=name, software_version=version,
                                 source_address=ctx.connection.client_host,
                                 source_port=ctx.connection.peer.rpartition(":")[2])

    def _now_ms(self) -> float:
        return self._clock() * 1000.0

    def instance(self, instance_id: UUID) -> ClientInstance | None:
        return self._instances.get(instance_id)

    def _evaluate(self, instance_id: UUID, client: ClientInformation) -> ClientInstance:
        version = self.subscriptions.version
        attributes = client.attributes(instance_id)
        interval = DEFAULT_INTERVAL_MS
        metrics: set[str] = set()
        for subscription in self.subscriptions.subscriptions():
            if subscription.matches(attributes):
                metrics |= subscription.metrics
                interval = min(interval, subscription.interval_ms)
        wanted = [ALL_SUBSCRIBED_METRICS] if ALL_SUBSCRIBED_METRICS in metrics else sorted(metrics)
        return ClientInstance(instance_id, client, subscription_id(wanted, interval, instance_id), version, wanted,
                              interval)

    def _expire(self, now_ms: float) -> None:
        """At most once a second: a look at every instance costs more than a request should."""
        if now_ms < self._next_expiry_ms:
            return
        self._next_expiry_ms = now_ms + 1000.0
        for instance_id, instance in list(self._instances.items()):
            if now_ms - instance.last_seen_ms > instance.expiry_ms:
                del self._instances[instance_id]
                self.collector.forget(instance_id)

    def _make_room(self) -> None:
        while len(self._instances) >= _MAX_INSTANCES:
            self.collector.forget(self._instances.pop(next(iter(self._instances))).instance_id)

    def _instance_for(self, instance_id: UUID, client: ClientInformation, now_ms: float) -> ClientInstance:
        """The instance (new, or evaluated again when the subscriptions changed), marked as heard of."""
        self._expire(now_ms)
        if instance_id not in self._instances:
            self._make_room()
        old = self._instances.pop(instance_id, None)
        if old is None:
            instance = self._evaluate(instance_id, client)
        elif old.subscription_version < self.subscriptions.version:
            # Evaluated again, with fresh request times as Kafka's new instance has; its counts go on.
            instance = self._evaluate(instance_id, old.client)
            instance.throttles, instance.exports, instance.export_errors = old.throttles, old.exports, old.export_errors
        else:
            instance = old
        instance.last_seen_ms = now_ms
        self._instances[instance_id] = instance
        return instance

    def get_subscriptions(self, requested_id: UUID, client: ClientInformation) -> GetTelemetrySubscriptionsResponse:
        now_ms = self._now_ms()
        instance_id = requested_id if requested_id != UUID(int=0) else self._new_instance_id()
        instance = self._instance_for(instance_id, client, now_ms)
        if not instance.may_get(now_ms):
            instance.throttles += 1
            return GetTelemetrySubscriptionsResponse(error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED)
        instance.last_get_ms = now_ms
        instance.last_error = ErrorCode.NO_ERROR
        return GetTelemetrySubscriptionsResponse(
            error_code=ErrorCode.NO_ERROR, client_instance_id=instance_id, subscription_id=instance.subscription_id,
            accepted_compression_types=list(ACCEPTED_COMPRESSION_TYPES), push_interval_ms=instance.push_interval_ms,
            telemetry_max_bytes=self._telemetry_max_bytes(), delta_temporality=True,
            requested_metrics=list(instance.metrics))

    def _new_instance_id(self) -> UUID:
        while True:
            candidate = uuid.uuid4()
            if candidate not in self._instances and candidate not in _RESERVED_IDS:
                return candidate

    def _push_error(self, request: PushTelemetryRequest, instance: ClientInstance, now_ms: float) -> ErrorCode:
        """Kafka's checks of a push, in Kafka's order."""
        if instance.terminating:
            return ErrorCode.INVALID_REQUEST
        if not instance.accept_push(now_ms) and not request.terminating:
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED
        if request.subscription_id != instance.subscription_id:
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        if request.compression_type not in (compression.NONE, *ACCEPTED_COMPRESSION_TYPES):
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        if len(request.metrics) > self._telemetry_max_bytes():
            return ErrorCode.TELEMETRY_TOO_LARGE
        return ErrorCode.NO_ERROR

    def push(self, request: PushTelemetryRequest, client: ClientInformation) -> PushTelemetryResponse:
        instance_id = request.client_instance_id
        if instance_id in _RESERVED_IDS:
            return PushTelemetryResponse(error_code=ErrorCode.INVALID_REQUEST)
        now_ms = self._now_ms()
        instance = self._instance_for(instance_id, client, now_ms)
        try:
            error = self._push_error(request, instance, now_ms)
        finally:
            instance.terminating = request.terminating
        if error == ErrorCode.THROTTLING_QUOTA_EXCEEDED:
            instance.throttles += 1
        elif error == ErrorCode.UNKNOWN_SUBSCRIPTION_ID:
            self.unknown_subscription_requests += 1
        if error == ErrorCode.NO_ERROR and request.metrics:
            try:
                points = decode_metrics(request.metrics, request.compression_type)
            except InvalidTelemetryPayload:
                error = ErrorCode.INVALID_RECORD
                instance.export_errors += 1
            else:
                instance.exports += 1
                self.collector.record(instance_id, instance.client.labels(instance_id), points,
                                      instance.expiry_ms / 1000.0)
        instance.last_error = error
        return PushTelemetryResponse(error_code=error)

    def clients(self) -> Mapping[UUID, ClientInstance]:
        return dict(self._instances)
