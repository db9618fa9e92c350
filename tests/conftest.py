"""Fixtures shared by every test directory."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from testing.zookeeper import ZooKeeperProcess


@pytest.fixture(scope="session")
def zookeeper() -> Iterator[ZooKeeperProcess]:
    """One real ZooKeeper (Debian's 3.8, a plain java process on 127.0.0.1) for the whole session.

    Tests keep apart by chroot: see ``zk_connect``.
    """
    with ZooKeeperProcess() as zk:
        yield zk


@pytest.fixture
def zk_connect(zookeeper: ZooKeeperProcess) -> str:
    """A connect string with a fresh chroot of its own (``127.0.0.1:port/test-<hex>``)."""
    return zookeeper.chroot(f"test-{uuid.uuid4().hex[:12]}")
