"""Transaction administration on pafka's client: what kafka-transactions.sh needs (KIP-664).

ListTransactions goes to every broker (each lists the transactional ids it
coordinates), DescribeTransactions to the id's coordinator, DescribeProducers
and WriteTxnMarkers to the partitions' leaders, as Kafka's admin client sends
them. :meth:`TransactionAdmin.find_hanging` is Kafka's ``find-hanging``: a
partition's open transaction is hanging when its coordinator no longer has it
in progress on that partition, so nothing will ever write its marker.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from client.admin import AdminClient
from client.client import KafkaClient
from client.connection import BrokerConnection
from client.errors import KafkaApiError, check_error
from client.groups import find_coordinator
from client.metadata import TopicPartition
from protocol.errors import ErrorCode
from protocol.messages import describe_producers as _dp
from protocol.messages import describe_transactions as _dt
from protocol.messages import list_transactions as _lt
from protocol.messages import write_txn_markers as _wtm
from protocol.request_constants import CoordinatorType

__all__ = ["OpenTransaction", "ProducerState", "TransactionAdmin", "TransactionDescription", "TransactionListing"]

_RETRIABLE = (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR)
_RETRY_BACKOFF_S = 0.1
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str
    coordinator_id: int


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    coordinator_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    transaction_timeout_ms: int
    #: None when no transaction is in progress (the coordinator answers -1).
    transaction_start_time_ms: int | None
    topic_partitions: list[TopicPartition] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    #: None when no marker of this producer was written on the partition yet (-1 on the wire).
    coordinator_epoch: int | None
    #: The first offset of the producer's open transaction on the partition, None if none is open.
    current_transaction_start_offset: int | None


@dataclass(frozen=True, slots=True)
class OpenTransaction:
    topic_partition: TopicPartition
    producer: ProducerState


class TransactionAdmin:
    """Transactions of the cluster ``client`` is connected to."""

    def __init__(self, client: KafkaClient, *, timeout: float = 30.0) -> None:
        self.client = client
        self.timeout = timeout

    # -- coordinators' view -------------------------------------------------------------
    def list_transactions(self, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                          duration_ms: int = -1, transactional_id_pattern: str | None = None
                          ) -> list[TransactionListing]:
        """Every broker's transactions matching all the filters (sorted by transactional id).

        ``duration_ms`` (-1: any) keeps transactions running longer than it;
        ``transactional_id_pattern`` (a regular expression the whole id must
        match; None or "": any) needs ListTransactions v2.
        """
        cluster = self.client.refresh_metadata([])
        request = _lt.ListTransactionsRequest(state_filters=list(states), producer_id_filters=list(producer_ids),
                                              duration_filter=duration_ms,
                                              transactional_id_pattern=transactional_id_pattern or None)
        out: list[TransactionListing] = []
        for node_id in sorted(cluster.brokers):
            conn = self.client.connection(node_id)

            def send(conn: BrokerConnection = conn) -> _lt.ListTransactionsResponse:
                response = conn.request(request)
                assert isinstance(response, _lt.ListTransactionsResponse)
                return response

            response = self._retry(send, lambda r: r.error_code)
            check_error(response.error_code, api_name="ListTransactions")
            out.extend(TransactionListing(t.transactional_id, t.producer_id, t.transaction_state, node_id)
                       for t in response.transaction_states)
        return sorted(out, key=lambda t: t.transactional_id)

    def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        """The coordinator's state of ``transactional_id``; raises TRANSACTIONAL_ID_NOT_FOUND and the like."""
        request = _dt.DescribeTransactionsRequest(transactional_ids=[transactional_id])

        def send() -> tuple[int, _dt.TransactionState]:
            conn = find_coordinator(self.client, transactional_id, CoordinatorType.TRANSACTION, self.timeout)
            response = conn.request(request)
            assert isinstance(response, _dt.DescribeTransactionsResponse)
            (state,) = response.transaction_states
            return conn.node_id if conn.node_id is not None else -1, state

        node_id, s = self._retry(send, lambda answer: answer[1].error_code)
        check_error(s.error_code, api_name="DescribeTransactions")
        return TransactionDescription(
            node_id, transactional_id, s.producer_id, s.producer_epoch, s.transaction_state,
            s.transaction_timeout_ms, None if s.transaction_start_time_ms < 0 else s.transaction_start_time_ms,
            [TopicPartition(t.topic, p) for t in s.topics for p in sorted(t.partitions)])

    # -- partitions' view -----------------------------------------------------------------
    def describe_producers(self, partitions: Iterable[TopicPartition], broker_id: int | None = None
                           ) -> dict[TopicPartition, list[ProducerState]]:
        """The active producers of each partition, as its leader (or the replica on ``broker_id``) keeps them."""
        out: dict[TopicPartition, list[ProducerState]] = {}
        by_broker = ({broker_id: list(partitions)} if broker_id is not None
                     else self.client._group_by_leader(partitions))
        for leader, tps in by_broker.items():
            by_topic: dict[str, list[int]] = {}
            for tp in tps:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            request = _dp.DescribeProducersRequest(
                topics=[_dp.TopicRequest(name=t, partition_indexes=ps) for t, ps in by_topic.items()])
            response = self.client.connection(leader).request(request)
            assert isinstance(response, _dp.DescribeProducersResponse)
            for topic in response.topics:
                for p in topic.partitions:
                    check_error(p.error_code, api_name="DescribeProducers", topic=topic.name,
                                partition=p.partition_index, message=p.error_message)
                    out[TopicPartition(topic.name, p.partition_index)] = [_producer(s) for s in p.active_producers]
        return out

    def abort_transaction(self, tp: TopicPartition, producer_id: int, producer_epoch: int,
                          coordinator_epoch: int) -> None:
        """Write an ABORT marker for the producer's open transaction on ``tp`` (Kafka's Admin.abortTransaction).

        The marker goes to the partition's leader as a coordinator would send it;
        the leader refuses it if the producer has moved to a newer epoch or a
        newer coordinator wrote its markers.
        """
        marker = _wtm.WritableTxnMarker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=False,
            coordinator_epoch=max(coordinator_epoch, 0),
            topics=[_wtm.WritableTxnMarkerTopic(name=tp.topic, partition_indexes=[tp.partition])])
        response = self.client.leader_connection(tp.topic, tp.partition).request(
            _wtm.WriteTxnMarkersRequest(markers=[marker]))
        assert isinstance(response, _wtm.WriteTxnMarkersResponse)
        for result in response.markers:
            for topic in result.topics:
                for p in topic.partitions:
                    check_error(p.error_code, api_name="WriteTxnMarkers", topic=topic.name,
                                partition=p.partition_index)

    def partitions_to_search(self, topic: str | None = None, partition: int | None = None,
                             broker_id: int | None = None, *, include_internal: bool = False
                             ) -> list[TopicPartition]:
        """One partition, a topic's, or those of every topic with a replica on ``broker_id`` (find-hanging's scope)."""
        if topic is not None and partition is not None:
            return [TopicPartition(topic, partition)]
        topics = [topic] if topic is not None else AdminClient(self.client).list_topics(
            include_internal=include_internal)
        self.client.refresh_metadata(topics)
        out = []
        for name in topics:
            for index, p in sorted(self.client.topic_metadata(name).partitions.items()):
                if broker_id is None or broker_id in p.replicas:
                    out.append(TopicPartition(name, index))
        return out

    def find_hanging(self, partitions: Iterable[TopicPartition], max_transaction_timeout_ms: int,
                     now_ms: int | None = None) -> list[OpenTransaction]:
        """Open transactions older than the timeout whose coordinator no longer has them on that partition.

        A transaction counts as old by the time since the producer's last write
        to the partition (as Kafka's tool measures it). Its producer id is
        looked up in every coordinator's list; no transactional id for it, or
        one whose current transaction does not include the partition, means
        no coordinator will ever write its marker.
        """
        now = int(time.time() * 1000) if now_ms is None else now_ms
        candidates = [OpenTransaction(tp, p) for tp, producers in self.describe_producers(partitions).items()
                      for p in producers if p.current_transaction_start_offset is not None
                      and now - p.last_timestamp > max_transaction_timeout_ms]
        if not candidates:
            return []
        wanted = {c.producer.producer_id for c in candidates}
        transactional_ids = {t.producer_id: t.transactional_id
                             for t in self.list_transactions(producer_ids=wanted) if t.producer_id in wanted}
        in_progress: dict[str, set[TopicPartition]] = {}
        for tid in set(transactional_ids.values()):
            try:
                in_progress[tid] = set(self.describe_transaction(tid).topic_partitions)
            except KafkaApiError as exc:
                if exc.error_code != ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                    raise
        hanging = []
        for c in candidates:
            found = transactional_ids.get(c.producer.producer_id)
            if found is None or c.topic_partition not in in_progress.get(found, set()):
                hanging.append(c)
        return sorted(hanging, key=lambda c: (c.topic_partition, c.producer.producer_id))

    def _retry(self, call: Callable[[], _T], error_of: Callable[[_T], int]) -> _T:
        """``call()`` until its error is not a coordinator one that passes (bounded by the timeout)."""
        deadline = time.monotonic() + self.timeout
        while True:
            answer = call()
            if error_of(answer) not in _RETRIABLE or time.monotonic() > deadline:
                return answer
            time.sleep(_RETRY_BACKOFF_S)


def _producer(s: _dp.ProducerState) -> ProducerState:
    return ProducerState(s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp,
                         None if s.coordinator_epoch < 0 else s.coordinator_epoch,
                         None if s.current_txn_start_offset < 0 else s.current_txn_start_offset)

