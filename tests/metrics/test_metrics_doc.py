"""docs/metrics.md's table is what the endpoint serves: a lone broker and a three-broker cluster
each show every metric the table lists, with its labels (a drop or a rename fails here)."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from pathlib import Path

from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.cluster import Cluster
from tests.metrics.scrape import Scrape
from tests.metrics.workload import consume_and_commit, create_topic, produce

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
ROW = re.compile(r"^\| `(?P<name>[a-z_]+)` \| (?P<labels>[^|]+) \| .+ \| (?P<scope>[a-z]+) \|$")


@dataclass(frozen=True)
class DocumentedMetric:
    name: str
    labels: frozenset[str]
    scope: str


def documented() -> list[DocumentedMetric]:
    rows = []
    for line in DOC.read_text().splitlines():
        match = ROW.match(line)
        if match:
            labels = match["labels"].strip()
            names = frozenset() if labels == "—" else frozenset(x.strip() for x in labels.split(","))
            rows.append(DocumentedMetric(match["name"], names, match["scope"]))
    return rows


def family_names(sample_name: str) -> set[str]:
    """The families a sample may belong to (``x_count`` is a summary's count, or a gauge of that name)."""
    return {sample_name, re.sub(r"_(total|count)$", "", sample_name)}


def missing(scrapes: list[Scrape], cluster: bool) -> list[str]:
    """The documented metrics none of the scrapes shows (with exactly the documented labels)."""
    problems = []
    for metric in documented():
        if metric.scope == "all" or (metric.scope == "cluster" and cluster):
            if not any(metric.labels in scrape.label_sets(metric.name) for scrape in scrapes):
                seen = set().union(*(scrape.label_sets(metric.name) for scrape in scrapes))
                problems.append(f"{metric.name}{{{', '.join(sorted(metric.labels))}}} (seen: {seen})")
        elif metric.scope != "cluster":  # shown once such groups or transactions exist: its family is declared
            if not any(f"# TYPE {family} " in scrape.text for scrape in scrapes for family in family_names(metric.name)):
                problems.append(f"{metric.name} (no family)")
    return problems


def test_the_table_is_read() -> None:
    rows = documented()
    assert len(rows) > 60
    assert DocumentedMetric("kafka_consumergroup_lag", frozenset({"consumergroup", "topic", "partition"}), "all") in rows


def test_a_lone_broker_serves_every_documented_metric(pafka_broker: BrokerProcess) -> None:
    topic = create_topic(pafka_broker.bootstrap)
    produce(pafka_broker.bootstrap, topic, 20)
    consume_and_commit(pafka_broker.bootstrap, topic, f"g-{uuid.uuid4().hex[:6]}", 20, 10)
    assert missing([Scrape.of(pafka_broker.metrics_url)], cluster=False) == []


def test_a_cluster_serves_every_documented_metric(pafka_cluster: Cluster) -> None:
    bootstrap = pafka_cluster.bootstrap
    topic = create_topic(bootstrap, replication_factor=3)
    produce(bootstrap, topic, 20)
    consume_and_commit(bootstrap, topic, f"g-{uuid.uuid4().hex[:6]}", 20, 10)
    scrapes = [Scrape.of(pafka_cluster.broker(i).metrics_url) for i in pafka_cluster.broker_ids]
    assert missing(scrapes, cluster=True) == []
    assert sum(s.value("kafka_controller_kafkacontroller_activecontrollercount") for s in scrapes) == 1
