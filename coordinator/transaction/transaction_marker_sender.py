"""Transaction markers for partitions led by other brokers: WriteTxnMarkers over the network.

Kafka's TransactionMarkerChannelManager keeps one queue per destination
broker and sends whatever is queued for a broker as one WriteTxnMarkers
request to that broker's inter-broker listener. :class:`RemoteMarkerSender`
is that half of it, behind the :class:`MarkerSender` interface the channel
manager (``transaction_marker_channel_manager``) already sends through:

- a marker for a partition this broker leads takes the local path
  (:class:`LocalMarkerSender`, the replica manager), as on a lone broker;
- every other destination has a queue and one drain task: the markers queued
  while a request is in flight go together in the next one (one marker per
  producer id in a request, so answers are never ambiguous);
- a lost connection or a request that times out fails every marker of the
  request with ``ConnectionError``: the channel manager then looks the leaders
  up again and retries, and completes a transaction only when every marker is
  acknowledged (NOT_LEADER_OR_FOLLOWER and the like come back as answers and
  are retried the same way).

:class:`ClusterLeaderLookup` gives the channel manager the leaders from the
broker's metadata (a :class:`~coordinator.common.partition_leader.PartitionLeaderLookup`)
and remembers where each leader listens, so the sender knows where to connect.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from client.async_connection import AsyncBrokerConnection
from client.errors import KafkaClientError
from client.sasl import SaslSettings
from coordinator.common.partition_leader import PartitionLeaderLookup, TopicPartitionCount
from coordinator.transaction.transaction_marker_channel_manager import MarkerErrors, MarkerSender
from coordinator.transaction.transaction_metadata import TopicPartition
from protocol.errors import ErrorCode
from protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from replication.replica_manager import ReplicaManager, TxnMarker

log = logging.getLogger(__name__)

#: WriteTxnMarkers v1 (flexible): every Kafka broker since 2.7 and pafka's handler serve it.
WRITE_TXN_MARKERS_VERSION = 1
WRITE_TXN_MARKERS_API_KEY = 27
#: Kafka's socket.connection.setup.timeout.ms default.
CONNECT_TIMEOUT_S = 10.0
RESPONSE_MARGIN_S = 5.0


class ClusterLeaderLookup:
    """The channel manager's :class:`LeaderLookup` in a cluster.

    This broker's own leadership (the replica manager) answers first; any other
    partition is looked up in the cluster's metadata on ``listener_name`` (the
    inter-broker listener). A topic the metadata does not know, or a partition
    beyond its count, is deleted (-1: its marker is dropped, as Kafka drops it);
    a known partition without a live leader is None (retried later).
    """

    def __init__(self, broker_id: int, replica_manager: ReplicaManager, partition_leader: PartitionLeaderLookup,
                 partition_count: TopicPartitionCount, listener_name: str) -> None:
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.partition_leader = partition_leader
        self.partition_count = partition_count
        self.listener_name = listener_name
        #: Where each leader seen last listened (node id → host, port).
        self.endpoints: dict[int, tuple[str, int]] = {}

    def __call__(self, tp: TopicPartition) -> int | None:
        hosted = self.replica_manager.get_partition(*tp)
        if hosted is not None and hosted.is_leader:
            return self.broker_id
        count = self.partition_count(tp[0])
        if count is None or not 0 <= tp[1] < count:
            return -1
        leader = self.partition_leader(tp[0], tp[1], self.listener_name)
        if leader is None or leader.node_id < 0:
            return None
        self.endpoints[leader.node_id] = (leader.host, leader.port)
        return leader.node_id

    def endpoint(self, node_id: int) -> tuple[str, int] | None:
        return self.endpoints.get(node_id)


@dataclass(slots=True)
class _Queued:
    markers: Sequence[TxnMarker]
    timeout_ms: int
    future: asyncio.Future[MarkerErrors]


@dataclass(slots=True)
class _Destination:
    """One broker's queue (Kafka's TxnMarkerQueue), its drain task and its connection."""

    node_id: int
    queue: list[_Queued] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    connection: AsyncBrokerConnection | None = None


class RemoteMarkerSender:
    """A :class:`MarkerSender` for a cluster: local partitions through the replica manager, the others
    as WriteTxnMarkers v1 requests to their leaders (one queue and connection per broker)."""

    def __init__(self, broker_id: int, local: MarkerSender,
                 endpoint_of: Callable[[int], tuple[str, int] | None], *, client_id: str | None = None,
                 ssl_context: ssl.SSLContext | None = None, sasl: SaslSettings | None = None) -> None:
        """``ssl_context``: TLS to other brokers (an SSL inter-broker listener); None for plain TCP."""
        self.broker_id = broker_id
        self.ssl_context = ssl_context
        self.sasl = sasl
        self.local = local
        self.endpoint_of = endpoint_of
        self.client_id = client_id or f"broker-{broker_id}-txn-marker-sender"
        self._destinations: dict[int, _Destination] = {}
        self._closed = False

    def _prefix(self) -> str:
        return f"[Transaction Marker Channel Manager {self.broker_id}]:"

    async def send(self, destination: int, markers: Sequence[TxnMarker], timeout_ms: int) -> MarkerErrors:
        if destination == self.broker_id:
            return await self.local.send(destination, markers, timeout_ms)
        if self._closed:
            raise ConnectionError("the marker sender is shut down")
        dest = self._destinations.get(destination)
        if dest is None:
            dest = self._destinations[destination] = _Destination(destination)
        future: asyncio.Future[MarkerErrors] = asyncio.get_running_loop().create_future()
        dest.queue.append(_Queued(markers, timeout_ms, future))
        if dest.task is None or dest.task.done():
            dest.task = asyncio.get_running_loop().create_task(
                self._drain(dest), name=f"txn-marker-sender-{destination}")
        return await future

    # -- one destination ------------------------------------------------------------------------
    async def _drain(self, dest: _Destination) -> None:
        """Send what is queued for ``dest``, a request at a time, until its queue is empty."""
        while dest.queue and not self._closed:
            batch = self._take_batch(dest)
            try:
                answers = await self._send_request(dest, batch)
            except asyncio.CancelledError:
                for queued in batch:
                    if not queued.future.done():
                        queued.future.set_exception(ConnectionError("the marker sender is shut down"))
                raise
            except Exception as exc:  # whatever it was, the callers must hear of it (and retry)
                report = log.info if isinstance(exc, (KafkaClientError, OSError)) else log.warning
                report("%s WriteTxnMarkers to broker %d failed: %r", self._prefix(), dest.node_id, exc)
                self._disconnect(dest)
                for queued in batch:
                    if not queued.future.done():
                        queued.future.set_exception(ConnectionError(f"broker {dest.node_id}: {exc}"))
                continue
            for queued, errors in zip(batch, answers, strict=True):
                if not queued.future.done():
                    queued.future.set_result(errors)

    @staticmethod
    def _take_batch(dest: _Destination) -> list[_Queued]:
        """Everything queued, except a second entry for a producer id already in the request."""
        batch: list[_Queued] = []
        producers: set[int] = set()
        rest: list[_Queued] = []
        for queued in dest.queue:
            ids = {m.producer_id for m in queued.markers}
            if len(ids) == len(queued.markers) and not ids & producers:
                batch.append(queued)
                producers |= ids
            else:
                rest.append(queued)
        if not batch:  # one entry naming a producer twice: it goes alone (answers matched by position)
            batch, rest = [dest.queue[0]], dest.queue[1:]
        dest.queue = rest
        return batch

    async def _connection(self, dest: _Destination) -> AsyncBrokerConnection:
        endpoint = self.endpoint_of(dest.node_id)
        if endpoint is None:
            raise ConnectionError(f"no endpoint known for broker {dest.node_id}")
        connection = dest.connection
        if connection is not None and (not connection.connected
                                       or (connection.address.host, connection.address.port) != endpoint):
            self._disconnect(dest)
            connection = None
        if connection is None:
            connection = AsyncBrokerConnection(endpoint[0], endpoint[1], client_id=self.client_id,
                                               node_id=dest.node_id, ssl_context=self.ssl_context,
                                               sasl=self.sasl)
            await connection.connect(timeout=CONNECT_TIMEOUT_S, negotiate=False)
            dest.connection = connection
        return connection

    async def _send_request(self, dest: _Destination, batch: list[_Queued]) -> list[MarkerErrors]:
        markers = [m for queued in batch for m in queued.markers]
        request = WriteTxnMarkersRequest(markers=[_writable(m) for m in markers])
        # The leader answers REQUEST_TIMED_OUT itself after the markers' timeout: wait a little longer
        # than that, so its answer (retried per partition) wins over a closed connection.
        timeout_s = max(q.timeout_ms for q in batch) / 1000 + RESPONSE_MARGIN_S
        connection = await self._connection(dest)
        response = await connection.request(request, version=WRITE_TXN_MARKERS_VERSION, timeout=timeout_s)
        assert isinstance(response, WriteTxnMarkersResponse)
        per_marker = _marker_errors(markers, response)
        answers: list[MarkerErrors] = []
        at = 0
        for queued in batch:
            answers.append(per_marker[at:at + len(queued.markers)])
            at += len(queued.markers)
        return answers

    def _disconnect(self, dest: _Destination) -> None:
        if dest.connection is not None:
            dest.connection.close()
            dest.connection = None

    async def shutdown(self) -> None:
        self._closed = True
        tasks = [d.task for d in self._destinations.values() if d.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for dest in self._destinations.values():
            self._disconnect(dest)
            for queued in dest.queue:
                if not queued.future.done():
                    queued.future.set_exception(ConnectionError("the marker sender is shut down"))
            dest.queue.clear()


def _writable(marker: TxnMarker) -> WritableTxnMarker:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in marker.partitions:
        by_topic.setdefault(topic, []).append(partition)
    return WritableTxnMarker(
        producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
        transaction_result=marker.committed, coordinator_epoch=marker.coordinator_epoch,
        topics=[WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()])


def _marker_errors(markers: Sequence[TxnMarker], response: WriteTxnMarkersResponse) -> MarkerErrors:
    """One {partition: error} per marker sent, from the response's entries (in request order).

    A partition the response does not mention is an error to retry, never an acknowledgement."""
    if len(response.markers) != len(markers):
        raise ValueError(f"WriteTxnMarkers answered {len(response.markers)} marker(s) for {len(markers)} sent")
    out: MarkerErrors = []
    for marker, result in zip(markers, response.markers, strict=True):
        if result.producer_id != marker.producer_id:
            raise ValueError(f"WriteTxnMarkers answered producer {result.producer_id} for {marker.producer_id}")
        answered = {(t.name, p.partition_index): p.error_code for t in result.topics for p in t.partitions}
        out.append({tp: answered.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR) for tp in marker.partitions})
    return out
