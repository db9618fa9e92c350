"""The pytest fixtures pafka installs (entry point ``pytest11``): real brokers for an application's tests.

    def test_round_trip(pafka_broker):
        producer = Producer({"bootstrap.servers": pafka_broker.bootstrap_servers})
        ...

``pafka_broker``
    A broker process (``python -m broker``) on a free 127.0.0.1 port with a fresh data dir, started for the test
    and killed after it (failed or not). A :class:`~pytest_pafka.broker_process.BrokerProcess`.
``pafka_broker_factory``
    Starts as many brokers as a test asks for, each with settings of its own:
    ``pafka_broker_factory("num.partitions=3", data_dir=tmp_path / "data")``.
``pafka_module_broker``, ``pafka_module_broker_factory``
    The same, shared by the tests of one module (configured by the module's ``pytestmark``).
``pafka_cluster``, ``pafka_module_cluster``, ``pafka_cluster_factory``
    ZooKeeper and N brokers (broker N on 127.0.0.N): a :class:`~pytest_pafka.cluster.Cluster`.
    ZooKeeper is Debian's (a java process), shared by the session, each cluster under a chroot of its own.
``pafka_zookeeper``, ``pafka_zk_connect``
    That session's ZooKeeper, and a connect string with a fresh chroot.
``pafka_prometheus``
    A real Prometheus (Debian's ``prometheus``, a plain process on a free 127.0.0.1 port) for this test:
    ``pafka_prometheus.scrape(targets, rule_files=[...])`` scrapes them every second; ``query()``,
    ``alerts()`` and ``targets()`` ask its HTTP API. A :class:`~pytest_pafka.prometheus.PrometheusProcess`.

Markers:

``@pytest.mark.pafka_broker_config("key=value", {"key": value}, key_with_underscores=value)``
    Server properties of every broker the test starts (on a module's ``pytestmark``: its module
    brokers' too). Keyword names stand for the dotted property (``num_partitions=3`` is
    ``num.partitions=3``); a property with an underscore of its own goes as a string or a dict.
    The marker nearest the test wins over a farther one; a factory's own arguments win over both.
``@pytest.mark.pafka_cluster(brokers=3, security="PLAINTEXT", ...)``
    The shape of ``pafka_cluster``: :class:`~pytest_pafka.cluster.Cluster`'s keyword arguments.

A broker's log (or every cluster broker's) is printed when its test failed, so pytest shows it.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Generator, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.cluster import Cluster
from pytest_pafka.prometheus import PrometheusProcess
from pytest_pafka.zookeeper import ZooKeeperProcess

BROKER_CONFIG_MARK = "pafka_broker_config"
CLUSTER_MARK = "pafka_cluster"
#: How much of a failed test's broker log is printed.
LOG_TAIL_CHARS = 6000
_FAILED = pytest.StashKey[bool]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{BROKER_CONFIG_MARK}(*properties, **properties): server properties of the "
                                       "brokers pafka's fixtures start ('key=value', a dict, or key_name=value for key.name)")
    config.addinivalue_line("markers", f"{CLUSTER_MARK}(brokers=3, **options): the shape of pafka_cluster "
                                       "(pytest_pafka.cluster.Cluster's keyword arguments)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Note failures on the test and its module: a fixture's teardown prints the broker logs only after one."""
    report = yield
    if report.failed:
        item.stash[_FAILED] = True
        module = item.getparent(pytest.Module)
        if module is not None:
            module.stash[_FAILED] = True
        item.session.stash[_FAILED] = True
    return report


def _failed(node: pytest.Item | pytest.Collector | pytest.Session) -> bool:
    return node.stash.get(_FAILED, False)


