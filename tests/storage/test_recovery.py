"""Opening a log after a crash: scans past the recovery point, truncation at the first bad
batch, index rebuilds, stray files, and completion of interrupted segment swaps."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from protocol.record_batch import iter_batch_headers
from storage.log import Log
from storage.log_config import LogConfig
from storage.log_segment import LogSegment
from tests.storage.helpers import check_log_dir_with_kafka_python, make_batch

NOW = 1_700_000_000_000
CONFIG = LogConfig.model_validate({"segment.bytes": 2000, "index.interval.bytes": 250})


def _write_log(dir: Path, batches: int = 60) -> tuple[list[int], dict[int, int]]:
    """A log of several segments closed WITHOUT flush; returns batch base offsets and sizes."""
    log = Log.open(dir, CONFIG)
    bases, sizes = [], {}
    for i in range(batches):
        batch = make_batch(2, timestamp=NOW + i, seed=i, value_size=60)
        info = log.append_as_leader(batch, leader_epoch=i // 20, now=NOW)
        bases.append(info.first_offset)
        sizes[info.first_offset] = len(batch)
    log.close_without_flush()
    return bases, sizes


def _batches(log: Log) -> list[int]:
    out = []
    for segment in log.segments:
        out += [h.base_offset for _, h in segment.batches()]
    return out


def test_byte_flipped_in_the_middle_is_found_logged_and_truncated(tmp_path, caplog) -> None:
    dir = tmp_path / "t-0"
    bases, _ = _write_log(dir)
    log = Log.open(dir, CONFIG, recovery_point=0)
    segments = log.log_segments()
    log.close_without_flush()
    assert len(segments) >= 4
    middle = segments[len(segments) // 2]
    headers = list(iter_batch_headers(middle.log.path.read_bytes()))
    pos, victim = headers[len(headers) // 2]
    data = bytearray(middle.log.path.read_bytes())
    data[pos + 70] ^= 0x01  # inside the records: only the CRC can tell
    middle.log.path.write_bytes(data)
    later = [s.log.path for s in segments if s.base_offset > middle.base_offset]

    with caplog.at_level(logging.WARNING, logger="storage"):
        recovered = Log.open(dir, CONFIG, recovery_point=0)
    assert any("CRC32C mismatch" in r.getMessage() and str(pos) in r.getMessage() for r in caplog.records)
    assert recovered.log_end_offset == victim.base_offset
    assert _batches(recovered) == [b for b in bases if b < victim.base_offset]
    assert not any(p.exists() for p in later)  # later segments deleted, as Kafka does
    assert recovered.read(victim.base_offset - 1, 10**6).records is not None
    info = recovered.append_as_leader(make_batch(1, timestamp=NOW), 9, now=NOW)
    assert info.first_offset == victim.base_offset
    recovered.close()
    check_log_dir_with_kafka_python(dir)


def test_torn_and_zero_filled_tails_are_cut(checked_tmp_path) -> None:
    dir = checked_tmp_path / "t-0"
    _write_log(dir, batches=10)
    active = max(dir.glob("*.log"))
    data = active.read_bytes()
    last_pos, last = list(iter_batch_headers(data))[-1]
    os.truncate(active, last_pos + last.size_in_bytes - 7)      # torn last batch
    with open(active, "ab") as f:
        f.write(b"\x00" * 4096)                                  # and a zero-filled tail
    log = Log.open(dir, CONFIG, recovery_point=0)
    assert log.log_end_offset == last.base_offset
    assert active.stat().st_size == last_pos
    log.close()
    check_log_dir_with_kafka_python(dir)


def test_segments_below_the_recovery_point_are_not_rescanned(checked_tmp_path, caplog) -> None:
    dir = checked_tmp_path / "t-0"
    _write_log(dir)
    log = Log.open(dir, CONFIG, recovery_point=0)
    log.flush()
    recovery_point = log.active_segment.base_offset
    log.close_without_flush()
    with caplog.at_level(logging.INFO, logger="storage.log_loader"):
        Log.open(dir, CONFIG, recovery_point=recovery_point).close()
    scanned = [r.getMessage() for r in caplog.records if "recovering unflushed segment" in r.getMessage()]
    assert scanned == [f"t-0: recovering unflushed segment {recovery_point}"]


def test_producer_snapshots_are_not_taken_for_orphaned_index_files(checked_tmp_path) -> None:
    # The snapshot a clean close takes at the log end (not a segment base) must
    # survive the reopen: it spares the replay of the whole log.
    dir = checked_tmp_path / "t-0"
    log = Log.open(dir, CONFIG, producer_state=True)
    for i in range(5):
        log.append_as_leader(make_batch(2, timestamp=NOW + i, seed=i, value_size=60), leader_epoch=0, now=NOW)
    end = log.log_end_offset
    assert end not in {s.base_offset for s in log.segments}
    log.close()
    snapshot = dir / f"{end:020d}.snapshot"
    assert snapshot.exists()
    reopened = Log.open(dir, CONFIG, had_clean_shutdown=True, producer_state=True)
    assert snapshot.exists()
    reopened.close()


def test_missing_and_corrupt_indexes_are_rebuilt_even_after_a_clean_shutdown(checked_tmp_path) -> None:
    dir = checked_tmp_path / "t-0"
    log = Log.open(dir, CONFIG)
    for i in range(60):
        log.append_as_leader(make_batch(2, timestamp=NOW + i, value_size=60), 0, now=NOW)
    log.update_high_watermark(log.log_end_offset)
    expected = {i: log.fetch_offset_by_timestamp(NOW + i) for i in range(0, 60, 7)}
    log.close()
    first, second = sorted(dir.glob("*.index"))[:2]
    reference = first.read_bytes()
    first.unlink()
    second.write_bytes(b"\x00\x00\x00\x00\x00\x00\x00\x01")   # last offset == base: corrupt
    sorted(dir.glob("*.timeindex"))[2].unlink()
    reopened = Log.open(dir, CONFIG, had_clean_shutdown=True)
    assert first.read_bytes() == reference
    assert {i: reopened.fetch_offset_by_timestamp(NOW + i) for i in range(0, 60, 7)} == expected
    reopened.close()
    check_log_dir_with_kafka_python(dir)


def test_leader_epochs_are_restored_from_the_batches(checked_tmp_path) -> None:
    dir = checked_tmp_path / "t-0"
    _write_log(dir)
    (dir / "leader-epoch-checkpoint").unlink()
    log = Log.open(dir, CONFIG, recovery_point=0)
    assert log.leader_epoch_cache.entries == [(0, 0), (1, 40), (2, 80)]
    log.close()


def test_stray_cleaned_deleted_and_tmp_files_are_removed(checked_tmp_path) -> None:
    dir = checked_tmp_path / "t-0"
    _write_log(dir, batches=5)
    for name in ("00000000000000000000.log.cleaned", "00000000000000000000.index.deleted",
                 "00000000000000000003.log.deleted", "leader-epoch-checkpoint.tmp"):
        (dir / name).write_bytes(b"junk")
    log = Log.open(dir, CONFIG, recovery_point=0)
    assert sorted(p.name for p in dir.iterdir() if p.name.endswith((".cleaned", ".deleted", ".tmp"))) == []
    assert log.log_end_offset == 10
    log.close()


# --- interrupted segment swaps (the cleaner's replaceSegments) ---------------------------------


def _log_with_segments(dir: Path) -> Log:
    log = Log.open(dir, CONFIG)
    for i in range(60):
        log.append_as_leader(make_batch(2, timestamp=NOW + i, seed=i, value_size=60), 0, now=NOW)
    log.update_high_watermark(log.log_end_offset)
    return log


def _cleaned_copy(log: Log, olds: list[LogSegment]) -> LogSegment:
    """A '.cleaned' segment holding every other batch of ``olds`` (as compaction might)."""
    cleaned = LogSegment.open(log.dir, olds[0].base_offset, log.config, file_suffix=".cleaned", create=True)
    n = 0
    for old in olds:
        for pos, header in old.batches():
            if n % 2 == 0 or header.next_offset == olds[-1].read_next_offset():
                cleaned.append_batches(old.read_batch(pos, header))
            n += 1
    return cleaned


def _content(log: Log) -> list[tuple[int, bytes]]:
    out = []
    for segment in log.segments:
        out += [(h.base_offset, segment.read_batch(p, h)) for p, h in segment.batches()]
    return out


def test_replace_segments_swaps_cleaned_segments_in(checked_tmp_path) -> None:
    dir = checked_tmp_path / "t-0"
    log = _log_with_segments(dir)
    olds = log.log_segments()[:3]
    cleaned = _cleaned_copy(log, olds)
    expected = [(o, b) for s in [cleaned] for o, b in [(h.base_offset, s.read_batch(p, h)) for p, h in s.batches()]]
    log.replace_segments([cleaned], olds)
    assert log.log_segments()[0] is cleaned and cleaned.log.path.name == "00000000000000000000.log"
    assert _content(log)[: len(expected)] == expected
    assert sorted(p.name for p in dir.glob("*.deleted"))  # old files wait for file.delete.delay.ms
    assert log.delete_pending_segments(now=10**15) == 3
    assert not list(dir.glob("*.deleted"))
    log.close()
    reopened = Log.open(dir, CONFIG, had_clean_shutdown=True)
    assert _content(reopened)[: len(expected)] == expected
    reopened.close()


def _crash_copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_a_crash_at_any_swap_step_leaves_a_readable_log(checked_tmp_path) -> None:
    dir = checked_tmp_path / "base" / "t-0"
    log = _log_with_segments(dir)
    before = _content(log)
    olds = log.log_segments()[:3]
    cleaned = _cleaned_copy(log, olds)
    cleaned.on_become_inactive_segment()
    cleaned.flush()
    after_clean = [(h.base_offset, cleaned.read_batch(p, h)) for p, h in cleaned.batches()]
    after = after_clean + [x for x in before if x[0] >= olds[-1].read_next_offset()]
    log.flush()

    states = {}
    # 1. crashed while writing .cleaned files: the clean is undone.
    states["cleaned"] = (_crash_copy(dir, checked_tmp_path / "s1" / "t-0"), before)
    # 2. after .cleaned -> .swap: the swap completes on open.
    cleaned.change_file_suffixes(".cleaned", ".swap")
    states["swap"] = (_crash_copy(dir, checked_tmp_path / "s2" / "t-0"), after)
    # 3. some old segments already renamed .deleted.
    olds[0].change_file_suffixes("", ".deleted")
    states["some deleted"] = (_crash_copy(dir, checked_tmp_path / "s3" / "t-0"), after)
    # 4. all old ones .deleted, swap not yet renamed.
    for old in olds[1:]:
        old.change_file_suffixes("", ".deleted")
    states["all deleted"] = (_crash_copy(dir, checked_tmp_path / "s4" / "t-0"), after)
    log.close_without_flush()
    for name, (state_dir, expected) in states.items():
        reopened = Log.open(state_dir, CONFIG, recovery_point=0)
        assert _content(reopened) == expected, name
        assert not [p for p in state_dir.iterdir() if p.name.endswith((".swap", ".cleaned", ".deleted"))], name
        reopened.close()
        check_log_dir_with_kafka_python(state_dir)


ONE_SEGMENT = LogConfig.model_validate({"segment.bytes": 1 << 20, "index.interval.bytes": 250})


def _flushed_then_unflushed(dir: Path, flushed: int, unflushed: int) -> tuple[int, list[int]]:
    """One segment: ``flushed`` batches then a flush, ``unflushed`` more, then a crash.
    Returns the recovery point and every batch's base offset."""
    log = Log.open(dir, ONE_SEGMENT)
    bases = []
    for i in range(flushed + unflushed):
        if i == flushed:
            log.flush()
        info = log.append_as_leader(make_batch(2, timestamp=NOW + i, seed=i, value_size=60), 0, now=NOW)
        bases.append(info.first_offset)
    recovery_point = log.recovery_point
    log.close_without_flush()
    return recovery_point, bases


