"""Each screen's data read from a real broker, and the writes the screens offer, through pafka's client."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import Iterator

import pytest

from client import KafkaClient, ProducerRecord
from client.admin import NewTopic
from client.groups import GroupAdmin
from client.metadata import TopicPartition
from console.cluster_reader import ClusterReader
from console.cluster_writer import ClusterWriter
from console.endpoints import MetricsEndpoints
from console.throughput import MetricsScraper
from pytest_pafka.broker_process import BrokerProcess
from tests.in_process import run, wait_for


@pytest.fixture
def client(pafka_module_broker: BrokerProcess) -> Iterator[KafkaClient]:
    with KafkaClient(pafka_module_broker.bootstrap_servers) as kafka:
        yield kafka


def _topic(client: KafkaClient, name: str, partitions: int = 2) -> None:
    ClusterWriter(client).admin.create_topics([NewTopic(name, partitions, 1)])
    client.refresh_metadata([name])


def test_the_cluster_screen_names_the_broker_its_controller_and_configs(client: KafkaClient) -> None:
    view = ClusterReader(client).cluster()
    (broker,) = view.brokers
    assert broker.is_controller and view.controller_id == broker.node_id
    assert broker.api_count > 40 and broker.api_versions["Produce"] >= 9
    assert view.cluster_id and view.config_broker == broker.node_id
    assert all(c.source != "DEFAULT_CONFIG" for c in view.broker_configs)


def test_topics_show_watermarks_sizes_and_configs(client: KafkaClient) -> None:
    _topic(client, "reader-topics")
    client.produce("reader-topics", 1, [ProducerRecord(b"v" * 100) for _ in range(5)])
    row = next(t for t in ClusterReader(client).topics() if t.name == "reader-topics")
    assert (row.partitions, row.replication_factor, row.messages, row.under_replicated) == (2, 1, 5, 0)
    assert row.size_bytes is not None and row.size_bytes > 500
    detail = ClusterReader(client).topic("reader-topics")
    assert [(p.partition, p.log_start_offset, p.high_watermark) for p in detail.partitions] == [(0, 0, 0), (1, 0, 5)]
    assert detail.partitions[1].size_bytes == row.size_bytes and detail.partitions[0].size_bytes == 0
    assert any(c.name == "retention.ms" for c in detail.configs)


def test_the_message_browser_reads_by_offset_by_timestamp_and_the_newest(client: KafkaClient) -> None:
    _topic(client, "reader-messages", 1)
    records = [ProducerRecord(f'{{"n": {i}}}'.encode(), key=f"k{i}".encode(), headers=[("h", b"x")],
                              timestamp=1_700_000_000_000 + i * 1000) for i in range(10)]
    client.produce("reader-messages", 0, records)
    reader = ClusterReader(client)
    assert [m.offset for m in reader.messages("reader-messages", 0, offset=4, limit=3)] == [4, 5, 6]
    assert [m.offset for m in reader.messages("reader-messages", 0, timestamp_ms=1_700_000_007_500)] == [8, 9]
    newest = reader.messages("reader-messages", 0, limit=2)
    assert [(m.offset, m.key, m.headers, m.value_is_json) for m in newest] == [(8, "k8", [("h", "x")], True),
                                                                              (9, "k9", [("h", "x")], True)]
    assert newest[0].value == '{\n  "n": 8\n}'


def test_group_lag_and_offset_resets(client: KafkaClient) -> None:
    _topic(client, "reader-lag")
    for partition, count in ((0, 7), (1, 3)):
        client.produce("reader-lag", partition, [ProducerRecord(b"x") for _ in range(count)])
    GroupAdmin(client).commit_offsets("reader-group", {TopicPartition("reader-lag", 0): 2})
    detail = ClusterReader(client).group("reader-group")
    assert detail.state == "Empty" and detail.members == []
    assert [(r.partition, r.committed_offset, r.log_end_offset, r.lag) for r in detail.offsets] == [(0, 2, 7, 5)]
    assert any(g.group_id == "reader-group" for g in ClusterReader(client).group_list())
    assert ClusterWriter(client).reset_offsets("reader-group", "reader-lag", "earliest") == {0: 0, 1: 0}
    assert ClusterReader(client).group("reader-group").total_lag == 10
    assert ClusterWriter(client).reset_offsets("reader-group", "reader-lag", "latest") == {0: 7, 1: 3}
    assert ClusterWriter(client).reset_offsets("reader-group", "reader-lag", "offset", 1) == {0: 1, 1: 1}


def test_topic_changes(client: KafkaClient) -> None:
    writer, reader = ClusterWriter(client), ClusterReader(client)
    writer.create_topic("reader-changes", 1, 1, {"retention.ms": "60000"})
    writer.add_partitions("reader-changes", 3)
    writer.alter_topic_config("reader-changes", "cleanup.policy", "compact")
    detail = reader.topic("reader-changes")
    configs = {c.name: c for c in detail.configs}
    assert len(detail.partitions) == 3
    assert configs["cleanup.policy"].value == "compact" and configs["retention.ms"].value == "60000"
    writer.alter_topic_config("reader-changes", "retention.ms", None)
    assert {c.name: c for c in reader.topic("reader-changes").configs}["retention.ms"].source == "DEFAULT_CONFIG"
    writer.delete_topic("reader-changes")
    assert "reader-changes" not in {t.name for t in reader.topics()}


def test_the_security_screen_says_why_acls_cannot_be_listed_without_an_authorizer(client: KafkaClient) -> None:
    view = ClusterReader(client).security()
    assert view.acls == [] and view.acls_error is not None and "SECURITY_DISABLED" in view.acls_error.upper().replace(" ", "_")
    assert view.scram_error is None


def test_the_scraper_reads_the_brokers_own_prometheus_endpoint(pafka_module_broker: BrokerProcess) -> None:
    async def scrape_twice() -> MetricsScraper:
        async def endpoints() -> dict[int, str]:
            return {1: pafka_module_broker.metrics_url}

        scraper = MetricsScraper(endpoints)
        scraper.start()
        try:
            await wait_for(lambda: len(scraper.history.points) >= 1, "a rate from two scrapes")
        finally:
            await scraper.stop()
        return scraper

    scraper = run(scrape_twice())
    assert scraper.available and scraper.errors == {}


def test_produced_records_show_as_a_rate_for_their_topic(pafka_module_broker: BrokerProcess, client: KafkaClient) -> None:
    with urllib.request.urlopen(pafka_module_broker.metrics_url, timeout=5) as response:
        served = response.read().decode()
    if "kafka_server_brokertopicmetrics_messagesin_total" not in served:
        pytest.skip("this broker's endpoint serves no BrokerTopicMetrics yet")
    _topic(client, "reader-rates", 1)

    async def rates() -> list[float | None]:
        async def endpoints() -> dict[int, str]:
            return {1: pafka_module_broker.metrics_url}

        scraper = MetricsScraper(endpoints, interval_s=0.2)
        scraper.start()
        try:
            await wait_for(lambda: len(scraper.history.points) >= 1, "a first rate")
            await asyncio.to_thread(client.produce, "reader-rates", 0, [ProducerRecord(b"x") for _ in range(50)])
            await wait_for(lambda: any(scraper.history.rates("topic", "reader-rates", "messages_in")),
                           "a rate for the produced records")
        finally:
            await scraper.stop()
        return scraper.history.rates("topic", "reader-rates", "messages_in")

    # The 50 records' rate, spread over the scrape intervals they fell in.
    assert 0 < max(r or 0 for r in run(rates())) <= 50 / 0.2 * 1.5


def test_each_brokers_endpoint_is_the_one_it_reports_unless_told(pafka_module_broker: BrokerProcess,
                                                                 client: KafkaClient) -> None:
    (node,) = client.refresh_metadata([]).brokers
    host = pafka_module_broker.host
    assert MetricsEndpoints(client).urls() == {node: pafka_module_broker.metrics_url}
    assert MetricsEndpoints(client, port=9999).urls() == {node: f"http://{host}:9999/metrics"}
    assert MetricsEndpoints(client, port=9999, explicit={node: "http://x:1/m"}).urls() == {node: "http://x:1/m"}
