"""Fixtures for the tools tests: one real broker per test module (see pytest_pafka/broker_process.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pytest_pafka.broker_process import BrokerProcess


@pytest.fixture(scope="module")
def broker_process() -> Iterator[BrokerProcess]:
    """One pafka broker per test module, on a free loopback port."""
    with BrokerProcess() as broker:
        yield broker
