"""Fixtures shared by every test directory: pafka's own tests use the plugin it ships (pytest_pafka)."""

from __future__ import annotations

import pytest

from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.zookeeper import ZooKeeperProcess


@pytest.fixture(scope="session")
def zookeeper(pafka_zookeeper: ZooKeeperProcess) -> ZooKeeperProcess:
    """One real ZooKeeper (Debian's 3.8, a plain java process on 127.0.0.1) for the whole session.

    Tests keep apart by chroot: see ``zk_connect``.
    """
    return pafka_zookeeper


@pytest.fixture
def zk_connect(pafka_zk_connect: str) -> str:
    """A connect string with a fresh chroot of its own (``127.0.0.1:port/test-<hex>``)."""
    return pafka_zk_connect


@pytest.fixture(scope="module")
def broker(pafka_module_broker: BrokerProcess) -> BrokerProcess:
    """One broker shared by a module's tests; the module's ``pytestmark`` may carry
    ``pytest.mark.pafka_broker_config(...)`` for its settings."""
    return pafka_module_broker
