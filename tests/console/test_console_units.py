"""The console's pieces that need no cluster: the Prometheus text parser and the rates drawn from it,
the message rows, the pages' escaping, timestamps, and the web layer's refusal of writes when read-only."""

from __future__ import annotations

import json

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from click.testing import CliRunner

from console import pages
from console.app import ConsoleSettings, create_app, parse_timestamp
from console.cluster_reader import ClusterReader, message_row
from console.throughput import MetricsScraper, ThroughputHistory, counters_of, parse_samples
from console.views import GroupDetail, LagRow, TopicRow
from protocol.errors import ProtocolError
from protocol.records import Record
from tests.in_process import run, wait_for
from tools.cli import main

_TEXT = """# HELP kafka_server_brokertopicmetrics_messagesin_total Incoming messages
# TYPE kafka_server_brokertopicmetrics_messagesin_total counter
kafka_server_brokertopicmetrics_messagesin_total 30.0
kafka_server_brokertopicmetrics_messagesin_total{topic="orders"} 20.0
kafka_server_brokertopicmetrics_messagesin_total{topic="odd \\"name\\"",x="a,b"} 10.0
kafka_server_brokertopicmetrics_bytesin_total{topic="orders"} 2000 1700000000000
process_cpu_seconds_total 1.5
"""


def test_the_text_format_is_parsed_with_its_escapes_and_timestamps() -> None:
    samples = list(parse_samples(_TEXT))
    assert ("kafka_server_brokertopicmetrics_messagesin_total", {}, 30.0) in samples
    assert ("kafka_server_brokertopicmetrics_messagesin_total", {"topic": 'odd "name"', "x": "a,b"}, 10.0) in samples
    assert ("kafka_server_brokertopicmetrics_bytesin_total", {"topic": "orders"}, 2000.0) in samples
    assert list(parse_samples(_TEXT, {"process_cpu_seconds_total"})) == [("process_cpu_seconds_total", {}, 1.5)]


def test_a_broker_counts_its_all_topics_series_or_else_the_sum_of_its_topics() -> None:
    counters = counters_of(1, _TEXT)
    assert counters[("topic", "orders", "messages_in")] == 20.0
    assert counters[("broker", "1", "messages_in")] == 30.0  # the all-topics series, not the sum of its topics
    other = counters_of(2, 'kafka_server_brokertopicmetrics_messagesin_total{topic="orders"} 5\n')
    assert other[("broker", "2", "messages_in")] == 5.0


def _messages(counts: dict[str, float]) -> str:
    return "".join(f'kafka_server_brokertopicmetrics_messagesin_total{{topic="{t}"}} {n}\n' for t, n in counts.items())


def test_rates_are_per_broker_deltas_summed_per_topic() -> None:
    history = ThroughputHistory(window=10)
    scrapes: list[tuple[float, dict[int, dict[str, float]]]] = [
        (100.0, {1: {"a": 10}, 2: {"a": 100}}),
        (102.0, {1: {"a": 30}, 2: {"a": 140}}),            # a: (20 + 40) / 2 s
        (104.0, {1: {"a": 50}}),                           # broker 2 missed: only broker 1's share, no fall
        (106.0, {1: {"a": 70}, 2: {"a": 220}}),            # broker 2 back: skipped once, no spike
        (108.0, {1: {"a": 5, "b": 8}, 2: {"a": 240}}),     # broker 1 restarted (reset); topic b is new on it
    ]
    for at, brokers in scrapes:
        history.record(at, {node: counters_of(node, _messages(counts)) for node, counts in brokers.items()})
    assert history.as_json()["times"] == [102.0, 104.0, 106.0, 108.0]
    assert history.rates("topic", "a", "messages_in") == [30.0, 10.0, 10.0, 10.0]
    assert history.rates("topic", "b", "messages_in") == [None, None, None, 4.0]
    assert history.rates("broker", "2", "messages_in") == [20.0, None, None, 10.0]


def test_json_values_are_pretty_printed_and_other_bytes_shown_as_text() -> None:
    row = message_row(0, Record(7, 1700000000000, b"k", b'{"a":[1,2]}', [("h", b"v"), ("n", None)]))
    assert row.value_is_json and row.value == json.dumps({"a": [1, 2]}, indent=2)
    assert row.headers == [("h", "v"), ("n", None)] and row.key == "k"
    plain = message_row(0, Record(8, 0, None, b"{not json \xff", []))
    assert not plain.value_is_json and plain.value == "{not json \ufffd" and plain.key is None


