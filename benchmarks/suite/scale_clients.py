"""Scale scenarios driven by confluent-kafka clients, run the same way against both brokers.

* 1,000 partitions (100 topics x 10) against 6, one producer writing to all of them,
  every record read back exactly once in per-partition order; a raw Metadata round trip
  for all partitions, timed with pafka's own protocol code.
* 1,000 idle connections (each after one ApiVersions round trip) next to 20 producers.
* 50 consumer groups, one consumer each, reading the whole of one topic concurrently.
"""

from __future__ import annotations

import resource
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from benchmarks.suite.bench_brokers import BenchBroker, ResourceMeter, median, percentile
from benchmarks.suite.scale_storage import TOPICS_TIMEOUT_S, delete_topics, produce_records
from benchmarks.suite.scale_wire import METADATA, WireClient, api_versions_v0_frame
from protocol.api import decode_response
from testing.sockets import read_frame
from testing.topics import create_topic, create_topics

PHASE_TIMEOUT_S = 300.0
T = TypeVar("T")
SEQUENCE = struct.Struct(">Q")
WARM_UP = (1 << 64) - 1  # the sequence number of each partition's untimed first record


def producer_config(bootstrap: str) -> dict[str, Any]:
    """The suite's producer settings (kbench's): acks 1, linger 5 ms, 1 MB batches."""
    return {"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "batch.size": 1000000,
            "queue.buffering.max.messages": 1000000, "queue.buffering.max.kbytes": 1048576,
            "message.timeout.ms": int(PHASE_TIMEOUT_S * 1000), "delivery.report.only.error": True}


def consumer_config(bootstrap: str, group: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760,
            "fetch.wait.max.ms": 100, "queued.min.messages": 1000000, "fetch.queue.backoff.ms": 5}


def own_cpu_seconds() -> float:
    """CPU seconds of this process, librdkafka's threads included: is the client the limit?"""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# -- producing a sequence to many partitions and reading it back ------------------------------
