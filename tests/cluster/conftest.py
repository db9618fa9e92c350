"""Fixtures for the cluster tests: a real ZooKeeper and real broker processes (the pytest_pafka plugin's)."""

from __future__ import annotations

import pytest

from pytest_pafka.cluster import Cluster


@pytest.fixture(scope="module")
def cluster(pafka_module_cluster: Cluster) -> Cluster:
    """The module's cluster: ``pytest.mark.pafka_cluster(brokers=N)`` and ``pafka_broker_config(...)``
    on its ``pytestmark`` shape it (default: three brokers); a module may define its own."""
    return pafka_module_cluster
