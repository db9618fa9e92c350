"""``pafka dev-cluster``: a local ZooKeeper and N brokers in the foreground, for machines without Docker.

    pafka dev-cluster --brokers 3        # ZooKeeper on 127.0.0.1:2181, brokers on 127.0.0.1:9092..9094
                                         # with their Prometheus endpoints on 127.0.0.1:9404..9406
    pafka dev-cluster --brokers 3 --racks 3  # broker.rack=RACK1..RACK3, consumers read from their rack

With ``--racks N`` broker i is in rack ``RACK((i-1) mod N + 1)`` and every broker runs Kafka's
RackAwareReplicaSelector, so a consumer with ``client.rack`` fetches from a replica in its rack
(KIP-392) and new topics' replicas spread over the racks.

Every process is a child of this one, started in its own session so that a Ctrl-C in the
terminal reaches only the dev cluster, which then stops the brokers one by one (SIGTERM: each
runs its controlled shutdown), ZooKeeper last, each by its PID. Without ``--data-dir`` all data
lives in a temp dir removed at the end; a ``--data-dir`` given is kept for the next run.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import click

from client.client import KafkaClient
from client.errors import KafkaClientError
from replication.replica_selector import RACK_AWARE_REPLICA_SELECTOR
from tools.child_process import stop_child
from tools.common import fail
from tools.local_zookeeper import DEBIAN_ZOOKEEPER_JAR, LocalZooKeeper, ZooKeeperUnavailable
from tools.local_zookeeper import zookeeper_jar as find_zookeeper_jar

HOST = "127.0.0.1"
#: Brokers register under this chroot, as Kafka's own quickstarts suggest for a shared ZooKeeper.
CHROOT = "/pafka"
READY_TIMEOUT_S = 60.0
BROKER_STOP_TIMEOUT_S = 30.0


@dataclass
class DevBroker:
    broker_id: int
    port: int
    metrics_port: int
    log_dir: Path
    output_path: Path
    overrides: list[str]
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{HOST}:{self.metrics_port}/metrics"

    def start(self) -> None:
        command = [sys.executable, "-m", "tools", "broker"]
        for item in self.overrides:
            command += ["--override", item]
        with open(self.output_path, "ab") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)

    def exited(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def stop(self) -> None:
        """SIGTERM (controlled shutdown), SIGKILL if it outlives the grace period."""
        stop_child(self.process, BROKER_STOP_TIMEOUT_S, lambda: click.echo(
            f"broker {self.broker_id} did not stop in {BROKER_STOP_TIMEOUT_S:.0f}s: SIGKILL", err=True))


@dataclass
class DevCluster:
    root: Path
    brokers_wanted: int
    base_port: int
    metrics_base_port: int
    zookeeper_port: int
    zookeeper_jar: Path
    extra_overrides: list[str]
    zookeeper: LocalZooKeeper | None = None
    brokers: list[DevBroker] = field(default_factory=list)
    #: How many racks the brokers are spread over; 0: no broker.rack.
    racks: int = 0

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers)

    def start(self) -> None:
        self.zookeeper = LocalZooKeeper(self.root / "zookeeper", self.zookeeper_port, HOST, self.zookeeper_jar).start()
        click.echo(f"ZooKeeper on {self.zookeeper.connect_string} (pid {self.zookeeper.process.pid if self.zookeeper.process else '?'})")
        connect = f"{self.zookeeper.connect_string}{CHROOT}"
        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        # Kafka's internal topics default to RF 3; a smaller dev cluster gets what it can hold.
        internal_rf = min(3, self.brokers_wanted)
        for broker_id in range(1, self.brokers_wanted + 1):
            port = self.base_port + broker_id - 1
            metrics_port = self.metrics_base_port + broker_id - 1
            log_dir = self.root / f"broker-{broker_id}"
            overrides = [f"broker.id={broker_id}", f"zookeeper.connect={connect}",
                         f"listeners=PLAINTEXT://{HOST}:{port}", f"log.dirs={log_dir}",
                         f"prometheus.metrics.port={metrics_port}",
                         f"offsets.topic.replication.factor={internal_rf}",
                         f"transaction.state.log.replication.factor={internal_rf}",
                         f"transaction.state.log.min.isr={min(2, internal_rf)}",
                         *rack_overrides(broker_id, self.racks), *self.extra_overrides]
            broker = DevBroker(broker_id, port, metrics_port, log_dir,
                               self.root / "logs" / f"broker-{broker_id}.log", overrides)
            self.brokers.append(broker)
            broker.start()
            assert broker.process is not None
            click.echo(f"broker {broker_id} on {broker.address} (pid {broker.process.pid}, output in {broker.output_path}, "
                       f"metrics at {broker.metrics_url})")

    def wait_until_ready(self, stopping: threading.Event) -> None:
        """Every broker's Metadata lists all of them (each has registered with ZooKeeper)."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        pending = list(self.brokers)
        while pending:
            if stopping.is_set():
                return
            self.check_alive()
            broker = pending[0]
            try:
                with KafkaClient(broker.address, timeout=2.0) as client:
                    assert client.cluster is not None
                    if len(client.cluster.brokers) == len(self.brokers):
                        pending.pop(0)
                        continue
            except (KafkaClientError, OSError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"broker {broker.broker_id} did not see all {len(self.brokers)} brokers "
                                   f"within {READY_TIMEOUT_S:.0f}s; its output ends:\n" + _tail(broker.output_path))
            stopping.wait(0.2)

    def check_alive(self) -> None:
        for broker in self.brokers:
            code = broker.exited()
            if code is not None:
                raise RuntimeError(f"broker {broker.broker_id} exited with {code}; see {broker.output_path}:\n"
                                   + _tail(broker.output_path))
        if self.zookeeper is not None and self.zookeeper.process is not None and self.zookeeper.process.poll() is not None:
            raise RuntimeError(f"ZooKeeper exited; see {self.zookeeper.log_path}")

    def stop(self) -> None:
        """Brokers one by one (the last one standing has nowhere to move leaders), ZooKeeper last."""
        for broker in reversed(self.brokers):
            broker.stop()
        if self.zookeeper is not None:
            self.zookeeper.stop()


