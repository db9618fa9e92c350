"""The leader's record-level checks (Kafka's LogValidator): maxTimestamp recomputed from the
records when a batch's header cannot be right, and per-record errors (KIP-467) naming the
records a topic refuses. Batches come from kafka-python's builder; headers are rewritten here
with struct and the crc32c package, not with the code under test."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder

import storage.log_append
from protocol import compression
from protocol.errors import ErrorCode
from protocol.record_batch import iter_batch_headers, validate_batch
from protocol.records import iter_records
from storage.errors import InvalidRecordError, InvalidTimestampError
from storage.log import Log
from storage.log_config import LogConfig
from tests.storage.helpers import make_batch

NOW = 1_700_000_000_000
HOUR = 3_600_000


def _open(path: Path, **props: object) -> Log:
    return Log.open(path / "topic-0", LogConfig.model_validate({k.replace("_", "."): v for k, v in props.items()}))


def _with_max_timestamp(batch: bytearray, max_timestamp: int) -> bytearray:
    """``batch`` with its header's maxTimestamp replaced and its CRC32C made right again."""
    out = bytearray(batch)
    struct.pack_into(">q", out, 35, max_timestamp)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return out


def _stored(log: Log) -> list[bytes]:
    info = log.read(0, 1 << 20)
    assert info.records is not None
    data = info.records.read_bytes()
    return [bytes(data[pos:pos + h.size_in_bytes]) for pos, h in iter_batch_headers(data)]


