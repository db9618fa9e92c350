"""The broker's Persister: share-partition state kept by the share coordinator, wherever it runs.

Kafka's DefaultStatePersister. The state of (group, topic id, partition) is
kept by the leader of its ``__share_group_state`` partition
(:meth:`ShareCoordinator.partition_for`). One code path for a lone broker and
a cluster member: the topic is created on first use (as FindCoordinator
creates it), the broker's :class:`~broker.membership.CoordinatorPlacement`
names the coordinator's broker, and that broker is either this one (the
local share coordinator is called directly) or another, which is sent the
persister API (InitializeShareGroupState ... ReadShareGroupStateSummary) on
the inter-broker listener, one connection per broker.

Errors that a later try may not have (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS, a lost connection) are retried with a backoff
until ``timeout_s`` passes, as leadership of the state's partition moves or
loads; every other error, and the last retriable one, raises
:class:`~coordinator.share.persister.PersisterError`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import ssl
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from broker.membership import CoordinatorPlacement
from broker.share_state_wire import (
    delete_outcome,
    delete_request,
    initialize_outcome,
    initialize_request,
    is_uninitialized,
    read_outcome,
    read_request,
    summary_outcome,
    summary_request,
    write_outcome,
    write_request,
)
from client.async_connection import AsyncBrokerConnection
from client.errors import KafkaClientError
from client.sasl import SaslSettings
from coordinator.common.internal_topics import SHARE_GROUP_STATE_TOPIC_NAME
from coordinator.share.persister import PersisterError, ShareGroupPartitionState
from coordinator.share.share_coordinator import ShareCoordinator
from coordinator.share.share_coordinator_records import SharePartitionKey
from protocol.errors import ErrorCode
from protocol.primitives import Message

log = logging.getLogger(__name__)

T = TypeVar("T")

RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                       ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NETWORK_EXCEPTION,
                       ErrorCode.REQUEST_TIMED_OUT})
#: Kafka's request.timeout.ms default for inter-broker requests.
REQUEST_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 10.0
#: The persister APIs' version sent: v0 of each, which every broker serving them accepts.
REQUEST_VERSION = 0


class BrokerConnections:
    """One connection per other broker, opened on first use and dropped when it fails."""

    def __init__(self, broker_id: int, ssl_context: ssl.SSLContext | None, sasl: SaslSettings | None) -> None:
        self.broker_id = broker_id
        self.ssl_context = ssl_context
        self.sasl = sasl
        self._connections: dict[int, AsyncBrokerConnection] = {}
        self._closed = False

    async def request(self, node_id: int, host: str, port: int, request: Message) -> Message:
        """The broker's answer; PersisterError NETWORK_EXCEPTION when it cannot be had."""
        try:
            connection = await self._connection(node_id, host, port)
            return await connection.request(request, version=REQUEST_VERSION, timeout=REQUEST_TIMEOUT_S)
        except (KafkaClientError, OSError) as exc:  # a timeout is an OSError
            self.drop(node_id)
            raise PersisterError(ErrorCode.NETWORK_EXCEPTION,
                                 f"The share coordinator's broker {node_id} cannot be reached: {exc}") from None

    async def _connection(self, node_id: int, host: str, port: int) -> AsyncBrokerConnection:
        existing = self._connections.get(node_id)
        if existing is not None and existing.connected and (existing.address.host, existing.address.port) == (host, port):
            return existing
        self.drop(node_id)
        connection = AsyncBrokerConnection(host, port, client_id=f"broker-{self.broker_id}-share-persister",
                                           node_id=node_id, request_timeout=REQUEST_TIMEOUT_S,
                                           ssl_context=self.ssl_context, sasl=self.sasl)
        await connection.connect(timeout=CONNECT_TIMEOUT_S, negotiate=False)
        if self._closed:
            connection.close()
            raise ConnectionError("shut down")
        previous = self._connections.get(node_id)
        if previous is not None and previous.connected:
            connection.close()  # a concurrent request connected first: one connection per broker
            return previous
        self._connections[node_id] = connection
        return connection

    def drop(self, node_id: int) -> None:
        connection = self._connections.pop(node_id, None)
        if connection is not None:
            connection.close()

    def close(self) -> None:
        self._closed = True
        for node_id in list(self._connections):
            self.drop(node_id)


