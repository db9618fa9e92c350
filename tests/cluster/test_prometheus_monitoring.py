"""A real Prometheus (Debian's 2.42, a plain process on loopback) scraping a three-broker cluster and a lone
broker every second, with the alert rules of deploy/prometheus/alerts.yml as they ship: what an operator's
Prometheus sees when things go wrong.

- a follower SIGKILLed: UnderReplicatedPartitions > 0 on the leader's broker, and the UnderReplicatedPartitions
  alert pending, then firing within its ``for`` window; the follower back: 0 again on every broker;
- the controller SIGKILLed: ActiveControllerCount sums to 1 over the live brokers within the ZooKeeper session
  timeout + 2 s, and the one is not the dead broker;
- a consumer group stopped while a producer writes: ``kafka_consumergroup_lag`` grows by the count produced;
- MessagesIn and BytesIn over a produce run match what the producer sent (records) and what the leaders
  appended (bytes on disk) within 2 %, on the cluster and on the lone broker;
- every request API the clients sent (librdkafka's own protocol log says which) has a non-zero request count.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.cluster import Cluster
from pytest_pafka.prometheus import PrometheusProcess
from pytest_pafka.waiting import wait_until
from tests.cluster.helpers import create_topic, isr_in_zookeeper, produce_confluent, restart_after_session, unique

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "alerts.yml"
CLUSTER_JOB, LONE_JOB = "pafka-cluster", "pafka-lone"
#: The alert rules' window for UnderReplicatedPartitions (deploy/prometheus/alerts.yml, as Strimzi's).
UNDER_REPLICATED_FOR_S = 10.0
#: A scrape a second, a rule evaluation a second: a change shows in Prometheus within about two.
SCRAPE_SLACK_S = 3.0
ISR_SHRINK_TIMEOUT_S = 30.0
#: Records of the produce run whose MessagesIn and BytesIn are checked.
RATE_RECORDS = 20_000

pytestmark = [pytest.mark.pafka_cluster(brokers=3), pytest.mark.pafka_broker_config("replica.lag.time.max.ms=3000")]


@pytest.fixture
def prometheus(pafka_prometheus: PrometheusProcess, pafka_module_cluster: Cluster,
               pafka_module_broker: BrokerProcess) -> PrometheusProcess:
    """The test's Prometheus, scraping the cluster (one job) and the lone broker (another), with the rules."""
    cluster_targets = {f"{pafka_module_cluster.broker(i).host}:{pafka_module_cluster.broker(i).metrics_port}":
                       {"broker_id": str(i)} for i in pafka_module_cluster.broker_ids}
    lone = {f"{pafka_module_broker.host}:{pafka_module_broker.metrics_port}": {"broker_id": "lone"}}
    pafka_prometheus.scrape_jobs({CLUSTER_JOB: cluster_targets, LONE_JOB: lone}, rule_files=[RULES])
    pafka_prometheus.wait_for_targets_up(4)
    return pafka_prometheus


def per_broker(prometheus: PrometheusProcess, metric: str, job: str = CLUSTER_JOB) -> dict[str, float]:
    return prometheus.values(f'{metric}{{job="{job}"}}', by="broker_id")


def test_prometheus_scrapes_the_cluster_and_the_lone_broker(prometheus: PrometheusProcess) -> None:
    assert per_broker(prometheus, "up") == {"1": 1.0, "2": 1.0, "3": 1.0}
    assert per_broker(prometheus, "up", LONE_JOB) == {"lone": 1.0}
    # the broker's own process, as every endpoint serves it
    assert set(per_broker(prometheus, "process_resident_memory_bytes")) == {"1", "2", "3"}
    assert not prometheus.alerts("KafkaBrokerDown")


