"""Fixtures for the integration tests: real ``pafka broker`` processes (the pytest_pafka plugin's)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pytest_pafka.broker_process import BrokerProcess
from testing.transactions import assert_no_hanging_transactions


@pytest.fixture
def no_hanging_transactions(broker: BrokerProcess) -> Iterator[None]:
    """After the test, `pafka transactions find-hanging` finds nothing on the module's ``broker``
    (a transaction module marks itself with ``pytest.mark.usefixtures("no_hanging_transactions")``)."""
    yield
    assert_no_hanging_transactions(broker.bootstrap)
