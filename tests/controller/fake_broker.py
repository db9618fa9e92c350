"""A test double of a broker's inter-broker endpoint, for controller unit tests.

A small asyncio server that decodes request frames with pafka's protocol codecs,
answers ApiVersions (listing the controller's APIs), LeaderAndIsr, UpdateMetadata and
StopReplica with success (or an error the test sets), and records every request with
the version it came at. End-to-end tests with real brokers live in the integration suite.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field

from protocol.api import DecodedRequest
from protocol.messages.api_versions import ApiVersion, ApiVersionsResponse
from protocol.messages.leader_and_isr import (
    LeaderAndIsrPartitionError,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LeaderAndIsrTopicError,
)
from protocol.messages.stop_replica import StopReplicaPartitionError, StopReplicaRequest, StopReplicaResponse
from protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse
from protocol.primitives import Message
from tests.in_process import KafkaFrameServer


@dataclass
class Received:
    api_key: int
    version: int
    body: Message


@dataclass
class FakeBroker:
    """Listens on ``host``; ``port`` 0 picks a free one (read it after :meth:`start`)."""

    broker_id: int
    host: str = "127.0.0.1"
    port: int = 0
    #: Inter-broker API ranges listed in ApiVersions (api key -> (min, max)); None lists none.
    api_ranges: dict[int, tuple[int, int]] | None = field(default_factory=lambda: {4: (0, 7), 5: (0, 4), 6: (0, 8)})
    stop_replica_error: int = 0
    received: list[Received] = field(default_factory=list)
    _server: KafkaFrameServer | None = None
    _changed: asyncio.Condition | None = None

    async def start(self) -> FakeBroker:
        self._changed = asyncio.Condition()
        self._server = KafkaFrameServer(self._receive, self.host, self.port)
        self.port = await self._server.start()
        return self

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            await server.close()

    def of_type(self, cls: type[Message]) -> list[Message]:
        return [r.body for r in self.received if isinstance(r.body, cls)]

    async def wait_for(self, cls: type[Message], count: int = 1, timeout: float = 10.0) -> list[Message]:
        """Wait until ``count`` requests of ``cls`` arrived (bounded by ``timeout``)."""
        assert self._changed is not None
        deadline = time.monotonic() + timeout
        async with self._changed:
            while len(self.of_type(cls)) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"broker {self.broker_id}: {len(self.of_type(cls))} {cls.__name__} "
                                         f"within {timeout} s, wanted {count}")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), remaining)
        return self.of_type(cls)

    async def _receive(self, request: DecodedRequest) -> Message:
        """Record the request (ApiVersions aside) and wake the waiters before answering it."""
        body = self._answer(request.body)
        if request.api_key != 18:
            self.received.append(Received(request.api_key, request.api_version, request.body))
            assert self._changed is not None
            async with self._changed:
                self._changed.notify_all()
        return body

    def _answer(self, body: Message) -> Message:
        if isinstance(body, LeaderAndIsrRequest):
            return LeaderAndIsrResponse(topics=[
                LeaderAndIsrTopicError(topic_id=t.topic_id, partition_errors=[
                    LeaderAndIsrPartitionError(topic_name=t.topic_name, partition_index=p.partition_index)
                    for p in t.partition_states
                ])
                for t in body.topic_states
            ])
        if isinstance(body, UpdateMetadataRequest):
            return UpdateMetadataResponse()
        if isinstance(body, StopReplicaRequest):
            return StopReplicaResponse(partition_errors=[
                StopReplicaPartitionError(topic_name=t.topic_name, partition_index=p.partition_index,
                                          error_code=self.stop_replica_error)
                for t in body.topic_states for p in t.partition_states
            ])
        keys = [ApiVersion(api_key=18, min_version=0, max_version=4)]
        keys += [ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in (self.api_ranges or {}).items()]
        return ApiVersionsResponse(api_keys=keys)
