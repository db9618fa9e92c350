"""deploy/prometheus: promtool accepts the alert rules and the compose Prometheus's configuration, and the rules
fire on the series a sick cluster shows (``promtool test rules`` on synthetic series, no broker needed).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from pytest_pafka.prometheus import PROMTOOL, check_rules

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "alerts.yml"
CONFIG = ROOT / "deploy" / "prometheus" / "prometheus.yml"
METRICS_DOC = ROOT / "docs" / "metrics.md"
EXPECTED_ALERTS = {"KafkaBrokerDown", "UnderReplicatedPartitions", "AbnormalControllerState", "OfflinePartitions",
                   "UnderMinIsrPartitionCount", "ZookeeperSessionLost", "ConsumerGroupLagGrowing"}


def test_promtool_checks_the_rules() -> None:
    result = check_rules(RULES)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(EXPECTED_ALERTS)} rules found" in result.stdout


def test_promtool_checks_the_compose_configuration(tmp_path: Path) -> None:
    """The compose file mounts alerts.yml at /etc/prometheus/alerts.yml; a copy stands in for it here."""
    text = CONFIG.read_text().replace("/etc/prometheus/alerts.yml", str(RULES))
    (tmp_path / "prometheus.yml").write_text(text)
    result = subprocess.run([PROMTOOL, "check", "config", str(tmp_path / "prometheus.yml")], capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def _series(name: str, labels: str, values: str) -> dict[str, str]:
    return {"series": f"{name}{{{labels}}}", "values": values}


def _summaries() -> dict[str, str]:
    rules = yaml.safe_load(RULES.read_text())
    return {rule["alert"]: rule["annotations"]["summary"] for group in rules["groups"] for rule in group["rules"]}


def _alert(name: str, at: str, labels: dict[str, str] | None = None, description: str = "") -> dict[str, object]:
    """Alert ``name`` firing at ``at`` with these labels and description (none given: not firing then)."""
    expected = [{"exp_labels": labels,
                 "exp_annotations": {"summary": _summaries()[name], "description": description}}] if labels else []
    return {"eval_time": at, "alertname": name, "exp_alerts": expected}


def _unit_tests() -> list[dict[str, object]]:
    """Series of a cluster where things go wrong one by one, and when each alert must fire (and not before)."""
    b1, b2 = 'job="pafka",instance="broker-1:9404"', 'job="pafka",instance="broker-2:9404"'
    series = [
        _series("up", b1, "1x120"),
        _series("up", b2, "1x10 0x110"),
        _series("kafka_server_replicamanager_underreplicatedpartitions", b1, "0x10 4x110"),
        _series("kafka_controller_kafkacontroller_activecontrollercount", b1, "1x60 0x60"),
        _series("kafka_controller_kafkacontroller_activecontrollercount", b2, "0x120"),
        _series("kafka_controller_kafkacontroller_offlinepartitionscount", b1, "0x30 2x90"),
        _series("kafka_server_replicamanager_underminisrpartitioncount", b1, "0x20 1x100"),
        _series("kafka_server_sessionexpirelistener_zookeeperexpires_total", b2, "0x40 1x80"),
        _series("kafka_server_sessionexpirelistener_sessionstate", b1 + ',state="CONNECTED"', "1x80 0x10 1x30"),
        _series("kafka_server_sessionexpirelistener_sessionstate", b1 + ',state="SUSPENDED"', "0x80 1x10 0x30"),
        _series("kafka_consumergroup_lag", 'job="pafka",consumergroup="g",topic="t",partition="0"', "0+10x120"),
    ]
    return [{"interval": "5s", "input_series": series, "alert_rule_test": _alert_tests()}]


def _alert_tests() -> list[dict[str, object]]:
    """When each alert fires on ``_unit_tests``' series, with what labels and description."""
    down = {"severity": "major", "job": "pafka", "instance": "broker-2:9404"}
    under = {"severity": "warning", "job": "pafka", "instance": "broker-1:9404"}
    return [
            _alert("KafkaBrokerDown", "45s"),
            _alert("KafkaBrokerDown", "90s", down,
                   "The metrics endpoint of broker broker-2:9404 has not answered for 30 seconds"),
            _alert("UnderReplicatedPartitions", "55s"),  # pending: not yet 10 s long
            _alert("UnderReplicatedPartitions", "70s", under, "There are 4 under replicated partitions on broker-1:9404"),
            _alert("AbnormalControllerState", "60s"),
            _alert("AbnormalControllerState", "320s", {"severity": "warning", "job": "pafka"},
                   "0 brokers of pafka say they are the active controller (exactly one should)"),
            _alert("OfflinePartitions", "170s", {"severity": "warning", "job": "pafka"},
                   "2 partitions of pafka have no active leader: no client can read or write them"),
            _alert("UnderMinIsrPartitionCount", "105s"),
            _alert("UnderMinIsrPartitionCount", "130s", under,
                   "1 partitions led by broker-1:9404 have fewer in-sync replicas than min.insync.replicas: "
                   "producers with acks=all get NOT_ENOUGH_REPLICAS"),
            _alert("ZookeeperSessionLost", "200s"),
            _alert("ZookeeperSessionLost", "230s", {"severity": "major", "job": "pafka", "instance": "broker-2:9404"},
                   "broker-2:9404 lost its ZooKeeper session, or its session expired in the last minute: it leaves "
                   "the cluster (its partitions are led elsewhere) until it has registered again"),
            _alert("ZookeeperSessionLost", "420s", {"severity": "major", "job": "pafka", "instance": "broker-1:9404"},
                   "broker-1:9404 lost its ZooKeeper session, or its session expired in the last minute: it leaves "
                   "the cluster (its partitions are led elsewhere) until it has registered again"),
            _alert("ZookeeperSessionLost", "500s"),
            _alert("ConsumerGroupLagGrowing", "60s"),
            _alert("ConsumerGroupLagGrowing", "590s",
                   {"severity": "warning", "job": "pafka", "consumergroup": "g", "topic": "t"},
                   "The lag of consumer group g on topic t has grown for 5 minutes (now 1180 records): its consumers "
                   "are gone, stuck, or slower than the producers"),
    ]


def test_the_alerts_fire_on_a_sick_clusters_series(tmp_path: Path) -> None:
    tests = tmp_path / "alerts_test.yml"
    tests.write_text(json.dumps({"rule_files": [str(RULES)], "evaluation_interval": "5s", "tests": _unit_tests()}))
    result = subprocess.run([PROMTOOL, "test", "rules", str(tests)], capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_is_covered() -> None:
    named = {str(test["alertname"]) for test in _alert_tests()}
    assert named == EXPECTED_ALERTS


def test_every_metric_the_rules_use_is_one_the_brokers_serve() -> None:
    """Each metric named in an alert's expression is in docs/metrics.md's tables (whose own test checks that the
    endpoint serves every one of them), so an alert cannot silently watch a name no broker has."""
    rules = yaml.safe_load(RULES.read_text())
    used = {name for group in rules["groups"] for rule in group["rules"]
            for name in re.findall(r"\b(kafka_[a-z_]+)\b", rule["expr"])}
    documented = set(re.findall(r"^\| `(kafka_[a-z_]+)`", METRICS_DOC.read_text(), re.MULTILINE))
    assert used, "the rules name no metric"
    assert used <= documented, f"metrics the rules use but no broker serves: {sorted(used - documented)}"
