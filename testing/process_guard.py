"""The ``process`` marker: which tests start a process, found at collection and enforced while they run.

``pytest -m "not process"`` is the quick run: in-process tests only. It stays quick only if every test
that starts a process (a broker, ZooKeeper, a client tool, a JVM, ``mypy``) carries the marker, so two
halves keep it true:

- ``mark_process_tests`` (from ``pytest_collection_modifyitems``) marks each test that uses one of
  ``PROCESS_FIXTURES`` (pytest lists a test's fixtures with everything they depend on, so a module's own
  fixture built on ``zookeeper`` is covered), or lives in one of ``PROCESS_MODULES``: modules whose tests
  or helpers start processes themselves. A module may instead say ``pytestmark = pytest.mark.process``.
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
    "zookeeper", "pafka_broker", "pafka_cluster", "pafka_broker_factory",
    # directory conftests: a broker process per module, a three-broker cluster, Spark's JVM
    "broker", "module_broker", "broker_process", "cluster3", "cluster", "spark_broker", "spark",
})

#: Modules (relative to the repository root) whose tests start processes without one of the fixtures above:
#: their own broker, cluster or ZooKeeper fixtures, openssl for certificates, client tools, benchmark children.
PROCESS_MODULES = frozenset({
    "tests/benchmarks/test_ceiling_profiles.py",
    "tests/benchmarks/test_client_bench.py",
    "tests/benchmarks/test_cluster_bench.py",
    "tests/benchmarks/test_scale_bench.py",
    "tests/broker/test_acl_api_matrix.py",
    "tests/broker/test_acl_apis.py",
    "tests/broker/test_acl_enforcement.py",
    "tests/broker/test_acl_txn_and_configs.py",
    "tests/broker/test_admin_configs.py",
    "tests/broker/test_admin_records.py",
    "tests/broker/test_admin_topics.py",
    "tests/broker/test_allocator_tuning.py",
    "tests/broker/test_broker_compaction.py",
    "tests/broker/test_coordinator_cluster.py",
    "tests/broker/test_handshake_fuzz.py",
    "tests/broker/test_pipelined_produce.py",
    "tests/broker/test_sasl_listeners.py",
    "tests/broker/test_ssl_listeners.py",
    "tests/broker/test_ssl_principal_mapper.py",
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
    "tests/storage/test_log_manager.py",
    "tests/test_code_quality.py",  # runs mypy and ruff
    "tests/test_docker_compose.py",
    "tests/test_skeleton.py",
    "tests/testing/test_cluster_harness.py",
    "tests/tools/test_async_connection.py",
    "tests/tools/test_client_broker.py",
    "tests/tools/test_configs_command.py",
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
    return module in PROCESS_MODULES


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
