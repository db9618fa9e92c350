"""The client benchmarks' own logic: verification, percentiles, the suite runner, and one
real throughput run against a pafka broker (the peer is not needed for that)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.suite import bench_brokers, client_common, client_latency, client_throughput, consume_only, suite


class FakeMessage:
    """Just what verify() reads from a confluent_kafka.Message."""

    def __init__(self, partition: int, value: bytes | None, error: object = None) -> None:
        self._partition, self._value, self._error = partition, value, error

    def partition(self) -> int:
        return self._partition

    def value(self) -> bytes | None:
        return self._value

    def error(self) -> object:
        return self._error


def records(seqs: list[tuple[int, int]], size: int = 16) -> list[FakeMessage]:
    return [FakeMessage(p, client_throughput.SEQ.pack(seq) + bytes(size - 4)) for p, seq in seqs]


def test_verify_accepts_every_record_once_in_partition_order() -> None:
    result = client_throughput.verify(records([(0, 0), (1, 1), (0, 2), (1, 3)]), sent=4, size=16)
    assert (result["missing"], result["duplicated"], result["out_of_order"], result["malformed"]) == (0, 0, 0, 0)


def test_verify_finds_missing_duplicated_reordered_and_malformed_records() -> None:
    messages = records([(0, 0), (0, 2), (0, 2), (1, 3), (1, 1)])
    messages.append(FakeMessage(1, b"short"))
    messages.append(FakeMessage(0, None, error="broker error"))
    result = client_throughput.verify(messages, sent=5, size=16)
    assert result["missing"] == 1  # seq 4
    assert result["duplicated"] == 1  # seq 2 twice
    assert result["out_of_order"] == 2  # the second 2 on partition 0, then 1 after 3 on partition 1
    assert result["malformed"] == 1
    assert result["consume_errors"] == 1


def test_values_carry_their_sequence_and_size() -> None:
    values = client_throughput.build_values(1000, 100)
    assert {len(v) for v in values} == {100}
    assert [client_throughput.SEQ.unpack_from(v)[0] for v in values] == list(range(1000))
    assert len({v[4:] for v in values}) > 900  # not one repeated body: compression has work


def test_percentile_is_nearest_rank() -> None:
    values = list(range(1, 1001))
    assert bench_brokers.percentile(values, 50) == 500
    assert bench_brokers.percentile(values, 99) == 990
    assert bench_brokers.percentile(values, 99.9) == 999
    assert bench_brokers.percentile([], 50) is None


def test_compare_leaves_failed_runs_out_of_the_medians() -> None:
    pafka = [{"ok": True, "x": 10.0}, {"ok": False, "x": 1000.0, "error": "pafka: missing=3"}, {"ok": True, "x": 20.0}]
    peer = [{"ok": True, "x": 5.0}]
    result = client_common.compare(pafka, peer, ["x"])
    assert result["pafka"]["x"] == 15.0
    assert result["ratio"]["x"] == 3.0
    assert (result["pafka_ok"], result["pafka_runs"]) == (2, 3)
    assert result["failures"] == ["pafka: missing=3"]


def test_suite_collects_figures_and_reports_missing_and_failed_parts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "client_throughput.py").write_text(
        "import json, sys\nprint('| table |')\nprint(json.dumps({'argv': sys.argv[1:]}))\n")
    (tmp_path / "client_latency.py").write_text("import sys\nprint('half a table')\nsys.exit(3)\n")
    monkeypatch.setattr(suite, "HERE", tmp_path)
    out = tmp_path / "all.json"
    code = suite.main(["--quick", "--repeats", "2", "--only", "client_latency,client_throughput,scale",
                       "--json-out", str(out)])
    printed = capsys.readouterr().out
    parts = json.loads(out.read_text())["parts"]
    assert code == 1  # client_latency failed
    assert parts["client_throughput"]["status"] == "ok"
    assert parts["client_throughput"]["figures"] == {"argv": ["--quick", "--repeats", "2"]}
    assert parts["client_latency"]["status"] == "failed"
    assert parts["scale"] == {"status": "missing"}
    assert "| table |" in printed and "half a table" in printed
    assert printed.index("| table |") < printed.index("half a table")  # the suite's order


@pytest.mark.slow
def test_throughput_run_against_pafka_verifies_every_record(tmp_path: Path) -> None:
    broker = bench_brokers.start_pafka(tmp_path / "data", log_path=tmp_path / "pafka.log")
    try:
        scenario = client_throughput.Scenario("test", records=20_000, size=100, partitions=3, acks="1")
        values = client_throughput.build_values(scenario.records, scenario.size)
        run = client_throughput.run_once(broker, scenario, values, timeout_s=30.0)
        assert run["ok"], run.get("error")
        assert (run["acked"], run["received"], run["missing"]) == (20_000, 20_000, 0)
        assert run["produce_msgs_s"] > 0 and run["consume_msgs_s"] > 0
        assert run["produce_cpu_s"] >= 0 and run["peak_rss_mb"] > 0
        assert run["delete_error"] is None
    finally:
        broker.stop()


@pytest.mark.slow
def test_latency_run_against_pafka_sees_every_record_end_to_end(tmp_path: Path) -> None:
    broker = bench_brokers.start_pafka(tmp_path / "data", log_path=tmp_path / "pafka.log")
    try:
        scenario = client_latency.Scenario("test", acks="1", rate=2000, seconds=1.0, max_records=2000)
        run = client_latency.run_once(broker, scenario)
        assert run["ok"], run.get("error")
        assert (run["sent"], run["acked"], run["received"], run["missing"]) == (2000, 2000, 2000, 0)
        assert 0 < run["produce_p50_ms"] <= run["produce_p99_ms"] <= run["produce_p999_ms"]
        assert 0 < run["e2e_p50_ms"] <= run["e2e_p99_ms"]
        assert run["client_stalled_ms"] is not None and run["delete_error"] is None
    finally:
        broker.stop()


def test_thread_deltas_sum_librdkafka_broker_threads_as_the_fetcher_and_drop_idle_threads() -> None:
    before = {"application#1": (1.0, 100, 10), "rdk:broker0#2": (0.5, 50, 5), "rdk:main#4": (0.1, 1, 1),
              "rdk:queue#5": (0.0, 0, 0)}
    after = {"application#1": (1.5, 160, 30), "rdk:broker0#2": (0.75, 80, 6),
             "rdk:broker1#3": (0.25, 20, 2),  # started meanwhile: counted from zero
             "rdk:main#4": (0.102, 1, 2),  # under 5 ms of CPU: idle, left out
             "rdk:queue#5": (0.5, 7, 1)}  # busy: listed
    assert consume_only.thread_deltas(before, after) == {
        "application": {"cpu_s": 0.5, "minflt": 60, "voluntary_switches": 20},
        "fetcher": {"cpu_s": 0.5, "minflt": 50, "voluntary_switches": 3},
        "rdk:queue": {"cpu_s": 0.5, "minflt": 7, "voluntary_switches": 1},
    }


def test_thread_deltas_always_report_the_application_and_the_fetcher() -> None:
    # A short run can take less than one clock tick of CPU: the two threads stay in the report.
    counters = {"application#1": (2.0, 10, 1), "rdk:broker0#2": (1.0, 5, 1)}
    assert consume_only.thread_deltas(counters, counters) == {
        "application": {"cpu_s": 0, "minflt": 0, "voluntary_switches": 0},
        "fetcher": {"cpu_s": 0, "minflt": 0, "voluntary_switches": 0},
    }


@pytest.mark.slow
def test_consume_only_child_reads_every_record_and_reports_its_threads(tmp_path: Path) -> None:
    broker = bench_brokers.start_pafka(tmp_path / "data", log_path=tmp_path / "pafka.log")
    try:
        scenario = client_throughput.Scenario("test", records=20_000, size=100, partitions=3, acks="1")
        topic = consume_only.fill(broker, scenario, client_throughput.build_values(scenario.records, scenario.size))
        args = consume_only.parse_args(["--records", "20000", "--partitions", "3", "--repeats", "1",
                                        "--timeout", "30"])
        run = consume_only.consume_once(broker, topic, args)
        assert run["received"] == 20_000 and run["msgs_s"] > 0
        # The application thread builds 20,000 messages after the first snapshot, so it faults in
        # fresh pages; CPU comes in 10 ms ticks, which so few records may not fill, and the fetcher
        # may have fetched everything before the snapshot: both are only reported.
        assert run["threads"]["application"]["minflt"] > 0
        assert set(run["threads"]) >= {"application", "fetcher"}
        assert run["fetch_responses"] >= 1 and run["fetched_MB"] >= 2.0  # 20,000 x 100 B at least
        assert run["peak_rss_mb"] > 0 and run["touch_us_per_page"] > 0
    finally:
        broker.stop()