def test_a_killed_follower_under_replicates_the_leaders_partitions_and_the_alert_fires(
        prometheus: PrometheusProcess, pafka_module_cluster: Cluster) -> None:
    cluster = pafka_module_cluster
    topic = unique("under-replicated")
    create_topic(cluster, topic, 1, 3)
    state = cluster.partition_state(topic, 0)
    assert state is not None
    leader = state["leader"]
    follower = next(b for b in cluster.topic_assignment(topic)[0] if b != leader)
    metric = "kafka_server_replicamanager_underreplicatedpartitions"
    assert per_broker(prometheus, metric).get(str(leader)) == 0.0
    cluster.kill(follower)
    try:
        cluster.wait_for(lambda: follower not in isr_in_zookeeper(cluster, topic, 0), ISR_SHRINK_TIMEOUT_S,
                         f"broker {follower} out of the ISR")
        wait_until(lambda: per_broker(prometheus, metric).get(str(leader), 0.0), SCRAPE_SLACK_S,
                   f"{metric} > 0 on the leader, broker {leader}")
        seen = time.monotonic()
        alert = wait_until(lambda: _under_replicated_alert(prometheus, leader), SCRAPE_SLACK_S,
                           "the UnderReplicatedPartitions alert pending")
        assert alert["state"] == "pending", alert
        wait_until(lambda: _under_replicated_alert(prometheus, leader, "firing"),
                   UNDER_REPLICATED_FOR_S + SCRAPE_SLACK_S, "the UnderReplicatedPartitions alert firing")
        assert time.monotonic() - seen >= UNDER_REPLICATED_FOR_S - SCRAPE_SLACK_S, "fired before its window"
    finally:
        restart_after_session(cluster, follower)
    cluster.wait_for(lambda: follower in isr_in_zookeeper(cluster, topic, 0), ISR_SHRINK_TIMEOUT_S,
                     f"broker {follower} back in the ISR")
    wait_until(lambda: per_broker(prometheus, metric), SCRAPE_SLACK_S + 2, f"{metric} 0 on every broker again",
               until=lambda values: values == {"1": 0.0, "2": 0.0, "3": 0.0})


def _under_replicated_alert(prometheus: PrometheusProcess, leader: int, state: str | None = None) -> dict[str, object] | None:
    for alert in prometheus.alerts("UnderReplicatedPartitions"):
        if alert["labels"].get("broker_id") == str(leader) and state in (None, alert["state"]):
            return alert
    return None


def test_a_killed_controller_leaves_exactly_one_active_controller_among_the_live_brokers(
        prometheus: PrometheusProcess, pafka_module_cluster: Cluster) -> None:
    cluster = pafka_module_cluster
    metric = "kafka_controller_kafkacontroller_activecontrollercount"
    old = cluster.controller_id()
    assert old is not None
    wait_until(lambda: per_broker(prometheus, metric), SCRAPE_SLACK_S, "one controller before",
               until=lambda values: values.get(str(old)) == 1.0 and sum(values.values()) == 1.0)
    cluster.kill(old)
    killed = time.monotonic()
    try:
        limit = cluster.session_timeout_ms / 1000 + 2.0
        values = wait_until(lambda: per_broker(prometheus, metric), limit,
                            "ActiveControllerCount summing to 1 over the live brokers",
                            until=lambda v: str(old) not in v and len(v) == 2 and sum(v.values()) == 1.0)
        new = next(broker for broker, count in values.items() if count == 1.0)
        assert int(new) == cluster.controller_id(), (values, cluster.controller_id())
        assert time.monotonic() - killed <= limit
    finally:
        restart_after_session(cluster, old)


def _consume_and_commit(bootstrap: str, topic: str, group: str, expected: int,
                        extra: dict[str, object] | None = None) -> None:
    """A consumer of ``group`` reads the topic to its end, commits, and stops (leaves the group)."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, **(extra or {})})
    consumer.subscribe([topic])
    try:
        seen = 0
        deadline = time.monotonic() + 60
        while seen < expected and time.monotonic() < deadline:
            seen += sum(1 for m in consumer.consume(1000, timeout=1.0) if m.error() is None)
        assert seen == expected, f"consumed {seen} of {expected}"
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def test_a_stopped_groups_lag_grows_by_what_is_produced(prometheus: PrometheusProcess,
                                                        pafka_module_cluster: Cluster) -> None:
    cluster = pafka_module_cluster
    topic, group = unique("lag"), unique("lagging")
    create_topic(cluster, topic, 3, 3)
    assert not produce_confluent(cluster.bootstrap, topic, range(300)).failed
    _consume_and_commit(cluster.bootstrap, topic, group, 300)
    lag = f'sum(kafka_consumergroup_lag{{consumergroup="{group}",topic="{topic}"}})'
    wait_until(lambda: prometheus.scalar(lag), SCRAPE_SLACK_S + 5, "the group's lag at 0", until=lambda v: v == 0.0)
    assert not produce_confluent(cluster.bootstrap, topic, range(300, 1300)).failed
    wait_until(lambda: prometheus.scalar(lag), SCRAPE_SLACK_S + 5, "the group's lag grown by 1000",
               until=lambda v: v == 1000.0)
    by_partition = prometheus.values(f'kafka_consumergroup_lag{{consumergroup="{group}",topic="{topic}"}}', "partition")
    assert set(by_partition) == {"0", "1", "2"} and sum(by_partition.values()) == 1000.0


class ProtocolLog(logging.Handler):
    """librdkafka's ``debug=protocol`` log, reduced to the names of the requests it sent."""

    SENT = re.compile(r"Sent (\w+?)Request \(")

    def __init__(self) -> None:
        super().__init__()
        self.sent: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        match = self.SENT.search(record.getMessage())
        if match:
            self.sent.add(match.group(1))


