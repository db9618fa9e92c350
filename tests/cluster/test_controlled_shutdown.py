"""Controlled shutdown (issue 17): a SIGTERMed broker asks the controller to move every leadership
it holds to another replica before it exits, so no partition of an RF >= 2 topic is offline at any
sampled moment, and a producer running through it sees only retriable errors (every record is
delivered, exactly once). The scenario is shared with the SASL_SSL cluster's test: shutdown_scenario.py."""

from __future__ import annotations

import pytest

from pytest_pafka.cluster import Cluster
from tests.cluster.shutdown_scenario import run_controlled_shutdown


@pytest.mark.parametrize("which", ["non-controller", "controller"])
def test_sigterm_moves_leaderships_before_exit(cluster: Cluster, which: str) -> None:
    run_controlled_shutdown(cluster, which)
