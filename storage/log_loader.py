"""Opening a partition directory: leftover files, interrupted swaps, index checks, recovery.

Kafka's LogLoader semantics:

* ``.cleaned`` and ``.deleted`` files are removed (a clean that never reached
  the swap step, segments already taken out of the log).
* A ``.swap`` log file completes an interrupted replaceSegments: every segment
  whose base offset lies in [swap base offset, swap next offset) is deleted,
  then the swap file is renamed to its final name (its indexes are rebuilt).
* Index files that are missing or fail their sanity check are rebuilt from the
  log, whatever the shutdown.
* Without the clean-shutdown marker, every segment from the one holding the
  recovery point on is scanned batch by batch (length, magic, CRC32C); the
  first bad batch truncates its segment and every later segment is deleted.

The loader works on a directory's parts, not on a Log: ``load_log`` returns a
``LoadedLog`` (segments, offsets, leader epoch cache, producer state) and
``Log.open``, one level up, builds the Log on it. ``rebuild_producer_state``
replays producer state from the segments, on load and after a truncation.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from protocol.record_batch import RecordBatchHeader
from storage.errors import CorruptIndexError
from storage.leader_epoch_cache import LeaderEpochFileCache
from storage.log_append import end_txn_marker
from storage.log_config import LogConfig
from storage.log_segment import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    LogSegment,
    log_file,
    offset_from_file_name,
    offset_index_file,
    time_index_file,
)
from storage.producer_state import EndTxnMarker, ProducerStateManager
from storage.segment_list import SegmentList

log = logging.getLogger(__name__)

_SEGMENT_SUFFIXES = (LOG_FILE_SUFFIX, INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX)


def _is_segment_file(name: str) -> bool:
    """A segment's log or index file (any suffix after it); not a producer ``.snapshot``."""
    base, _, rest = name.partition(".")
    return len(base) == 20 and base.isdigit() and "." + rest.split(".", 1)[0] in _SEGMENT_SUFFIXES


def remove_temp_files_and_collect_swaps(dir: Path) -> list[Path]:
    swaps = []
    for path in sorted(dir.iterdir()):
        name = path.name
        if not path.is_file():
            continue
        if name.endswith((DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, ".tmp")):
            log.info("%s: deleting stray temporary file %s", dir.name, name)
            path.unlink()
        elif name.endswith(SWAP_FILE_SUFFIX) and _is_segment_file(name):
            base = offset_from_file_name(name)
            if name.endswith(LOG_FILE_SUFFIX + SWAP_FILE_SUFFIX):
                swaps.append(path)
            elif log_file(dir, base).exists() and not log_file(dir, base, SWAP_FILE_SUFFIX).exists():
                # The crash came during the final renames, after the log's (renamed
                # first): this index was complete and fsynced, so finish its rename.
                # (A .txnindex could not be rebuilt from the log alone.)
                log.info("%s: completing the rename of swapped index file %s", dir.name, name)
                os.replace(path, path.with_name(name[: -len(SWAP_FILE_SUFFIX)]))
            else:
                path.unlink()  # the swap is completed from its log, and this index rebuilt
    return swaps


def complete_swaps(dir: Path, swaps: list[Path], config: LogConfig) -> set[int]:
    """Finish replaceSegments interrupted by a crash (Kafka's three passes).

    Returns the base offsets of the swapped-in segments: their indexes were
    rebuilt from the log, their ``.txnindex`` is rebuilt with producer state.
    """
    if not swaps:
        return set()
    low, high = None, None
    for swap in swaps:
        base = offset_from_file_name(swap.name)
        segment = LogSegment.open(dir, base, config, file_suffix=SWAP_FILE_SUFFIX)
        segment.recover()
        next_offset = segment.read_next_offset()
        segment.close()
        log.info("%s: found %s from an interrupted swap, covering [%d, %d)", dir.name, swap.name, base, next_offset)
        low = base if low is None else min(low, base)
        high = next_offset if high is None else max(high, next_offset)
    for path in sorted(dir.iterdir()):
        if path.is_file() and _is_segment_file(path.name) and not path.name.endswith(SWAP_FILE_SUFFIX):
            if low <= offset_from_file_name(path.name) < high:  # type: ignore[operator]
                log.info("%s: deleting %s, replaced by a swap segment", dir.name, path.name)
                path.unlink()
    for path in sorted(dir.iterdir()):
        if path.name.endswith(SWAP_FILE_SUFFIX):
            os.replace(path, path.with_name(path.name[: -len(SWAP_FILE_SUFFIX)]))
    return {offset_from_file_name(swap.name) for swap in swaps}


