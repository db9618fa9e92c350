"""``pafka console`` in headless Chromium (Debian's ``chromium`` and ``chromium-driver``, driven by Selenium)
against a three-broker cluster: every screen loads with the cluster's data, a produced record shows in the
message browser, a group's lag is the lag the client computes, a topic created from the console (writes
allowed, confirmation accepted) exists for a client, and the throughput plot draws from Prometheus
endpoints: the brokers' own once they serve BrokerTopicMetrics, else fakes on the brokers' hosts serving the
Strimzi names with counters that grow.

Each screen's screenshot goes to ``$PAFKA_CONSOLE_SCREENSHOTS`` (the README's come from
``PAFKA_CONSOLE_SCREENSHOTS=docs/console``), or to the test's temporary directory.
"""

from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from client import KafkaApiError, KafkaClient, ProducerRecord
from client.acl_admin import Acl, AclAdmin
from client.admin import AdminClient, NewTopic
from client.groups import GroupAdmin
from client.scram import ScramMechanism
from protocol.acl_types import AclOperation, AclPermissionType, PatternType, ResourceType
from pytest_pafka.cluster import Cluster
from pytest_pafka.ports import free_port
from pytest_pafka.waiting import wait_until

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(CHROMIUM is None or CHROMEDRIVER is None, reason="needs Debian's chromium and chromium-driver"),
    pytest.mark.pafka_broker_config("authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
                                    "allow.everyone.if.no.acl.found=true"),
]

TOPIC, GROUP = "console-orders", "console-group"


class _FakeMetrics(http.server.BaseHTTPRequestHandler):
    """A broker's Prometheus endpoint as the JMX exporter renders BrokerTopicMetrics; the counters grow per scrape."""

    def do_GET(self) -> None:
        assert isinstance(self.server, _MetricsServer)
        self.server.scrapes += 1
        n, host_step = self.server.scrapes, int(str(self.server.server_address[0]).rsplit(".", 1)[-1])
        body = "".join(
            f"kafka_server_brokertopicmetrics_{name}_total{{topic=\"{TOPIC}\"}} {n * factor * host_step}\n"
            f"kafka_server_brokertopicmetrics_{name}_total {n * factor * (host_step + 1)}\n"
            for name, factor in (("messagesin", 10), ("bytesin", 1000), ("bytesout", 3000))).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


class _MetricsServer(http.server.ThreadingHTTPServer):
    #: Scrapes so far: the counters grow by the same step each time, by a step that differs per broker host.
    scrapes = 0


@pytest.fixture(scope="module")
def cluster(pafka_module_cluster: Cluster) -> Cluster:
    return pafka_module_cluster


def _serves_broker_topic_metrics(cluster: Cluster) -> bool:
    try:
        with urllib.request.urlopen(cluster.broker(cluster.broker_ids[0]).metrics_url, timeout=5) as response:
            return b"kafka_server_brokertopicmetrics_messagesin_total" in response.read()
    except OSError:
        return False


