"""A real pafka cluster for tests and benchmarks: one ZooKeeper and N broker processes.

    with Cluster(3, "min.insync.replicas=2") as cluster:    # ZooKeeper + brokers 1..3, all registered
        cluster.bootstrap                 # "127.0.0.1:p1,127.0.0.2:p2,127.0.0.3:p3"
        cluster.kill(cluster.controller_id())                  # SIGKILL: a crash
        cluster.wait_for(lambda: cluster.controller_id() not in (None, old), timeout=8.0)
        cluster.pause(2); cluster.resume(2)                    # SIGSTOP / SIGCONT
        zk = cluster.zk()                 # a connected kazoo client under the cluster's chroot

Broker N listens on 127.0.0.N (a free port) with ``broker.id=N``, registers under a chroot of its
own (``/pafka-<random>``) in the cluster's ZooKeeper (or a shared one passed in), and keeps its data
in the cluster's temp dir. Everything is cleaned up on exit, on failure too: brokers are killed by
their PIDs (a paused one is killed as it is), kazoo clients closed, ZooKeeper stopped, temp dirs
removed.

With ``security="SASL_SSL"`` every listener is SASL_SSL, the brokers' own connections to each other
included (SCRAM-SHA-512 over TLS, ``pytest_pafka.cluster_security``): the brokers' and the tests' SCRAM
users are written to ZooKeeper before the first broker starts, and ``cluster.client_config()`` is
what a confluent-kafka client needs (``cluster.client_security()`` for pafka's own client).

kazoo runs its own threads and blocks its caller: call these methods from plain (sync) test code,
never from a coroutine running on an event loop.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import secrets
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from client.client import KafkaClient
from client.client_security import ClientSecurity
from client.errors import KafkaClientError
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.cluster_security import ConfluentConfig, SaslSslSecurity
from pytest_pafka.network_faults import ClusterLinks
from pytest_pafka.waiting import wait_until
from pytest_pafka.zookeeper import ZooKeeperProcess

T = TypeVar("T")

#: Tests use a short session so that a dead or paused broker's znodes go quickly (issue 17: 6,000 ms).
TEST_SESSION_TIMEOUT_MS = 6000
REGISTRATION_TIMEOUT_S = 30.0
#: A controlled shutdown moves every leadership first: give it longer than a plain stop.
TERMINATE_TIMEOUT_S = 60.0
LOG_TAIL_CHARS = 6000
#: ``Cluster(security=...)``: PLAINTEXT (the default) or SASL_SSL everywhere.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SASL_SSL")


class Cluster:
    """ZooKeeper and brokers 1..N on 127.0.0.1..127.0.0.N; see the module docstring."""

    def __init__(self, brokers: int = 3, *overrides: str, session_timeout_ms: int = TEST_SESSION_TIMEOUT_MS,
                 broker_overrides: dict[int, list[str]] | None = None, zookeeper: ZooKeeperProcess | None = None,
                 start_brokers: bool = True, link_faults: bool = False, security: str = "PLAINTEXT",
                 tree: Path | None = None) -> None:
        if not 1 <= brokers <= 254:
            raise ValueError("brokers: 1..254 (one loopback address each)")
        if security not in SECURITY_PROTOCOLS:
            raise ValueError(f"security: one of {', '.join(SECURITY_PROTOCOLS)}")
        if security != "PLAINTEXT" and link_faults:
            raise ValueError("link_faults route PLAINTEXT listeners only")
        self.size = brokers
        self.chroot = f"/pafka-{secrets.token_hex(4)}"
        self.session_timeout_ms = session_timeout_ms
        self.overrides = list(overrides)
        self.broker_overrides = broker_overrides or {}
        self.start_brokers = start_brokers
        #: Another checkout whose pafka the brokers run (a benchmark's old tree); None: the installed one.
        self.tree = tree
        self._shared_zookeeper = zookeeper
        self.zookeeper: ZooKeeperProcess | None = zookeeper
        self.root = Path(tempfile.mkdtemp(prefix="pafka-cluster-"))
        self.brokers: dict[int, BrokerProcess] = {}
        self._paused: set[int] = set()
        self._kazoo_clients: list[KazooClient] = []
        self._kazoo: KazooClient | None = None
        self.link_faults = link_faults
        #: With ``link_faults``: a proxy on every client, broker-to-broker and ZooKeeper link
        #: (``pytest_pafka.network_faults``), made when the cluster starts.
        self.links: ClusterLinks | None = None
        self.security = security
        #: With SASL_SSL: its certificates and SCRAM users (made when the cluster starts).
        self.sasl_ssl: SaslSslSecurity | None = None

    # -- addresses -------------------------------------------------------------------
    @property
    def zookeeper_connect(self) -> str:
        """``host:port/chroot``: what every broker's ``zookeeper.connect`` says."""
        if self.zookeeper is None:
            raise RuntimeError("the cluster is not started")
        return f"{self.zookeeper.connect_string}{self.chroot}"

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    @property
    def bootstrap_servers(self) -> str:
        """Every broker's ``host:port``, what a client's ``bootstrap.servers`` says."""
        return self.bootstrap

    def broker(self, broker_id: int) -> BrokerProcess:
        return self.brokers[broker_id]

    @property
    def broker_ids(self) -> list[int]:
        return sorted(self.brokers)

    def running_ids(self) -> list[int]:
        return [i for i, b in sorted(self.brokers.items()) if b.running]

    def bootstrap_of(self, broker_ids: Iterable[int]) -> str:
        return ",".join(self.brokers[i].bootstrap for i in broker_ids)

    # -- clients -----------------------------------------------------------------------
    def client_properties(self) -> dict[str, str]:
        """Kafka client properties for the cluster's listeners (empty with PLAINTEXT)."""
        return self.sasl_ssl.client_properties() if self.sasl_ssl is not None else {}

    def client_security(self) -> ClientSecurity:
        """TLS and SASL for pafka's own ``KafkaClient``/``BrokerConnection`` (none with PLAINTEXT)."""
        return ClientSecurity.from_properties(self.client_properties())

    def confluent_security(self) -> ConfluentConfig:
        """confluent-kafka's security settings, without ``bootstrap.servers`` (empty with PLAINTEXT):
        for helpers that take a bootstrap of their own and ``extra`` settings."""
        return self.sasl_ssl.confluent_config() if self.sasl_ssl is not None else {}

    def client_config(self, bootstrap: str | None = None) -> ConfluentConfig:
        """A confluent-kafka client's config: ``bootstrap`` (default every broker) and the security."""
        return {"bootstrap.servers": bootstrap or self.bootstrap, **self.confluent_security()}

    # -- lifecycle -------------------------------------------------------------------
    def __enter__(self) -> Cluster:
        try:
            if self.zookeeper is None:
                zookeeper = ZooKeeperProcess()
                zookeeper.__enter__()
                self.zookeeper = zookeeper
            if self.link_faults:
                self.links = ClusterLinks((self.zookeeper.host, self.zookeeper.port), self.chroot)
            if self.security == "SASL_SSL":
                self._bootstrap_sasl_ssl()
            for broker_id in range(1, self.size + 1):
                self.brokers[broker_id] = self._make_broker(broker_id)
            if self.start_brokers:
                self.start_all(self.brokers)
        except BaseException:
            self.cleanup()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.cleanup()

    def _make_broker(self, broker_id: int) -> BrokerProcess:
        overrides = [f"broker.id={broker_id}", f"zookeeper.connect={self.zookeeper_connect}",
                     f"zookeeper.session.timeout.ms={self.session_timeout_ms}",
                     *self.overrides, *self.broker_overrides.get(broker_id, [])]
        broker = BrokerProcess(*overrides, data_dir=self.root / f"broker-{broker_id}", host=f"127.0.0.{broker_id}",
                               log_path=self.root / f"broker-{broker_id}.log", tree=self.tree)
        if self.links is not None:  # the later overrides win: listeners and ZooKeeper through the proxies
            broker.overrides += self.links.broker_overrides(broker_id, broker.host, broker.port)
        if self.sasl_ssl is not None:  # its listener replaces the PLAINTEXT one on the same address
            broker.overrides += self.sasl_ssl.broker_overrides(broker.host, broker.port)
            broker.client_properties = self.sasl_ssl.client_properties()
        return broker

    def _bootstrap_sasl_ssl(self) -> None:
        """Certificates, and the SCRAM users in ZooKeeper before any broker needs them (Kafka's way)."""
        self.sasl_ssl = SaslSslSecurity.create(self.root / "tls")
        for path, data in self.sasl_ssl.credential_znodes().items():
            self.kazoo.create(path, data, makepath=True)

    def start(self, broker_id: int, *, wait_registered: bool = True) -> BrokerProcess:
        """Start (again) on the same address and data; by default wait until this start registered it in
        /brokers/ids (a registration left by a killed run lives until its session expires: not that one)."""
        broker = self.brokers[broker_id]
        previous = self.broker_epoch(broker_id) if wait_registered else None
        broker.start()
        if wait_registered:
            self.wait_for(lambda: self.broker_epoch(broker_id) not in (None, previous), REGISTRATION_TIMEOUT_S,
                          f"broker {broker_id} registered by its new start")
            self.wait_until_serving([broker_id])
        return broker

    def start_all(self, broker_ids: Iterable[int]) -> None:
        """Launch several brokers at once (each start waits for its listener) and wait for their registrations."""
        ids = list(broker_ids)
        with ThreadPoolExecutor(max_workers=len(ids) or 1) as pool:
            for future in [pool.submit(self.brokers[i].start) for i in ids]:
                future.result()
        self.wait_until_registered(ids)
        self.wait_until_serving(ids)

    def kill(self, broker_id: int) -> int:
        """SIGKILL: a crash; returns once the process is gone (its znode goes at session expiry)."""
        self._paused.discard(broker_id)
        return self.brokers[broker_id].kill()

    def terminate(self, broker_id: int, timeout: float = TERMINATE_TIMEOUT_S) -> int:
        """SIGTERM (controlled shutdown) and wait for the exit; SIGKILL only past ``timeout``. The exit code."""
        broker = self.brokers[broker_id]
        saved, broker.stop_timeout_s = broker.stop_timeout_s, timeout
        try:
            return broker.terminate()
        finally:
            broker.stop_timeout_s = saved

    def restart(self, broker_id: int, sig: signal.Signals = signal.SIGTERM) -> BrokerProcess:
        if sig == signal.SIGKILL:
            self.kill(broker_id)
        else:
            self.terminate(broker_id)
        return self.start(broker_id)

    def pause(self, broker_id: int) -> None:
        """SIGSTOP: the broker keeps its sockets but answers nothing, heartbeats to ZooKeeper included."""
        pid = self._pid(broker_id)
        os.kill(pid, signal.SIGSTOP)
        self._paused.add(broker_id)

    def resume(self, broker_id: int) -> None:
        os.kill(self._pid(broker_id), signal.SIGCONT)
        self._paused.discard(broker_id)

    @property
    def paused_ids(self) -> frozenset[int]:
        return frozenset(self._paused)

    def _pid(self, broker_id: int) -> int:
        pid = self.brokers[broker_id].pid
        if pid is None or not self.brokers[broker_id].running:
            raise RuntimeError(f"broker {broker_id} is not running")
        return pid

    def cleanup(self) -> None:
        """Everything this cluster started, even after a failure; errors of one step do not skip the next."""
        for broker_id, broker in self.brokers.items():
            with contextlib.suppress(Exception):
                if broker_id in self._paused and broker.running and broker.pid is not None:
                    os.kill(broker.pid, signal.SIGCONT)
            with contextlib.suppress(Exception):
                broker.cleanup()  # SIGKILL by PID
        self._paused.clear()
        for client in self._kazoo_clients:
            with contextlib.suppress(Exception):
                client.stop()
                client.close()
        self._kazoo_clients.clear()
        self._kazoo = None
        if self.links is not None:
            self.links.close()
        if self.zookeeper is not None and self._shared_zookeeper is None:
            with contextlib.suppress(Exception):
                self.zookeeper.__exit__(None, None, None)
        self.zookeeper = self._shared_zookeeper
        shutil.rmtree(self.root, ignore_errors=True)

    # -- ZooKeeper -------------------------------------------------------------------
    def zk(self) -> KazooClient:
        """A new connected kazoo client under the cluster's chroot (closed at cleanup)."""
        client = KazooClient(hosts=self.zookeeper_connect, timeout=10.0)
        client.start(timeout=15.0)
        self._kazoo_clients.append(client)
        return client

    @property
    def kazoo(self) -> KazooClient:
        """The cluster's own shared kazoo client (for reads)."""
        if self._kazoo is None or not self._kazoo.connected:
            self._kazoo = self.zk()
        return self._kazoo

    def read_json(self, path: str) -> Any:
        """The znode's data as JSON, or None if the znode does not exist."""
        try:
            data, _ = self.kazoo.get(path)
        except NoNodeError:
            return None
        return json.loads(data) if data else None

    def registered_ids(self) -> set[int]:
        try:
            return {int(child) for child in self.kazoo.get_children("/brokers/ids")}
        except NoNodeError:
            return set()

    def broker_epoch(self, broker_id: int) -> int | None:
        """The broker's epoch as Kafka defines it (the czxid of /brokers/ids/N), None if not registered."""
        if self.zookeeper is None:
            return None
        try:
            stat = self.kazoo.exists(f"/brokers/ids/{broker_id}")
        except Exception:  # the chroot may not exist before the first broker created it
            return None
        return None if stat is None else int(stat.czxid)

    def controller_id(self) -> int | None:
        """The broker id in /controller, or None when no broker is controller."""
        data = self.read_json("/controller")
        return None if data is None else int(data["brokerid"])

    def controller_epoch(self) -> int | None:
        data = self.read_json("/controller_epoch")
        return None if data is None else int(data)

    def partition_state(self, topic: str, partition: int) -> dict[str, Any] | None:
        """/brokers/topics/T/partitions/P/state: leader, leader_epoch, isr, controller_epoch, version."""
        state = self.read_json(f"/brokers/topics/{topic}/partitions/{partition}/state")
        return state if isinstance(state, dict) else None

    def topic_assignment(self, topic: str) -> dict[int, list[int]]:
        data = self.read_json(f"/brokers/topics/{topic}")
        if not data:
            return {}
        return {int(p): list(replicas) for p, replicas in data["partitions"].items()}

    def wait_until_registered(self, broker_ids: Iterable[int], timeout: float = REGISTRATION_TIMEOUT_S) -> None:
        wanted = set(broker_ids)
        self.wait_for(lambda: wanted <= self.registered_ids() and self.controller_id() is not None, timeout,
                      f"brokers {sorted(wanted)} registered and a controller elected")

    def wait_until_serving(self, broker_ids: Iterable[int], timeout: float = REGISTRATION_TIMEOUT_S) -> None:
        """Each broker's Metadata names a controller and every registered broker (the controller's
        UpdateMetadata reached it): admin clients that wait for a controller find one at once."""
        def serving(broker_id: int) -> bool:
            try:
                with KafkaClient(self.brokers[broker_id].bootstrap, timeout=5.0,
                                 security=self.client_security()) as client:
                    metadata = client.refresh_metadata([])
            except (KafkaClientError, OSError):
                return False
            registered = self.registered_ids()
            return metadata.controller_id in registered and registered <= set(metadata.brokers)

        for broker_id in broker_ids:
            self.wait_for(functools.partial(serving, broker_id), timeout, f"broker {broker_id} serving cluster metadata")

    def wait_for_topic(self, topic: str, partitions: int, timeout: float = 30.0) -> None:
        """Every partition of ``topic`` has a state znode with a live leader."""
        def ready() -> bool:
            live = self.registered_ids()
            for p in range(partitions):
                state = self.partition_state(topic, p)
                if state is None or state["leader"] not in live:
                    return False
            return True
        self.wait_for(ready, timeout, f"topic {topic}: {partitions} partitions with live leaders")

    # -- waiting and diagnostics --------------------------------------------------------
    def wait_for(self, predicate: Callable[[], T], timeout: float, what: str = "condition",
                 interval: float = 0.05) -> T:
        """Poll until ``predicate()`` is truthy and return its value; a timeout names ``what`` and shows
        the brokers' logs."""
        return wait_until(predicate, timeout, what, interval=interval, details=lambda: self.log_tails(2000))

    def log_tails(self, chars: int = LOG_TAIL_CHARS) -> str:
        parts = []
        for broker_id, broker in sorted(self.brokers.items()):
            parts.append(f"--- broker {broker_id} ({broker.bootstrap}) ---\n{broker.log_text()[-chars:]}")
        return "\n".join(parts)
