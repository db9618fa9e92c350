"""``pafka dev-cluster``: starts ZooKeeper and three brokers, serves a client, stops every child on SIGINT.

The command runs as a real subprocess (as a user runs it in a terminal); its children's PIDs come
from what it prints and from /proc, and every one of them must be gone after the Ctrl-C.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from pytest_pafka.ports import free_port
from pytest_pafka.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 150.0
READY = re.compile(r"pafka dev-cluster ready: bootstrap\.servers=(\S+)")


def consecutive_free_ports(count: int) -> int:
    """A base port with ``count`` free ports from it (checked now; races are possible but rare)."""
    for _ in range(50):
        base = free_port()
        if base + count > 65535:
            continue
        try:
            for offset in range(1, count):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", base + offset))
        except OSError:
            continue
        return base
    raise RuntimeError("no run of free ports found")


def children_of(pid: int) -> set[int]:
    """The direct children of ``pid`` now (Linux /proc)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found.update(int(p) for p in (task / "children").read_text().split())
    return found


def alive(pid: int) -> bool:
    """Running (a zombie counts as gone: it has exited and only waits for its parent)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


class OutputReader:
    """Collects the command's stdout lines on a thread (a blocked read never stalls the test)."""

    def __init__(self, stream: object) -> None:
        self.lines: list[str] = []
        self._stream = stream
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for line in self._stream:  # type: ignore[attr-defined]
            self.lines.append(line.rstrip("\n"))

    def text(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, pattern: re.Pattern[str], proc: subprocess.Popen[str], timeout: float) -> re.Match[str]:
        def ready() -> re.Match[str] | None:
            for line in list(self.lines):
                if match := pattern.search(line):
                    return match
            if proc.poll() is not None:
                time.sleep(0.2)  # let the reader drain the last lines
                raise AssertionError(f"dev-cluster exited with {proc.returncode} before ready:\n{self.text()}")
            return None

        return wait_until(ready, timeout, "dev-cluster ready", interval=0.1, details=self.text)


def produce_and_consume_one(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"dev-cluster-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)],
                        operation_timeout=30)[topic].result(timeout=60)
    errors: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce(topic, key=b"k", value=b"hello cluster", on_delivery=lambda err, msg: err and errors.append(err))
    assert producer.flush(60) == 0
    assert not errors, errors
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        def record() -> Any:
            msg = consumer.poll(1.0)
            return msg if msg is not None and not msg.error() else None

        msg = wait_until(record, 60, "the produced record was not consumed", interval=0)
        assert (msg.key(), msg.value()) == (b"k", b"hello cluster")
    finally:
        consumer.close()


def test_dev_cluster_serves_and_stops_cleanly() -> None:
    base_port = consecutive_free_ports(3)
    metrics_base_port = consecutive_free_ports(3)
    while abs(metrics_base_port - base_port) < 3:
        metrics_base_port = consecutive_free_ports(3)
    zookeeper_port = free_port()
    command = [sys.executable, "-m", "tools", "dev-cluster", "--brokers", "3",
               "--base-port", str(base_port), "--metrics-base-port", str(metrics_base_port),
               "--zookeeper-port", str(zookeeper_port)]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            stdin=subprocess.DEVNULL)
    out = OutputReader(proc.stdout)
    children: set[int] = set()
    try:
        ready = out.wait_for(READY, proc, READY_TIMEOUT_S)
        bootstrap = ready.group(1)
        assert bootstrap == ",".join(f"127.0.0.1:{base_port + i}" for i in range(3))
        children = children_of(proc.pid)
        printed = {int(pid) for pid in re.findall(r"\(pid (\d+)", out.text())}
        assert len(printed) == 4, out.text()  # ZooKeeper and three brokers
        assert printed <= children, (printed, children)
        data_dirs = set(re.findall(r"output in (/\S+?)/logs/", out.text()))
        assert len(data_dirs) == 1, out.text()
        produce_and_consume_one(bootstrap)
        metrics_urls = re.findall(r"metrics at (http://\S+)\)", out.text())
        assert metrics_urls == [f"http://127.0.0.1:{metrics_base_port + i}/metrics" for i in range(3)], out.text()
        for url in metrics_urls:
            with urllib.request.urlopen(url, timeout=10) as answer:
                assert b"process_cpu_seconds_total" in answer.read()

        os.kill(proc.pid, signal.SIGINT)
        code = proc.wait(timeout=STOP_TIMEOUT_S)
        time.sleep(0.2)
        assert code == 0, out.text()
        assert "pafka dev-cluster: stopped" in out.text()
        assert not [pid for pid in children if alive(pid)], f"children left running:\n{out.text()}"
        assert not Path(data_dirs.pop()).exists(), "the temp data dir was removed"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        for pid in children:  # the children run in sessions of their own: end them by PID
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def test_dev_cluster_without_zookeeper_says_how_to_install_it(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "tools", "dev-cluster",
                             "--zookeeper-jar", str(tmp_path / "zookeeper.jar")],
                            cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0
    assert "apt-get install zookeeper" in result.stderr
    assert list(tmp_path.iterdir()) == []
