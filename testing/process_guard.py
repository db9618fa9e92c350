"""The ``process`` marker: which tests start a process, found at collection and enforced while they run.

``pytest -m "not process"`` is the quick run: in-process tests only. It stays quick only if every test
that starts a process (a broker, ZooKeeper, a client tool, a JVM, ``mypy``) carries the marker, so two
halves keep it true:

- ``mark_process_tests`` (from ``pytest_collection_modifyitems``) marks each test that uses one of
  ``PROCESS_FIXTURES`` (pytest lists a test's fixtures with everything they depend on, so a module's own
  fixture built on ``zookeeper`` is covered), lives in one of ``PROCESS_MODULES`` (modules whose tests
  or helpers start processes themselves), or is one of ``PROCESS_TESTS``. A module may instead say
  ``pytestmark = pytest.mark.process``, a test ``@pytest.mark.process``.
- ``ProcessGuard`` makes every way of starting a process (``subprocess``, which asyncio's subprocesses
  go through, ``os.fork``/``posix_spawn``/``system``, ``multiprocessing``) fail a test that is not marked,
  during its set-up and call, with a message saying to mark it: a missing mark shows up as a
  failure in the quick run instead of silently slowing it down.
"""

from __future__ import annotations

import multiprocessing.process
import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

#: Fixtures that start a process (directly or through a harness), by name: the suite's own and the
#: ``pytest_pafka`` plugin's.
PROCESS_FIXTURES = frozenset({
    # tests/conftest.py and the pytest_pafka plugin
    "zookeeper", "pafka_zookeeper", "pafka_broker", "pafka_broker_factory", "pafka_module_broker",
    "pafka_module_broker_factory", "pafka_session_broker_factory", "pafka_cluster", "pafka_cluster_factory",
    "pafka_module_cluster", "pafka_module_cluster_factory", "pafka_prometheus",
    # conftests: a broker process per module, a cluster per module, Spark's JVM
    "broker", "cluster", "spark_broker", "spark",
})

#: Modules (relative to the repository root) whose tests start processes without one of the fixtures above:
#: their own broker, cluster or ZooKeeper fixtures, openssl for certificates, client tools, benchmark children.
PROCESS_MODULES = frozenset({
    "tests/broker/test_acl_apis.py",
    "tests/broker/test_acl_enforcement.py",
    "tests/broker/test_admin_configs.py",
    "tests/broker/test_admin_records.py",
    "tests/broker/test_admin_topics.py",
    "tests/broker/test_allocator_tuning.py",
    "tests/broker/test_broker_compaction.py",
    "tests/broker/test_handshake_fuzz.py",
    "tests/broker/test_pipelined_produce.py",
    "tests/broker/test_sasl_listeners.py",
    "tests/cluster/test_acl_cluster.py",
    "tests/cluster/test_chaos.py",
    "tests/cluster/test_cluster_handlers.py",
    "tests/cluster/test_cluster_startup.py",
    "tests/cluster/test_dev_cluster.py",
    "tests/cluster/test_epoch_acceptance.py",
    "tests/cluster/test_isolated_leader.py",
    "tests/cluster/test_preferred_leader.py",
    "tests/cluster/test_reassignment.py",
    "tests/cluster/test_sasl_inter_broker.py",
    "tests/cluster/test_ssl_inter_broker.py",
    "tests/controller/test_zk_outage.py",
    "tests/integration/test_bad_input.py",
    "tests/integration/test_connection_limits.py",
    "tests/integration/test_durability.py",
    "tests/integration/test_groups_compaction.py",
    "tests/integration/test_groups_membership.py",
    "tests/integration/test_idempotent_producer.py",
    "tests/integration/test_large_records.py",
    "tests/integration/test_live_consumers.py",
    "tests/integration/test_metadata_auto_create.py",
    "tests/integration/test_pipelined_fetch.py",
    "tests/integration/test_sasl_clients.py",
    "tests/integration/test_shutdown.py",
    "tests/integration/test_ssl_clients.py",
    "tests/integration/test_startup.py",
    "tests/integration/test_transaction_recovery.py",
    "tests/protocol/test_codec_regenerate.py",
    "tests/storage/test_crash.py",
    "tests/storage/test_log_cleaner_crash.py",
    "tests/test_code_quality.py",  # runs mypy and ruff
    "tests/test_docker_compose.py",
    "tests/test_skeleton.py",
    "tests/testing/test_cluster_harness.py",
    "tests/testing/test_prometheus_fixture.py",
    "tests/testing/test_pytest_plugin.py",
    "tests/tools/test_cli_commands.py",
    "tests/tools/test_client_broker.py",
    "tests/tools/test_configs_command.py",
})