CODECS = [compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("header_max", [-1, NOW - 1])  # sarama 1.22's -1; below the first timestamp
def test_an_implausible_max_timestamp_is_recomputed_from_the_records(checked_tmp_path: Path, codec: int,
                                                                     header_max: int) -> None:
    log = _open(checked_tmp_path, index_interval_bytes=1)
    timestamps = [[NOW, NOW + 40, NOW + 7], [NOW + 100, NOW + 250, NOW + 90]]
    for stamps in timestamps:
        sent = _with_max_timestamp(make_batch(3, timestamps=stamps, compression_type=codec), header_max)
        info = log.append_as_leader(bytearray(sent), 0, now=NOW)
        assert info.max_timestamp == max(stamps)
    stored = _stored(log)
    for stamps, batch in zip(timestamps, stored, strict=True):
        header = validate_batch(batch)  # the CRC was recomputed with the field
        assert header.max_timestamp == max(stamps)
        assert [r.timestamp for r in iter_records(batch)] == stamps
    # The time index holds the real maxima (an entry per batch after the first at this interval).
    segment = log.log_segments()[0]
    entries = [segment.time_index.entry(i) for i in range(segment.time_index.entries)]
    assert [(e.timestamp, e.offset) for e in entries] == [(NOW + 250, 5)]
    assert segment.max_timestamp_so_far == NOW + 250
    # ListOffsets by timestamp: the first offset whose record timestamp is >= the target.
    by_time = {t: log.fetch_offset_by_timestamp(t) for t in (NOW, NOW + 8, NOW + 41, NOW + 95, NOW + 251)}
    assert {t: (None if r is None else r.offset) for t, r in by_time.items()} == {
        NOW: 0, NOW + 8: 1, NOW + 41: 3, NOW + 95: 3, NOW + 251: None}
    log.close()
    # Reloaded from disk (the index rebuilt from the stored headers), the answers stand.
    log = _open(checked_tmp_path, index_interval_bytes=1)
    assert log.fetch_offset_by_timestamp(NOW + 95).offset == 3  # type: ignore[union-attr]
    log.close()


def test_a_batch_with_a_plausible_header_is_stored_as_it_came_without_reading_its_records(
        checked_tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the records of a plausible batch were read")

    monkeypatch.setattr(storage.log_append, "read_batch", refuse)
    log = _open(checked_tmp_path)
    # A header max above every record (a client's own business): trusted, as the hot path must.
    sent = _with_max_timestamp(make_batch(3, timestamps=[NOW, NOW + 1, NOW + 2]), NOW + 9)
    log.append_as_leader(bytearray(sent), 0, now=NOW)
    stored = _stored(log)[0]
    assert stored[61:] == bytes(sent[61:]) and validate_batch(stored).max_timestamp == NOW + 9
    log.close()


def test_log_append_time_topics_stamp_the_append_time_over_an_implausible_header(checked_tmp_path: Path) -> None:
    log = _open(checked_tmp_path, message_timestamp_type="LogAppendTime")
    log.append_as_leader(_with_max_timestamp(make_batch(2, timestamps=[5, 9]), -1), 0, now=NOW)
    header = validate_batch(_stored(log)[0])
    assert header.max_timestamp == NOW and header.timestamp_type == 1
    log.close()


def test_keyless_records_on_a_compacted_topic_are_named_by_batch_index(checked_tmp_path: Path) -> None:
    log = _open(checked_tmp_path, cleanup_policy="compact")
    batch = make_batch(5, key=b"k", timestamp=NOW)
    # Records 1 and 3 keyless (compressed: the validator reads through the codec).
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression.GZIP, is_transactional=0,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for i in range(5):
        builder.append(i, timestamp=NOW + i, key=None if i in (1, 3) else b"k", value=b"v", headers=[])
    keyless = bytearray(builder.build())
    with pytest.raises(InvalidRecordError) as refused:
        log.append_as_leader(keyless, 0, now=NOW)
    message = "Compacted topic cannot accept message without key in topic partition topic-0"
    assert [(e.batch_index, e.message) for e in refused.value.record_errors] == [(1, message), (3, message)]
    assert refused.value.error_code == ErrorCode.INVALID_RECORD
    assert str(refused.value) == (
        "One or more records have been rejected due to 2 record errors in total, and only showing the first "
        f"three errors at most: [RecordError(batchIndex=1, message='{message}'), "
        f"RecordError(batchIndex=3, message='{message}')]")
    assert log.log_end_offset == 0 and log.size == 0
    log.append_as_leader(batch, 0, now=NOW)  # every record keyed: accepted
    assert log.log_end_offset == 5
    log.close()


def test_out_of_range_timestamps_are_named_by_batch_index(checked_tmp_path: Path) -> None:
    log = _open(checked_tmp_path, message_timestamp_before_max_ms=HOUR, message_timestamp_after_max_ms=HOUR)
    old, future = NOW - HOUR - 1, NOW + HOUR + 1
    stamps = [old, NOW, NOW - HOUR, future, NOW + HOUR, old]  # the bounds themselves are accepted
    with pytest.raises(InvalidTimestampError) as refused:
        log.append_as_leader(make_batch(6, timestamps=stamps), 0, now=NOW)
    bounds = f"[{NOW - HOUR}, {NOW + HOUR}]"
    expected = "Timestamp {} of message with offset {} is out of range. The timestamp should be within {}"
    assert [(e.batch_index, e.message) for e in refused.value.record_errors] == [
        (i, expected.format(stamps[i], i, bounds)) for i in (0, 3, 5)]
    assert str(refused.value) == "One or more records have been rejected due to invalid timestamp"
    assert refused.value.error_code == ErrorCode.INVALID_TIMESTAMP
    # Only the largest out of range (the first record fine): still found by the header alone.
    with pytest.raises(InvalidTimestampError) as refused:
        log.append_as_leader(make_batch(3, timestamps=[NOW, future, NOW]), 0, now=NOW)
    assert [e.batch_index for e in refused.value.record_errors] == [1]
    assert log.log_end_offset == 0
    log.close()


def test_a_keyless_record_is_reported_as_such_and_a_bad_timestamp_makes_the_batch_invalid_timestamp(
        checked_tmp_path: Path) -> None:
    """Kafka checks a record's key before its timestamp; one bad timestamp makes it INVALID_TIMESTAMP."""
    log = _open(checked_tmp_path, cleanup_policy="compact", message_timestamp_after_max_ms=HOUR)
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for i, (key, ts) in enumerate([(None, NOW + 2 * HOUR), (b"k", NOW + 2 * HOUR), (b"k", NOW)]):
        builder.append(i, timestamp=ts, key=key, value=b"v", headers=[])
    with pytest.raises(InvalidTimestampError) as refused:
        log.append_as_leader(bytearray(builder.build()), 0, now=NOW)
    errors = refused.value.record_errors
    assert [e.batch_index for e in errors] == [0, 1]
    assert errors[0].message.startswith("Compacted topic cannot accept message without key")
    assert errors[1].message.startswith(f"Timestamp {NOW + 2 * HOUR} of message with offset 1 is out of range")
    log.close()


def test_the_timestamp_rule_judges_the_recomputed_maximum(checked_tmp_path: Path) -> None:
    """Header maxTimestamp -1 hides nothing: the records' own timestamps are checked."""
    log = _open(checked_tmp_path, message_timestamp_after_max_ms=HOUR)
    hidden = _with_max_timestamp(make_batch(3, timestamps=[NOW, NOW + 2 * HOUR, NOW]), -1)
    with pytest.raises(InvalidTimestampError) as refused:
        log.append_as_leader(hidden, 0, now=NOW)
    assert [e.batch_index for e in refused.value.record_errors] == [1]
    log.append_as_leader(_with_max_timestamp(make_batch(3, timestamps=[NOW, NOW + HOUR, NOW]), -1), 0, now=NOW)
    assert validate_batch(_stored(log)[0]).max_timestamp == NOW + HOUR
    log.close()
