"""Records out of a Fetch response's partition data.

A fetch returns whole batches, possibly starting before the requested offset
(the broker serves from the batch that contains it) and possibly ending with a
partial batch cut at max_bytes; the consumer skips the former's early records
and stops before the latter, as Kafka's Fetcher does. Control batches
(transaction markers) are never shown to the application, and with
read_committed the batches of aborted transactions are dropped using the
response's aborted-transaction list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from protocol.buffers import Buffer
from protocol.record_batch import (
    CONTROL_FLAG,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG,
    RecordBatchHeader,
    iter_batch_headers,
)
from protocol.records import Record, read_batch

#: Kafka's TimestampType names, as the console consumer prints them.
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"


@dataclass(slots=True)
class FetchedBatch:
    """The records of one fetched batch (those at or after the fetch offset)."""

    header: RecordBatchHeader
    records: list[Record]

    @property
    def timestamp_type(self) -> str:
        return LOG_APPEND_TIME if self.header.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME


class AbortedTransaction(Protocol):
    producer_id: int
    first_offset: int


def visible_batches(
    data: Buffer,
    fetch_offset: int,
    aborted_transactions: Sequence[AbortedTransaction] | None = None,
    until_offset: int | None = None,
) -> tuple[list[tuple[int, RecordBatchHeader]], int]:
    """(position and header of each batch holding records the application sees, the offset to fetch next).

    Batches wholly before ``fetch_offset``, control batches and (when
    ``aborted_transactions`` is given, i.e. read_committed) aborted batches are
    left out; so is everything from ``until_offset`` on. The next offset moves
    past the batches left out, so a fetch never asks for them again.
    """
    visible: list[tuple[int, RecordBatchHeader]] = []
    next_offset = fetch_offset
    pending_aborts = sorted(aborted_transactions or (), key=lambda t: t.first_offset)
    aborting: set[int] = set()
    for pos, header in iter_batch_headers(data):
        if until_offset is not None and header.base_offset >= until_offset:
            break
        if header.last_offset < fetch_offset:
            continue
        next_offset = header.next_offset
        if aborted_transactions is not None:
            while pending_aborts and pending_aborts[0].first_offset <= header.last_offset:
                aborting.add(pending_aborts.pop(0).producer_id)
            if header.attributes & CONTROL_FLAG:
                # The marker that ends an aborted transaction ends its range.
                aborting.discard(header.producer_id)
                continue
            if header.attributes & TRANSACTIONAL_FLAG and header.producer_id in aborting:
                continue
        if header.attributes & CONTROL_FLAG:
            continue
        visible.append((pos, header))
    return visible, next_offset


def decode_fetched_records(
    data: Buffer,
    fetch_offset: int,
    aborted_transactions: Sequence[AbortedTransaction] | None = None,
    *,
    verify_crc: bool = True,
) -> tuple[list[FetchedBatch], int]:
    """(batches with the records at or after ``fetch_offset``, the offset to fetch next).

    ``aborted_transactions`` is given only for read_committed fetches.
    CRCs are checked by default, as Kafka's consumer does (check.crcs=true).
    """
    batches: list[FetchedBatch] = []
    visible, next_offset = visible_batches(data, fetch_offset, aborted_transactions)
    for pos, header in visible:
        _, batch_records = read_batch(data, pos, verify_crc=verify_crc)
        if header.base_offset < fetch_offset:
            batch_records = [r for r in batch_records if r.offset >= fetch_offset]
        if batch_records:
            batches.append(FetchedBatch(header, batch_records))
    return batches, next_offset
