"""The replica manager's writes of transaction markers: WriteTxnMarkers' COMMIT and ABORT
control batches, and the listeners told once they are written.

A collaborator of :class:`~replication.replica_manager.ReplicaManager`: a marker is a
one-record control batch appended as leader through the appender's ``append_records``, as
Kafka's WriteTxnMarkers path appends it, so it waits for the high watermark and wakes fetches
as any append does. What it adds is the marker's batch and, once written, telling the topic's
listener (the group coordinator, for its transactional offsets).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from protocol.control_records import build_end_txn_marker_batch
from protocol.errors import ErrorCode
from replication.append_result import PartitionAppendResult
from storage.log_append import AppendOrigin
from storage.log_segment import now_ms

if TYPE_CHECKING:
    from replication.replica_appender import ReplicaAppender

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
Records = bytearray | memoryview
#: Told (producer id, the partitions of one topic a marker was written to, committed?) on the event loop.
TxnMarkerCallback = Callable[[int, set[int], bool], None]


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """One entry of WriteTxnMarkers: end one producer's transaction on these partitions."""

    producer_id: int
    producer_epoch: int
    #: The epoch of the transaction coordinator writing it (its __transaction_state partition's
    #: leader epoch): a marker from a coordinator older than the last one a partition saw is fenced.
    coordinator_epoch: int
    committed: bool
    partitions: Sequence[TopicPartition]


class TxnMarkerWriter:
    def __init__(self, broker_id: int, appender: ReplicaAppender) -> None:
        self.broker_id = broker_id
        self._appender = appender
        #: topic → told of every transaction marker written to it (the group coordinator's offsets).
        self._txn_marker_listeners: dict[str, TxnMarkerCallback] = {}

    def add_txn_marker_listener(self, topic: str, on_markers_written: TxnMarkerCallback) -> None:
        """Be told, on the event loop, when transaction markers are written (and acknowledged) to
        partitions of ``topic``: Kafka's onTransactionCompleted, which makes a group's
        transactional offsets visible or drops them. The listener owns no partition data: it
        learns only of markers this broker wrote as leader."""
        self._txn_marker_listeners[topic] = on_markers_written

    def write_txn_markers(self, markers: Sequence[TxnMarker], timeout_ms: int
                          ) -> list[dict[TopicPartition, int]] | Awaitable[list[dict[TopicPartition, int]]]:
        """End transactions on the partitions this broker leads: Kafka's WriteTxnMarkers path.

        Each marker becomes, on each of its partitions, a one-record control batch
        (COMMIT or ABORT, with the coordinator epoch) of the producer's id and epoch,
        appended as leader with origin COORDINATOR and ``acks=-1`` (at most
        ``timeout_ms`` for the high watermark), as Kafka's appendRecords does for it.
        The partition's producer state checks it (Kafka's appendEndTxnMarker): a producer
        epoch older than the partition's is INVALID_PRODUCER_EPOCH, a coordinator epoch
        older than the last marker's TRANSACTION_COORDINATOR_FENCED. Writing it moves the
        last stable offset past the transaction and, for ABORT, records it in the
        ``.txnindex`` for ``read_committed`` fetches.

        One {partition: error code} per marker, in order, as WriteTxnMarkersResponse
        answers; synchronously when every append was acknowledged on the loop. Once a
        marker is acknowledged, the listener of its topic (``add_txn_marker_listener``)
        is told, as Kafka tells the group coordinator of markers on its offsets topic.
        """
        now = now_ms()
        entries: list[tuple[str, int, Records]] = []
        for marker in markers:
            for topic, index in marker.partitions:
                batch = build_end_txn_marker_batch(
                    commit=marker.committed, producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
                    coordinator_epoch=marker.coordinator_epoch, timestamp=now)
                entries.append((topic, index, batch))
        outcome = self._appender.append_records(entries, -1, timeout_ms, AppendOrigin.COORDINATOR)
        if isinstance(outcome, list):
            return self._markers_written(markers, outcome)
        return self._markers_written_later(markers, outcome)

    async def _markers_written_later(self, markers: Sequence[TxnMarker],
                                     pending: Awaitable[list[PartitionAppendResult]]
                                     ) -> list[dict[TopicPartition, int]]:
        return self._markers_written(markers, await pending)

    def _markers_written(self, markers: Sequence[TxnMarker], results: list[PartitionAppendResult]
                         ) -> list[dict[TopicPartition, int]]:
        """Each marker's errors by partition; listeners told of the markers now in their topic."""
        answers: list[dict[TopicPartition, int]] = []
        position = 0
        for marker in markers:
            errors: dict[TopicPartition, int] = {}
            written: dict[str, set[int]] = {}
            for tp in marker.partitions:
                result = results[position]
                position += 1
                errors[tp] = result.error_code
                if result.error_code == ErrorCode.NO_ERROR:
                    written.setdefault(tp[0], set()).add(tp[1])
                else:
                    log.debug("[ReplicaManager broker=%d] marker of producer %d on %s-%d failed: %s",
                              self.broker_id, marker.producer_id, *tp, result.error_message)
            answers.append(errors)
            for topic, indexes in written.items():
                listener = self._txn_marker_listeners.get(topic)
                if listener is None:
                    continue
                try:
                    listener(marker.producer_id, indexes, marker.committed)
                except Exception:  # the markers are written: a listener's bug must not turn them into errors
                    log.exception("[ReplicaManager broker=%d] transaction marker listener of %s failed",
                                  self.broker_id, topic)
        return answers