def test_lag_is_the_log_end_less_the_committed_offset() -> None:
    rows = [LagRow("t", 0, 3, 10, "m"), LagRow("t", 1, None, 4, None), LagRow("t", 2, 9, 9, None),
            LagRow("gone", 0, 5, -1, None)]
    assert [r.lag for r in rows] == [7, None, 0, None]
    assert GroupDetail("g", "consumer", "Stable", "uniform", [], rows).total_lag == 7


def test_pages_escape_what_the_cluster_names() -> None:
    html = pages.topics_page([TopicRow("<script>x</script>", False, 1, 1, 0, 0, None)], writes=False)
    assert "<script>x" not in html and "&lt;script&gt;x&lt;/script&gt;" in html
    assert "--allow-writes" in html and "create-topic" not in html
    assert 'onsubmit="return confirm(' in pages.topics_page([], writes=True)


def test_sizes_are_shown_in_binary_units() -> None:
    assert [pages.size(n) for n in (None, 0, 1023, 1536, 5 * 1024 ** 3, 3 * 1024 ** 5)] == [
        "?", "0 B", "1023 B", "1.5 KiB", "5.0 GiB", "3072.0 TiB"]


def test_timestamps_are_milliseconds_or_iso_8601() -> None:
    assert parse_timestamp("1700000000000") == 1700000000000
    assert parse_timestamp("2023-11-14T22:13:20Z") == 1700000000000
    assert parse_timestamp("2023-11-14T22:13:20") == 1700000000000
    assert parse_timestamp(" ") is None


def test_writes_are_refused_when_the_console_is_read_only() -> None:
    async def scenario() -> None:
        # Nothing listens on this port: a refused write never reaches the cluster.
        app = create_app(ConsoleSettings("127.0.0.1:1", metrics_endpoints={}, scrape_interval_s=60))
        async with TestClient(TestServer(app)) as client:
            for path in ("/topics", "/topics/t/delete", "/topics/t/partitions", "/topics/t/config", "/groups/g/reset"):
                response = await client.post(path, data={"name": "t"}, allow_redirects=False)
                assert response.status == 403, path
            static = await client.get("/static/uPlot.iife.min.js")
            assert static.status == 200 and "uPlot" in await static.text()

    run(scenario())


def test_an_answer_that_breaks_its_schema_is_an_error_page(monkeypatch: pytest.MonkeyPatch) -> None:
    """A broker that implements the protocol in part (a null where Kafka's schema allows none) gets the
    same error page as Kafka's own errors, not a server error."""
    def broken(*_: object, **__: object) -> None:
        raise ProtocolError("non-nullable field Topics is null", api_key=9, api_version=7)

    monkeypatch.setattr(ClusterReader, "group", broken)

    async def scenario() -> None:
        app = create_app(ConsoleSettings("127.0.0.1:1", metrics_endpoints={}, scrape_interval_s=60))
        async with TestClient(TestServer(app)) as client:
            response = await client.get("/groups/g")
            assert response.status == 502 and "non-nullable field Topics is null" in await response.text()

    run(scenario())


def test_the_scraper_reports_an_endpoint_that_does_not_answer_and_plots_the_others() -> None:
    async def scenario() -> None:
        counter = {"value": 0}

        async def metrics(_: web.Request) -> web.Response:
            counter["value"] += 100
            return web.Response(text=f'kafka_server_brokertopicmetrics_messagesin_total{{topic="t"}} {counter["value"]}\n')

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        async with TestServer(app) as server:
            good = str(server.make_url("/metrics"))

            async def endpoints() -> dict[int, str]:
                return {1: good, 2: "http://127.0.0.1:1/metrics"}

            scraper = MetricsScraper(endpoints, interval_s=0.05)
            scraper.start()
            try:
                await wait_for(lambda: len(scraper.history.points) >= 2, "two rates")
            finally:
                await scraper.stop()
        assert scraper.available and list(scraper.errors) == ["http://127.0.0.1:1/metrics"]
        shown = scraper.history.as_json()
        assert set(shown["topic"]) == {"t"} and all(r is not None and r > 0 for r in shown["topic"]["t"]["messages_in"])

    run(scenario())


def test_the_command_refuses_a_metrics_endpoint_without_a_broker_id() -> None:
    result = CliRunner().invoke(main, ["console", "--bootstrap-server", "127.0.0.1:1", "--metrics-endpoint",
                                       "http://127.0.0.1:9404/metrics"])
    assert result.exit_code == 2 and "expected BROKER_ID=URL" in result.output
    assert "--allow-writes" in CliRunner().invoke(main, ["console", "--help"]).output