def load_segments(dir: Path, config: LogConfig) -> tuple[SegmentList, set[int]]:
    """Open every segment; returns them and the base offsets whose indexes were rebuilt."""
    segments = SegmentList()
    rebuilt: set[int] = set()
    names = sorted(p.name for p in dir.iterdir() if p.is_file() and _is_segment_file(p.name))
    logs = {offset_from_file_name(n) for n in names if n.endswith(LOG_FILE_SUFFIX)}
    for name in names:
        if not name.endswith(LOG_FILE_SUFFIX) and offset_from_file_name(name) not in logs:
            log.warning("%s: deleting orphaned index file %s", dir.name, name)
            (dir / name).unlink()
    for base in sorted(logs):
        missing = not offset_index_file(dir, base).exists() or not time_index_file(dir, base).exists()
        segment = LogSegment.open(dir, base, config)
        try:
            if missing:
                raise CorruptIndexError("index file missing")
            segment.sanity_check()
        except CorruptIndexError as exc:
            log.warning("%s: rebuilding the indexes of segment %d (%s)", dir.name, base, exc)
            segment.recover()
            rebuilt.add(base)
        segments.add(segment)
    return segments, rebuilt


def recover_log(dir: Path, segments: SegmentList, recovery_point: int, epoch_cache: LeaderEpochFileCache, rebuilt: set[int]) -> None:
    """Scan every segment past the recovery point; cut at the first invalid batch."""
    def on_batch(header: RecordBatchHeader) -> None:
        epoch_cache.assign(header.partition_leader_epoch, header.base_offset)

    unflushed = segments.segments_from(recovery_point)
    for i, segment in enumerate(unflushed):
        log.info("%s: recovering unflushed segment %d", dir.name, segment.base_offset)
        # The first one holds the recovery point: its flushed head is not rescanned.
        truncated = segment.recover(on_batch=on_batch, recovery_point=recovery_point if i == 0 else -1)
        log.info("%s: segment %d recovered: %d bytes scanned from position %d", dir.name, segment.base_offset,
                 segment.size - segment.recovery_scan_start, segment.recovery_scan_start)
        rebuilt.add(segment.base_offset)
        if truncated > 0:
            later = unflushed[i + 1 :]
            if later:
                log.warning("%s: corruption in segment %d: deleting %d later segment(s)",
                            dir.name, segment.base_offset, len(later))
            for doomed in later:
                segments.remove(doomed.base_offset)
                doomed.delete_if_exists()
            break


@dataclass(frozen=True)
class LoadedLog:
    """A partition directory as loading leaves it: what ``Log.open`` builds the Log on
    (Kafka's LoadedLogOffsets, with the segments, epoch cache and producer state)."""

    segments: SegmentList
    log_start_offset: int
    recovery_point: int
    log_end_offset: int
    #: Where the HW starts: the log end after a clean shutdown, else the log start offset
    #: (the broker then sets it from its replication-offset-checkpoint).
    high_watermark: int
    leader_epoch_cache: LeaderEpochFileCache
    producer_state: ProducerStateManager | None


