"""benchmarks/suite/cluster.py's own logic on a real three-broker cluster (the peer is not needed):
a small RF 3 produce run verified end to end, a latency run, and a follower catch-up measured."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from benchmarks.suite import cluster as cluster_bench
from benchmarks.suite.client_latency import Scenario as LatencyScenario
from benchmarks.suite.client_throughput import Scenario, build_values
from pytest_pafka.cluster import Cluster


@pytest.fixture(scope="module")
def bench_cluster() -> Iterator[Cluster]:
    with Cluster(3, *cluster_bench.CLUSTER_OVERRIDES) as cluster:
        yield cluster
        print(cluster.log_tails())


def test_produce_run_replicates_and_verifies(bench_cluster: Cluster) -> None:
    target = cluster_bench.cluster_target(bench_cluster)
    assert target.replication_factor == 3 and len(target.pids) == 3
    s = Scenario("small RF 3", 20_000, 100, 6)
    run = cluster_bench.produce_run(target, s, build_values(s.records, s.size), 120.0)
    assert run["ok"], run.get("error")
    assert run["acked"] == run["received"] == s.records
    assert run["produce_cpu_s"] > 0  # summed over the three brokers
    assert run["delete_error"] is None


def test_latency_run(bench_cluster: Cluster) -> None:
    run = cluster_bench.latency_run(cluster_bench.cluster_target(bench_cluster),
                                    LatencyScenario("1k/s acks=all", "all", 1000, 1.0, 10_000))
    assert run["ok"], run.get("error")
    assert run["missing"] == 0 and run["e2e_p50_ms"] is not None


def test_catch_up_run_measures_a_follower(bench_cluster: Cluster) -> None:
    run = cluster_bench.catch_up_run(bench_cluster, 16 * 1024 * 1024, 120.0)
    assert run["ok"], run.get("error")
    assert run["behind_MB"] >= 16 and run["catch_up_MB_s"] > 0
    assert sorted(bench_cluster.running_ids()) == [1, 2, 3], "the stopped follower is running again"


def test_targets_and_checks() -> None:
    checks: dict[str, dict] = {}
    cluster_bench.check(checks, "at least", 0.9, 1.0, True)
    cluster_bench.check(checks, "at most", 2.5, 3.0, False)
    cluster_bench.check(checks, "missing", None, 3.0, False)
    assert [c["met"] for c in checks.values()] == [False, True, False]
