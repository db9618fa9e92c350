"""Issue 4's client matrix: real clients, every codec, 100,000 records each.

For each of confluent-kafka, kafka-python, aiokafka and Debian's kcat
(librdkafka 2.0) and each of gzip, snappy, lz4 and zstd: create a topic with
the client's admin path, produce records with keys and headers, then consume
every partition from the beginning by explicit assignment. Every record must
come back exactly once, in production order per partition, with its key,
value, headers and timestamp.

Then the clients that speak the versions Kafka 4 removed: kafka-python pinned
to Kafka 0.10.1 (Produce v2, message format v1) and 0.11 (Produce v3), and kcat
told the broker is 0.9 without ApiVersions (librdkafka's Produce v1, format v0,
with the old LZ4 frame checksum); a current client (confluent-kafka) reads
their records back.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import time

import pytest

from pytest_pafka.broker_process import BrokerProcess
from tests.integration.clients import DRIVERS
from tests.integration.records import Consumed, Produced, check_consumed, make_records

RECORDS = int(os.environ.get("PAFKA_MATRIX_RECORDS", "100000"))
PARTITIONS = 3
CODECS = ("gzip", "snappy", "lz4", "zstd")


def _require(client: str) -> None:
    # kcat is a Debian package, not a Python one: missing means the set-up
    # command was not followed, which must fail rather than skip.
    if client == "kcat":
        assert shutil.which("kcat"), "kcat is not installed (apt-get install -y kcat)"


@pytest.mark.slow
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", list(DRIVERS))
def test_produce_and_consume_every_record(broker: BrokerProcess, client: str, codec: str) -> None:
    _require(client)
    driver = DRIVERS[client]
    topic = f"matrix-{client}-{codec}"
    driver.create_topic(broker.bootstrap, topic, PARTITIONS)
    before_ms = int(time.time() * 1000)
    records = make_records(RECORDS, base_timestamp_ms=before_ms - 10 * RECORDS,
                           per_record_headers=driver.per_record_headers)
    driver.produce(broker.bootstrap, topic, codec, records)
    after_ms = int(time.time() * 1000)
    consumed = driver.consume(broker.bootstrap, topic, PARTITIONS, expected=len(records))
    check_consumed(records, consumed, exact_timestamps=driver.exact_timestamps,
                   timestamp_window=(before_ms, after_ms))
    assert "Traceback" not in broker.log_text()


# -- Old clients reading what a current client produced (Fetch v0-v5, Kafka 3.9's versions) ----------

OLD_CODECS = ("none", "gzip", "snappy", "lz4")
CONSUMED_RECORDS = 3000


def _produced_by_current_client(broker: BrokerProcess, topic: str, codec: str) -> list[Produced]:
    driver = DRIVERS["confluent-kafka"]
    driver.create_topic(broker.bootstrap, topic, PARTITIONS)
    records = make_records(CONSUMED_RECORDS, base_timestamp_ms=int(time.time() * 1000) - 10 * CONSUMED_RECORDS)
    driver.produce(broker.bootstrap, topic, codec, records)
    return records


@pytest.mark.parametrize("codec", OLD_CODECS)
@pytest.mark.parametrize("api_version", [(0, 10, 1), (0, 11)])
def test_kafka_python_with_old_api_versions_consumes(broker: BrokerProcess, api_version: tuple[int, ...],
                                                     codec: str) -> None:
    """kafka-python pinned to 0.10.1 (Fetch v3: message format v1, down-converted) and 0.11 (Fetch v5)."""
    from kafka import KafkaConsumer, TopicPartition

    topic = f"old-kafka-python-{'-'.join(map(str, api_version))}-{codec}"
    records = _produced_by_current_client(broker, topic, codec)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, api_version=api_version, group_id=None,
                             enable_auto_commit=False, auto_offset_reset="earliest")
    consumed: list[Consumed] = []
    try:
        assignment = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(assignment)
        consumer.seek_to_beginning(*assignment)
        deadline = time.monotonic() + 60
        while len(consumed) < len(records) and time.monotonic() < deadline:
            for tp, batch in consumer.poll(timeout_ms=1000, max_records=5000).items():
                consumed.extend(Consumed(tp.partition, m.offset, m.key, m.value,
                                         tuple((k, v) for k, v in m.headers or ()), m.timestamp) for m in batch)
    finally:
        consumer.close()
    if api_version < (0, 11):
        records = [dataclasses.replace(r, headers=()) for r in records]  # message format v1 has no headers
    check_consumed(records, consumed, exact_timestamps=True)
    assert "Traceback" not in broker.log_text()


@pytest.mark.slow
def test_kcat_without_api_versions_consumes(broker: BrokerProcess) -> None:
    """librdkafka's path for brokers without ApiVersions (Kafka 0.9): Fetch v0, message format v0.

    Needs ListOffsets v0 (``-o beginning``) as well, served since issue 15's ListOffsets part.
    """
    _require("kcat")
    topic = "old-kcat-fallback"
    records = _produced_by_current_client(broker, topic, "gzip")
    result = subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-X", "broker.version.fallback=0.9.0", "-X",
         "api.version.request=false", "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-J", "-q"],
        capture_output=True, timeout=120)
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    docs = [json.loads(line) for line in result.stdout.splitlines()]
    want = [r for r in records if r.key in {d["key"].encode() for d in docs}]
    assert len(docs) == len(want) > 0
    assert [d["offset"] for d in docs] == list(range(len(docs)))
    assert sorted((d["key"].encode(), d["payload"].encode()) for d in docs) == sorted((r.key, r.value) for r in want)


# -- Old clients producing (Produce v0-v2: message formats v0/v1, up-converted) ----------

PRODUCED_RECORDS = 300


def _read_back(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes, int]]:
    consumed = DRIVERS["confluent-kafka"].consume(bootstrap, topic, 1, expected=None)
    assert [c.offset for c in consumed] == list(range(len(consumed)))
    return [(c.key, c.value, c.timestamp_ms) for c in consumed]


@pytest.mark.parametrize("codec", OLD_CODECS)
@pytest.mark.parametrize("api_version", [(0, 10, 1), (0, 11)])
def test_kafka_python_with_old_api_versions_produces(broker: BrokerProcess, api_version: tuple[int, ...],
                                                     codec: str) -> None:
    from kafka import KafkaProducer

    topic = f"old-kafka-python-{'.'.join(map(str, api_version))}-{codec}"
    DRIVERS["confluent-kafka"].create_topic(broker.bootstrap, topic, 1)
    base = int(time.time() * 1000) - PRODUCED_RECORDS
    produced = [(b"key-%d" % i, b"value %d " % i + b"-pafka-" * 8, base + i) for i in range(PRODUCED_RECORDS)]
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, api_version=api_version,
                             compression_type=None if codec == "none" else codec, linger_ms=5, acks="all")
    try:
        futures = [producer.send(topic, key=k, value=v, timestamp_ms=ts) for k, v, ts in produced]
        producer.flush(30)
        offsets = [f.get(timeout=30).offset for f in futures]
    finally:
        producer.close(timeout=10)
    assert offsets == list(range(PRODUCED_RECORDS))
    assert _read_back(broker.bootstrap, topic) == produced
    assert "Traceback" not in broker.log_text()


@pytest.mark.parametrize("codec", OLD_CODECS)
def test_kcat_without_api_versions_produces(broker: BrokerProcess, codec: str) -> None:
    _require("kcat")
    topic = f"old-kcat-{codec}"
    DRIVERS["confluent-kafka"].create_topic(broker.bootstrap, topic, 1)
    lines = [(b"key-%d" % i, b"value %d " % i + b"-pafka-" * 8) for i in range(PRODUCED_RECORDS)]
    result = subprocess.run(
        ["kcat", "-P", "-b", broker.bootstrap, "-t", topic, "-z", codec, "-K", "\t",
         "-X", "broker.version.fallback=0.9.0", "-X", "api.version.request=false", "-X", "linger.ms=5",
         "-d", "protocol"],
        input=b"".join(k + b"\t" + v + b"\n" for k, v in lines), capture_output=True, timeout=120)
    log = result.stderr.decode(errors="replace")
    assert result.returncode == 0, log[-3000:]
    # librdkafka's path for a broker without ApiVersions: Produce v1, message format v0.
    assert "Sent ProduceRequest (v1," in log, log[-3000:]
    assert "Sent ApiVersionRequest" not in log
    # Format v0 has no timestamps: each record reads back with -1.
    assert _read_back(broker.bootstrap, topic) == [(k, v, -1) for k, v in lines]