def _read_positions(log: Log, bases: list[int]) -> list[int]:
    return [log.read(b, 1).fetch_offset_metadata.relative_position_in_segment for b in bases]


def _file_positions(dir: Path, bases: list[int]) -> list[int]:
    by_base = {h.base_offset: pos for pos, h in iter_batch_headers(next(dir.glob("*.log")).read_bytes())}
    return [by_base[b] for b in bases]


def test_recovery_rescans_only_what_follows_the_recovery_point_in_its_segment(checked_tmp_path, monkeypatch) -> None:
    import storage.file_records as file_records

    dir = checked_tmp_path / "t-0"
    recovery_point, bases = _flushed_then_unflushed(dir, flushed=200, unflushed=10)
    reference = Log.open(shutil.copytree(dir, checked_tmp_path / "copy-0"), ONE_SEGMENT, recovery_point=0)
    times = [NOW + i for i in range(0, 215, 3)]
    expected = [reference.fetch_offset_by_timestamp(t) for t in times]
    reference.close()
    validated: list[int] = []
    real = file_records.validate_batch
    monkeypatch.setattr(file_records, "validate_batch", lambda buf, pos: validated.append(pos) or real(buf, pos))
    log = Log.open(dir, ONE_SEGMENT, recovery_point=recovery_point)
    # Only the 10 unflushed batches are checked (a whole-segment scan checked all 210); the
    # flushed ones after the last index entry below the recovery point are walked by header.
    assert len(validated) == 10
    assert log.log_end_offset == bases[-1] + 2 and len(log.segments) == 1
    log.update_high_watermark(log.log_end_offset)
    assert _read_positions(log, bases) == _file_positions(dir, bases)  # the index finds every batch
    assert [log.fetch_offset_by_timestamp(t) for t in times] == expected
    log.close()


