"""A standalone ZooKeeper server as a plain child process, for ``pafka dev-cluster``.

Debian's ``zookeeper`` package ships the server as ``/usr/share/java/zookeeper.jar``, whose
manifest names every library it needs; ``java -cp zookeeper.jar ZooKeeperServerMain zoo.cfg``
runs it in the foreground with no init system involved. The server listens on loopback only
and is ended by its own PID.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from tools.child_process import stop_child

DEBIAN_ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
INSTALL_HINT = "apt-get install zookeeper"
#: ZooKeeper's session timeouts are bounded by 2..20 ticks: 1 s ticks allow 2 s to 20 s.
TICK_TIME_MS = 1000
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0


class ZooKeeperUnavailable(RuntimeError):
    """Java or the ZooKeeper jar is missing: the message says what to install."""


def zookeeper_jar(path: Path = DEBIAN_ZOOKEEPER_JAR) -> Path:
    """The server jar, or :class:`ZooKeeperUnavailable` saying how to install it."""
    if not path.is_file():
        raise ZooKeeperUnavailable(f"ZooKeeper is not installed ({path} is missing): {INSTALL_HINT}")
    if shutil.which("java") is None:
        raise ZooKeeperUnavailable(f"java is not on PATH (ZooKeeper needs a JRE): {INSTALL_HINT}")
    return path


def four_letter_word(host: str, port: int, word: bytes, timeout: float = 1.0) -> bytes:
    """Send one of ZooKeeper's four-letter commands and read the whole answer."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word)
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks)


class LocalZooKeeper:
    """One standalone ZooKeeper on ``host:port`` with its data in ``data_dir``."""

    def __init__(self, data_dir: Path, port: int, host: str = "127.0.0.1", jar: Path = DEBIAN_ZOOKEEPER_JAR) -> None:
        self.jar = zookeeper_jar(jar)
        self.data_dir = data_dir
        self.host = host
        self.port = port
        self.log_path = data_dir / "zookeeper.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    def _write_config(self) -> Path:
        (self.data_dir / "data").mkdir(parents=True, exist_ok=True)
        config = self.data_dir / "zoo.cfg"
        config.write_text(
            f"tickTime={TICK_TIME_MS}\n"
            f"dataDir={self.data_dir / 'data'}\n"
            f"clientPort={self.port}\n"
            f"clientPortAddress={self.host}\n"
            "maxClientCnxns=0\n"
            # No Jetty admin server on 8080: two dev clusters (or a test run) would collide on it.
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr\n"
        )
        return config

    def start(self) -> LocalZooKeeper:
        """Launch and return once the server answers ``ruok``; killed before any error is raised."""
        config = self._write_config()
        command = ["java", f"-Dzookeeper.log.dir={self.data_dir}", "-Xmx256m",
                   "-cp", str(self.jar), "org.apache.zookeeper.server.ZooKeeperServerMain", str(config)]
        with open(self.log_path, "ab") as log:
            # Its own session: a Ctrl-C in the terminal reaches the dev cluster, which stops ZooKeeper last.
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            self._wait_until_serving()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_until_serving(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self.process.returncode}; see {self.log_path}")
            try:
                if four_letter_word(self.host, self.port, b"ruok") == b"imok":
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"ZooKeeper did not answer on {self.connect_string} within {START_TIMEOUT_S}s")

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after a grace period; by PID."""
        stop_child(self.process, STOP_TIMEOUT_S)
