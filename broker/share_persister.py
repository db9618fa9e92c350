"""The broker's Persister: share-partition state kept by the share coordinator, wherever it runs.

Kafka's DefaultStatePersister. The state of (group, topic id, partition) is
kept by the leader of its ``__share_group_state`` partition
(:meth:`ShareCoordinator.partition_for`). One code path for a lone broker and
a cluster member: the topic is created on first use (as FindCoordinator
creates it), the broker's :class:`~broker.membership.CoordinatorPlacement`
names the coordinator's broker, and that broker is either this one (the
local share coordinator is called directly) or another, which is sent the
persister API (InitializeShareGroupState ... ReadShareGroupStateSummary) on
the inter-broker listener through its own
:class:`~broker.inter_broker_channel.InterBrokerChannel` (one connection per broker).

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
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from broker.inter_broker_channel import REQUEST_TIMEOUT_S, InterBrokerChannel
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
from client.errors import KafkaClientError
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
#: The persister APIs' version sent: v0 of each, which every broker serving them accepts.
REQUEST_VERSION = 0


class BrokerSharePersister:
    """The :class:`~coordinator.share.persister.Persister` the broker's share partitions use."""

    def __init__(self, broker_id: int, coordinator: ShareCoordinator, placement: CoordinatorPlacement,
                 ensure_topic: Callable[[], Awaitable[ErrorCode]], channel: InterBrokerChannel, *,
                 timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        """``channel``: the connections to other share coordinators' brokers (the persister shuts it down)."""
        self.broker_id = broker_id
        self.coordinator = coordinator
        self.placement = placement
        #: Creates __share_group_state when missing: NO_ERROR once usable here.
        self.ensure_topic = ensure_topic
        self.channel = channel
        self.timeout_s = timeout_s
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
        node = self.placement.coordinator_node(SHARE_GROUP_STATE_TOPIC_NAME, partition, self.channel.listener_name)
        if node is None:
            self._topic_ready = False  # created again if it was deleted meanwhile
            raise PersisterError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.")
        if node.node_id == self.broker_id:
            return await local(self.coordinator)
        return outcome(await self._remote(node.node_id, request))

    async def _remote(self, node_id: int, request: Message) -> Message:
        """The broker's answer; PersisterError NETWORK_EXCEPTION when it cannot be had."""
        try:
            return await self.channel.request(node_id, request, version=REQUEST_VERSION)
        except (KafkaClientError, OSError) as exc:  # a timeout is an OSError
            raise PersisterError(ErrorCode.NETWORK_EXCEPTION,
                                 f"The share coordinator's broker {node_id} cannot be reached: {exc}") from None

    async def shutdown(self) -> None:
        await self.channel.shutdown()
