"""The scale benchmark's own logic, and small real runs against pafka: the partitions
scenario verifies every record, and the start-up scenario shows a crash recovery that
scans exactly the unflushed bytes."""

from __future__ import annotations

import pytest

from benchmarks.suite import scale_clients, scale_storage
from benchmarks.suite.bench_brokers import start_pafka


def test_expected_counts_spread_the_remainder_over_the_first_partitions() -> None:
    partitions = [("a", 0), ("a", 1), ("b", 0)]
    assert scale_clients.expected_counts(partitions, 8) == {("a", 0): 3, ("a", 1): 3, ("b", 0): 2}
    assert scale_clients.expected_offsets({("a", 0): 3}) == {("a", 0): 4}  # plus the warm-up record


def test_recovery_scans_sum_only_the_lines_logged_since_the_offset(tmp_path) -> None:
    log = tmp_path / "broker.log"
    old = "t-0: recovering unflushed segment 0\nt-0: segment 0 recovered: 999 bytes scanned from position 0\n"
    new = ("t-0: recovering unflushed segment 0\nt-0: segment 0 recovered: 120 bytes scanned from position 40\n"
           "t-1: recovering unflushed segment 7\nt-1: segment 7 recovered: 0 bytes scanned from position 512\n")
    log.write_text(old + new)
    assert scale_storage.recovery_scans(log, len(old)) == (2, 120)


@pytest.mark.slow
def test_partitions_scenario_reads_every_record_back(tmp_path) -> None:
    broker = start_pafka(tmp_path / "data")
    try:
        result = scale_clients.run_partitions(broker, topics=2, per_topic=3, records=600, metadata_repeats=3)
    finally:
        broker.stop()
    assert result["read_back_ok"] is True
    assert result["list_offsets_match"] == 6 and result["metadata_partitions_seen"] == 6
    assert result["records_per_s"] > 0 and result["metadata_ms_p50"] > 0


@pytest.mark.slow
def test_startup_scenario_recovery_scans_exactly_the_unflushed_bytes(tmp_path) -> None:
    result = scale_storage.run_startup(tmp_path, 12 << 20, topics=2, partitions=2, repeats=1, write_timeout=60,
                                       on_phase=lambda _: None)
    runs = result["runs"]
    assert runs["clean"][0]["scanned_bytes"] == 0 and runs["clean"][0]["recovered_segments"] == 0
    assert runs["kill_after_clean"][0]["scanned_bytes"] == 0
    assert runs["kill_after_clean"][0]["recovered_segments"] == 4  # every active segment, by header only
    assert runs["kill_all_unflushed"][0]["scanned_bytes"] == result["written_bytes"]
    some = runs["kill_some_unflushed"][0]
    assert some["scanned_bytes"] == some["unflushed_bytes"] > 0