@pytest.fixture
def protocol_log() -> Iterator[tuple[ProtocolLog, logging.Logger]]:
    handler = ProtocolLog()
    logger = logging.getLogger(f"librdkafka.{unique('protocol')}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.addHandler(handler)
    try:
        yield handler, logger
    finally:
        logger.removeHandler(handler)


#: librdkafka's names of the APIs that differ from Kafka's RequestMetrics names, and Fetch as a consumer's.
_KAFKA_NAMES = {"ApiVersion": "ApiVersions", "Offset": "ListOffsets", "Fetch": "FetchConsumer"}


def test_messages_and_bytes_in_match_what_was_produced_and_every_api_used_is_counted(
        prometheus: PrometheusProcess, pafka_module_cluster: Cluster, pafka_module_broker: BrokerProcess,
        protocol_log: tuple[ProtocolLog, logging.Logger]) -> None:
    handler, logger = protocol_log
    for job, bootstrap, replicas in ((CLUSTER_JOB, pafka_module_cluster.bootstrap, 3),
                                     (LONE_JOB, pafka_module_broker.bootstrap, 1)):
        topic = unique("rates")
        if replicas == 3:
            create_topic(pafka_module_cluster, topic, 3, 3)
        traced: dict[str, object] = {"debug": "protocol", "logger": logger}
        outcome = produce_confluent(bootstrap, topic, range(RATE_RECORDS), value_size=200, extra=traced)
        assert len(outcome.acked) == RATE_RECORDS and not outcome.failed
        _consume_and_commit(bootstrap, topic, unique("reader"), RATE_RECORDS, traced)
        selector = f'job="{job}",topic="{topic}"'
        messages = wait_until(
            lambda s=selector: prometheus.scalar(f"sum(kafka_server_brokertopicmetrics_messagesin_total{{{s}}})"),
            SCRAPE_SLACK_S + 5, f"{job}: MessagesIn of {topic}", until=lambda v: v is not None and v >= RATE_RECORDS * 0.98)
        assert messages is not None and abs(messages - RATE_RECORDS) <= RATE_RECORDS * 0.02, (job, messages, RATE_RECORDS)
        bytes_in = prometheus.scalar(f"sum(kafka_server_brokertopicmetrics_bytesin_total{{{selector}}})")
        on_disk = prometheus.scalar(f"sum(kafka_log_log_size{{{selector}}}) / {replicas}")
        assert bytes_in is not None and on_disk, (job, bytes_in, on_disk)
        assert abs(bytes_in - on_disk) <= on_disk * 0.02, (job, bytes_in, on_disk)
    _every_api_used_is_counted(prometheus, handler.sent)


def _every_api_used_is_counted(prometheus: PrometheusProcess, sent: set[str]) -> None:
    used = {_KAFKA_NAMES.get(name, name) for name in sent}
    assert {"Produce", "Metadata", "ApiVersions"} <= used, used
    counted = prometheus.values("sum by (request) (kafka_network_requestmetrics_requests_total)", by="request")
    missing = {api for api in used if counted.get(api, 0.0) <= 0}
    assert not missing, f"requests the clients sent but the brokers did not count: {missing} (counted: {counted})"