@pytest.fixture(scope="module")
def metrics_options(cluster: Cluster) -> Iterator[list[str]]:
    """The brokers' own endpoints when they serve BrokerTopicMetrics (the console finds each from the port
    the broker reports); otherwise fakes on every broker's host, on one port, as ``--metrics-port`` names it."""
    if _serves_broker_topic_metrics(cluster):
        yield []
        return
    port = free_port()
    servers = [_MetricsServer((b.host, port), _FakeMetrics) for b in cluster.brokers.values()]
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers]
    for thread in threads:
        thread.start()
    yield ["--metrics-port", str(port)]
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def console(cluster: Cluster, metrics_options: list[str]) -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "tools", "console", "--bootstrap-server", cluster.bootstrap_servers,
               "--port", str(port), "--allow-writes", *metrics_options, "--scrape-interval", "0.5"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def answers() -> bool:
            assert process.poll() is None, f"the console exited: {process.stderr.read().decode() if process.stderr else ''}"
            try:
                with urllib.request.urlopen(f"{url}/static/throughput.js", timeout=2):
                    return True
            except OSError:
                return False
        wait_until(answers, 30, "the console answers")
        yield url
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM or ""
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER or ""))
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = os.environ.get("PAFKA_CONSOLE_SCREENSHOTS")
    path = Path(where) if where else tmp_path_factory.mktemp("console-screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _produce(kafka: KafkaClient, partition: int, records: list[ProducerRecord]) -> None:
    """Produce once the partition's leader serves it: a new topic's leader may not know it for a moment after
    Metadata names it (a refused batch is not appended, so the retry does not duplicate it)."""
    def produced() -> bool:
        try:
            kafka.produce(TOPIC, partition, records)
        except KafkaApiError:
            kafka.refresh_metadata([TOPIC])
            return False
        return True
    wait_until(produced, 30, f"a produce to {TOPIC}-{partition}")


@pytest.fixture(scope="module")
def client(cluster: Cluster) -> Iterator[KafkaClient]:
    with KafkaClient(cluster.bootstrap_servers) as kafka:
        AdminClient(kafka).create_topics([NewTopic(TOPIC, 3, 3)])
        kafka.refresh_metadata([TOPIC])
        for partition in range(3):
            _produce(kafka, partition, [ProducerRecord(f'{{"order": {partition * 100 + i}, "items": ["tea"]}}'.encode(),
                                                       key=f"order-{i}".encode(), headers=[("source", b"test")])
                                        for i in range(10)])
        yield kafka


def _open(browser: WebDriver, url: str, shots: Path, name: str) -> str:
    browser.get(url)
    text = browser.find_element(By.TAG_NAME, "main").text
    assert "The cluster answered with an error" not in text, text
    browser.save_screenshot(str(shots / f"{name}.png"))
    return text


def _rows_after_refresh(browser: WebDriver, table_id: str) -> int:
    """The rows a table shows once the page is loaded again: in a cluster, the broker the console asks may
    learn of a change from the controller a moment after the change was acknowledged."""
    browser.refresh()
    return len(_cells(browser, table_id))


def _cells(browser: WebDriver, table_id: str) -> list[list[str]]:
    rows = browser.find_elements(By.CSS_SELECTOR, f"#{table_id} tbody tr")
    return [[cell.text for cell in row.find_elements(By.TAG_NAME, "td")] for row in rows]


def test_the_cluster_screen_lists_the_three_brokers_and_the_controller(browser: WebDriver, console: str, client: KafkaClient,
                                                                       cluster: Cluster, shots: Path) -> None:
    _open(browser, console + "/", shots, "cluster")
    brokers = _cells(browser, "brokers")
    assert [int(row[0]) for row in brokers] == cluster.broker_ids
    controller = int(browser.find_element(By.ID, "controller").text)
    assert [row[4] for row in brokers] == ["yes" if b == controller else "" for b in cluster.broker_ids]
    assert browser.find_element(By.ID, "cluster-id").text == client.refresh_metadata([]).cluster_id


def test_topics_and_a_topic_show_partitions_replicas_and_watermarks(browser: WebDriver, console: str, client: KafkaClient,
                                                                    shots: Path) -> None:
    _open(browser, console + "/topics", shots, "topics")
    row = next(r for r in _cells(browser, "topics") if r[0] == TOPIC)
    assert row[1:5] == ["3", "3", "0", "30"]
    _open(browser, f"{console}/topics/{TOPIC}", shots, "topic")
    partitions = _cells(browser, "partitions")
    assert [(r[0], r[6]) for r in partitions] == [("0", "10"), ("1", "10"), ("2", "10")]
    assert all(r[1] == str(client.partition_metadata(TOPIC, int(r[0])).leader) for r in partitions)


def test_a_produced_record_appears_in_the_message_browser(browser: WebDriver, console: str, client: KafkaClient,
                                                          shots: Path) -> None:
    client.produce(TOPIC, 1, [ProducerRecord(b'{"order": "from-the-test", "n": 42}', key=b"the-key",
                                             headers=[("trace", b"abc")])])
    _open(browser, f"{console}/topics/{TOPIC}/messages?partition=1", shots, "messages")
    last = _cells(browser, "messages")[-1]
    assert last[:2] == ["1", "10"] and last[3] == "the-key" and last[5] == "trace: abc"
    assert last[4] == '{\n  "order": "from-the-test",\n  "n": 42\n}'
    browser.get(f"{console}/topics/{TOPIC}/messages?partition=0&offset=2&limit=3")
    assert [r[1] for r in _cells(browser, "messages")] == ["2", "3", "4"]


def test_a_groups_lag_is_the_lag_the_client_computes(browser: WebDriver, console: str, client: KafkaClient,
                                                     cluster: Cluster, shots: Path) -> None:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": GROUP,
                                         "group.protocol": "consumer", "auto.offset.reset": "earliest",
                                         "enable.auto.commit": False})
    try:
        consumer.subscribe([TOPIC])
        consumed: list[confluent_kafka.Message] = []

        def some_consumed() -> bool:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                consumed.append(message)
            return len(consumed) >= 5
        wait_until(some_consumed, 60, "five records consumed")
        consumer.commit(asynchronous=False)
        committed = GroupAdmin(client).fetch_offsets(GROUP)
        lag = {tp.partition: client.latest_offset(TOPIC, tp.partition) - o.offset for tp, o in committed.items()}
        _open(browser, console + "/groups", shots, "groups")
        assert [r[1:] for r in _cells(browser, "groups") if r[0] == GROUP] == [["consumer", "consumer", "Stable"]]
        _open(browser, f"{console}/groups/{GROUP}", shots, "group")
        shown = {int(r[1]): int(r[4]) for r in _cells(browser, "lag") if r[2] != "-"}
        assert shown == lag and int(browser.find_element(By.ID, "total-lag").text) == sum(lag.values())
        assert len(_cells(browser, "members")) == 1
    finally:
        consumer.close()