# -- properties --------------------------------------------------------------------------------------
def _format(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def properties(*items: str | Mapping[str, object], **named: object) -> list[str]:
    """``key=value`` overrides from strings, dicts and keyword arguments (``a_b=1`` is ``a.b=1``)."""
    out: list[str] = []
    for item in items:
        if isinstance(item, str):
            if "=" not in item:
                raise ValueError(f"a broker property is key=value, not {item!r}")
            out.append(item)
        else:
            out += [f"{key}={_format(value)}" for key, value in item.items()]
    out += [f"{key.replace('_', '.')}={_format(value)}" for key, value in named.items()]
    return out


def marker_properties(node: pytest.Item | pytest.Collector) -> list[str]:
    """Every ``pafka_broker_config`` marker on ``node`` and its parents, the farthest first (the nearest wins)."""
    marks = list(node.iter_markers(BROKER_CONFIG_MARK))
    out: list[str] = []
    for mark in reversed(marks):
        out += properties(*mark.args, **mark.kwargs)
    return out


def cluster_options(node: pytest.Item | pytest.Collector) -> dict[str, Any]:
    """The nearest ``pafka_cluster`` marker's keyword arguments (none: three brokers)."""
    mark = node.get_closest_marker(CLUSTER_MARK)
    options: dict[str, Any] = {"brokers": 3}
    if mark is not None:
        if mark.args:
            raise TypeError(f"{CLUSTER_MARK} takes keyword arguments only (broker properties go in {BROKER_CONFIG_MARK})")
        options.update(mark.kwargs)
    return options


# -- factories ------------------------------------------------------------------------------------------
class BrokerFactory:
    """Starts brokers with the marker's properties and the caller's; :meth:`close` ends every one of them."""

    def __init__(self, defaults: list[str]) -> None:
        self.defaults = defaults
        self.brokers: list[BrokerProcess] = []

    def __call__(self, *items: str | Mapping[str, object], start: bool = True, data_dir: Path | None = None,
                 port: int | None = None, host: str = "127.0.0.1", env: Mapping[str, str] | None = None,
                 **named: object) -> BrokerProcess:
        """A broker with these properties on top of the defaults, started unless ``start=False``."""
        broker = BrokerProcess(*self.defaults, *properties(*items, **named), data_dir=data_dir, port=port,
                               host=host, env=env)
        self.brokers.append(broker)
        if start:
            broker.start()
        return broker

    def log_tails(self) -> str:
        return "\n".join(f"--- pafka broker {b.bootstrap} ---\n{b.log_text()[-LOG_TAIL_CHARS:]}" for b in self.brokers)

    def close(self) -> None:
        """Kill every broker by its PID and remove its temp dir, each whatever the others did."""
        for broker in reversed(self.brokers):
            with contextlib.suppress(Exception):
                broker.cleanup()
        self.brokers.clear()


class ClusterFactory:
    """Starts clusters on the session's ZooKeeper; :meth:`close` ends every one of them."""

    def __init__(self, zookeeper: ZooKeeperProcess, defaults: list[str], options: dict[str, Any]) -> None:
        self.zookeeper = zookeeper
        self.defaults = defaults
        self.options = options
        self.clusters: list[Cluster] = []

    def __call__(self, *items: str | Mapping[str, object], **options: Any) -> Cluster:
        """A started cluster: these broker properties on top of the defaults, ``options`` as :class:`Cluster` takes them."""
        merged = {**self.options, **options}
        brokers = merged.pop("brokers", 3)
        cluster = Cluster(brokers, *self.defaults, *properties(*items), zookeeper=self.zookeeper, **merged)
        self.clusters.append(cluster)
        cluster.__enter__()
        return cluster

    def log_tails(self) -> str:
        return "\n".join(cluster.log_tails() for cluster in self.clusters)

    def close(self) -> None:
        for cluster in reversed(self.clusters):
            with contextlib.suppress(Exception):
                cluster.cleanup()
        self.clusters.clear()


def _serve(request: pytest.FixtureRequest, factory: BrokerFactory | ClusterFactory) -> Iterator[Any]:
    """Yield ``factory``; afterwards print the logs if the test (or, module-wide, any test) failed, then close it."""
    try:
        yield factory
    finally:
        try:
            if _failed(request.node):
                print(factory.log_tails())
        finally:
            factory.close()


# -- fixtures ---------------------------------------------------------------------------------------------
@pytest.fixture
def pafka_broker_factory(request: pytest.FixtureRequest) -> Iterator[BrokerFactory]:
    """Start brokers: ``pafka_broker_factory("log.retention.ms=1000")`` -> a started BrokerProcess."""
    yield from _serve(request, BrokerFactory(marker_properties(request.node)))


@pytest.fixture
def pafka_broker(pafka_broker_factory: BrokerFactory) -> BrokerProcess:
    """A real pafka broker on a free 127.0.0.1 port with a fresh data dir, for this test only."""
    return pafka_broker_factory()


@pytest.fixture(scope="module")
def pafka_module_broker_factory(request: pytest.FixtureRequest) -> Iterator[BrokerFactory]:
    """``pafka_broker_factory`` for brokers shared by a module's tests."""
    yield from _serve(request, BrokerFactory(marker_properties(request.node)))


@pytest.fixture(scope="module")
def pafka_module_broker(pafka_module_broker_factory: BrokerFactory) -> BrokerProcess:
    """One broker shared by the tests of a module (configured by the module's ``pytestmark``)."""
    return pafka_module_broker_factory()


@pytest.fixture(scope="session")
def pafka_session_broker_factory(request: pytest.FixtureRequest) -> Iterator[BrokerFactory]:
    """``pafka_broker_factory`` for brokers shared by the whole session (no markers apply at that scope)."""
    yield from _serve(request, BrokerFactory([]))


@pytest.fixture(scope="session")
def pafka_zookeeper() -> Iterator[ZooKeeperProcess]:
    """One real ZooKeeper (Debian's, a java process on 127.0.0.1) for the whole session; tests keep apart by chroot."""
    with ZooKeeperProcess() as zookeeper:
        yield zookeeper


@pytest.fixture
def pafka_prometheus(request: pytest.FixtureRequest) -> Iterator[PrometheusProcess]:
    """A Prometheus server for this test, scraping nothing until told; stopped by its PID afterwards, failed or not."""
    with PrometheusProcess() as prometheus:
        try:
            yield prometheus
        finally:
            if _failed(request.node):
                print(f"--- prometheus {prometheus.url} ---\n{prometheus.log_tail()}")


@pytest.fixture
def pafka_zk_connect(pafka_zookeeper: ZooKeeperProcess) -> str:
    """A connect string with a fresh chroot of its own (``127.0.0.1:port/test-<hex>``)."""
    return pafka_zookeeper.chroot(f"test-{uuid.uuid4().hex[:12]}")


@pytest.fixture
def pafka_cluster_factory(request: pytest.FixtureRequest, pafka_zookeeper: ZooKeeperProcess) -> Iterator[ClusterFactory]:
    """Start clusters: ``pafka_cluster_factory("min.insync.replicas=2", brokers=3)`` -> a started Cluster."""
    factory = ClusterFactory(pafka_zookeeper, marker_properties(request.node), cluster_options(request.node))
    yield from _serve(request, factory)


@pytest.fixture
def pafka_cluster(pafka_cluster_factory: ClusterFactory) -> Cluster:
    """ZooKeeper and N brokers (``@pytest.mark.pafka_cluster(brokers=N)``, default 3), for this test only."""
    return pafka_cluster_factory()


@pytest.fixture(scope="module")
def pafka_module_cluster_factory(request: pytest.FixtureRequest,
                                 pafka_zookeeper: ZooKeeperProcess) -> Iterator[ClusterFactory]:
    """``pafka_cluster_factory`` for clusters shared by a module's tests."""
    factory = ClusterFactory(pafka_zookeeper, marker_properties(request.node), cluster_options(request.node))
    yield from _serve(request, factory)


@pytest.fixture(scope="module")
def pafka_module_cluster(pafka_module_cluster_factory: ClusterFactory) -> Cluster:
    """One cluster shared by the tests of a module; tests that kill or pause brokers start them again."""
    return pafka_module_cluster_factory()
