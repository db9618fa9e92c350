"""AlterPartitionManager: a partition leader's ISR changes, sent to the controller.

Kafka's AlterPartitionManager (KIP-497): partition leaders ``submit`` proposed
ISR changes (``replication.partition_state.LeaderAndIsr``); they are batched
into one AlterPartition request to the controller, with at most one request in
flight. Each submission's future completes with the state the controller
recorded, or fails with :class:`AlterPartitionError` carrying the partition's
error code (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION,
OPERATION_NOT_ATTEMPTED...): the partition decides what that means.

What the controller did not answer is sent again after a backoff: a lost
connection, a timeout, a top-level error (NOT_CONTROLLER: the controller moved,
so the next attempt asks ``controller_node_fn`` again and connects to the new
one; STALE_BROKER_EPOCH...), a partition missing from the answer.
A partition with a submission still unanswered refuses another
(OPERATION_NOT_ATTEMPTED), as Kafka does.

One background task sends; it is created on the first submission and
cancelled by ``shutdown``. Event loop only.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from client.async_connection import AsyncBrokerConnection
from client.errors import KafkaClientError, NoCompatibleVersionError
from client.sasl import SaslSettings
from protocol.errors import ErrorCode
from protocol.messages.alter_partition import (
    AlterPartitionRequest,
    AlterPartitionRequestPartitionData,
    AlterPartitionRequestTopicData,
    AlterPartitionResponse,
    BrokerState,
)
from replication.partition_state import LeaderAndIsr

log = logging.getLogger(__name__)

API_KEY = 56
#: The newest AlterPartition this broker speaks (NewIsrWithEpochs, KIP-903).
MAX_VERSION = 3
#: (controller id, host, port) of the controller's inter-broker endpoint, or None when unknown.
ControllerNode = tuple[int, str, int]
TopicPartition = tuple[str, int]
ZERO_UUID = uuid.UUID(int=0)


class AlterPartitionError(Exception):
    """The controller refused one partition's ISR change."""

    def __init__(self, error_code: int, message: str = "") -> None:
        super().__init__(message or f"AlterPartition failed with error {error_code}")
        self.error_code = error_code


@dataclass(slots=True)
class _Item:
    topic: str
    topic_id: uuid.UUID
    partition_index: int
    proposal: LeaderAndIsr
    future: asyncio.Future[LeaderAndIsr]