def test_acls_and_scram_users_are_listed(browser: WebDriver, console: str, client: KafkaClient, shots: Path) -> None:
    AclAdmin(client).create_acls([Acl(ResourceType.TOPIC, TOPIC, PatternType.LITERAL, "User:alice", "*",
                                      AclOperation.READ, AclPermissionType.ALLOW)])
    AdminClient(client).alter_user_scram_credentials([("alice", ScramMechanism.SCRAM_SHA_256, "alice-secret", 8192)])
    _open(browser, console + "/security", shots, "security")

    def listed() -> bool:
        browser.refresh()
        return bool(browser.find_elements(By.ID, "acls")) and bool(browser.find_elements(By.ID, "scram-users"))
    wait_until(listed, 15, "the ACL and the user listed")
    assert ["TOPIC", TOPIC, "LITERAL", "User:alice", "*", "READ", "ALLOW"] in _cells(browser, "acls")
    assert ["alice", "SCRAM-SHA-256 (8192)"] in _cells(browser, "scram-users")
    browser.save_screenshot(str(shots / "security.png"))


def test_a_topic_created_in_the_console_exists_for_a_client(browser: WebDriver, console: str, client: KafkaClient,
                                                            shots: Path) -> None:
    browser.get(console + "/topics")
    form = browser.find_element(By.ID, "create-topic")
    form.find_element(By.NAME, "name").send_keys("console-created")
    partitions = form.find_element(By.NAME, "partitions")
    partitions.clear()
    partitions.send_keys("4")
    form.find_element(By.TAG_NAME, "button").click()
    alert = browser.switch_to.alert
    assert alert.text == "Create this topic?"
    alert.accept()
    wait_until(lambda: browser.current_url.endswith("/topics/console-created"), 30, "the new topic's page")
    assert len(client.topic_metadata("console-created", refresh=True).partitions) == 4
    wait_until(lambda: _rows_after_refresh(browser, "partitions") == 4, 30, "four partitions shown")


def test_a_dismissed_confirmation_changes_nothing_and_an_accepted_one_does(browser: WebDriver, console: str,
                                                                          client: KafkaClient) -> None:
    AdminClient(client).create_topics([NewTopic("console-doomed", 1, 3)])
    browser.get(f"{console}/topics/console-doomed")
    browser.find_element(By.CSS_SELECTOR, "#delete-topic button").click()
    browser.switch_to.alert.dismiss()
    assert browser.current_url.endswith("/topics/console-doomed")
    assert "console-doomed" in AdminClient(client).list_topics()
    form = browser.find_element(By.ID, "add-partitions")
    total = form.find_element(By.NAME, "total")
    total.clear()
    total.send_keys("2")
    form.find_element(By.TAG_NAME, "button").click()
    browser.switch_to.alert.accept()
    wait_until(lambda: _rows_after_refresh(browser, "partitions") == 2, 30, "two partitions shown")
    assert len(client.topic_metadata("console-doomed", refresh=True).partitions) == 2
    browser.find_element(By.CSS_SELECTOR, "#delete-topic button").click()
    browser.switch_to.alert.accept()
    wait_until(lambda: browser.current_url.endswith("/topics"), 30, "back to the topics")
    wait_until(lambda: "console-doomed" not in AdminClient(client).list_topics(), 30, "the topic deleted")


def test_the_throughput_screen_plots_rates_per_topic_and_broker(browser: WebDriver, console: str, cluster: Cluster,
                                                                shots: Path, metrics_options: list[str]) -> None:
    browser.get(console + "/throughput")
    if not metrics_options:  # found on their own: the brokers' reported ports
        scraping = browser.find_element(By.ID, "endpoints").text
        assert all(cluster.broker(b).metrics_url in scraping for b in cluster.broker_ids), scraping

    def points() -> int:
        return int(browser.find_element(By.TAG_NAME, "body").get_attribute("data-points") or 0)
    wait_until(lambda: points() >= 3, 30, "three points plotted")
    for plot in ("broker-messages", "broker-bytes", "topic-messages", "topic-bytes"):
        assert browser.find_elements(By.CSS_SELECTOR, f"#{plot} canvas"), plot
    legend = browser.find_element(By.ID, "topic-messages").text
    assert TOPIC in legend
    drawn = points()
    wait_until(lambda: points() > drawn, 30, "one more poll")  # the screenshot shows lines, not a first point
    browser.set_window_size(1280, 1420)  # both the brokers' and the topics' plots
    try:
        browser.save_screenshot(str(shots / "throughput.png"))
    finally:
        browser.set_window_size(1280, 900)
