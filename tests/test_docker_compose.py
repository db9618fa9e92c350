"""docker-compose.yml and the Dockerfile: Debian's docker-compose accepts the file (no Docker engine
needed to validate), and the three brokers agree with each other and with ZooKeeper.

What a typo would break and only a running cluster would show: two brokers with one id, an
advertised port that is not the published one (clients then dial a port nothing forwards), brokers
on different ZooKeeper connect strings (two clusters instead of one), a shared data volume, a Prometheus
that scrapes a broker that is not there (or misses one) or runs without the alert rules.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from broker.config.broker_config import Listener, load_broker_config

ROOT = Path(__file__).resolve().parents[1]
BROKERS = ("broker-1", "broker-2", "broker-3")
ZOOKEEPER_CLIENT_PORT = 2181  # the official image's default clientPort
METRICS_PORT = 9404  # prometheus.metrics.port's default
PROMETHEUS_DIR = ROOT / "deploy" / "prometheus"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    """The file as docker-compose resolves it (anchors merged, ports and volumes normalised)."""
    assert shutil.which("docker-compose"), "docker-compose is missing: apt-get install docker-compose"
    result = subprocess.run(["docker-compose", "-f", "docker-compose.yml", "config"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, f"docker-compose config rejected the file:\n{result.stderr}"
    config: dict[str, Any] = yaml.safe_load(result.stdout)
    return config


def overrides_of(service: dict[str, Any]) -> dict[str, str]:
    """The service's ``--override key=value`` arguments (the image's entrypoint is ``pafka broker``)."""
    command = service["command"]
    assert len(command) % 2 == 0, command
    props: dict[str, str] = {}
    for flag, item in zip(command[::2], command[1::2], strict=True):
        assert flag == "--override", command
        key, sep, value = item.partition("=")
        assert sep, item
        assert key not in props, f"{key} given twice"
        props[key] = value
    return props


def listeners(value: str) -> dict[str, Listener]:
    parsed = load_broker_config(None, (f"listeners={value}",), environ={}).listeners
    return {listener.name: listener for listener in parsed}


def published_ports(service: dict[str, Any]) -> dict[int, int]:
    """Container port -> host port."""
    return {int(p["target"]): int(p["published"]) for p in service.get("ports", [])}


def test_services(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {"zookeeper", *BROKERS, "prometheus"}
    assert services["zookeeper"]["image"] == "zookeeper:3.8"
    assert published_ports(services["zookeeper"]) == {ZOOKEEPER_CLIENT_PORT: ZOOKEEPER_CLIENT_PORT}
    for name in BROKERS:
        service = services[name]
        assert Path(service["build"]["context"]).resolve() == ROOT, "brokers are built from this repository"
        assert "zookeeper" in service["depends_on"]
        assert service["hostname"] == name


def test_broker_ids_unique_and_connect_strings_equal(compose: dict[str, Any]) -> None:
    props = {name: overrides_of(compose["services"][name]) for name in BROKERS}
    ids = [int(props[name]["broker.id"]) for name in BROKERS]
    assert len(set(ids)) == len(ids), ids
    assert all(i >= 0 for i in ids)
    connects = {props[name]["zookeeper.connect"] for name in BROKERS}
    assert len(connects) == 1, f"brokers on different ZooKeeper connect strings: {connects}"
    (connect,) = connects
    match = re.fullmatch(r"([\w.-]+):(\d+)(/[\w/-]+)", connect)
    assert match, f"zookeeper.connect {connect!r}: host:port/chroot expected"
    host, port, chroot = match.groups()
    assert host == "zookeeper" and int(port) == ZOOKEEPER_CLIENT_PORT, connect
    assert chroot != "/", connect


def test_listeners_and_advertised_ports(compose: dict[str, Any]) -> None:
    published_host_ports: list[int] = []
    for name in BROKERS:
        service = compose["services"][name]
        props = overrides_of(service)
        bound = listeners(props["listeners"])
        advertised = listeners(props["advertised.listeners"])
        assert set(advertised) <= set(bound), "every advertised listener is one the broker binds"
        protocol_map = dict(item.split(":") for item in props["listener.security.protocol.map"].split(","))
        assert set(bound) <= set(protocol_map)
        inter_broker = props["inter.broker.listener.name"]
        assert inter_broker in bound
        # Other brokers reach this one by its compose hostname on the inter-broker listener.
        assert advertised[inter_broker].host == service["hostname"] == name
        assert advertised[inter_broker].port == bound[inter_broker].port
        # Clients on the host: the advertised port is the published one, forwarded to the bound one.
        external = [listener for listener_name, listener in advertised.items() if listener_name != inter_broker]
        assert len(external) == 1, advertised
        ports = published_ports(service)
        assert len(ports) == 1, ports
        ((target, published),) = ports.items()
        assert external[0].port == published, f"{name}: advertises {external[0].port}, publishes {published}"
        assert bound[external[0].name].port == target, f"{name}: binds {bound[external[0].name].port}, forwards to {target}"
        assert external[0].host in ("localhost", "127.0.0.1")
        published_host_ports.append(published)
    assert len(set(published_host_ports)) == len(BROKERS), published_host_ports


def test_each_broker_has_its_own_data_volume(compose: dict[str, Any]) -> None:
    volumes = []
    for name in BROKERS:
        service = compose["services"][name]
        (volume,) = service["volumes"]
        source, target = volume.split(":")[:2]
        assert source in compose["volumes"], f"{name}: {source} is a named volume"
        log_dirs = overrides_of(service)["log.dirs"].split(",")
        assert all(Path(d).is_relative_to(target) for d in log_dirs), f"{name}: log.dirs {log_dirs} outside {target}"
        volumes.append(source)
    assert len(set(volumes)) == len(volumes), volumes


def test_overrides_are_broker_configs(compose: dict[str, Any]) -> None:
    """pafka's own config loader accepts every broker's overrides as they are."""
    for name in BROKERS:
        props = overrides_of(compose["services"][name])
        config = load_broker_config(None, tuple(f"{k}={v}" for k, v in props.items()), environ={})
        assert config.node_id == int(props["broker.id"])
        assert config.zookeeper_connect == props["zookeeper.connect"]


def test_dockerfile() -> None:
    text = (ROOT / "Dockerfile").read_text()
    instructions = [line for line in text.splitlines() if line and not line.startswith(("#", " "))]
    assert instructions[0] == "FROM python:3.11-slim"
    assert 'ENTRYPOINT ["pafka", "broker"]' in instructions
    assert re.search(r"^RUN pip install /tmp/pafka-src", text, re.MULTILINE), "pafka installed from the repository"
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".venv" in ignored and ".git" in ignored, "the build context leaves out the venv and the git history"


def test_prometheus_scrapes_every_broker_with_the_alert_rules(compose: dict[str, Any]) -> None:
    service = compose["services"]["prometheus"]
    mounts = {Path(volume.split(":")[0]).resolve(): volume.split(":")[1] for volume in service["volumes"]
              if volume.startswith("/")}
    assert mounts[PROMETHEUS_DIR / "prometheus.yml"] == "/etc/prometheus/prometheus.yml"
    assert mounts[PROMETHEUS_DIR / "alerts.yml"] == "/etc/prometheus/alerts.yml"
    assert "--config.file=/etc/prometheus/prometheus.yml" in service["command"]
    assert set(service["depends_on"]) == set(BROKERS)
    config = yaml.safe_load((PROMETHEUS_DIR / "prometheus.yml").read_text())
    assert config["rule_files"] == ["/etc/prometheus/alerts.yml"]
    (job,) = config["scrape_configs"]
    scraped = {target: static["labels"]["broker_id"] for static in job["static_configs"] for target in static["targets"]}
    wanted = {}
    for name in BROKERS:
        props = overrides_of(compose["services"][name])
        wanted[f"{name}:{props.get('prometheus.metrics.port', METRICS_PORT)}"] = props["broker.id"]
    assert scraped == wanted, "one target per broker, at its metrics port, labelled with its id"


def test_brokers_are_healthy_once_ready(compose: dict[str, Any]) -> None:
    """The health check asks the broker's own /readyz on its metrics port, not merely whether a port is open."""
    for name in BROKERS:
        props = overrides_of(compose["services"][name])
        port = props.get("prometheus.metrics.port", METRICS_PORT)
        test = compose["services"][name]["healthcheck"]["test"]
        assert test[:3] == ["CMD", "python", "-c"], test
        assert f"urlopen('http://127.0.0.1:{port}/readyz'" in test[3], test
