"""Real ``pafka broker`` processes for integration tests.

A ``BrokerProcess`` owns one data directory and one loopback port; it can be
started, stopped with SIGTERM, killed with SIGKILL and started again on the
same port and directory, which is what the durability and restart tests need.
``running_broker`` is the usual entry point: it yields a started broker and,
whatever the test did, ends the process by its PID and removes the temporary
directory.

Readiness is "answered an ApiVersions request", not merely "accepts TCP
connections": the probe below speaks just enough of the protocol for that.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 15.0
API_VERSIONS_KEY = 18


def free_loopback_port() -> int:
    """A port that was free on 127.0.0.1 a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def encode_request(api_key: int, api_version: int, correlation_id: int, body: bytes = b"",
                   client_id: str = "pafka-tests") -> bytes:
    """A size-prefixed request with a v1 (non-flexible) header."""
    cid = client_id.encode()
    payload = struct.pack(">hhih", api_key, api_version, correlation_id, len(cid)) + cid + body
    return struct.pack(">i", len(payload)) + payload


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """n bytes, or fewer if the peer closed the connection first."""
    chunks: list[bytes] = []
    while n > 0:
        chunk = sock.recv(n)
        if not chunk:
            break
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_response(sock: socket.socket) -> bytes | None:
    """One response frame (without its size), or None if the connection closed."""
    size_bytes = recv_exact(sock, 4)
    if len(size_bytes) < 4:
        return None
    (size,) = struct.unpack(">i", size_bytes)
    frame = recv_exact(sock, size)
    return frame if len(frame) == size else None


@dataclass(frozen=True)
class ApiVersionsV0:
    correlation_id: int
    error_code: int
    api_keys: dict[int, tuple[int, int]]


def parse_api_versions_v0(frame: bytes) -> ApiVersionsV0:
    correlation_id, error_code, count = struct.unpack_from(">ihi", frame, 0)
    keys: dict[int, tuple[int, int]] = {}
    pos = 10
    for _ in range(count):
        key, lo, hi = struct.unpack_from(">hhh", frame, pos)
        keys[key] = (lo, hi)
        pos += 6
    return ApiVersionsV0(correlation_id, error_code, keys)


def api_versions_v0(host: str, port: int, timeout: float = 2.0) -> ApiVersionsV0:
    """Send ApiVersions v0 on a new connection and parse the answer."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(encode_request(API_VERSIONS_KEY, 0, 1))
        frame = read_response(sock)
    if frame is None:
        raise ConnectionError("connection closed before the ApiVersions response")
    return parse_api_versions_v0(frame)


@dataclass
class BrokerProcess:
    """One broker's process, data directory and port, restartable in place."""

    data_dir: Path
    port: int
    log_file: Path
    overrides: tuple[str, ...] = ()
    host: str = "127.0.0.1"
    process: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def command(self) -> list[str]:
        args = [sys.executable, "-m", "broker.cli", "broker",
                "--override", f"log.dirs={self.data_dir}",
                "--override", f"listeners=PLAINTEXT://{self.host}:{self.port}"]
        for override in self.overrides:
            args += ["--override", override]
        return args

    def spawn(self) -> subprocess.Popen:
        """Start the process without waiting for it to be ready."""
        assert self.process is None or self.process.poll() is not None, "broker already running"
        with open(self.log_file, "ab") as log:
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL)
        return self.process

    def start(self, timeout: float = START_TIMEOUT_S) -> float:
        """Spawn and wait until ApiVersions is answered; returns the seconds that took."""
        started = time.monotonic()
        self.spawn()
        self.wait_ready(timeout, started)
        return time.monotonic() - started

    def wait_ready(self, timeout: float = START_TIMEOUT_S, since: float | None = None) -> float:
        since = time.monotonic() if since is None else since
        deadline = since + timeout
        while True:
            proc = self.process
            assert proc is not None
            if proc.poll() is not None:
                raise RuntimeError(f"pafka broker exited with {proc.returncode}:\n{self.log_text()[-4000:]}")
            try:
                api_versions_v0(self.host, self.port, timeout=0.5)
                return time.monotonic() - since
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"pafka broker not ready on {self.port} after {timeout}s:\n"
                                       f"{self.log_text()[-4000:]}") from None
                time.sleep(0.005)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM and wait (SIGKILL if it does not stop in time); returns the exit code."""
        proc = self.process
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=timeout)
        return proc.returncode

    def kill(self) -> None:
        """SIGKILL, as a crash would: no flush, no checkpoints, no clean-shutdown marker."""
        proc = self.process
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=STOP_TIMEOUT_S)

    def restart(self, timeout: float = START_TIMEOUT_S) -> float:
        self.stop()
        return self.start(timeout)

    def log_text(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""


@contextlib.contextmanager
def broker_in_tempdir(*overrides: str, port: int | None = None, start: bool = True) -> Iterator[BrokerProcess]:
    """A BrokerProcess in a fresh temp dir; process and dir are gone afterwards."""
    tmp = Path(tempfile.mkdtemp(prefix="pafka-it-"))
    broker = BrokerProcess(tmp / "data", port or free_loopback_port(), tmp / "broker.log", tuple(overrides))
    try:
        if start:
            broker.start()
        yield broker
    finally:
        try:
            broker.kill()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def running_broker(*overrides: str, port: int | None = None) -> contextlib.AbstractContextManager[BrokerProcess]:
    """A started broker (see ``broker_in_tempdir``)."""
    return broker_in_tempdir(*overrides, port=port, start=True)
