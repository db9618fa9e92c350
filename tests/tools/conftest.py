"""Fixtures for the tools tests: one real broker per test module (the pytest_pafka plugin's)."""

from __future__ import annotations

import pytest

from pytest_pafka.broker_process import BrokerProcess


@pytest.fixture(scope="module")
def broker_process(pafka_module_broker: BrokerProcess) -> BrokerProcess:
    """One pafka broker per test module, on a free loopback port (the plugin's)."""
    return pafka_module_broker
