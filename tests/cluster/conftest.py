"""Fixtures for the cluster tests: a real ZooKeeper and real broker processes (pytest_pafka/cluster.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pytest_pafka.cluster import Cluster


@pytest.fixture(scope="module")
def cluster3() -> Iterator[Cluster]:
    """Three brokers (ids 1..3 on 127.0.0.1..3) and their ZooKeeper, shared by a module's tests.

    Tests that kill or pause brokers start them again before they end (or use a cluster of their own).
    """
    with Cluster(3) as cluster:
        yield cluster
        # Shown only when a test of the module failed: the brokers' side of the story.
        print(cluster.log_tails())