class BrokerSharePersister:
    """The :class:`~coordinator.share.persister.Persister` the broker's share partitions use."""

    def __init__(self, broker_id: int, coordinator: ShareCoordinator, placement: CoordinatorPlacement,
                 ensure_topic: Callable[[], Awaitable[ErrorCode]], listener_name: str, *,
                 ssl_context: ssl.SSLContext | None = None, sasl: SaslSettings | None = None,
                 timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        self.broker_id = broker_id
        self.coordinator = coordinator
        self.placement = placement
        #: Creates __share_group_state when missing: NO_ERROR once usable here.
        self.ensure_topic = ensure_topic
        self.listener_name = listener_name
        self.timeout_s = timeout_s
        self.connections = BrokerConnections(broker_id, ssl_context, sasl)
        #: The topic was usable at the last call: not asked again until no coordinator is named.
        self._topic_ready = False

    async def initialize_state(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                               start_offset: int) -> None:
        await self._call(SharePartitionKey(group_id, topic_id, partition),
                         lambda c: c.initialize_state(group_id, topic_id, partition, state_epoch, start_offset),
                         initialize_request(group_id, topic_id, partition, state_epoch, start_offset),
                         initialize_outcome)

    async def read_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         leader_epoch: int) -> ShareGroupPartitionState | None:
        """As ReadShareGroupState answers, whether the coordinator is here or elsewhere: the state's
        leader epoch is the reader's (the answer carries none)."""
        state = await self._call(SharePartitionKey(group_id, topic_id, partition),
                                 lambda c: c.read_state(group_id, topic_id, partition, leader_epoch),
                                 read_request(group_id, topic_id, partition, leader_epoch),
                                 lambda response: read_outcome(response, leader_epoch))
        return None if state is None else dataclasses.replace(state, leader_epoch=leader_epoch)

    async def write_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                          state: ShareGroupPartitionState) -> None:
        await self._call(SharePartitionKey(group_id, topic_id, partition),
                         lambda c: c.write_state(group_id, topic_id, partition, state),
                         write_request(group_id, topic_id, partition, state), write_outcome)

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        await self._call(SharePartitionKey(group_id, topic_id, partition),
                         lambda c: c.delete_state(group_id, topic_id, partition),
                         delete_request(group_id, topic_id, partition), delete_outcome)

    async def read_state_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                                 leader_epoch: int) -> tuple[int, int, int] | None:
        summary = await self._call(SharePartitionKey(group_id, topic_id, partition),
                                   lambda c: c.read_state_summary(group_id, topic_id, partition, leader_epoch),
                                   summary_request(group_id, topic_id, partition, leader_epoch), summary_outcome)
        if summary is None or is_uninitialized(summary[0], summary[1]):
            return None
        return summary

    async def _call(self, key: SharePartitionKey, local: Callable[[ShareCoordinator], Awaitable[T]],
                    request: Message, outcome: Callable[[Any], T]) -> T:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        backoff = 0.05
        while True:
            try:
                return await self._once(key, local, request, outcome)
            except PersisterError as exc:
                if exc.error_code not in RETRIABLE or loop.time() + backoff > deadline:
                    raise
                log.debug("[SharePersister %d] %s: %s; retrying", self.broker_id, key, exc.message)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    async def _once(self, key: SharePartitionKey, local: Callable[[ShareCoordinator], Awaitable[T]],
                    request: Message, outcome: Callable[[Any], T]) -> T:
        if not self._topic_ready:
            if await self.ensure_topic() != ErrorCode.NO_ERROR:
                raise PersisterError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.")
            self._topic_ready = True
        partition = self.coordinator.partition_for(key)
        node = self.placement.coordinator_node(SHARE_GROUP_STATE_TOPIC_NAME, partition, self.listener_name)
        if node is None:
            self._topic_ready = False  # created again if it was deleted meanwhile
            raise PersisterError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.")
        if node.node_id == self.broker_id:
            return await local(self.coordinator)
        response = await self.connections.request(node.node_id, node.host, node.port, request)
        return outcome(response)

    async def shutdown(self) -> None:
        self.connections.close()
