"""Log: appends (leader and follower), reads, rolls, flushes, ListOffsets lookups, truncation."""

from __future__ import annotations

import random
import struct

import pytest

from protocol.errors import CorruptRecordError, ErrorCode
from protocol.record_batch import build_batch_header, iter_batch_headers, parse_batch_header, patch_base_offset, validate_batch
from protocol.records import iter_records
from storage.errors import (
    InvalidRecordError,
    InvalidTimestampError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from storage.log import Log
from storage.log_append import AppendOrigin
from storage.log_config import LogConfig
from tests.storage.helpers import make_batch

NOW = 1_700_000_000_000


def _config(**props) -> LogConfig:
    return LogConfig.model_validate({k.replace("_", "."): v for k, v in props.items()})


def _open(path, **props) -> Log:
    return Log.open(path / "topic-0", _config(**props))


def _read_all(log: Log) -> list[tuple[int, bytes]]:
    """(base offset, batch bytes) of every batch, read through Log.read."""
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        info = log.read(offset, 1 << 20)
        data = info.records.read_bytes()
        for pos, header in iter_batch_headers(data):
            out.append((header.base_offset, data[pos : pos + header.size_in_bytes]))
            offset = header.next_offset
    return out


def test_leader_append_assigns_offsets_and_stamps_the_epoch(checked_tmp_path) -> None:
    log = _open(checked_tmp_path)
    first = make_batch(3, timestamp=NOW)
    info = log.append_as_leader(first, leader_epoch=7, now=NOW)
    assert (info.first_offset, info.last_offset, info.num_records, info.log_append_time) == (0, 2, 3, -1)
    second = make_batch(2, timestamp=NOW + 5)
    info = log.append_as_leader(second, leader_epoch=7, now=NOW)
    assert (info.first_offset, info.last_offset, info.max_timestamp, info.offset_of_max_timestamp) == (3, 4, NOW + 6, 4)
    assert log.log_end_offset == 5
    header = parse_batch_header(second)
    assert header.base_offset == 3 and header.partition_leader_epoch == 7  # patched in place
    validate_batch(second)  # offset and epoch are outside the CRC
    assert [o for o, _ in _read_all(log)] == [0, 3]
    assert log.leader_epoch_cache.entries == [(7, 0)]
    log.close()


def test_one_append_with_several_batches_is_one_write(checked_tmp_path) -> None:
    log = _open(checked_tmp_path)
    buf = make_batch(2, seed=1, timestamp=NOW) + make_batch(3, seed=2, timestamp=NOW) + make_batch(1, seed=3, timestamp=NOW)
    info = log.append_as_leader(buf, leader_epoch=0, now=NOW)
    assert (info.first_offset, info.last_offset, info.num_batches) == (0, 5, 3)
    assert [o for o, _ in _read_all(log)] == [0, 2, 5]
    assert log.active_segment.log.path.read_bytes() == bytes(buf)
    log.close()


def test_log_append_time_rewrites_max_timestamp_and_crc(checked_tmp_path) -> None:
    log = _open(checked_tmp_path, message_timestamp_type="LogAppendTime")
    batch = make_batch(3, timestamp=1000)
    info = log.append_as_leader(batch, leader_epoch=0, now=NOW)
    assert info.log_append_time == NOW
    (_offset, data), = _read_all(log)
    header = validate_batch(data)
    assert header.timestamp_type == 1 and header.max_timestamp == NOW
    assert {r.timestamp for r in iter_records(data)} == {NOW}  # readers see the append time
    log.close()


def test_reads(checked_tmp_path) -> None:
    log = _open(checked_tmp_path, segment_bytes=2000)
    sizes = []
    for i in range(30):
        batch = make_batch(4, timestamp=NOW + i, seed=i, value_size=50)
        sizes.append(len(batch))
        log.append_as_leader(batch, leader_epoch=1, now=NOW)
    assert len(log.segments) > 3
    log.update_high_watermark(log.log_end_offset)
    # Inside a batch: the whole batch comes back.
    info = log.read(42, max_bytes=1)
    data = info.records.read_bytes()
    assert parse_batch_header(data).base_offset == 40 and len(data) == sizes[10]
    # Across the segment boundary only one segment is read.
    info = log.read(0, max_bytes=10**6)
    assert info.records.position == 0 and info.records.size == log.segments.values()[0].size
    # max_offset (HW / LSO) excludes the batch containing it.
    info = log.read(40, max_bytes=10**6, max_offset=49)
    assert [h.base_offset for _, h in iter_batch_headers(info.records.read_bytes())] == [40, 44]
    assert log.read(60, 100, max_offset=60).records is None
    # At the log end: empty; beyond or below: OFFSET_OUT_OF_RANGE.
    assert log.read(120, 100).records is None
    with pytest.raises(OffsetOutOfRangeError) as exc:
        log.read(121, 100)
    assert exc.value.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    log.close()


def test_validation_errors(checked_tmp_path) -> None:
    log = _open(checked_tmp_path, max_message_bytes=500)
    corrupt = make_batch(2, timestamp=NOW)
    corrupt[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(corrupt, 0, now=NOW)
    with pytest.raises(RecordTooLargeError) as too_large:
        log.append_as_leader(make_batch(1, value_size=600, timestamp=NOW), 0, now=NOW)
    assert too_large.value.error_code == ErrorCode.MESSAGE_TOO_LARGE
    with pytest.raises(InvalidTimestampError):
        log.append_as_leader(make_batch(1, timestamp=NOW + 3_600_001), 0, now=NOW)
    control = build_batch_header(base_offset=0, records_size=0, attributes=0x20, last_offset_delta=0,
                                 base_timestamp=NOW, max_timestamp=NOW, records_count=1)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(control, 0, now=NOW)
    mismatched = build_batch_header(base_offset=0, records_size=0, attributes=0, last_offset_delta=4,
                                    base_timestamp=NOW, max_timestamp=NOW, records_count=2)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(mismatched, 0, now=NOW)
    assert log.log_end_offset == 0 and log.size == 0  # nothing written
    # A trailing partial batch is ignored, as Kafka's produce path does.
    whole = make_batch(2, timestamp=NOW)
    info = log.append_as_leader(whole + make_batch(1, timestamp=NOW)[:20], 0, now=NOW)
    assert info.valid_bytes == len(whole) and log.size == len(whole)
    log.close()


def test_roll_on_size_time_index_and_offset_overflow(checked_tmp_path) -> None:
    log = _open(checked_tmp_path, segment_bytes=1000, segment_ms=60_000)
    batch_size = len(make_batch(1, value_size=100))
    for _ in range(20):
        log.append_as_leader(make_batch(1, value_size=100, timestamp=NOW), 0, now=NOW)
    per_segment = 1000 // batch_size
    assert [s.base_offset for s in log.segments][:3] == [0, per_segment, 2 * per_segment]
    assert all(s.size <= 1000 for s in log.segments)
    # Rolled segments are fsynced: the recovery point reaches the active segment.
    assert log.recovery_point == log.active_segment.base_offset
    # segment.ms: by record timestamps relative to the segment's first batch.
    before = len(log.segments)
    log.append_as_leader(make_batch(1, timestamp=NOW + 60_001), 0, now=NOW)
    assert len(log.segments) == before + 1
    log.close()

    small_index = _open(checked_tmp_path / "b", segment_index_bytes=24, index_interval_bytes=1)
    for i in range(8):
        small_index.append_as_leader(make_batch(1, timestamp=NOW + i), 0, now=NOW)
    assert len(small_index.segments) > 2  # full offset/time index forces a roll
    small_index.close()

    follower = _open(checked_tmp_path / "c")
    for base in (0, 2**31 + 10):
        batch = make_batch(1, timestamp=NOW)
        patch_base_offset(batch, 0, base)
        follower.append_as_follower(batch, now=NOW)
    assert [s.base_offset for s in follower.segments] == [0, 2**31 + 10]
    follower.close()


def test_follower_append_keeps_offsets_and_epochs(checked_tmp_path) -> None:
    log = _open(checked_tmp_path)
    batches = bytearray()
    for base, epoch in ((0, 1), (3, 1), (10, 4)):  # a gap, as after compaction on the leader
        batch = make_batch(3, timestamp=NOW)
        patch_base_offset(batch, 0, base)
        struct.pack_into(">i", batch, 12, epoch)
        batches += batch
    log.append_as_follower(batches, now=NOW)
    assert log.log_end_offset == 13
    assert log.leader_epoch_cache.entries == [(1, 0), (4, 10)]
    stale = make_batch(1, timestamp=NOW)
    patch_base_offset(stale, 0, 12)
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(stale, now=NOW)
    log.close()


def test_try_append_as_follower_appends_only_what_cannot_block(checked_tmp_path) -> None:
    """The event-loop form of a follower append: done when no roll and no flush is due and the
    lock is free; otherwise nothing happens (None) and the append thread's form does it."""
    import threading

    first = make_batch(3, timestamp=NOW)
    log = _open(checked_tmp_path, segment_bytes=len(first) * 2 + 10)
    info = log.try_append_as_follower(first, now=NOW)
    assert info is not None and log.log_end_offset == 3
    second = make_batch(3, timestamp=NOW)
    patch_base_offset(second, 0, 3)
    assert log.try_append_as_follower(second, now=NOW) is not None
    third = make_batch(3, timestamp=NOW)
    patch_base_offset(third, 0, 6)
    segments = len(log.segments)
    assert log.try_append_as_follower(third, now=NOW) is None  # would roll: refused, untouched
    assert (log.log_end_offset, len(log.segments)) == (6, segments)
    held, release = threading.Event(), threading.Event()

    def hold_lock() -> None:
        with log.lock:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold_lock)
    holder.start()
    held.wait(10)
    try:
        assert log.try_append_as_follower(third, now=NOW) is None  # the lock is busy: never waits
    finally:
        release.set()
        holder.join(10)
    log.append_as_follower(third, now=NOW)  # the blocking form rolls
    assert (log.log_end_offset, len(log.segments)) == (9, segments + 1)
    assert [offset for offset, _ in _read_all(log)] == [0, 3, 6]  # batch base offsets
    log.close()
    flushing = _open(checked_tmp_path / "flush", flush_messages=5)
    assert flushing.try_append_as_follower(make_batch(3, timestamp=NOW), now=NOW) is not None
    fourth = make_batch(3, timestamp=NOW)
    patch_base_offset(fourth, 0, 3)
    assert flushing.try_append_as_follower(fourth, now=NOW) is None  # flush.messages would flush
    flushing.close()


def test_list_offsets_lookups_match_a_brute_force_scan(checked_tmp_path) -> None:
    rng = random.Random(7)
    log = _open(checked_tmp_path, segment_bytes=3000, index_interval_bytes=200)
    records: list[tuple[int, int]] = []  # (offset, timestamp)
    for i in range(150):
        count = rng.randint(1, 4)
        stamps = [NOW - 100_000 + rng.randint(0, 100_000) for _ in range(count)]
        info = log.append_as_leader(make_batch(count, timestamps=stamps, seed=i), leader_epoch=i // 50, now=NOW)
        records += [(info.first_offset + j, ts) for j, ts in enumerate(stamps)]
    log.update_high_watermark(log.log_end_offset)
    assert len(log.segments) > 5
    for target in [NOW - 100_001] + [rng.choice(records)[1] for _ in range(40)] + [NOW - 50_000, NOW + 1]:
        expected = next(((o, ts) for o, ts in records if ts >= target), None)
        found = log.fetch_offset_by_timestamp(target)
        assert (None if found is None else (found.offset, found.timestamp)) == expected, target
    latest = log.fetch_offset_by_timestamp(-1)
    assert (latest.offset, latest.leader_epoch) == (log.log_end_offset, 2)
    assert log.fetch_offset_by_timestamp(-2).offset == 0
    max_ts = max(ts for _, ts in records)
    found = log.fetch_offset_by_timestamp(-3)
    assert (found.offset, found.timestamp) == next((o, ts) for o, ts in records if ts == max_ts)
    log.close()


def test_flush_messages_advances_the_recovery_point(checked_tmp_path) -> None:
    log = _open(checked_tmp_path, flush_messages=5)
    for _ in range(4):
        log.append_as_leader(make_batch(1, timestamp=NOW), 0, now=NOW)
    assert log.recovery_point == 0
    log.append_as_leader(make_batch(1, timestamp=NOW), 0, now=NOW)
    assert log.recovery_point == 5
    log.close()
    timed = _open(checked_tmp_path / "b", flush_ms=1000)
    timed.append_as_leader(make_batch(1, timestamp=NOW), 0, now=NOW)
    assert not timed.flush_if_due(timed.last_flush_ms + 999)
    assert timed.flush_if_due(timed.last_flush_ms + 1000) and timed.recovery_point == 1
    timed.close()


def test_truncate_to_and_truncate_fully(checked_tmp_path) -> None:
    log = _open(checked_tmp_path, segment_bytes=1000)
    for i in range(30):
        log.append_as_leader(make_batch(2, value_size=80, timestamp=NOW), leader_epoch=i // 10, now=NOW)
    assert len(log.segments) > 3
    assert log.truncate_to(24)
    assert log.log_end_offset == 24 and log.active_segment.read_next_offset() == 24
    assert [o for o, _ in _read_all(log)][-1] == 22
    assert log.leader_epoch_cache.entries == [(0, 0), (1, 20)]
    info = log.append_as_leader(make_batch(1, timestamp=NOW), leader_epoch=3, now=NOW)
    assert info.first_offset == 24
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (500, 500, 1)
    assert log.append_as_leader(make_batch(1, timestamp=NOW), 4, now=NOW).first_offset == 500
    log.close()


def test_producer_state_hook_detects_duplicates_and_sequence_gaps(checked_tmp_path) -> None:
    from storage.producer_state import OutOfOrderSequenceError

    log = Log.open(checked_tmp_path / "topic-0", LogConfig(), producer_state=True)
    first = make_batch(3, timestamp=NOW, producer_id=42, producer_epoch=0, base_sequence=0)
    resend = bytearray(first)
    info = log.append_as_leader(first, 0, now=NOW)
    dup = log.append_as_leader(resend, 0, now=NOW)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (info.first_offset, info.last_offset)
    assert log.log_end_offset == 3
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(make_batch(1, timestamp=NOW, producer_id=42, producer_epoch=0, base_sequence=7), 0, now=NOW)
    log.append_as_leader(make_batch(1, timestamp=NOW, producer_id=42, producer_epoch=0, base_sequence=3), 0, now=NOW)
    log.close()
    # The state survives a reopen (snapshot at close) and still catches the duplicate.
    reopened = Log.open(checked_tmp_path / "topic-0", LogConfig(), had_clean_shutdown=True, producer_state=True)
    assert reopened.append_as_leader(bytearray(resend), 0, now=NOW).duplicate
    reopened.close()


def test_client_control_batch_from_coordinator_is_accepted(checked_tmp_path) -> None:
    from protocol.control_records import build_end_txn_marker_batch

    log = Log.open(checked_tmp_path / "topic-0", LogConfig(), producer_state=True)
    marker = build_end_txn_marker_batch(commit=True, producer_id=9, producer_epoch=0, coordinator_epoch=3, timestamp=NOW)
    info = log.append_as_leader(marker, 0, origin=AppendOrigin.COORDINATOR, now=NOW)
    assert info.first_offset == 0 and log.log_end_offset == 1
    log.close()


def test_reads_from_another_thread_while_appends_roll_segments(checked_tmp_path) -> None:
    import threading

    log = _open(checked_tmp_path, segment_bytes=3000, index_interval_bytes=100, segment_index_bytes=240)
    errors: list[BaseException] = []
    done = threading.Event()
    hw = [0]

    def reader() -> None:
        rng = random.Random(3)
        try:
            while not done.is_set():
                end = hw[0]
                if end == 0:
                    continue
                offset = rng.randrange(end)
                data = log.read(offset, 500, max_offset=end).records.read_bytes()
                first = parse_batch_header(data)
                assert first.base_offset <= offset <= first.last_offset
                found = log.fetch_offset_by_timestamp(NOW + offset // 2)
                assert found is not None and found.offset <= offset
        except BaseException as exc:  # surfaced in the main thread
            errors.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(900):
            info = log.append_as_leader(make_batch(2, timestamp=NOW + i, seed=i), 0, now=NOW)
            hw[0] = info.last_offset + 1
    finally:
        done.set()
        thread.join(timeout=30)
    assert not errors, errors[0]
    assert len(log.segments) > 25
    log.close()


def test_producer_state_is_rebuilt_from_the_log_after_a_crash(checked_tmp_path) -> None:
    from storage.producer_state import OutOfOrderSequenceError

    log = Log.open(checked_tmp_path / "topic-0", _config(segment_bytes=600), producer_state=True)
    batches = [make_batch(2, timestamp=NOW, producer_id=7, producer_epoch=1, base_sequence=2 * i) for i in range(12)]
    for batch in batches:
        log.append_as_leader(bytearray(batch), 0, now=NOW)
    assert len(log.segments) > 2  # snapshots were taken at the rolls
    log.close_without_flush()
    reopened = Log.open(checked_tmp_path / "topic-0", _config(segment_bytes=600), recovery_point=0, producer_state=True)
    dup = reopened.append_as_leader(bytearray(batches[-1]), 0, now=NOW)
    assert dup.duplicate and dup.first_offset == 22
    with pytest.raises(OutOfOrderSequenceError):
        reopened.append_as_leader(make_batch(1, timestamp=NOW, producer_id=7, producer_epoch=1, base_sequence=30), 0, now=NOW)
    assert reopened.append_as_leader(
        make_batch(1, timestamp=NOW, producer_id=7, producer_epoch=1, base_sequence=24), 0, now=NOW).first_offset == 24
    reopened.close()


def test_follower_appends_are_not_held_to_max_message_bytes(checked_tmp_path) -> None:
    log = _open(checked_tmp_path, max_message_bytes=200)
    big = make_batch(1, value_size=1000, timestamp=NOW)
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(bytearray(big), 0, now=NOW)
    assert log.append_as_follower(big, now=NOW).last_offset == 0  # the leader already accepted it
    log.close()


def test_io_errors_surface_as_kafka_storage_error(checked_tmp_path, monkeypatch) -> None:
    import errno
    import os

    from storage.errors import KafkaStorageError

    log = _open(checked_tmp_path)
    log.append_as_leader(make_batch(1, timestamp=NOW), 0, now=NOW)

    def disk_full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", disk_full)
    monkeypatch.setattr(os, "pread", disk_full)
    with pytest.raises(KafkaStorageError) as exc:
        log.append_as_leader(make_batch(1, timestamp=NOW), 0, now=NOW)
    assert exc.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    with pytest.raises(KafkaStorageError):
        log.read(0, 100)
    monkeypatch.undo()
    assert log.log_end_offset == 1  # nothing half-appended
    assert log.append_as_leader(make_batch(1, timestamp=NOW), 0, now=NOW).first_offset == 1
    log.close()