def load_log(
    dir: Path,
    config: LogConfig,
    log_start_offset: int = 0,
    recovery_point: int = 0,
    had_clean_shutdown: bool = False,
    producer_state: ProducerStateManager | bool | None = None,
) -> LoadedLog:
    """Load the partition directory ``dir`` (created if missing), recovering it if needed.

    ``producer_state``: a ProducerStateManager to rebuild (or True to create
    one in ``dir``); None or False loads no producer state.
    """
    dir.mkdir(parents=True, exist_ok=True)
    swapped = complete_swaps(dir, remove_temp_files_and_collect_swaps(dir), config)
    segments, rebuilt = load_segments(dir, config)
    rebuilt |= swapped
    epoch_cache = LeaderEpochFileCache(dir)
    if not had_clean_shutdown:
        recover_log(dir, segments, recovery_point, epoch_cache, rebuilt)
    if len(segments) == 0:
        segments.add(LogSegment.open(dir, log_start_offset, config, create=True))
    log_end_offset = segments.last_segment.read_next_offset()  # type: ignore[union-attr]
    if log_start_offset > log_end_offset:
        log.warning("%s: log start offset %d beyond the log end %d: starting afresh there",
                    dir.name, log_start_offset, log_end_offset)
        for segment in list(segments):
            segment.delete_if_exists()
        segments.clear()
        segments.add(LogSegment.open(dir, log_start_offset, config, create=True))
        log_end_offset = log_start_offset
    log_start_offset = max(log_start_offset, segments.first_segment.base_offset)  # type: ignore[union-attr]
    for segment in segments.values()[:-1]:
        # Rebuilt indexes of inactive segments are trimmed like a rolled segment's.
        segment.offset_index.trim_to_valid_size()
        segment.time_index.trim_to_valid_size()
    active = segments.last_segment
    assert active is not None
    active.resize_indexes(config.segment_index_bytes)
    active.rolling_jitter_ms = config.random_segment_jitter()
    epoch_cache.truncate_from_end(log_end_offset)
    epoch_cache.truncate_from_start(log_start_offset)
    recovery_point = log_end_offset if had_clean_shutdown else min(recovery_point, log_end_offset)
    if producer_state is True:
        producer_state = ProducerStateManager(dir)
    state = producer_state if isinstance(producer_state, ProducerStateManager) else None
    if state is not None:
        recovered = {base for base in rebuilt if segments.get(base) is not None}
        rebuild_producer_state(state, segments, log_start_offset, log_end_offset, recovered)
    log.info("%s: loaded %d segment(s), logStartOffset=%d, logEndOffset=%d",
             dir.name, len(segments), log_start_offset, log_end_offset)
    return LoadedLog(segments, log_start_offset, recovery_point, log_end_offset,
                     log_end_offset if had_clean_shutdown else log_start_offset, epoch_cache, state)


def rebuild_producer_state(
    state: ProducerStateManager,
    segments: SegmentList,
    log_start_offset: int,
    log_end_offset: int,
    recovered: set[int] | frozenset[int] = frozenset(),
) -> None:
    """Reload the newest producer snapshot and replay the batch headers after it.

    Run on load and after a truncation (``Log.truncate_to``). ``recovered`` are
    the base offsets of segments whose transaction index was reset by a
    recovery: the replay then starts at or before the first of them and
    re-records the aborted transactions whose markers they hold.
    """
    replay_from = state.truncate_and_reload(log_start_offset, log_end_offset)
    if recovered and min(recovered) < replay_from:
        replay_from = state.load(log_start_offset, min(recovered))
    markers: dict[int, EndTxnMarker] = {}
    for header in _headers_from(segments, replay_from, markers):
        if header.next_offset <= state.map_end_offset:
            continue
        completed = state.update(header, marker=markers.get(header.base_offset))
        if completed is not None and completed.is_aborted:
            segment = segments.floor_segment(header.base_offset)
            if segment is not None and segment.base_offset in recovered:
                segment.update_txn_index(completed.producer_id, completed.first_offset, completed.last_offset,
                                         state.last_stable_offset(completed))


def _headers_from(segments: SegmentList, offset: int, markers: dict[int, EndTxnMarker]) -> Iterator[RecordBatchHeader]:
    for segment in segments.segments_from(offset):
        for position, header in segment.batches():
            if header.next_offset <= offset:
                continue
            if header.is_control:
                marker = end_txn_marker(segment.read_batch(position, header), 0)
                if marker is not None:
                    markers[header.base_offset] = marker
            yield header
