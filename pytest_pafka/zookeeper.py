"""A real ZooKeeper for tests: Debian's ZooKeeper 3.8 run as a plain java process on loopback.

``ZooKeeperProcess`` writes a zoo.cfg (client port bound to 127.0.0.1, short ticks so
session timeouts of a few seconds are honoured, the four-letter ``ruok``/``srvr``
commands allowed) into a temp dir, starts ``ZooKeeperServerMain`` with Debian's jar
(its manifest names its dependencies in /usr/share/java; slf4j-nop keeps it quiet),
waits until it answers ``imok``, and on exit stops it by PID and removes the dir.

``expire_session`` forces a ZooKeeper session's expiry the way ZooKeeper's own tests
do: a second connection attaches to the session with its id and password and closes
it, so the session's owner is told SESSION_EXPIRED on its next contact and its
ephemeral znodes are gone at once. (For a broker *process*, pausing it with SIGSTOP
past zookeeper.session.timeout.ms does the same, more slowly.)
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from pytest_pafka.ports import free_port
from pytest_pafka.waiting import wait_until

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
_QUIET_LOGGING = Path("/usr/share/java/slf4j-nop.jar")
INSTALL_HINT = "ZooKeeper is not installed: sudo apt-get install zookeeper (Debian's package; nothing is started as a service)"


def zookeeper_available() -> bool:
    return ZOOKEEPER_JAR.is_file() and shutil.which("java") is not None


def four_letter_word(host: str, port: int, word: str, timeout: float = 2.0) -> str:
    """Send a four-letter command (``ruok``, ``srvr``...) and return the server's whole answer."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word.encode("ascii"))
        chunks = []
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


class ZooKeeperProcess:
    """One standalone ZooKeeper server on ``host:port`` with its data in a temp dir."""

    def __init__(self, host: str = "127.0.0.1", port: int | None = None, tick_time_ms: int = 200,
                 min_session_timeout_ms: int = 1000, max_session_timeout_ms: int = 60000,
                 start_timeout: float = 30.0) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.tick_time_ms = tick_time_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.start_timeout = start_timeout
        self.dir: Path | None = None
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    def chroot(self, path: str) -> str:
        """The connect string with a chroot (``/pafka`` -> ``127.0.0.1:port/pafka``)."""
        return f"{self.connect_string}/{path.strip('/')}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def __enter__(self) -> ZooKeeperProcess:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        if not zookeeper_available():
            raise RuntimeError(INSTALL_HINT)
        self.dir = Path(tempfile.mkdtemp(prefix="pafka-zookeeper-"))
        (self.dir / "data").mkdir()
        (self.dir / "zoo.cfg").write_text("\n".join([
            f"tickTime={self.tick_time_ms}",
            f"dataDir={self.dir / 'data'}",
            f"clientPort={self.port}",
            f"clientPortAddress={self.host}",
            f"minSessionTimeout={self.min_session_timeout_ms}",
            f"maxSessionTimeout={self.max_session_timeout_ms}",
            "maxClientCnxns=0",
            "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr,stat,cons,mntr",
            "",
        ]))
        try:
            self.start_server()
        except BaseException:
            self.stop()
            raise

    def start_server(self) -> None:
        """Start the java process on the existing config and data (again, after ``stop_server``)."""
        assert self.dir is not None and self.process is None
        classpath = f"{ZOOKEEPER_JAR}:{_QUIET_LOGGING}" if _QUIET_LOGGING.is_file() else str(ZOOKEEPER_JAR)
        log = open(self.dir / "zookeeper.log", "ab")  # the child process writes to it
        try:
            self.process = subprocess.Popen(
                ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", classpath,
                 "org.apache.zookeeper.server.ZooKeeperServerMain", str(self.dir / "zoo.cfg")],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.dir,
            )
        finally:
            log.close()
        self._wait_ready()

    def _wait_ready(self) -> None:
        def ok() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self.process.returncode}: {self.log_tail()}")
            return four_letter_word(self.host, self.port, "ruok", timeout=1.0) == "imok"

        wait_until(ok, self.start_timeout, f"ZooKeeper did not answer ruok on {self.connect_string}",
                   details=self.log_tail, ignoring=(OSError,))

    def log_tail(self, lines: int = 20) -> str:
        if self.dir is None or not (self.dir / "zookeeper.log").exists():
            return ""
        return "\n".join((self.dir / "zookeeper.log").read_text("utf-8", "replace").splitlines()[-lines:])

    def stop_server(self) -> None:
        """SIGTERM the java process by PID (SIGKILL after 10 s); its data stays for ``start_server``."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait(timeout=10)

    def stop(self) -> None:
        """Stop the server and remove its data dir."""
        self.stop_server()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


def expire_session(connect_string: str, client_id: tuple[int, bytes], timeout: float = 10.0) -> None:
    """Expire the ZooKeeper session ``client_id`` (session id, password) of another client, now."""
    from kazoo.client import KazooClient

    servers = connect_string.split("/", 1)[0]
    thief = KazooClient(hosts=servers, client_id=client_id, timeout=timeout)
    thief.start(timeout=timeout)
    try:
        if thief.client_id is None or thief.client_id[0] != client_id[0]:
            raise RuntimeError("could not attach to the session to expire it")
    finally:
        thief.stop()  # closing the session: ZooKeeper drops it and its ephemeral znodes
        thief.close()


def pause_until_session_expired(pid: int, connect_string: str, ephemeral_path: str, timeout: float = 60.0) -> float:
    """SIGSTOP process ``pid`` until ZooKeeper expired its session, then SIGCONT it; the seconds paused.

    The session is known to be gone when ``ephemeral_path`` (a znode of that session, e.g.
    ``/brokers/ids/1`` under the chroot of ``connect_string``) has disappeared. The process
    is resumed even if that never happens (TimeoutError then).
    """
    from kazoo.client import KazooClient

    watcher = KazooClient(hosts=connect_string, timeout=10.0)
    watcher.start(timeout=10.0)
    started = time.monotonic()
    os.kill(pid, signal.SIGSTOP)
    try:
        while watcher.exists(ephemeral_path) is not None:
            if time.monotonic() - started > timeout:
                raise TimeoutError(f"{ephemeral_path} still exists after {timeout}s: the session did not expire")
            time.sleep(0.05)
        return time.monotonic() - started
    finally:
        os.kill(pid, signal.SIGCONT)
        watcher.stop()
        watcher.close()
