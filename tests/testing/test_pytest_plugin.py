"""The pytest plugin pafka ships (pytest_pafka): its fixtures, markers and factories, and its installation.

The last test is the user's view: a throwaway project outside the repository pip-installs pafka
into a fresh venv and runs a three-line test that uses ``pafka_broker``; pytest finds the plugin
through its ``pytest11`` entry point alone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
import tomllib
from pathlib import Path

import pytest

from client.client import KafkaClient
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.cluster import Cluster
from pytest_pafka.plugin import BrokerFactory, properties

REPO_ROOT = Path(__file__).resolve().parents[2]


def gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_properties_from_strings_dicts_and_keywords() -> None:
    assert properties("a.b=1", {"c.d": True, "e_f.g": 2}, num_partitions=3, delete_topic_enable=False) == [
        "a.b=1", "c.d=true", "e_f.g=2", "num.partitions=3", "delete.topic.enable=false"]
    with pytest.raises(ValueError, match="key=value"):
        properties("num.partitions")


def test_pafka_broker_is_a_fresh_broker_on_loopback(pafka_broker: BrokerProcess) -> None:
    assert pafka_broker.running and pafka_broker.host == "127.0.0.1"
    assert pafka_broker.bootstrap_servers == f"127.0.0.1:{pafka_broker.port}"
    assert not any(p.is_dir() for p in pafka_broker.data_dir.iterdir())  # no partition yet
    with KafkaClient(pafka_broker.bootstrap_servers) as client:
        assert list(client.refresh_metadata([]).brokers) == [0]
    print(f"pafka_broker answered {pafka_broker.start_s:.3f} s after its launch")


@pytest.mark.pafka_broker_config("log.retention.hours=1", num_partitions=1)
class TestMarkers:
    @pytest.mark.pafka_broker_config(num_partitions=4)
    def test_the_nearest_marker_wins(self, pafka_broker: BrokerProcess) -> None:
        assert pafka_broker.overrides == ["log.retention.hours=1", "num.partitions=1", "num.partitions=4"]
        with KafkaClient(pafka_broker.bootstrap_servers) as client:
            # auto.create.topics.enable: the topic is created with the broker's num.partitions.
            deadline = time.monotonic() + 10
            while not (topic := client.refresh_metadata(["auto"], allow_auto_topic_creation=True).topics["auto"]).partitions:
                assert time.monotonic() < deadline, "the auto-created topic's partitions"
                time.sleep(0.05)
            assert len(topic.partitions) == 4

    def test_a_factory_takes_its_own_settings_over_the_markers(self, pafka_broker_factory: BrokerFactory) -> None:
        first = pafka_broker_factory()
        second = pafka_broker_factory({"num.partitions": 2}, start=False)
        assert not second.running
        second.start()
        assert first.port != second.port and first.data_dir != second.data_dir
        assert second.overrides == ["log.retention.hours=1", "num.partitions=1", "num.partitions=2"]


def test_a_failed_test_still_ends_its_broker_and_shows_its_log(tmp_path: Path) -> None:
    """Run in a pytest of its own (the plugin comes through its entry point there too)."""
    (tmp_path / "test_fails.py").write_text(textwrap.dedent(f"""
        from pathlib import Path

        def test_fails(pafka_broker):
            Path({str(tmp_path / "pid")!r}).write_text(f"{{pafka_broker.pid}} {{pafka_broker.data_dir}}")
            assert False, "on purpose"
    """))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_fails.py"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "--- pafka broker 127.0.0.1:" in result.stdout and "started in" in result.stdout, result.stdout
    pid, data_dir = (tmp_path / "pid").read_text().split(" ", 1)
    assert gone(int(pid)) and not Path(data_dir).exists()


@pytest.mark.pafka_cluster(brokers=2)
@pytest.mark.pafka_broker_config("log.retention.hours=2")
def test_pafka_cluster_brokers_on_their_own_addresses(pafka_cluster: Cluster) -> None:
    assert pafka_cluster.broker_ids == [1, 2]
    assert pafka_cluster.bootstrap_servers == ",".join(f"127.0.0.{i}:{pafka_cluster.broker(i).port}" for i in (1, 2))
    assert pafka_cluster.registered_ids() == {1, 2} and pafka_cluster.controller_id() in (1, 2)
    assert "log.retention.hours=2" in pafka_cluster.broker(2).overrides


def _source_copy(dest: Path) -> Path:
    """What pip needs to build pafka, copied out of the checkout (a build writes build/ beside the sources)."""
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    dest.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO_ROOT / name, dest / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for pattern in config["tool"]["setuptools"]["packages"]["find"]["include"]:
        package = pattern.rstrip("*")
        shutil.copytree(REPO_ROOT / package, dest / package, ignore=ignore)
    return dest


@pytest.mark.slow
def test_a_throwaway_project_pip_installs_pafka_and_uses_pafka_broker(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_app.py").write_text(textwrap.dedent("""
        from confluent_kafka import Producer

        def test_produce(pafka_broker):
            producer = Producer({"bootstrap.servers": pafka_broker.bootstrap_servers})
            producer.produce("events", b"hello")
            assert producer.flush(10) == 0
    """))
    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYTEST", "VIRTUAL_ENV"))}
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120, env=env)
    python = str(venv / "bin" / "python")
    install = subprocess.run([python, "-m", "pip", "install", "-q", str(_source_copy(tmp_path / "src")), "pytest",
                              "confluent-kafka"], capture_output=True, text=True, timeout=600, env=env)
    assert install.returncode == 0, install.stdout + install.stderr
    result = subprocess.run([python, "-m", "pytest", "-v", "-p", "no:cacheprovider", "test_app.py"], cwd=project,
                            capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0 and "test_app.py::test_produce PASSED" in result.stdout, result.stdout + result.stderr
    where = subprocess.run([python, "-c", "import pytest_pafka; print(pytest_pafka.__file__)"], cwd=project,
                           capture_output=True, text=True, timeout=60, env=env, check=True)
    assert where.stdout.startswith(str(venv)), where.stdout