def test_a_corrupt_batch_after_the_recovery_point_is_cut_and_the_index_rebuilt_past_it(checked_tmp_path) -> None:
    dir = checked_tmp_path / "t-0"
    recovery_point, bases = _flushed_then_unflushed(dir, flushed=100, unflushed=20)
    path = next(dir.glob("*.log"))
    headers = list(iter_batch_headers(path.read_bytes()))
    pos, victim = headers[110]
    data = bytearray(path.read_bytes())
    data[pos + 70] ^= 0x01
    path.write_bytes(data)
    log = Log.open(dir, ONE_SEGMENT, recovery_point=recovery_point)
    assert log.log_end_offset == victim.base_offset
    assert _batches(log) == bases[:110]
    log.update_high_watermark(log.log_end_offset)
    assert _read_positions(log, bases[:110]) == _file_positions(dir, bases[:110])
    for i in range(5):  # appends after recovery index on from the recovered state
        log.append_as_leader(make_batch(2, timestamp=NOW + 500 + i, seed=i, value_size=60), 0, now=NOW)
    log.close()
    reopened = Log.open(dir, ONE_SEGMENT, had_clean_shutdown=True)
    assert reopened.fetch_offset_by_timestamp(NOW + 500).offset == victim.base_offset
    assert reopened.fetch_offset_by_timestamp(NOW + 50).offset == bases[49] + 1  # batch i: times i, i+1
    reopened.close()


