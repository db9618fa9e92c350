"""pytest_pafka/cluster.py itself: addresses, signals and cleanup, whatever the brokers do with ZooKeeper.

The brokers here are started without waiting for their registration, so these checks hold for the
harness alone: a test that fails half-way must still leave no broker, no ZooKeeper and no temp dir.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from pytest_pafka.cluster import Cluster


def process_state(pid: int) -> str | None:
    """The /proc state letter (R, S, T, Z...) or None once the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def gone(pid: int) -> bool:
    return process_state(pid) in (None, "Z")


def test_brokers_on_their_own_loopback_addresses_with_ids_and_connect_string() -> None:
    with Cluster(3, "log.retention.hours=1", start_brokers=False, broker_overrides={2: ["broker.rack=r2"]}) as cluster:
        for broker_id in (1, 2, 3):
            cluster.start(broker_id, wait_registered=False)
        assert cluster.bootstrap == ",".join(f"127.0.0.{i}:{cluster.broker(i).port}" for i in (1, 2, 3))
        assert cluster.chroot.startswith("/pafka-") and cluster.zookeeper_connect.endswith(cluster.chroot)
        for broker_id in (1, 2, 3):
            broker = cluster.broker(broker_id)
            assert broker.host == f"127.0.0.{broker_id}"
            with socket.create_connection((broker.host, broker.port), timeout=5):
                pass
            command = " ".join(broker.command())
            assert f"broker.id={broker_id}" in command
            assert f"zookeeper.connect={cluster.zookeeper_connect}" in command
            assert "zookeeper.session.timeout.ms=6000" in command
            assert "log.retention.hours=1" in command
            assert ("broker.rack=r2" in command) == (broker_id == 2)
            assert broker.data_dir.parent == cluster.root


def test_pause_resume_kill_and_restart() -> None:
    with Cluster(2, start_brokers=False) as cluster:
        for broker_id in (1, 2):
            cluster.start(broker_id, wait_registered=False)
        pid = cluster.broker(2).pid
        assert pid is not None
        cluster.pause(2)
        # Signals are delivered asynchronously: the state follows within moments.
        assert cluster.wait_for(lambda: process_state(pid) == "T", 5.0, "broker 2 stopped")
        assert cluster.paused_ids == {2}
        cluster.resume(2)
        assert cluster.wait_for(lambda: process_state(pid) in ("R", "S"), 5.0, "broker 2 running again")
        assert not cluster.paused_ids
        cluster.kill(1)
        assert not cluster.broker(1).running and cluster.running_ids() == [2]
        with pytest.raises(RuntimeError, match="not running"):
            cluster.pause(1)
        cluster.start(1, wait_registered=False)
        assert cluster.running_ids() == [1, 2]


def test_everything_cleaned_up_when_the_test_fails() -> None:
    pids: list[int] = []
    root: Path | None = None
    with pytest.raises(RuntimeError, match="the test failed"), Cluster(2, start_brokers=False) as cluster:
        for broker_id in (1, 2):
            cluster.start(broker_id, wait_registered=False)
        pids = [b.pid for b in cluster.brokers.values() if b.pid is not None]
        assert cluster.zookeeper is not None and cluster.zookeeper.pid is not None
        pids.append(cluster.zookeeper.pid)
        root = cluster.root
        cluster.pause(2)  # a paused broker is killed as it is
        raise RuntimeError("the test failed")
    assert len(pids) == 3
    assert all(gone(pid) for pid in pids), {pid: process_state(pid) for pid in pids}
    assert root is not None and not root.exists()
