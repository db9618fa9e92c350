"""Fixtures shared by every test directory: pafka's own tests use the plugin it ships (pytest_pafka)."""

from __future__ import annotations

from collections.abc import Generator

import pytest

from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.zookeeper import ZooKeeperProcess
from testing.process_guard import ProcessGuard, mark_process_tests

_GUARD = ProcessGuard()


def pytest_configure(config: pytest.Config) -> None:
    _GUARD.install()


def pytest_unconfigure(config: pytest.Config) -> None:
    _GUARD.uninstall()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that starts a process ``process`` (see testing/process_guard.py)."""
    mark_process_tests(items, config.rootpath)


# Set-up and call only: a test's tear-down also finalizes wider-scoped fixtures of the tests before it
# (a module's broker, the session's ZooKeeper), which belong to marked tests.
@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    with _GUARD.watching(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    with _GUARD.watching(item):
        return (yield)


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
