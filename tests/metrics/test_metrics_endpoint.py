"""The broker's Prometheus endpoint: /metrics, /livez, /readyz, its start-up line and a taken port."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

import pytest

from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.cluster import Cluster
from pytest_pafka.plugin import BrokerFactory
from pytest_pafka.waiting import wait_until
from tests.metrics.scrape import get


def base_url(broker: BrokerProcess) -> str:
    return f"http://{broker.host}:{broker.metrics_port}"


def test_a_lone_broker_serves_metrics_and_health(pafka_broker: BrokerProcess) -> None:
    status, text = get(pafka_broker.metrics_url)
    assert status == 200
    assert "process_cpu_seconds_total" in text
    assert get(base_url(pafka_broker) + "/livez") == (200, "ok\n")
    assert get(base_url(pafka_broker) + "/readyz") == (200, "ready\n")
    assert get(base_url(pafka_broker) + "/nothing")[0] == 404
    assert (f"Prometheus metrics endpoint listening on http://{pafka_broker.host}:{pafka_broker.metrics_port}/metrics"
            in pafka_broker.log_text())


def test_a_taken_metrics_port_is_a_start_up_error_naming_the_property(pafka_broker_factory: BrokerFactory) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        broker = pafka_broker_factory(start=False)
        broker.metrics_port = port
        with pytest.raises(RuntimeError, match="did not start") as failure:
            broker.start()
    assert f"prometheus.metrics.port={port}" in str(failure.value)
    assert "address already in use" in str(failure.value)


def test_the_endpoint_can_be_turned_off(pafka_broker_factory: BrokerFactory) -> None:
    broker = pafka_broker_factory("prometheus.metrics.enable=false")
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(base_url(broker) + "/livez", timeout=5)
    assert "Prometheus metrics endpoint" not in broker.log_text()


def test_every_broker_of_a_cluster_is_ready_on_its_own_port(pafka_cluster: Cluster) -> None:
    brokers = [pafka_cluster.broker(i) for i in pafka_cluster.broker_ids]
    assert len({(b.host, b.metrics_port) for b in brokers}) == len(brokers)
    for broker in brokers:
        wait_until(lambda b=broker: get(base_url(b) + "/readyz")[0] == 200, 20, f"broker {broker.bootstrap} ready")
        assert get(broker.metrics_url)[0] == 200