def test_a_recovery_point_past_intact_data_falls_back_to_a_full_scan(tmp_path) -> None:
    # A checkpoint can name a recovery point beyond what the file holds (a crash before the
    # checkpoint that followed a truncation): the batch the index names must be checked.
    dir = tmp_path / "t-0"
    recovery_point, bases = _flushed_then_unflushed(dir, flushed=100, unflushed=0)
    log = Log.open(dir, ONE_SEGMENT, recovery_point=recovery_point)
    entry = log.active_segment.offset_index.lookup(recovery_point - 1)
    log.close_without_flush()
    path = next(dir.glob("*.log"))
    with open(path, "r+b") as f:
        f.truncate(entry.position + 30)  # the indexed batch torn, its index entry kept
    recovered = Log.open(dir, ONE_SEGMENT, recovery_point=recovery_point)
    first_lost = next(b for b in bases if b + 1 >= entry.offset)
    assert recovered.log_end_offset == first_lost
    assert _batches(recovered) == [b for b in bases if b < first_lost]
    recovered.close()


def test_recovery_points_are_checkpointed_right_after_a_recovery(tmp_path) -> None:
    from storage.checkpoints import RECOVERY_POINT_OFFSET_CHECKPOINT, OffsetCheckpointFile
    from storage.log_manager import LogManager

    manager = LogManager([tmp_path], ONE_SEGMENT)
    manager.startup()
    log = manager.get_or_create_log("t", 0)
    for i in range(50):
        log.append_as_leader(make_batch(2, timestamp=NOW + i, seed=i, value_size=60), 0, now=NOW)
    log.flush()
    manager.checkpoint_log_recovery_offsets()
    manager.close_without_clean_shutdown()
    path = next((tmp_path / "t-0").glob("*.log"))
    headers = list(iter_batch_headers(path.read_bytes()))
    with open(path, "r+b") as f:
        f.truncate(headers[20][0] + 5)  # as a lost disk cache would leave it
    checkpoint = OffsetCheckpointFile(tmp_path / RECOVERY_POINT_OFFSET_CHECKPOINT)
    assert checkpoint.read_or_empty()[("t", 0)] == 100
    manager = LogManager([tmp_path], ONE_SEGMENT)
    manager.startup()
    assert manager.get_log("t", 0).log_end_offset == headers[20][1].base_offset
    assert checkpoint.read_or_empty()[("t", 0)] == headers[20][1].base_offset
    manager.shutdown()
