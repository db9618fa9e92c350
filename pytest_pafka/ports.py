"""Free loopback ports and waiting for a process's listener, for the brokers and ZooKeepers the plugin starts."""

from __future__ import annotations

import socket
import subprocess
import time


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the OS picks it; it may be taken again later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def wait_until_listening(host: str, port: int, process: subprocess.Popen[bytes] | None,
                         timeout: float) -> float:
    """Seconds until ``host:port`` accepts a connection; raises if ``process`` exits first."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"broker exited with {process.returncode} before listening on {port}")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return time.monotonic() - started
        except OSError:
            time.sleep(0.005)  # the start-up time is a benchmark figure: poll finely
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout}s")
