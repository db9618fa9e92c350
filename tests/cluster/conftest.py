"""Fixtures for the cluster tests: a real ZooKeeper and real broker processes (the pytest_pafka plugin's)."""

from __future__ import annotations

import pytest

from pytest_pafka.cluster import Cluster


@pytest.fixture(scope="module")
def cluster3(pafka_module_cluster: Cluster) -> Cluster:
    """Three brokers (ids 1..3 on 127.0.0.1..3) on the session's ZooKeeper, shared by a module's tests.

    Tests that kill or pause brokers start them again before they end (or use a cluster of their own).
    """
    return pafka_module_cluster


@pytest.fixture(scope="module")
def cluster(pafka_module_cluster: Cluster) -> Cluster:
    """The module's cluster: ``pytest.mark.pafka_cluster(brokers=N)`` and ``pafka_broker_config(...)``
    on its ``pytestmark`` shape it (default: three brokers); a module may define its own."""
    return pafka_module_cluster