def produce_spread(broker: BenchBroker, partitions: list[tuple[str, int]], records: int, size: int
                   ) -> tuple[ResourceMeter, float]:
    """Record i goes to partitions[i % n] carrying its sequence number within that partition.

    First one warm-up record per partition (not timed, sequence WARM_UP): the producer
    learns every topic's leader before the clock starts, so the timed phase measures
    produce, not a client's metadata discovery of 100 topics. Returns the broker's meter
    over the timed phase and this process's CPU seconds in it.
    """
    errors: list[str] = []
    producer = Producer(producer_config(broker.bootstrap) | {"error_cb": lambda e: errors.append(str(e))})
    count = len(partitions)
    padding = b"x" * (size - SEQUENCE.size)
    deadline = time.monotonic() + PHASE_TIMEOUT_S

    def failed(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    def send(topic: str, partition: int, value: bytes) -> None:
        while True:
            try:
                producer.produce(topic, value, partition=partition, on_delivery=failed)
                return
            except BufferError:
                producer.poll(0.005)
                if time.monotonic() > deadline:
                    raise TimeoutError("producer queue stayed full") from None

    warm_up = SEQUENCE.pack(WARM_UP) + padding
    for topic, partition in partitions:
        send(topic, partition, warm_up)
    left = producer.flush(PHASE_TIMEOUT_S)
    client_cpu = own_cpu_seconds()
    with ResourceMeter(broker) as meter:
        for i in range(records):
            topic, partition = partitions[i % count]
            send(topic, partition, SEQUENCE.pack(i // count) + padding)
        left += producer.flush(max(1.0, deadline - time.monotonic()))
    client_cpu = own_cpu_seconds() - client_cpu
    if left or errors:
        raise RuntimeError(f"{left} records undelivered; errors: {errors[:3]}")
    return meter, client_cpu


def expected_counts(partitions: list[tuple[str, int]], records: int) -> dict[tuple[str, int], int]:
    count = len(partitions)
    return {tp: records // count + (1 if i < records % count else 0) for i, tp in enumerate(partitions)}


def expected_offsets(expected: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """Log end offsets: the records plus each partition's warm-up record."""
    return {tp: n + 1 for tp, n in expected.items()}


def read_back(bootstrap: str, expected: dict[tuple[str, int], int]) -> bool:
    """Every partition from offset 0: each record exactly once, sequence numbers in order."""
    consumer = Consumer(consumer_config(bootstrap, "scale-verify-" + uuid.uuid4().hex))
    consumer.assign([TopicPartition(t, p, 0) for t, p in expected])
    following = dict.fromkeys(expected, 0)
    warmed: set[tuple[str, int]] = set()
    total, got, ok = sum(expected.values()), 0, True
    deadline = time.monotonic() + PHASE_TIMEOUT_S
    try:
        while got < total and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=10000, timeout=0.5):
                if message.error() is not None:
                    continue
                tp = (message.topic(), message.partition())
                sequence = SEQUENCE.unpack_from(message.value())[0]
                if sequence == WARM_UP:
                    ok = ok and following[tp] == 0 and tp not in warmed
                    warmed.add(tp)
                    continue
                if sequence != following[tp]:
                    ok = False
                following[tp] += 1
                got += 1
    finally:
        consumer.close()
    return ok and following == expected and len(warmed) == len(expected)


def run_partitions(broker: BenchBroker, topics: int, per_topic: int, records: int, metadata_repeats: int
                   ) -> dict[str, Any]:
    """Produce ``records`` of 100 B over topics x per_topic partitions; Metadata timing; verify."""
    tag = uuid.uuid4().hex[:6]
    names = [f"scale-parts-{tag}-{i:03d}" for i in range(topics)]
    create_topics(broker.bootstrap, names, per_topic, timeout_s=TOPICS_TIMEOUT_S)
    partitions = [(t, p) for t in names for p in range(per_topic)]
    result: dict[str, Any] = {"partitions": len(partitions)}
    with WireClient(broker.host, broker.port) as client:
        client.negotiate()
        result["metadata_version"] = client.versions[METADATA]
        times, seen = [], 0
        for i in range(metadata_repeats + 3):  # three warm-ups
            frame, elapsed = client.timed_metadata(None)
            if i >= 3:
                times.append(elapsed)
            response = decode_response(METADATA, client.versions[METADATA], frame)[1]
            seen = sum(len(t.partitions) for t in response.topics if t.name in set(names))
        result |= {"metadata_ms_p50": median(times) * 1000, "metadata_ms_p99": percentile(sorted(times), 99) * 1000,
                   "metadata_partitions_seen": seen}
    meter, client_cpu = produce_spread(broker, partitions, records, 100)
    result |= {"records": records, "produce_s": meter.wall_s, "records_per_s": records / meter.wall_s,
               "cpu_s_per_million": meter.cpu_s / records * 1e6,
               "client_cpu_s_per_million": client_cpu / records * 1e6}
    expected = expected_counts(partitions, records)
    by_topic: dict[str, list[int]] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    with WireClient(broker.host, broker.port) as client:
        client.negotiate()
        latest = client.latest_offsets(by_topic)
    result["list_offsets_match"] = sum(1 for tp, n in expected_offsets(expected).items() if latest.get(tp) == n)
    result["read_back_ok"] = read_back(broker.bootstrap, expected)
    delete_topics(broker.bootstrap, names)
    return result


# -- 1,000 idle connections ---------------------------------------------------------------------
def open_idle_connections(broker: BenchBroker, count: int) -> list[socket.socket]:
    """``count`` connections, each after one ApiVersions v0 round trip (sent all, then read)."""
    sockets = [socket.create_connection((broker.host, broker.port), timeout=30) for _ in range(count)]
    frame = api_versions_v0_frame()
    for sock in sockets:
        sock.sendall(frame)
    for sock in sockets:
        read_frame(sock)
    return sockets


def run_active_producers(broker: BenchBroker, topic: str, producers: int, records_each: int) -> tuple[float, float]:
    """``producers`` producers (one partition each) in lockstep; (records/s, broker CPU-s/M)."""
    clients = [Producer(producer_config(broker.bootstrap)) for _ in range(producers)]
    value = b"y" * 100
    deadline = time.monotonic() + PHASE_TIMEOUT_S
    with ResourceMeter(broker) as meter:
        for _ in range(records_each):
            for index, producer in enumerate(clients):
                while True:
                    try:
                        producer.produce(topic, value, partition=index)
                        break
                    except BufferError:
                        producer.poll(0.005)
                        if time.monotonic() > deadline:
                            raise TimeoutError("producer queue stayed full") from None
        left = sum(p.flush(max(1.0, deadline - time.monotonic())) for p in clients)
    if left:
        raise RuntimeError(f"{left} records undelivered")
    total = producers * records_each
    return total / meter.wall_s, meter.cpu_s / total * 1e6


def rss_around_idle_connections(broker: BenchBroker, idle: int, during: Callable[[list[socket.socket]], T]
                                ) -> tuple[float, float, T]:
    """The broker's settled RSS before and after opening ``idle`` connections, and what
    ``during`` returns, run while they are open (they are closed afterwards)."""
    time.sleep(1.0)
    before = broker.rss_mb()
    sockets = open_idle_connections(broker, idle)
    try:
        time.sleep(1.0)
        after = broker.rss_mb()
        return before, after, during(sockets)
    finally:
        for sock in sockets:
            sock.close()


def run_connections(broker: BenchBroker, topic: str, idle: int, producers: int, records_each: int
                    ) -> dict[str, Any]:
    without_rate, without_cpu = run_active_producers(broker, topic, producers, records_each)

    def active_phase(sockets: list[socket.socket]) -> tuple[float, float, int]:
        rate, cpu = run_active_producers(broker, topic, producers, records_each)
        return rate, cpu, sum(1 for s in sockets if _still_open(s))

    rss_before, rss_idle, (with_rate, with_cpu, alive) = rss_around_idle_connections(broker, idle, active_phase)
    return {"rss_before_mb": rss_before, "rss_with_idle_mb": rss_idle, "idle_cost_mb": rss_idle - rss_before,
            "records_per_s_without": without_rate, "records_per_s_with": with_rate,
            "cpu_s_per_million_without": without_cpu, "cpu_s_per_million_with": with_cpu,
            "idle_still_open": alive}


def fresh_idle_cost(broker: BenchBroker, idle: int) -> dict[str, float]:
    """RSS of a just-started broker before and after ``idle`` connections: the cost with no
    heap left over from earlier load to absorb it."""
    before, after, _ = rss_around_idle_connections(broker, idle, lambda sockets: None)
    return {"fresh_rss_mb": before, "fresh_rss_with_idle_mb": after, "fresh_idle_cost_mb": after - before}


def _still_open(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


# -- 50 consumer groups ---------------------------------------------------------------------------
def consume_as_group(bootstrap: str, topic: str, group: str, expected: dict[int, int]) -> dict[str, Any]:
    """One consumer in its own group: subscribe, read everything once and in order, commit, leave."""
    assigned = threading.Event()
    consumer = Consumer(consumer_config(bootstrap, group))
    started = time.monotonic()
    join_s: list[float] = []

    def on_assign(c: Any, partitions: list[Any]) -> None:
        join_s.append(time.monotonic() - started)
        assigned.set()

    consumer.subscribe([topic], on_assign=on_assign)
    following = dict.fromkeys(expected, 0)
    got, ok, total = 0, True, sum(expected.values())
    deadline = started + PHASE_TIMEOUT_S
    try:
        while got < total and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=10000, timeout=0.5):
                error = message.error()
                if error is not None:
                    ok = ok and error.code() == KafkaError._PARTITION_EOF
                    continue
                partition = message.partition()
                if message.offset() != following[partition]:
                    ok = False
                following[partition] = message.offset() + 1
                got += 1
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return {"join_s": join_s[0] if join_s else None, "read_s": time.monotonic() - started,
            "ok": ok and following == expected}


def run_groups(broker: BenchBroker, groups: int, partitions: int, per_partition: int, workers: int
               ) -> dict[str, Any]:
    topic = "scale-groups-" + uuid.uuid4().hex[:6]
    create_topic(broker.bootstrap, topic, partitions, timeout_s=TOPICS_TIMEOUT_S)
    produce_records(broker.bootstrap, topic, partitions * per_partition, 100, partitions)
    expected = dict.fromkeys(range(partitions), per_partition)
    names = [f"scale-group-{uuid.uuid4().hex[:6]}-{i}" for i in range(groups)]
    with ResourceMeter(broker) as meter:
        with ThreadPoolExecutor(workers) as pool:
            results = list(pool.map(lambda g: consume_as_group(broker.bootstrap, topic, g, expected), names))
    delete_topics(broker.bootstrap, [topic])
    joins = [r["join_s"] for r in results if r["join_s"] is not None]
    return {"groups": groups, "records_per_group": partitions * per_partition, "all_read_s": meter.wall_s,
            "broker_cpu_s": meter.cpu_s, "join_s_p50": median(joins), "join_s_max": max(joins, default=None),
            "read_s_max": max(r["read_s"] for r in results), "groups_ok": sum(1 for r in results if r["ok"])}