#: Single tests that start processes in modules whose other tests run in-process (``module::test``).
PROCESS_TESTS = frozenset({
    "tests/benchmarks/test_ceiling_profiles.py::test_a_quick_ceiling_run_against_pafka_verifies_and_reports",
    "tests/benchmarks/test_ceiling_profiles.py::test_a_quick_spread_produce_appends_one_batch_to_each_of_1000_partitions",
    "tests/benchmarks/test_client_bench.py::test_consume_only_child_reads_every_record_and_reports_its_threads",
    "tests/benchmarks/test_client_bench.py::test_latency_run_against_pafka_sees_every_record_end_to_end",
    "tests/benchmarks/test_client_bench.py::test_suite_collects_figures_and_reports_missing_and_failed_parts",
    "tests/benchmarks/test_client_bench.py::test_throughput_run_against_pafka_verifies_every_record",
    "tests/benchmarks/test_cluster_bench.py::test_catch_up_run_measures_a_follower",
    "tests/benchmarks/test_cluster_bench.py::test_latency_run",
    "tests/benchmarks/test_cluster_bench.py::test_produce_run_replicates_and_verifies",
    "tests/benchmarks/test_scale_bench.py::test_partitions_scenario_reads_every_record_back",
    "tests/benchmarks/test_scale_bench.py::test_startup_scenario_recovery_scans_exactly_the_unflushed_bytes",
    "tests/broker/test_coordinator_cluster.py::test_a_partition_leader_verifies_with_the_coordinators_broker",
    "tests/broker/test_ssl_listeners.py::test_a_subject_no_rule_maps_is_not_authenticated",
    "tests/broker/test_ssl_listeners.py::test_kafka_checks_of_the_stores",
    "tests/broker/test_ssl_listeners.py::test_listener_prefix_wins_key_by_key",
    "tests/broker/test_ssl_listeners.py::test_pem_text_in_a_properties_file_with_an_encrypted_key",
    "tests/broker/test_ssl_listeners.py::test_plaintext_listeners_have_no_context",
    "tests/broker/test_ssl_listeners.py::test_principal_of_each_kind_of_client",
    "tests/broker/test_ssl_listeners.py::test_refused_handshakes",
    "tests/broker/test_ssl_listeners.py::test_sasl_ssl_applies_client_auth_only_with_the_listener_prefix",
    "tests/broker/test_ssl_principal_mapper.py::test_multi_valued_rdn_and_attributes_without_keyword",
    "tests/broker/test_ssl_principal_mapper.py::test_subject_in_rfc2253_form",
    "tests/storage/test_log_manager.py::test_the_lock_keeps_a_second_broker_out",
    "tests/tools/test_async_connection.py::test_a_broker_killed_mid_request_fails_every_waiter",
})


def needs_process(item: pytest.Item, root: Path) -> bool:
    if item.get_closest_marker("process") is not None:
        return True
    if PROCESS_FIXTURES.intersection(getattr(item, "fixturenames", ())):
        return True
    try:
        module = item.path.resolve().relative_to(root).as_posix()
    except ValueError:
        return False
    name = getattr(item, "originalname", item.name)  # without its parameters
    return module in PROCESS_MODULES or f"{module}::{name}" in PROCESS_TESTS


def mark_process_tests(items: list[pytest.Item], root: Path) -> None:
    for item in items:
        if needs_process(item, root) and item.get_closest_marker("process") is None:
            item.add_marker(pytest.mark.process)


class ProcessGuard:
    """Replaces the ways of starting a process with ones that refuse while an unmarked test runs."""

    def __init__(self) -> None:
        self._watched: pytest.Item | None = None
        self._refused: list[str] = []
        self._originals: list[tuple[Any, str, Callable[..., Any]]] = []

    def install(self) -> None:
        targets: list[tuple[Any, str]] = [
            (subprocess.Popen, "_execute_child"),
            (multiprocessing.process.BaseProcess, "start"),
            (os, "system"),
        ]
        targets += [(os, name) for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp") if hasattr(os, name)]
        for owner, name in targets:
            original = getattr(owner, name)
            self._originals.append((owner, name, original))
            setattr(owner, name, self._refusing(f"{getattr(owner, '__name__', owner)}.{name}", original))

    def uninstall(self) -> None:
        for owner, name, original in reversed(self._originals):
            setattr(owner, name, original)
        self._originals.clear()

    def _refusing(self, what: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if self._watched is not None:
                message = (f"{self._watched.nodeid} started a process ({what}) but is not marked `process`: mark it "
                           "(pytestmark = pytest.mark.process, or list its fixture or module in testing/process_guard.py) "
                           "so that `pytest -m \"not process\"` stays the quick, in-process run")
                self._refused.append(message)
                raise RuntimeError(message)
            return original(*args, **kwargs)
        return guarded

    @contextmanager
    def watching(self, item: pytest.Item) -> Iterator[None]:
        """Refuse process starts while ``item`` (its set-up or call) runs, unless it is marked ``process``.

        A refusal fails the phase even if the code under test caught the RuntimeError.
        """
        if item.get_closest_marker("process") is not None:
            yield
            return
        self._watched, self._refused = item, []
        try:
            yield
        finally:
            self._watched = None
        if self._refused:
            pytest.fail(self._refused[0], pytrace=False)