def rack_overrides(broker_id: int, racks: int) -> list[str]:
    """Broker ``broker_id``'s rack (round robin over ``racks``) and the rack-aware replica selector."""
    if racks <= 0:
        return []
    return [f"broker.rack=RACK{(broker_id - 1) % racks + 1}", f"replica.selector.class={RACK_AWARE_REPLICA_SELECTOR}"]


def _tail(path: Path, chars: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


@contextlib.contextmanager
def _stop_signals() -> Iterator[threading.Event]:
    """SIGINT and SIGTERM set the returned event instead of raising in the middle of a start."""
    stopping = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stopping
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@click.command("dev-cluster")
@click.option("--brokers", "broker_count", type=click.IntRange(1, 64), default=3, show_default=True,
              help="How many brokers (ids 1..N).")
@click.option("--base-port", type=click.IntRange(1, 65535), default=9092, show_default=True,
              help="Broker N listens on 127.0.0.1:BASE_PORT+N-1.")
@click.option("--metrics-base-port", type=click.IntRange(1, 65535), default=9404, show_default=True,
              help="Broker N serves Prometheus metrics on 127.0.0.1:METRICS_BASE_PORT+N-1.")
@click.option("--zookeeper-port", type=click.IntRange(1, 65535), default=2181, show_default=True,
              help="ZooKeeper's client port on 127.0.0.1.")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where ZooKeeper's and the brokers' data go (kept); default: a temp dir removed at exit.")
@click.option("--zookeeper-jar", type=click.Path(dir_okay=False, path_type=Path), default=DEBIAN_ZOOKEEPER_JAR,
              show_default=True, help="The ZooKeeper server jar (Debian's zookeeper package).")
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="A broker property for every broker (repeatable).")
@click.option("--racks", type=click.IntRange(0, 64), default=0, show_default=True,
              help="Spread the brokers over this many racks (broker.rack=RACK1..) with the rack-aware "
                   "replica selector: consumers with client.rack read from their rack's replica.")
def dev_cluster_command(broker_count: int, base_port: int, metrics_base_port: int, zookeeper_port: int,
                        data_dir: Path | None, zookeeper_jar: Path, overrides: tuple[str, ...], racks: int) -> None:
    """Run a local ZooKeeper and N brokers in the foreground until Ctrl-C."""
    if base_port + broker_count - 1 > 65535:
        fail("--base-port leaves no room for that many brokers")
    if metrics_base_port + broker_count - 1 > 65535:
        fail("--metrics-base-port leaves no room for that many brokers")
    try:
        zookeeper_jar = find_zookeeper_jar(zookeeper_jar)
    except ZooKeeperUnavailable as exc:
        fail(str(exc))
    own_dir = data_dir is None
    root = Path(tempfile.mkdtemp(prefix="pafka-dev-cluster-")) if data_dir is None else data_dir.resolve()
    root.mkdir(parents=True, exist_ok=True)
    cluster = DevCluster(root, broker_count, base_port, metrics_base_port, zookeeper_port, zookeeper_jar,
                         list(overrides), racks=racks)
    exit_code = 0
    with _stop_signals() as stopping:
        try:
            cluster.start()
            cluster.wait_until_ready(stopping)
            if not stopping.is_set():
                click.echo(f"pafka dev-cluster ready: bootstrap.servers={cluster.bootstrap} "
                           f"zookeeper.connect={HOST}:{zookeeper_port}{CHROOT} (Ctrl-C stops it)")
            while not stopping.wait(0.5):
                cluster.check_alive()
        except (RuntimeError, TimeoutError, OSError) as exc:
            click.echo(f"pafka dev-cluster: {exc}", err=True)
            exit_code = 1
        finally:
            click.echo("pafka dev-cluster: stopping")
            cluster.stop()
            if own_dir:
                shutil.rmtree(root, ignore_errors=True)
            click.echo("pafka dev-cluster: stopped")
    sys.exit(exit_code)
