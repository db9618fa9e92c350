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

from pathlib import Path

import pytest

from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.cluster import Cluster
from pytest_pafka.prometheus import PrometheusProcess

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "alerts.yml"
CLUSTER_JOB, LONE_JOB = "pafka-cluster", "pafka-lone"

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
