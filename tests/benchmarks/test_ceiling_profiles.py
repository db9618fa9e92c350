"""The ceiling client's own checks (a broker cannot win by answering with less) and the
profile folding; plus one quick ceiling run against a real pafka."""

from __future__ import annotations

import json

import pytest

from benchmarks.suite import broker_ceiling as ceiling
from benchmarks.suite import profiles
from protocol.api import encode_response
from protocol.buffers import join_chunks
from protocol.messages.fetch import FetchableTopicResponse, FetchResponse, PartitionData
from protocol.record_batch import patch_base_offset

VERSION = 12


def _fetch_answer(batches: list[bytearray], error_code: int = 0) -> memoryview:
    body = FetchResponse(responses=[FetchableTopicResponse(topic="t", partitions=[
        PartitionData(partition_index=0, error_code=error_code, high_watermark=100, last_stable_offset=100,
                      log_start_offset=0, records=b"".join(batches))])])
    return memoryview(join_chunks(encode_response(1, VERSION, 0, body))[4:])


def _batch_at(batch: bytearray, offset: int) -> bytearray:
    copy = bytearray(batch)
    patch_base_offset(copy, 0, offset)
    return copy


@pytest.mark.parametrize("size", [16 << 10, 1 << 20])
def test_batches_have_exactly_the_size_asked(size: int) -> None:
    assert len(ceiling.build_sized_batch(size, ceiling.records_per_batch(size))) == size


def test_fetch_plan_counts_each_batch_once_and_refetches_what_is_missing() -> None:
    batch = ceiling.build_sized_batch(16 << 10, 16)
    plan = ceiling.FetchPlan(partition=0, batches=8, records_per_batch=16, batch_bytes=len(batch), batches_per_fetch=4)
    # A broker answering the fetch at batch 0 with only two batches of the four asked:
    plan.check(0, _fetch_answer([_batch_at(batch, 0), _batch_at(batch, 16)]), VERSION)
    plan.check(4, _fetch_answer([_batch_at(batch, 16 * i) for i in range(4, 8)]), VERSION)
    assert plan.bytes == 6 * len(batch)
    assert plan.missing_starts() == [2]
    plan.check(2, _fetch_answer([_batch_at(batch, 32), _batch_at(batch, 48), _batch_at(batch, 64)]), VERSION)
    assert plan.bytes == 8 * len(batch)  # batch 4 again: not counted twice
    assert plan.missing_starts() == []


def test_fetch_plan_refuses_wrong_offsets_corrupt_batches_and_errors() -> None:
    batch = ceiling.build_sized_batch(16 << 10, 16)
    plan = ceiling.FetchPlan(partition=0, batches=8, records_per_batch=16, batch_bytes=len(batch), batches_per_fetch=4)
    with pytest.raises(RuntimeError, match="began at offset"):
        plan.check(1, _fetch_answer([_batch_at(batch, 0)]), VERSION)
    corrupt = _batch_at(batch, 0)
    corrupt[-1] ^= 0xFF
    with pytest.raises(Exception, match=r"(?i)crc"):
        plan.check(0, _fetch_answer([corrupt]), VERSION)
    with pytest.raises(RuntimeError, match="fetch failed"):
        plan.check(0, _fetch_answer([], error_code=1), VERSION)


def test_profiles_fold_self_and_inclusive_by_function() -> None:
    raw = [
        "main (tools/cli.py);run (asyncio/runners.py);append (storage/file_records.py) 30",
        ("main (tools/cli.py);run (asyncio/runners.py);handle (broker/handlers/produce.py);"
         "append (storage/file_records.py) 10"),
        "main (tools/cli.py);run (asyncio/runners.py) 5",
    ]
    total, self_counts, inclusive = profiles.fold(raw)
    assert total == 45
    assert self_counts["append (storage/file_records.py)"] == 40
    assert inclusive["handle (broker/handlers/produce.py)"] == 10
    p = profiles.Profile("x", 1.0, total, self_counts, inclusive)
    assert [f for f, _ in profiles.top_inclusive(p, 5)] == ["append (storage/file_records.py)",
                                                             "handle (broker/handlers/produce.py)"]


def test_a_quick_ceiling_run_against_pafka_verifies_and_reports(capsys: pytest.CaptureFixture[str]) -> None:
    assert ceiling.main(["--quick", "--repeats", "1", "--brokers", "pafka", "--no-machine",
                         "--loads", "produce-16KiB-acks1,fetch-16KiB", "--data-scale", "0.25"]) == 0
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    rows = {row["load"]: row["pafka"] for row in figures["rows"]}
    assert rows["produce-16KiB-acks1"]["mb_s"] > 0 and rows["fetch-16KiB"]["retries"] == 0
    fetched = next(r for r in figures["runs"] if r["load"] == "fetch-16KiB")
    assert fetched["bytes"] == 2 * (8 << 20)  # 8 MiB per pass (quick 32 MiB x 0.25), two passes, each batch once


def test_a_quick_spread_produce_appends_one_batch_to_each_of_1000_partitions(
        capsys: pytest.CaptureFixture[str]) -> None:
    # Every request's answer must list all 1,000 partitions without error, or the run fails.
    assert ceiling.main(["--quick", "--repeats", "1", "--brokers", "pafka", "--no-machine",
                         "--loads", "produce-1000p-3KiB", "--data-scale", "0.5"]) == 0
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    (run,) = figures["runs"]
    assert run["requests"] == (8 << 20) // (3 << 10) // 1000 == 2  # quick 16 MiB x 0.5, 1,000 batches each
    assert run["bytes"] == run["requests"] * 1000 * (3 << 10)