class AlterPartitionManager:
    def __init__(self, broker_id: int, broker_epoch_fn: Callable[[], int],
                 controller_node_fn: Callable[[], ControllerNode | None], *,
                 retry_backoff_ms: int = 50, request_timeout_ms: int = 30_000,
                 broker_epochs_fn: Callable[[int], int] | None = None,
                 ssl_context: ssl.SSLContext | None = None, sasl: SaslSettings | None = None) -> None:
        """``ssl_context``: TLS to the controller (an SSL inter-broker listener); None for plain TCP."""
        self.broker_id = broker_id
        self.ssl_context = ssl_context
        self.sasl = sasl
        self._broker_epoch_fn = broker_epoch_fn
        self._controller_node_fn = controller_node_fn
        #: A follower's broker epoch for NewIsrWithEpochs (v3); -1 (not checked) when not given.
        self._broker_epochs_fn = broker_epochs_fn
        self.retry_backoff = retry_backoff_ms / 1000
        self.request_timeout = request_timeout_ms / 1000
        #: Submissions not yet answered (sent or not), by partition.
        self._unsent: dict[TopicPartition, _Item] = {}
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._connection: AsyncBrokerConnection | None = None
        self._connected_to: ControllerNode | None = None
        self._closed = False

    # -- submission ------------------------------------------------------------------
    def submit(self, topic: str, topic_id: uuid.UUID, partition_index: int,
               proposal: LeaderAndIsr) -> asyncio.Future[LeaderAndIsr]:
        """Queue an ISR change; the future has the controller's answer."""
        future: asyncio.Future[LeaderAndIsr] = asyncio.get_running_loop().create_future()
        tp = (topic, partition_index)
        if self._closed:
            future.set_exception(AlterPartitionError(ErrorCode.OPERATION_NOT_ATTEMPTED, "shutting down"))
            return future
        if tp in self._unsent:
            future.set_exception(AlterPartitionError(
                ErrorCode.OPERATION_NOT_ATTEMPTED, f"an ISR change of {topic}-{partition_index} is in flight"))
            return future
        self._unsent[tp] = _Item(topic, topic_id, partition_index, proposal, future)
        self._wakeup.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._send_loop(),
                                                                name=f"alter-partition-{self.broker_id}")
        return future

    @property
    def pending(self) -> int:
        return len(self._unsent)

    # -- sending -----------------------------------------------------------------------
    async def _send_loop(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            if not self._unsent:
                continue
            batch = dict(self._unsent)
            try:
                response = await self._send(batch)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # connection, timeout, version: all answered by retrying
                log.info("[AlterPartitionManager broker=%d] AlterPartition of %d partition(s) failed, retrying: %s",
                         self.broker_id, len(batch), exc)
                self._disconnect()
                await self._retry_later()
                continue
            if self._handle_response(batch, response):
                await self._retry_later()

    async def _retry_later(self) -> None:
        await asyncio.sleep(self.retry_backoff)
        if self._unsent:
            self._wakeup.set()

    async def _connection_to_controller(self) -> AsyncBrokerConnection:
        node = self._controller_node_fn()
        if node is None:
            raise KafkaClientError("no controller known")
        connection = self._connection
        if connection is not None and connection.connected and self._connected_to == node:
            return connection
        self._disconnect()
        _, host, port = node
        connection = AsyncBrokerConnection(host, port, node_id=node[0],
                                           client_id=f"broker-{self.broker_id}-alter-partition",
                                           request_timeout=self.request_timeout, ssl_context=self.ssl_context,
                                           sasl=self.sasl)
        await connection.connect()
        self._connection, self._connected_to = connection, node
        return connection

    def _disconnect(self) -> None:
        if self._connection is not None:
            self._connection.close()
        self._connection = self._connected_to = None

    def _version(self, connection: AsyncBrokerConnection) -> int:
        try:
            return connection.version_for(API_KEY, max_version=MAX_VERSION)
        except NoCompatibleVersionError:
            # The ZooKeeper-mode inter-broker APIs are not listed in a pafka broker's ApiVersions
            # answer (clients never send them): speak our newest, which the controller serves.
            return MAX_VERSION

    async def _send(self, batch: dict[TopicPartition, _Item]) -> AlterPartitionResponse:
        connection = await self._connection_to_controller()
        version = self._version(connection)
        request = self.build_request(batch.values(), version)
        response = await connection.request(request, version=version)
        assert isinstance(response, AlterPartitionResponse)
        return response

    def build_request(self, items: Iterable[_Item], version: int) -> AlterPartitionRequest:
        topics: dict[uuid.UUID, AlterPartitionRequestTopicData] = {}
        epochs = self._broker_epochs_fn
        for item in items:
            topic = topics.get(item.topic_id)
            if topic is None:
                topic = topics[item.topic_id] = AlterPartitionRequestTopicData(
                    topic_name=item.topic, topic_id=item.topic_id, partitions=[])
            proposal = item.proposal
            data = AlterPartitionRequestPartitionData(
                partition_index=item.partition_index, leader_epoch=proposal.leader_epoch,
                leader_recovery_state=proposal.leader_recovery_state, partition_epoch=proposal.partition_epoch)
            if version >= 3:
                data.new_isr_with_epochs = [
                    BrokerState(broker_id=b, broker_epoch=epochs(b) if epochs is not None else -1) for b in proposal.isr]
            else:
                data.new_isr = list(proposal.isr)
            topic.partitions.append(data)
        return AlterPartitionRequest(broker_id=self.broker_id, broker_epoch=self._broker_epoch_fn(),
                                     topics=list(topics.values()))

    def _handle_response(self, batch: dict[TopicPartition, _Item], response: AlterPartitionResponse) -> bool:
        """Complete what the controller answered; True when something must be sent again."""
        if response.error_code != ErrorCode.NO_ERROR:
            if response.error_code == ErrorCode.NOT_CONTROLLER:
                self._disconnect()  # ask controller_node_fn again: the controller moved
            log.info("[AlterPartitionManager broker=%d] AlterPartition answered %s, retrying", self.broker_id,
                     _name(response.error_code))
            return True
        # v2+ answer by topic id, v0-v1 by name.
        by_id: dict[tuple[uuid.UUID | str, int], tuple[TopicPartition, _Item]] = {}
        for tp, item in batch.items():
            by_id[(item.topic_id, item.partition_index)] = by_id[tp] = (tp, item)
        for topic in response.topics:
            for answer in topic.partitions:
                key = (topic.topic_id, answer.partition_index) if topic.topic_id != ZERO_UUID \
                    else (topic.topic_name, answer.partition_index)
                found = by_id.pop(key, None)
                if found is None:
                    continue
                tp, item = found
                by_id.pop(tp, None)
                by_id.pop((item.topic_id, item.partition_index), None)
                if self._unsent.get(tp) is item:
                    del self._unsent[tp]
                if item.future.done():
                    continue
                if answer.error_code != ErrorCode.NO_ERROR:
                    item.future.set_exception(AlterPartitionError(answer.error_code))
                else:
                    item.future.set_result(LeaderAndIsr(answer.leader_id, answer.leader_epoch, tuple(answer.isr),
                                                        answer.partition_epoch, answer.leader_recovery_state))
        return bool(by_id)  # partitions the controller did not answer go again

    async def shutdown(self) -> None:
        """Cancel the sender and fail every unanswered submission."""
        self._closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self._disconnect()
        unsent, self._unsent = self._unsent, {}
        for item in unsent.values():
            if not item.future.done():
                item.future.set_exception(AlterPartitionError(ErrorCode.OPERATION_NOT_ATTEMPTED, "shutting down"))


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
