"""A real ``pafka broker`` process for tests: free loopback port, temp data dir, cleanup by PID.

Usage::

    from tests.broker_harness import BrokerProcess, broker_process  # fixture

    def test_x(broker_process): ...          # a fresh broker per test

    with BrokerProcess.started("delete.topic.enable=false") as broker:
        broker.restart()                      # SIGTERM, then start on the same dir and port

The process is always ended by its own PID (SIGTERM, then SIGKILL after a
grace period) and the temp dir removed, even when a test fails.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 15.0


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BrokerProcess:
    """One broker on 127.0.0.1 with its own data dir; may be stopped and started again."""

    def __init__(self, *overrides: str, tmp_dir: Path | None = None) -> None:
        self.tmp_dir = tmp_dir or Path(tempfile.mkdtemp(prefix="pafka-broker-"))
        self.log_dir = self.tmp_dir / "data"
        self.port = free_loopback_port()
        self.host = "127.0.0.1"
        self.overrides = list(overrides)
        self.process: subprocess.Popen | None = None
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def log_file(self) -> Path:
        return self.tmp_dir / f"broker-{self.starts}.log"

    def log_text(self) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(self.tmp_dir.glob("broker-*.log")))

    # -- lifecycle ---------------------------------------------------------------
    def start(self) -> "BrokerProcess":
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError("broker already running")
        self.starts += 1
        args = [sys.executable, "-m", "broker.cli", "broker",
                "--override", f"log.dirs={self.log_dir}",
                "--override", f"listeners=PLAINTEXT://{self.host}:{self.port}"]
        for item in self.overrides:
            args += ["--override", item]
        with open(self.log_file, "wb") as out:
            self.process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                            cwd=Path(__file__).resolve().parents[1])
        self._wait_until_listening()
        return self

    def _wait_until_listening(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"pafka broker exited with {self.process.returncode}:\n{self.log_text()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"pafka broker not listening on {self.port} after {START_TIMEOUT_S}s:\n{self.log_text()}")

    def terminate(self) -> int:
        """SIGTERM and wait for the clean shutdown; SIGKILL if it hangs. Returns the exit code."""
        return self._signal_and_wait(signal.SIGTERM)

    def kill(self) -> int:
        """SIGKILL: a crash, no shutdown work at all."""
        return self._signal_and_wait(signal.SIGKILL)

    def _signal_and_wait(self, sig: signal.Signals) -> int:
        proc = self.process
        if proc is None:
            return 0
        if proc.poll() is None:
            os.kill(proc.pid, sig)
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=STOP_TIMEOUT_S)
        return proc.returncode

    def restart(self, sig: signal.Signals = signal.SIGTERM) -> "BrokerProcess":
        """Stop with ``sig`` and start again on the same data dir and port."""
        self._signal_and_wait(sig)
        return self.start()

    def cleanup(self) -> None:
        try:
            self.kill()
        finally:
            shutil.rmtree(self.tmp_dir, ignore_errors=True)

    @classmethod
    def started(cls, *overrides: str) -> "_Running":
        return _Running(cls(*overrides))


class _Running:
    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker

    def __enter__(self) -> BrokerProcess:
        try:
            return self.broker.start()
        except BaseException:
            self.broker.cleanup()
            raise

    def __exit__(self, *exc: object) -> None:
        self.broker.cleanup()


@pytest.fixture
def broker_process() -> Iterator[BrokerProcess]:
    """A fresh broker with Kafka's defaults, removed after the test."""
    with BrokerProcess.started() as broker:
        yield broker


def send_request(broker: BrokerProcess, api_key: int, api_version: int, body, timeout: float = 10.0):
    """One request on a fresh connection; returns the decoded response body (for fields no client exposes)."""
    from protocol.api import decode_response, encode_request
    from protocol.buffers import join_chunks

    frame = join_chunks(encode_request(api_key, api_version, 1, "pafka-tests", body))
    with socket.create_connection((broker.host, broker.port), timeout=timeout) as sock:
        sock.sendall(frame)
        size = int.from_bytes(_read_exactly(sock, 4), "big")
        _, response = decode_response(api_key, api_version, _read_exactly(sock, size))
    return response


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return bytes(buf)
