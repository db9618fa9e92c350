"""A real broker's memory stays bounded under clients that never read their sockets.

Clients pipeline 50 MB fetches and 1 MB produce requests and never read an answer, while
consumers read large fetches in other processes: the broker stops reading from the
non-readers once their unsent answers pass the connection's high water, its request memory
pool (``queued.max.request.bytes``) bounds the requests it holds, and its RSS (from /proc)
stays within the bound while a probe connection keeps being answered.
"""

import multiprocessing
import socket
import time

import pytest

from benchmarks.suite.memory_bound import (
    TOPIC,
    RssSampler,
    consumer_process,
    fill_topic,
    open_non_readers,
    probe_latencies,
    push_non_readers,
    rss_bytes,
)
from benchmarks.suite.scale_wire import WireClient, record_batch
from pytest_pafka.broker_process import BrokerProcess
from testing.topics import create_topic

pytestmark = pytest.mark.process

PARTITIONS = 4
#: What the broker's RSS may grow by under the load: its pool (32 MB) and one request over it,
#: a few connections' high water of unsent answers (8 MB each) and the interpreter's own churn.
RSS_GROWTH_BOUND = 256 << 20
POOL = 32 << 20


def _push_produce(socks: list[socket.socket], frame: bytes) -> int:
    """Send 1 MB produce requests on each socket until it takes no more; the requests sent whole."""
    sent = 0
    for sock in socks:
        view = memoryview(frame)
        try:
            while True:
                n = sock.send(view)
                if n < len(view):
                    break  # the rest of this frame waits: the broker has stopped reading
                sent += 1
        except (BlockingIOError, ConnectionError):
            continue
    return sent


def test_non_reading_clients_leave_the_broker_s_rss_bounded_and_others_served() -> None:
    with BrokerProcess(f"queued.max.request.bytes={POOL}") as broker:
        assert broker.pid is not None
        create_topic(broker.bootstrap, TOPIC, PARTITIONS)
        records = fill_topic(broker.host, broker.port, PARTITIONS, 32)
        with WireClient(broker.host, broker.port, "producer-frame") as client:
            client.negotiate()
            produce = client.produce_frame(TOPIC, [(0, bytes(record_batch(1000, 1000)))])
        quiet = probe_latencies(broker.host, broker.port, 1.0)
        rss_before = rss_bytes(broker.pid)
        sampler = RssSampler(broker.pid).start()
        out: multiprocessing.Queue[int] = multiprocessing.Queue()
        consumers = multiprocessing.Process(target=consumer_process, args=(
            broker.host, broker.port, 10, PARTITIONS, records, 50 << 20, 10.0, out))
        consumers.start()
        fetchers = open_non_readers(broker.host, broker.port, 20)
        producers = open_non_readers(broker.host, broker.port, 10)
        pushed = push_non_readers(fetchers, PARTITIONS, 50 << 20) + _push_produce(producers, produce)
        loaded = probe_latencies(broker.host, broker.port, 6.0)
        pushed += push_non_readers(fetchers, PARTITIONS, 50 << 20) + _push_produce(producers, produce)
        consumed = out.get(timeout=120)
        consumers.join(30)
        rss_max = sampler.stop()
        for sock in fetchers + producers:
            sock.close()
        time.sleep(0.5)
        after = probe_latencies(broker.host, broker.port, 0.5)
    assert pushed > 0 and consumed > 0
    assert quiet and loaded and after  # the probe was answered throughout
    assert max(loaded) < 5.0, f"probe round trips up to {max(loaded):.2f} s under load"
    assert rss_max - rss_before < RSS_GROWTH_BOUND, (
        f"RSS grew from {rss_before >> 20} MB to {rss_max >> 20} MB")


def test_the_broker_s_fetch_max_bytes_caps_what_a_fetch_asks_for() -> None:
    """KIP-541: a fetch asking 50 MB of a broker with fetch.max.bytes=1 MiB gets about 1 MiB
    (whole batches, the first always), and one asking less gets what it asked."""
    with BrokerProcess("fetch.max.bytes=1048576") as broker:
        create_topic(broker.bootstrap, TOPIC, 1)
        fill_topic(broker.host, broker.port, 1, 4)
        with WireClient(broker.host, broker.port, "capped") as client:
            client.negotiate()
            capped = client.fetch(TOPIC, 0, 0, max_bytes=50 << 20)
            small = client.fetch(TOPIC, 0, 0, max_bytes=1)
    capped_records = capped.responses[0].partitions[0].records  # type: ignore[attr-defined]
    small_records = small.responses[0].partitions[0].records  # type: ignore[attr-defined]
    batch = len(record_batch(1000, 1000))
    assert batch <= len(capped_records) <= 1048576
    assert len(small_records) == batch  # KIP-74: the first batch comes whole
