"""Log compaction end to end on real logs: what survives, what the files look like."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.control_records import build_end_txn_marker_batch
from storage.checkpoints import CLEANER_OFFSET_CHECKPOINT, OffsetCheckpointFile
from storage.errors import InvalidRecordError
from storage.log import FetchIsolation, Log
from storage.log_cleaner import LogCleaner, LogCleaningAbortedError, cleanable_offsets
from storage.producer_state import AppendOrigin
from tests.storage.cleaner_support import (
    BASE_TIMESTAMP,
    KafkaPythonBatch,
    append_keyed,
    batch_headers,
    compact_config,
    kafka_python_batches,
    kafka_python_records,
    key_of,
    latest_per_key,
    pafka_records,
    write_workload,
)

RETENTION = 60_000


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def partition_dir(tmp_path: Path) -> Path:
    d = tmp_path / "data" / "topic-0"
    d.mkdir(parents=True)
    return d


@pytest.fixture
def opened(partition_dir: Path) -> Iterator[list[Log]]:
    logs: list[Log] = []
    yield logs
    for log in logs:
        log.close()


def open_log(partition_dir: Path, opened: list[Log], **config: object) -> Log:
    log = Log.open(partition_dir, compact_config(**config))
    opened.append(log)
    return log


def seal(log: Log) -> None:
    """Roll so everything written is in inactive segments, and let the HW cover it."""
    log.roll()
    log.update_high_watermark(log.log_end_offset)


def test_100k_records_compact_to_the_latest_value_per_key(partition_dir: Path, opened: list[Log]) -> None:
    log = open_log(partition_dir, opened, **{"delete.retention.ms": RETENTION})
    written = write_workload(log)
    seal(log)
    original = {h.base_offset: h for h in batch_headers(partition_dir)}
    latest = latest_per_key(written)
    assert len(latest) == 10_000
    expected = sorted(latest.values())
    clock = Clock(BASE_TIMESTAMP + 10_000)
    cleaner = LogCleaner(time_ms=clock)

    result = cleaner.clean_once([log])

    assert result is not None and result.end_offset == 100_000
    # Exactly the latest record of every key, tombstones included, in offset order,
    # as another implementation's parser reads the files (every batch passes its CRC).
    seen = kafka_python_records(partition_dir)
    assert seen == expected
    assert pafka_records(partition_dir) == expected  # timestamps kept too
    for batch in kafka_python_batches(partition_dir):
        before = original[batch.base_offset]
        assert batch.codec == before.compression_type
        assert batch.last_offset == before.last_offset
    # Tombstone batches now carry the delete horizon (KIP-534).
    tombstone_offsets = {w.offset for w in expected if w.value is None}
    assert tombstone_offsets
    for header in batch_headers(partition_dir):
        holds_tombstone = any(header.base_offset <= o <= header.last_offset for o in tombstone_offsets)
        assert header.has_delete_horizon == holds_tombstone
        if holds_tombstone:
            assert header.base_timestamp == clock.now + RETENTION
    assert (partition_dir.parent / "cleaner-offset-checkpoint").read_text() == "0\n1\ntopic 0 100000\n"
    check_indexes_point_at_batches(log)

    # Before the horizon a new pass keeps the tombstones.
    clock.now += RETENTION - 1
    cleaner.clean_log(log)
    assert kafka_python_records(partition_dir) == expected
    # Once it has passed they go; every live key keeps its latest value.
    clock.now += 2
    cleaner.clean_log(log)
    live = [w for w in expected if w.value is not None]
    assert kafka_python_records(partition_dir) == live
    check_indexes_point_at_batches(log)
    assert len(live) < len(expected)

    # The log reopens to the same content and keeps appending after the gaps.
    log.close()
    opened.remove(log)
    log = open_log(partition_dir, opened)
    assert log.log_end_offset == 100_000
    assert pafka_records(partition_dir) == live
    more = append_keyed(log, [(key_of(1), False)])
    assert more[0].offset == 100_000


def check_indexes_point_at_batches(log: Log) -> None:
    """Every offset index entry of the cleaned segments names a batch start holding its offset."""
    for segment in log.log_segments():
        starts = dict(segment.batches())
        for slot in range(segment.offset_index.entries):
            entry = segment.offset_index.entry(slot)
            header = starts.get(entry.position)
            assert header is not None, f"{segment}: index entry {entry} is not at a batch start"
            assert header.base_offset <= entry.offset <= header.last_offset
        for slot in range(segment.time_index.entries):
            ts_entry = segment.time_index.entry(slot)
            assert segment.base_offset <= ts_entry.offset < segment.read_next_offset()


def test_dirty_ratio_and_compaction_lag_decide_what_is_cleaned(partition_dir: Path, opened: list[Log]) -> None:
    log = open_log(partition_dir, opened, **{"min.cleanable.dirty.ratio": 0.5, "min.compaction.lag.ms": 1_000,
                                             "segment.bytes": 4096})
    for i in range(40):
        append_keyed(log, [(key_of(j), False) for j in range(10)], timestamp=BASE_TIMESTAMP + i * 100)
    seal(log)
    clock = Clock(BASE_TIMESTAMP + 40 * 100 + 10_000)
    cleaner = LogCleaner(time_ms=clock)
    assert [ltc.log for ltc in cleaner.cleanable_logs([log])] == [log]
    cleaner.clean_once([log])
    assert len(pafka_records(partition_dir)) == 10

    # A little new dirty data: below the ratio, nothing to do.
    append_keyed(log, [(key_of(0), False)], timestamp=clock.now)
    seal(log)
    assert cleaner.cleanable_logs([log]) == []
    assert cleaner.clean_once([log]) is None

    # Lots of new data but younger than min.compaction.lag.ms: not cleanable yet.
    for _ in range(40):
        append_keyed(log, [(key_of(j), False) for j in range(10)], timestamp=clock.now)
    seal(log)
    first_dirty, first_uncleanable, _ = cleanable_offsets(log, cleaner.last_clean_offset(log), clock.now)
    assert first_uncleanable == first_dirty  # the lag holds everything back
    assert cleaner.clean_once([log]) is None
    clock.now += 1_000 + 10  # records carry timestamp + index in batch
    assert cleaner.clean_once([log]) is not None
    assert sorted(w.key for w in pafka_records(partition_dir)) == [key_of(j) for j in range(10)]


def test_active_segment_and_data_above_the_high_watermark_are_not_cleaned(
    partition_dir: Path, opened: list[Log]
) -> None:
    log = open_log(partition_dir, opened, **{"segment.bytes": 2048})
    for _ in range(30):
        append_keyed(log, [(key_of(0), False), (key_of(1), False)])
    log.update_high_watermark(20)
    active = log.active_segment
    active_bytes = active.log.path.read_bytes()
    cleaner = LogCleaner(time_ms=Clock(BASE_TIMESTAMP + 10**6))
    result = cleaner.clean_log(log)
    assert result is not None and result.end_offset <= 20
    records = pafka_records(partition_dir)
    # Everything from the high watermark on is still there, the active segment untouched.
    assert [w.offset for w in records if w.offset >= result.end_offset] == list(range(result.end_offset, 60))
    assert log.active_segment is active and active.log.path.read_bytes() == active_bytes
    # Below the cleaned offset only the latest of each key (within the cleaned range) is left.
    below = [w for w in records if w.offset < result.end_offset]
    assert [w.offset for w in below] == [result.end_offset - 2, result.end_offset - 1]


def test_groups_fit_segment_bytes(partition_dir: Path, opened: list[Log]) -> None:
    log = open_log(partition_dir, opened, **{"segment.bytes": 8192})
    for i in range(200):
        append_keyed(log, [(key_of(i * 5 + j), False) for j in range(5)])  # unique keys: nothing to drop
    seal(log)
    cleaner = LogCleaner(time_ms=Clock(BASE_TIMESTAMP + 10**6))
    before = pafka_records(partition_dir)
    result = cleaner.clean_log(log)
    assert result is not None and result.groups >= 2
    assert pafka_records(partition_dir) == before
    for segment in log.log_segments():
        assert segment.size <= 8192


def test_keyless_records_are_dropped_as_kafka_does(partition_dir: Path, opened: list[Log]) -> None:
    # A compacted topic refuses keyless records, so they exist only when the
    # topic was switched to compact after they were written.
    log = open_log(partition_dir, opened, **{"cleanup.policy": "delete"})
    append_keyed(log, [(None, False), (key_of(1), False), (None, False)])
    append_keyed(log, [(key_of(2), False)])
    log.config = compact_config()
    seal(log)
    LogCleaner(time_ms=Clock(BASE_TIMESTAMP + 10**6)).clean_log(log)
    assert [w.key for w in pafka_records(partition_dir)] == [key_of(1), key_of(2)]


def test_a_compacted_log_refuses_keyless_records(partition_dir: Path, opened: list[Log]) -> None:
    log = open_log(partition_dir, opened)
    with pytest.raises(InvalidRecordError, match="without key"):
        append_keyed(log, [(key_of(1), False), (None, False)])
    assert log.log_end_offset == 0


def test_idempotent_producer_metadata_survives_and_last_batch_is_kept_empty(
    partition_dir: Path, opened: list[Log]
) -> None:
    log = open_log(partition_dir, opened)
    append_keyed(log, [(key_of(1), False), (key_of(2), False)], producer=(42, 3, 0), codec=1)
    append_keyed(log, [(key_of(1), False)], producer=(42, 3, 2), codec=1)
    append_keyed(log, [(key_of(2), False)], producer=(42, 3, 3))
    append_keyed(log, [(key_of(1), False)], producer=(43, 0, 0))
    append_keyed(log, [(key_of(1), False)])  # supersedes producer 43's only record
    append_keyed(log, [(key_of(2), False)])
    seal(log)
    LogCleaner(time_ms=Clock(BASE_TIMESTAMP + 10**6)).clean_log(log)
    batches = kafka_python_batches(partition_dir)
    by_base = {b.base_offset: b for b in batches}
    # Producer 42's first two batches lost every record: gone. Its last one
    # (offset 3) lost its record too but stays, empty, with its sequence.
    assert 0 not in by_base and 2 not in by_base
    assert (by_base[3].producer_id, by_base[3].producer_epoch, by_base[3].base_sequence) == (42, 3, 3)
    assert by_base[3].records == []
    assert (by_base[4].producer_id, by_base[4].records) == (43, [])
    assert [r.offset for b in batches for r in b.records] == [5, 6]
    # The state rebuilt from the cleaned log still knows both producers' last sequences.
    log.close()
    opened.remove(log)
    reopened = Log.open(partition_dir, compact_config(), producer_state=True)
    opened.append(reopened)
    assert reopened.producer_state.last_entry(42).last_seq == 3  # type: ignore[union-attr]
    assert reopened.producer_state.last_entry(43).last_seq == 0  # type: ignore[union-attr]


def _marker(log: Log, pid: int, commit: bool, ts: int) -> None:
    batch = build_end_txn_marker_batch(commit=commit, producer_id=pid, producer_epoch=0, coordinator_epoch=1,
                                       timestamp=ts)
    log.append_as_leader(batch, leader_epoch=0, origin=AppendOrigin.COORDINATOR, now=ts)


def test_aborted_transactions_are_removed_and_markers_expire(partition_dir: Path, opened: list[Log]) -> None:
    # Producer state: the log learns of aborted transactions (its .txnindex) through it.
    log = Log.open(partition_dir, compact_config(**{"delete.retention.ms": RETENTION}), producer_state=True)
    opened.append(log)
    ts = BASE_TIMESTAMP
    append_keyed(log, [(key_of(1), False), (key_of(2), False)], producer=(7, 0, 0), transactional=True)  # 0-1
    append_keyed(log, [(key_of(3), False)], producer=(8, 0, 0), transactional=True)  # 2
    _marker(log, 7, commit=False, ts=ts)  # 3: abort producer 7's data
    _marker(log, 8, commit=True, ts=ts)  # 4: commit producer 8's data
    append_keyed(log, [(key_of(1), False), (key_of(4), False)], producer=(9, 0, 0))  # 5-6
    append_keyed(log, [(key_of(3), False)])  # 7: supersedes the committed key-3
    append_keyed(log, [(key_of(5), False)])  # 8
    seal(log)
    clock = Clock(ts + 1_000)
    cleaner = LogCleaner(time_ms=clock, producer_id_expiration_ms=10_000)

    def batches() -> dict[int, KafkaPythonBatch]:
        return {b.base_offset: b for b in kafka_python_batches(partition_dir)}

    def data_offsets() -> list[int]:
        return [r.offset for b in batches().values() for r in b.records if not b.is_control]

    def horizons() -> dict[int, int | None]:
        return {h.base_offset: h.base_timestamp if h.has_delete_horizon else None
                for h in batch_headers(partition_dir) if h.is_control}

    # Pass 1: aborted data is dropped, but the last batch of each active
    # producer stays (empty) for its sequence/epoch; both markers stay while
    # batches of their transactions are still in the log.
    cleaner.clean_log(log)
    assert data_offsets() == [5, 6, 7, 8]
    assert batches()[0].records == [] and batches()[0].is_transactional
    assert batches()[2].records == [] and batches()[2].producer_id == 8
    assert horizons() == {3: None, 4: None}

    # Pass 2: the producers have expired, so their empty batches go; the
    # markers stay for this pass (their transactions' batches were just seen).
    clock.now = ts + 20_000
    cleaner.clean_log(log)
    assert set(batches()) == {3, 4, 5, 7, 8}
    assert horizons() == {3: None, 4: None}

    # Pass 3: no data left for either transaction: markers get a delete horizon.
    cleaner.clean_log(log)
    assert horizons() == {3: clock.now + RETENTION, 4: clock.now + RETENTION}

    # Pass 4, after the horizon: the markers are gone, the data is unchanged.
    clock.now += RETENTION
    cleaner.clean_log(log)
    assert horizons() == {}
    assert data_offsets() == [5, 6, 7, 8]
    assert [r.key for b in batches().values() for r in b.records] == [key_of(1), key_of(4), key_of(3), key_of(5)]


def test_checkpoint_past_the_log_end_is_reset(partition_dir: Path, opened: list[Log]) -> None:
    log = open_log(partition_dir, opened)
    append_keyed(log, [(key_of(1), False)] * 3)
    seal(log)
    cleaner = LogCleaner(time_ms=Clock(BASE_TIMESTAMP))
    cleaner.update_checkpoint(log, 500)
    assert cleanable_offsets(log, cleaner.last_clean_offset(log), BASE_TIMESTAMP)[0] == 0
    cleaner.clean_once([log])
    assert cleaner.last_clean_offset(log) == 3
    assert [w.offset for w in pafka_records(partition_dir)] == [2]



@pytest.mark.parametrize("content", ["", "0\n", "zero\n1\ntopic 0 5\n", "0\n2\ntopic 0 5\n", "0\n1\ntopic 0\n"])
def test_malformed_cleaner_checkpoint_is_logged_and_read_as_empty(
    partition_dir: Path, opened: list[Log], caplog: pytest.LogCaptureFixture, content: str
) -> None:
    log = open_log(partition_dir, opened)
    append_keyed(log, [(key_of(1), False)] * 3)
    seal(log)
    checkpoint = partition_dir.parent / "cleaner-offset-checkpoint"
    checkpoint.write_text(content)
    cleaner = LogCleaner(time_ms=Clock(BASE_TIMESTAMP))
    with caplog.at_level(logging.ERROR, logger="storage.checkpoints"):
        assert cleaner.last_clean_offset(log) is None
        result = cleaner.clean_once([log])
    assert any(str(checkpoint) in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)
    # Cleaned from the log start, and the file rewritten in Kafka's format.
    assert result is not None and result.first_dirty_offset == 0 and result.end_offset == 3
    assert checkpoint.read_text() == "0\n1\ntopic 0 3\n"
    assert [w.offset for w in pafka_records(partition_dir)] == [2]


def test_a_full_offset_map_cleans_in_several_passes(partition_dir: Path, opened: list[Log]) -> None:
    log = open_log(partition_dir, opened, **{"segment.bytes": 16 * 1024})
    written = write_workload(log, keys=1_000, total=5_000, seed=5)
    seal(log)
    # Room for 400 keys per pass (24 bytes a slot, load factor 0.9).
    cleaner = LogCleaner(dedupe_buffer_size=24 * 445, time_ms=Clock(BASE_TIMESTAMP + 10**6))
    first = cleaner.clean_once([log])
    assert first is not None and 0 < first.end_offset < 5_000
    assert cleaner.last_clean_offset(log) == first.end_offset
    passes = 1
    while cleaner.last_clean_offset(log) < 5_000:
        assert cleaner.clean_log(log) is not None
        passes += 1
        assert passes < 50
    assert passes > 2
    assert pafka_records(partition_dir) == sorted(latest_per_key(written).values())


def test_producer_state_of_the_log_decides_which_producer_batches_stay(
    partition_dir: Path, opened: list[Log]
) -> None:
    log = Log.open(partition_dir, compact_config(), producer_state=True)
    opened.append(log)
    append_keyed(log, [(key_of(1), False)], producer=(42, 0, 0))
    append_keyed(log, [(key_of(1), False)], producer=(42, 0, 1))
    append_keyed(log, [(key_of(1), False)])
    seal(log)
    LogCleaner(time_ms=Clock(BASE_TIMESTAMP + 10**6)).clean_log(log)
    by_base = {b.base_offset: b for b in kafka_python_batches(partition_dir)}
    assert 0 not in by_base
    assert by_base[1].records == [] and by_base[1].base_sequence == 1
    # Once the broker expired the producer, its last batch may go too.
    assert log.producer_state.remove_expired_producers(BASE_TIMESTAMP + 10**9) == [42]  # type: ignore[union-attr]
    LogCleaner(time_ms=Clock(BASE_TIMESTAMP + 10**6)).clean_log(log)
    assert [b.base_offset for b in kafka_python_batches(partition_dir)] == [2]


def test_cleaned_segments_keep_aborted_transactions_for_read_committed(partition_dir: Path, opened: list[Log]) -> None:
    config = compact_config(**{"delete.retention.ms": RETENTION})
    log = Log.open(partition_dir, config, producer_state=True)
    opened.append(log)
    ts = BASE_TIMESTAMP
    # Three segments, one cleaned group: each transaction's entry comes from a different source segment.
    append_keyed(log, [(key_of(1), False), (key_of(2), False)], producer=(7, 0, 0), transactional=True)  # 0-1
    log.roll()
    _marker(log, 7, commit=False, ts=ts)  # 2
    append_keyed(log, [(key_of(3), False)], producer=(8, 0, 0), transactional=True)  # 3
    log.roll()
    _marker(log, 8, commit=False, ts=ts)  # 4
    append_keyed(log, [(key_of(5), False)])  # 5
    seal(log)

    def read_committed_aborts(target: Log) -> list[tuple[int, int, int]]:
        """What a READ_COMMITTED consumer reading the whole log is told, fetch by fetch."""
        seen: list[tuple[int, int, int]] = []
        offset = target.log_start_offset
        while offset < target.last_stable_offset:
            info = target.read(offset, 10**6, isolation=FetchIsolation.TXN_COMMITTED)
            assert info.next_offset is not None and info.next_offset > offset
            for t in info.aborted_transactions or []:
                if (t.producer_id, t.first_offset, t.last_offset) not in seen:
                    seen.append((t.producer_id, t.first_offset, t.last_offset))
            offset = info.next_offset
        return seen

    assert read_committed_aborts(log) == [(7, 0, 2), (8, 3, 4)]
    clock = Clock(ts + 1_000)
    cleaner = LogCleaner(time_ms=clock, producer_id_expiration_ms=10_000)
    cleaner.clean_log(log)
    log.delete_pending_segments(now=2**62)
    # One cleaned segment holds the emptied data batches of both transactions and their markers.
    assert [s.base_offset for s in log.log_segments()] == [0, 6]
    assert {b.base_offset: (b.is_control, len(b.records))
            for b in kafka_python_batches(partition_dir) if b.producer_id in (7, 8)} == {
        0: (False, 0), 2: (True, 1), 3: (False, 0), 4: (True, 1)}
    assert read_committed_aborts(log) == [(7, 0, 2), (8, 3, 4)]
    assert sorted(p.name for p in partition_dir.iterdir() if ".txnindex" in p.name) == ["00000000000000000000.txnindex"]

    # On disk: a clean reopen reads the cleaned .txnindex as written.
    log.close()
    opened.remove(log)
    log = Log.open(partition_dir, config, had_clean_shutdown=True, producer_state=True)
    opened.append(log)
    assert read_committed_aborts(log) == [(7, 0, 2), (8, 3, 4)]

    # Crashes during the final ".swap" -> live renames (the log is renamed first):
    # before any rename the loader completes the swap and rebuilds the entries
    # with producer state; after the log's rename the index files' renames are finished.
    for renamed_back in ((".log", ".index", ".timeindex", ".txnindex"), (".timeindex", ".txnindex"), (".txnindex",)):
        log.close()
        opened.remove(log)
        for suffix in renamed_back:
            path = partition_dir / f"00000000000000000000{suffix}"
            path.rename(path.with_name(path.name + ".swap"))
        log = Log.open(partition_dir, config, had_clean_shutdown=True, producer_state=True)
        opened.append(log)
        assert read_committed_aborts(log) == [(7, 0, 2), (8, 3, 4)], renamed_back
        assert not [p.name for p in partition_dir.iterdir() if p.name.endswith(".swap")]

    # Once the producers expired their batches go; the next pass finds no data
    # of either transaction, so the markers and the index entries go too.
    log.update_high_watermark(log.log_end_offset)
    clock.now = ts + 20_000
    cleaner.clean_log(log)
    assert read_committed_aborts(log) == [(7, 0, 2), (8, 3, 4)]  # markers seen with batches: kept this pass
    cleaner.clean_log(log)
    log.delete_pending_segments(now=2**62)
    assert read_committed_aborts(log) == []
    assert not [p.name for p in partition_dir.iterdir() if ".txnindex" in p.name]


def test_a_paused_partition_is_not_cleaned_and_a_running_pass_stops(partition_dir: Path, opened: list[Log]) -> None:
    log = open_log(partition_dir, opened, **{"segment.bytes": 4096})
    for i in range(40):
        append_keyed(log, [(key_of(j), False) for j in range(10)], timestamp=BASE_TIMESTAMP + i)
    seal(log)
    cleaner, tp = LogCleaner(), (log.topic, log.partition)
    cleaner.pause_cleaning(tp)
    cleaner.pause_cleaning(tp)  # pauses nest: two resumes before it is cleanable again
    assert cleaner.cleanable_logs([log]) == [] and cleaner.clean_once([log]) is None
    with pytest.raises(LogCleaningAbortedError):
        cleaner.clean_log(log)
    cleaner.await_pause(tp)  # no pass runs: returns at once
    cleaner.resume_paused_cleaning(tp)
    assert cleaner.cleanable_logs([log]) == []
    cleaner.resume_paused_cleaning(tp)

    # A pass paused at its first batch stops, leaves the files as they were and lets await_pause return.
    ltc = cleaner.grab_filthiest_log([log])
    assert ltc is not None
    before = len(pafka_records(partition_dir))
    check_done = cleaner._check_done
    cleaner._check_done = lambda log_: (cleaner.pause_cleaning(tp), check_done(log_))[1]  # type: ignore[method-assign]
    with pytest.raises(LogCleaningAbortedError):
        cleaner.clean(ltc, BASE_TIMESTAMP + 10_000)
    cleaner.await_pause(tp)
    assert len(pafka_records(partition_dir)) == before
    cleaner._check_done = check_done  # type: ignore[method-assign]
    cleaner.resume_paused_cleaning(tp)
    assert cleaner.clean_once([log]) is not None
    assert len(pafka_records(partition_dir)) == 10


def test_the_cleaner_checkpoint_moves_with_the_log(tmp_path: Path) -> None:
    source, dest = tmp_path / "a", tmp_path / "b"
    source.mkdir()
    dest.mkdir()
    OffsetCheckpointFile(source / CLEANER_OFFSET_CHECKPOINT).write({("t", 0): 42, ("t", 1): 7})
    OffsetCheckpointFile(dest / CLEANER_OFFSET_CHECKPOINT).write({("u", 0): 3})
    cleaner = LogCleaner()
    cleaner.alter_checkpoint_dir(("t", 0), source, dest)
    assert OffsetCheckpointFile(source / CLEANER_OFFSET_CHECKPOINT).read_or_empty() == {("t", 1): 7}
    assert OffsetCheckpointFile(dest / CLEANER_OFFSET_CHECKPOINT).read_or_empty() == {("u", 0): 3, ("t", 0): 42}
    cleaner.alter_checkpoint_dir(("t", 5), source, dest)  # nothing checkpointed: nothing written
    assert OffsetCheckpointFile(dest / CLEANER_OFFSET_CHECKPOINT).read_or_empty() == {("u", 0): 3, ("t", 0): 42}
