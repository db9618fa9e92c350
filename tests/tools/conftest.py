"""Fixtures for the tools tests: one real broker per test module (see tests/broker_harness.py)."""

from __future__ import annotations

from typing import Iterator

import pytest

from tests.broker_harness import BrokerProcess


@pytest.fixture(scope="module")
def broker_process() -> Iterator[BrokerProcess]:
    """One pafka broker per test module, on a free loopback port."""
    with BrokerProcess.started() as broker:
        yield broker
