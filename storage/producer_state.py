"""Producer state per partition: idempotence, fencing and ongoing transactions.

Kafka's ProducerStateManager. For every producer id that wrote to the
partition we keep its epoch, the metadata of its last five batches (enough to
answer a retried produce with the offsets of the original append), the
coordinator epoch of its last transaction marker and the first offset of its
ongoing transaction. Ongoing transactions give the first unstable offset, from
which the partition's last stable offset is derived.

The state is rebuilt on load from the newest snapshot at or below the log end
and then from the batch headers after it (``rebuild_from_headers``).

Snapshot files
--------------
``<20-digit offset>.snapshot`` in the partition directory; the offset is the
map end offset when it was taken (the state covers every batch below it).
Our own format, all big-endian::

    magic                  4 bytes  b"PFPS"
    version                int16    1
    crc                    uint32   CRC32C of every byte after this field
    entry_count            int32
    entries, each:
      producer_id          int64
      producer_epoch       int16
      coordinator_epoch    int32
      last_timestamp       int64
      current_txn_first_offset int64  (-1: no ongoing transaction)
      batch_count          int8     (0..5, oldest first)
      batches, each:
        last_sequence      int32
        last_offset        int64
        offset_delta       int32    (last_offset - first offset of the batch)
        timestamp          int64    (the batch's max timestamp)

A snapshot is written to ``<name>.tmp``, fsynced, renamed and the directory
fsynced, so a crash leaves either no snapshot or a whole one. A snapshot that
fails its magic, version, length or CRC check is ignored (and deleted) on load,
and an older one is used instead, as Kafka does with a CorruptSnapshotException.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterable
from pathlib import Path

from crc32c import crc32c

from protocol.errors import ErrorCode
from protocol.record_batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, RecordBatchHeader
from storage.checkpoints import write_atomically
from storage.errors import StorageError
from storage.producer_state_entry import (
    _INT32_MAX,
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    NUM_BATCHES_TO_RETAIN,
    SENTINEL_GUARD,
    AppendOrigin,
    BatchMetadata,
    CompletedTxn,
    EndTxnMarker,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    ProducerStateEntry,
    ProducerStateError,
    TransactionCoordinatorFencedError,
    TxnMetadata,
    VerificationGuard,
    VerificationStateEntry,
    in_sequence,
)

__all__ = [
    "CONTROL_TYPE_ABORT",
    "CONTROL_TYPE_COMMIT",
    "SENTINEL_GUARD",
    "AppendOrigin",
    "BatchMetadata",
    "CompletedTxn",
    "CorruptSnapshotError",
    "EndTxnMarker",
    "InvalidProducerEpochError",
    "InvalidTxnStateError",
    "OutOfOrderSequenceError",
    "ProducerStateEntry",
    "ProducerStateError",
    "ProducerStateManager",
    "TransactionCoordinatorFencedError",
    "TxnMetadata",
    "VerificationGuard",
    "VerificationStateEntry",
    "decode_snapshot",
    "encode_snapshot",
    "read_snapshot",
    "snapshot_path",
]

log = logging.getLogger(__name__)

#: ``producer.id.expiration.ms``'s default (one day).
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
SNAPSHOT_SUFFIX = ".snapshot"
_MAGIC = b"PFPS"
_VERSION = 1
_FILE_HEADER = struct.Struct(">4shIi")  # magic, version, crc, entry_count
_CRC_START = 4 + 2 + 4  # the CRC covers the entry count and the entries
_ENTRY = struct.Struct(">qhiqqb")
_BATCH = struct.Struct(">iqiq")


class CorruptSnapshotError(StorageError):
    """A producer snapshot file that cannot be trusted; the loader skips it."""

    error_code = ErrorCode.CORRUPT_MESSAGE


# ---------------------------------------------------------------- the manager


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def offset_from_snapshot_name(name: str) -> int | None:
    stem = name[: -len(SNAPSHOT_SUFFIX)] if name.endswith(SNAPSHOT_SUFFIX) else ""
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


class ProducerStateManager:
    """Producer state of one partition (``directory`` is the partition's folder)."""

    def __init__(
        self,
        directory: Path | str,
        *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        topic_partition: str = "",
    ) -> None:
        self.directory = Path(directory)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.topic_partition = topic_partition or self.directory.name
        self.producers: dict[int, ProducerStateEntry] = {}
        # Keyed by the transaction's first offset; inserted in offset order.
        self.ongoing_txns: dict[int, TxnMetadata] = {}
        # Completed but not yet below the high watermark: still unstable.
        self.unreplicated_txns: dict[int, TxnMetadata] = {}
        #: Every batch below this offset is reflected in the state.
        self.map_end_offset = 0
        #: Producers whose transaction on this partition is being verified with the
        #: coordinator (KIP-890 part 1). In memory only: a restart drops them, and the
        #: produce waiting on one then fails its guard check and is retried.
        self.verification_states: dict[int, VerificationStateEntry] = {}

    # -------------------------------------------------------- queries

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    @property
    def active_producers(self) -> dict[int, ProducerStateEntry]:
        return self.producers

    def find_duplicate_batch(self, header: RecordBatchHeader) -> BatchMetadata | None:
        """The metadata (with original offsets) of an earlier append of the same batch."""
        if header.producer_id == NO_PRODUCER_ID:
            return None
        entry = self.producers.get(header.producer_id)
        return entry.find_duplicate_batch(header) if entry is not None else None

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """The producer has a transaction open here at this epoch: its batches need no verification."""
        entry = self.producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset is not None and entry.producer_epoch == producer_epoch

    # -------------------------------------------------------- transaction verification (KIP-890 part 1)

    def maybe_create_verification_state_entry(self, producer_id: int, producer_epoch: int,
                                              now_ms: int) -> VerificationGuard:
        """The guard an append of this producer must carry once the coordinator has verified
        its transaction; created if none is pending, else the pending one (a retried produce
        may verify again)."""
        entry = self.verification_states.get(producer_id)
        if entry is None:
            entry = self.verification_states[producer_id] = VerificationStateEntry(now_ms, producer_epoch)
        else:
            entry.maybe_update_epoch(producer_epoch)
        return entry.guard

    def verification_guard(self, producer_id: int) -> VerificationGuard:
        entry = self.verification_states.get(producer_id)
        return SENTINEL_GUARD if entry is None else entry.guard

    def clear_verification_state_entry(self, producer_id: int) -> None:
        self.verification_states.pop(producer_id, None)

    def first_undecided_offset(self) -> int | None:
        """First offset of the oldest transaction without a marker yet."""
        return min(self.ongoing_txns) if self.ongoing_txns else None

    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest transaction that is undecided or not yet replicated."""
        ongoing, unreplicated = self.ongoing_txns, self.unreplicated_txns
        if not ongoing:  # every read asks (for the LSO): no transaction open is the common case
            return min(unreplicated) if unreplicated else None
        return min(min(ongoing), min(unreplicated)) if unreplicated else min(ongoing)

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO once ``completed`` has its marker: the next undecided transaction's start, if any."""
        undecided = self.first_undecided_offset()
        return undecided if undecided is not None else completed.last_offset + 1

    # -------------------------------------------------------- validation

    def validate_append(
        self,
        header: RecordBatchHeader,
        *,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        marker: EndTxnMarker | None = None,
        verification_guard: VerificationGuard | None = None,
    ) -> None:
        """Raise the typed error Kafka answers for this append; changes nothing.

        Call after ``find_duplicate_batch`` (a duplicate is answered, not
        rejected) and before writing the batch. ``verification_guard`` (not None
        when the broker verifies transactions, SENTINEL_GUARD when this append
        was not verified): a client's transactional batch may start a transaction
        here only with the guard its verification left, still pending.
        """
        if header.producer_id == NO_PRODUCER_ID:
            return
        entry = self.producers.get(header.producer_id) or ProducerStateEntry(header.producer_id)
        self._check_producer_epoch(entry, header.producer_epoch, header.base_offset, origin)
        if header.is_control:
            if marker is not None and entry.coordinator_epoch > marker.coordinator_epoch and origin != AppendOrigin.REPLICATION:
                raise TransactionCoordinatorFencedError(
                    f"{self.topic_partition}: marker of producer {header.producer_id} has coordinator epoch "
                    f"{marker.coordinator_epoch}, older than the current {entry.coordinator_epoch}"
                )
            return
        if origin == AppendOrigin.CLIENT:
            self._check_sequence(entry, header.producer_epoch, header.base_sequence)
        # A client's batch, or the group coordinator's TxnOffsetCommit write (origin COORDINATOR,
        # verified when it names its transactional id); a follower copies what its leader checked.
        if verification_guard is not None and header.is_transactional and origin != AppendOrigin.REPLICATION:
            self._check_verified(entry, header, verification_guard)
        if entry.current_txn_first_offset is not None and not header.is_transactional:
            raise InvalidTxnStateError(
                f"{self.topic_partition}: non-transactional batch from producer {header.producer_id} "
                f"while its transaction from offset {entry.current_txn_first_offset} is ongoing"
            )

    def _check_verified(self, entry: ProducerStateEntry, header: RecordBatchHeader,
                        request_guard: VerificationGuard) -> None:
        """Kafka's batchMissingRequiredVerification: a transactional batch that does not
        continue an open transaction must carry the pending verification's guard."""
        if entry.current_txn_first_offset is not None and entry.producer_epoch == header.producer_epoch:
            return
        if not self.verification_guard(header.producer_id).verify(request_guard):
            raise InvalidTxnStateError(
                f"{self.topic_partition}: record of producer {header.producer_id} (epoch {header.producer_epoch}) "
                f"was not part of an ongoing transaction"
            )

    def _check_producer_epoch(self, entry: ProducerStateEntry, epoch: int, offset: int, origin: AppendOrigin) -> None:
        if epoch >= entry.producer_epoch:
            return
        message = (
            f"{self.topic_partition}: epoch {epoch} of producer {entry.producer_id} at offset {offset} "
            f"is older than the current epoch {entry.producer_epoch}"
        )
        if origin == AppendOrigin.REPLICATION:
            # The leader already accepted it; a follower must not diverge.
            log.warning(message)
            return
        raise InvalidProducerEpochError(message)

    def _check_sequence(self, entry: ProducerStateEntry, epoch: int, first_seq: int) -> None:
        if epoch != entry.producer_epoch:
            # A bumped epoch restarts the sequence space at 0.
            if first_seq != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"{self.topic_partition}: new epoch {epoch} of producer {entry.producer_id} starts at "
                    f"sequence {first_seq}, not 0 (current epoch {entry.producer_epoch})"
                )
            return
        # With no known epoch (all its batches removed by retention or
        # DeleteRecords) any sequence is accepted, as Kafka does since KIP-360.
        if entry.producer_epoch == NO_PRODUCER_EPOCH:
            return
        if not in_sequence(entry.last_seq, first_seq):
            raise OutOfOrderSequenceError(
                f"{self.topic_partition}: out of order sequence {first_seq} for producer "
                f"{entry.producer_id} (epoch {epoch}), expected {(entry.last_seq + 1) & _INT32_MAX}"
            )

    # -------------------------------------------------------- updates

    def update(
        self,
        header: RecordBatchHeader,
        first_offset: int | None = None,
        *,
        marker: EndTxnMarker | None = None,
    ) -> CompletedTxn | None:
        """Record an appended batch (``header.base_offset`` assigned); no checks.

        A control batch ends the producer's ongoing transaction and returns it
        (already moved to the unreplicated transactions). ``marker`` gives the
        control record's type and coordinator epoch when the caller has them.
        """
        self.map_end_offset = max(self.map_end_offset, header.next_offset)
        if header.producer_id == NO_PRODUCER_ID:
            return None
        first_offset = header.base_offset if first_offset is None else first_offset
        entry = self.producers.get(header.producer_id)
        if entry is None:
            entry = self.producers[header.producer_id] = ProducerStateEntry(header.producer_id)
        if self.verification_states:
            # The producer's state moved on (its transaction started here, or a marker ended it):
            # a verification made before can no longer append.
            self.verification_states.pop(header.producer_id, None)
        if header.is_control:
            return self._append_end_txn_marker(entry, header, marker)
        entry.add_batch(
            header.producer_epoch, header.last_sequence, header.last_offset,
            header.last_offset - first_offset, header.max_timestamp,
        )
        if header.is_transactional and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = first_offset
            self.ongoing_txns[first_offset] = TxnMetadata(header.producer_id, first_offset)
        return None

    def _append_end_txn_marker(
        self, entry: ProducerStateEntry, header: RecordBatchHeader, marker: EndTxnMarker | None
    ) -> CompletedTxn | None:
        completed = None
        if entry.current_txn_first_offset is not None:
            # An empty transaction (marker without data) does not move the LSO.
            completed = CompletedTxn(
                entry.producer_id, entry.current_txn_first_offset, header.base_offset,
                None if marker is None else marker.is_abort,
            )
        entry.maybe_update_producer_epoch(header.producer_epoch)
        entry.current_txn_first_offset = None
        if marker is not None:
            entry.coordinator_epoch = marker.coordinator_epoch
        entry.last_timestamp = header.max_timestamp
        if completed is not None:
            self.complete_txn(completed)
        return completed

    def complete_txn(self, completed: CompletedTxn) -> None:
        txn = self.ongoing_txns.pop(completed.first_offset, None)
        if txn is None:
            raise ValueError(f"{self.topic_partition}: completing transaction {completed} that was not started")
        txn.last_offset = completed.last_offset
        self.unreplicated_txns[completed.first_offset] = txn

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Transactions whose marker is below the HW are stable."""
        if not self.unreplicated_txns:  # called after every append: no copy when there is nothing
            return
        for first_offset, txn in list(self.unreplicated_txns.items()):
            if txn.last_offset is not None and txn.last_offset < high_watermark:
                del self.unreplicated_txns[first_offset]

    def update_map_end_offset(self, offset: int) -> None:
        self.map_end_offset = offset

    def rebuild_from_headers(
        self, headers: Iterable[RecordBatchHeader], markers: dict[int, EndTxnMarker] | None = None
    ) -> int:
        """Replay appended batches (e.g. after the loaded snapshot); returns how many.

        Batches below ``map_end_offset`` are already in the state and skipped.
        ``markers`` maps a control batch's base offset to its marker when known.
        """
        count = 0
        for header in headers:
            if header.next_offset <= self.map_end_offset:
                continue
            self.update(header, marker=(markers or {}).get(header.base_offset))
            count += 1
        return count

    def remove_expired_producers(self, now_ms: int) -> list[int]:
        """Forget producers idle for ``producer.id.expiration.ms`` (not inside a transaction)."""
        expired = [pid for pid, entry in self.producers.items() if self._is_expired(entry, now_ms)]
        for pid in expired:
            del self.producers[pid]
        stale = [pid for pid, verifying in self.verification_states.items()
                 if now_ms - verifying.timestamp >= self.producer_id_expiration_ms]
        for pid in stale:
            del self.verification_states[pid]
        return expired

    def _is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return entry.current_txn_first_offset is None and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """The log was emptied and restarts at ``offset``: drop all state and snapshots."""
        self._clear()
        for snap_offset in self.snapshot_offsets():
            self._delete_snapshot(snap_offset)
        self.map_end_offset = offset

    def _clear(self) -> None:
        self.producers.clear()
        self.ongoing_txns.clear()
        self.unreplicated_txns.clear()
        self.verification_states.clear()

    # -------------------------------------------------------- snapshots

    def snapshot_offsets(self) -> list[int]:
        offsets: list[int] = []
        if not self.directory.is_dir():
            return offsets
        for name in os.listdir(self.directory):
            offset = offset_from_snapshot_name(name)
            if offset is not None:
                offsets.append(offset)
        return sorted(offsets)

    def latest_snapshot_offset(self) -> int | None:
        offsets = self.snapshot_offsets()
        return offsets[-1] if offsets else None

    def oldest_snapshot_offset(self) -> int | None:
        offsets = self.snapshot_offsets()
        return offsets[0] if offsets else None

    def take_snapshot(self, next_offset: int | None = None) -> Path:
        """Write the state as of ``next_offset`` (default: the map end offset)."""
        offset = self.map_end_offset if next_offset is None else next_offset
        path = snapshot_path(self.directory, offset)
        write_atomically(path, encode_snapshot(self.producers.values()))
        return path

    def load(self, log_start_offset: int, log_end_offset: int, now_ms: int | None = None) -> int:
        """Replace the state with the newest readable snapshot at or below the log end.

        Returns the offset from which the caller must replay batch headers
        (``rebuild_from_headers``) to bring the state up to the log end.
        Corrupt snapshots are logged, deleted and skipped; expired producers
        are not loaded when ``now_ms`` is given.
        """
        self._clear()
        for offset in reversed(self.snapshot_offsets()):
            if offset > log_end_offset:
                continue
            try:
                entries = read_snapshot(snapshot_path(self.directory, offset))
            except CorruptSnapshotError as exc:
                log.warning("%s: ignoring corrupt producer snapshot: %s", self.topic_partition, exc)
                self._delete_snapshot(offset)
                continue
            for entry in entries:
                if now_ms is None or not self._is_expired(entry, now_ms):
                    self._load_entry(entry)
            self.map_end_offset = max(offset, log_start_offset)
            return self.map_end_offset
        self.map_end_offset = log_start_offset
        return self.map_end_offset

    def _load_entry(self, entry: ProducerStateEntry) -> None:
        self.producers[entry.producer_id] = entry
        if entry.current_txn_first_offset is not None:
            first = entry.current_txn_first_offset
            self.ongoing_txns[first] = TxnMetadata(entry.producer_id, first)
            self.ongoing_txns = dict(sorted(self.ongoing_txns.items()))

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now_ms: int | None = None) -> int:
        """After a truncation or a log start move: drop out-of-range snapshots, reload.

        Returns the offset from which batch headers must be replayed.
        """
        for offset in self.snapshot_offsets():
            if offset > log_end_offset or offset < log_start_offset:
                self._delete_snapshot(offset)
        if log_end_offset != self.map_end_offset:
            return self.load(log_start_offset, log_end_offset, now_ms)
        self.on_log_start_offset_incremented(log_start_offset)
        return self.map_end_offset

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        for first_offset, txn in list(self.unreplicated_txns.items()):
            if txn.last_offset is not None and txn.last_offset < log_start_offset:
                del self.unreplicated_txns[first_offset]
        self.map_end_offset = max(self.map_end_offset, log_start_offset)

    def delete_snapshots_before(self, offset: int) -> None:
        for snap_offset in self.snapshot_offsets():
            if snap_offset < offset:
                self._delete_snapshot(snap_offset)

    def _delete_snapshot(self, offset: int) -> None:
        try:
            snapshot_path(self.directory, offset).unlink()
        except FileNotFoundError:
            pass


# ---------------------------------------------------------------- snapshot codec


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    body = bytearray()
    count = 0
    for entry in entries:
        txn_first = -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset
        body += _ENTRY.pack(
            entry.producer_id, entry.producer_epoch, entry.coordinator_epoch, entry.last_timestamp,
            txn_first, len(entry.batch_metadata),
        )
        for meta in entry.batch_metadata:
            body += _BATCH.pack(meta.last_seq, meta.last_offset, meta.offset_delta, meta.timestamp)
        count += 1
    counted = struct.pack(">i", count) + bytes(body)
    return _MAGIC + struct.pack(">hI", _VERSION, crc32c(counted)) + counted


def decode_snapshot(data: bytes, name: str = "snapshot") -> list[ProducerStateEntry]:
    if len(data) < _FILE_HEADER.size:
        raise CorruptSnapshotError(f"{name}: {len(data)} bytes, shorter than the header")
    magic, version, crc, count = _FILE_HEADER.unpack_from(data, 0)
    if magic != _MAGIC:
        raise CorruptSnapshotError(f"{name}: bad magic {magic!r}")
    if version != _VERSION:
        raise CorruptSnapshotError(f"{name}: unknown version {version}")
    if crc32c(memoryview(data)[_CRC_START:]) != crc:
        raise CorruptSnapshotError(f"{name}: CRC32C mismatch")
    entries = []
    pos = _FILE_HEADER.size
    try:
        for _ in range(count):
            pid, epoch, coord_epoch, last_ts, txn_first, n_batches = _ENTRY.unpack_from(data, pos)
            pos += _ENTRY.size
            if not 0 <= n_batches <= NUM_BATCHES_TO_RETAIN:
                raise CorruptSnapshotError(f"{name}: {n_batches} batches for producer {pid}")
            entry = ProducerStateEntry(pid, epoch, coord_epoch, last_ts, None if txn_first < 0 else txn_first)
            for _ in range(n_batches):
                entry.batch_metadata.append(BatchMetadata(*_BATCH.unpack_from(data, pos)))
                pos += _BATCH.size
            entries.append(entry)
    except struct.error as exc:
        raise CorruptSnapshotError(f"{name}: truncated entries ({exc})") from None
    if pos != len(data):
        raise CorruptSnapshotError(f"{name}: {len(data) - pos} trailing bytes")
    return entries


def read_snapshot(path: Path) -> list[ProducerStateEntry]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CorruptSnapshotError(f"{path}: unreadable ({exc})") from None
    return decode_snapshot(data, str(path))

