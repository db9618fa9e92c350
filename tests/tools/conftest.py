"""A real ``pafka broker`` process for the client and tool tests.

Self-contained on purpose (a shared fixture may later move to tests/conftest.py):
a free loopback port, a temporary log dir, the process killed by its PID and
the directory removed in a ``finally`` whatever the test did.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

_START_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class BrokerProcess:
    host: str
    port: int
    log_dir: Path
    log_file: Path
    process: subprocess.Popen

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def log_text(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_until_listening(proc: subprocess.Popen, port: int, log_file: Path) -> None:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"pafka broker exited with {proc.returncode}:\n{log_file.read_text(errors='replace')}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"pafka broker not listening on {port} after {_START_TIMEOUT_S}s")


def stop_broker(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def start_broker(*overrides: str, tmp: Path | None = None, port: int | None = None) -> tuple[BrokerProcess, Path]:
    """Start a broker; returns it and the temp dir the caller must remove.

    Passing the ``tmp`` dir and ``port`` of a stopped broker restarts it on its data.
    """
    owns_tmp = tmp is None
    tmp = Path(tempfile.mkdtemp(prefix="pafka-tools-")) if tmp is None else tmp
    log_dir = tmp / "data"
    log_file = tmp / "broker.log"
    port = free_loopback_port() if port is None else port
    args = [
        sys.executable,
        "-m",
        "broker.cli",
        "broker",
        "--override",
        f"log.dirs={log_dir}",
        "--override",
        f"listeners=PLAINTEXT://127.0.0.1:{port}",
    ]
    for override in overrides:
        args += ["--override", override]
    with open(log_file, "ab") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    broker = BrokerProcess("127.0.0.1", port, log_dir, log_file, proc)
    try:
        _wait_until_listening(proc, port, log_file)
    except BaseException:
        stop_broker(proc)
        if owns_tmp:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    return broker, tmp


@pytest.fixture(scope="module")
def broker_process() -> Iterator[BrokerProcess]:
    """One pafka broker per test module, on a free loopback port."""
    broker, tmp = start_broker()
    try:
        yield broker
    finally:
        try:
            stop_broker(broker.process)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
