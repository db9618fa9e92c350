"""Seed the fuzz corpus with real client traffic: ``python -m fuzz.record_traffic [--out fuzz/corpus]``.

A broker is started with a PLAINTEXT and a SASL_PLAINTEXT listener (PLAIN and SCRAM-SHA-256),
each behind a :class:`testing.recording_proxy.RecordingProxy` (the broker advertises the
proxies, so clients never go around them). Real clients then do real work through them:
confluent-kafka (a producer per compression codec, idempotent and transactional ones, a classic
and a ``group.protocol=consumer`` group, admin calls), kafka-python, aiokafka, kcat and KafkaJS
when they are installed, and SASL PLAIN and SCRAM logins. What each client sent is split into
request frames; every distinct frame goes to ``request_decoders``, the record batches of its
produce requests to ``record_batches`` and its SASL tokens to ``sasl_plain`` / ``sasl_scram``,
named ``<client>-<api>-v<version>-<sha1 prefix>`` and capped (see ``MAX_PER_KIND``).

The files are named by content: running it again adds only what is new (clients' random ids,
nonces and timestamps make some frames new each time; ``--replace`` empties the recorded files first).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import shutil
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

from client import KafkaClient
from client.admin import AdminClient
from client.scram import ScramMechanism
from fuzz.make_corpus import CORPUS
from protocol.api import APIS, decode_request
from protocol.errors import ProtocolError
from protocol.record_batch import iter_batch_headers
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.ports import free_port
from testing.recording_proxy import RecordedConnection, RecordingProxy

HOST = "127.0.0.1"
TOPIC = "recorded"
SASL_USER, SASL_PASSWORD = "alice", "alice-secret"
#: Frames larger than this are left out (the short fuzz runs cut inputs at 4 KiB anyway).
MAX_FRAME_BYTES = 64 * 1024
#: At most this many distinct inputs per (client, API, version): the corpus stays a few MB.
MAX_PER_KIND = 4
KAFKAJS = Path(__file__).resolve().parents[1] / "tests" / "integration" / "kafkajs"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
API_KEY_PRODUCE, API_KEY_SASL_HANDSHAKE, API_KEY_SASL_AUTHENTICATE = 0, 17, 36
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def _broker(plain_proxy: int, sasl_proxy: int, plain: int, sasl: int) -> BrokerProcess:
    jaas = (f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{SASL_USER}="{SASL_PASSWORD}";')
    return BrokerProcess(
        f"listeners=PLAINTEXT://{HOST}:{plain},SASL_PLAINTEXT://{HOST}:{sasl}",
        f"advertised.listeners=PLAINTEXT://{HOST}:{plain_proxy},SASL_PLAINTEXT://{HOST}:{sasl_proxy}",
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256",
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}",
        "group.coordinator.rebalance.protocols=classic,consumer",
        "transaction.state.log.replication.factor=1", "offsets.topic.replication.factor=1", port=plain)


# -- the clients -------------------------------------------------------------------------------------

def _confluent(bootstrap: str, sasl_bootstrap: str, label: Callable[[str], None]) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ConfigResource,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )
    from confluent_kafka.admin import AdminClient as CkAdmin

    label("rdkafka-admin")
    admin = CkAdmin({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, 2, 1), NewTopic(f"{TOPIC}-compact", 1, 1, config={
            "cleanup.policy": "compact"})]).values():
        with contextlib.suppress(Exception):
            future.result(10)
    for future in admin.describe_configs([ConfigResource("topic", TOPIC), ConfigResource("broker", "0")]).values():
        future.result(10)
    with contextlib.suppress(Exception):
        admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                             AclOperation.ANY, AclPermissionType.ANY)).result(10)
    with contextlib.suppress(Exception):
        admin.list_consumer_groups().result(10)
    for codec in CODECS:
        label(f"rdkafka-{codec}")
        producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5})
        for i in range(50):
            producer.produce(TOPIC, f"value {i} {codec} " * 4, key=f"k{i % 7}", headers={"h": b"v"})
        producer.flush(10)
    label("rdkafka-transactional")
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "recorded-txn"})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(TOPIC, b"in a transaction", key=b"t")
    producer.commit_transaction(10)
    producer.begin_transaction()
    producer.produce(TOPIC, b"aborted", key=b"t")
    producer.abort_transaction(10)
    for protocol in ("classic", "consumer"):
        label(f"rdkafka-group-{protocol}")
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"recorded-{protocol}",
                             "group.protocol": protocol, "auto.offset.reset": "earliest",
                             "isolation.level": "read_committed"})
        consumer.subscribe([TOPIC])
        _poll_for(consumer, 20, 10)
        consumer.commit(asynchronous=False)
        consumer.close()
    for mechanism in ("PLAIN", "SCRAM-SHA-256"):
        label(f"rdkafka-sasl-{mechanism.lower()}")
        producer = Producer({"bootstrap.servers": sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
                             "sasl.mechanism": mechanism, "sasl.username": SASL_USER,
                             "sasl.password": SASL_PASSWORD})
        producer.produce(TOPIC, b"over SASL")
        producer.flush(10)


def _poll_for(consumer: object, wanted: int, seconds: float) -> None:
    got, deadline = 0, time.monotonic() + seconds
    while got < wanted and time.monotonic() < deadline:
        msg = consumer.poll(0.2)  # type: ignore[attr-defined]
        if msg is not None and msg.error() is None:
            got += 1


def _kafka_python(bootstrap: str, label: Callable[[str], None]) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    label("kafka-python")
    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip")
    for i in range(20):
        producer.send(TOPIC, f"kafka-python {i}".encode(), key=b"kp")
    producer.flush(10)
    producer.close()
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id="recorded-kafka-python",
                             auto_offset_reset="earliest", consumer_timeout_ms=3000)
    for _ in zip(range(20), consumer, strict=False):
        pass
    consumer.commit()
    consumer.close()


def _aiokafka(bootstrap: str, label: Callable[[str], None]) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type="lz4", enable_idempotence=True)
        await producer.start()
        for i in range(20):
            await producer.send(TOPIC, f"aiokafka {i}".encode(), key=b"ak")
        await producer.stop()
        consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id="recorded-aiokafka",
                                    auto_offset_reset="earliest")
        await consumer.start()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(consumer.getmany(timeout_ms=3000), 10)
        await consumer.commit()
        await consumer.stop()

    label("aiokafka")
    asyncio.run(run())


def _kcat(bootstrap: str, label: Callable[[str], None]) -> None:
    if shutil.which("kcat") is None:
        return
    label("kcat")
    subprocess.run(["kcat", "-b", bootstrap, "-P", "-t", TOPIC, "-z", "snappy"], input=b"kcat 1\nkcat 2\n",
                   timeout=30, check=True)
    subprocess.run(["kcat", "-b", bootstrap, "-C", "-t", TOPIC, "-o", "beginning", "-c", "5", "-e"],
                   capture_output=True, timeout=30, check=True)
    subprocess.run(["kcat", "-b", bootstrap, "-L"], capture_output=True, timeout=30, check=True)


def _kafkajs(bootstrap: str, label: Callable[[str], None]) -> None:
    if shutil.which("node") is None or not (KAFKAJS / "node_modules").is_dir():
        return
    label("kafkajs")
    subprocess.run(["node", str(KAFKAJS / "client.js"), "roundtrip", "--brokers", bootstrap, "--topic",
                    f"{TOPIC}-kafkajs"], input=json.dumps(["a", "b", "c"]).encode(), capture_output=True,
                   timeout=60, check=True)


def record(work: Callable[[str, str, Callable[[str], None]], None] | None = None) -> list[RecordedConnection]:
    """Start the broker behind the proxies, run the clients, return what they sent."""
    plain, sasl = free_port(HOST), free_port(HOST)
    with RecordingProxy(HOST, plain) as plain_proxy, RecordingProxy(HOST, sasl) as sasl_proxy:
        broker = _broker(plain_proxy.port, sasl_proxy.port, plain, sasl)
        broker.start()
        try:
            with KafkaClient(f"{HOST}:{plain}") as client:  # straight to the broker: not recorded
                AdminClient(client).alter_user_scram_credentials(
                    [(SASL_USER, ScramMechanism.SCRAM_SHA_256, SASL_PASSWORD, 4096)])

            def label(name: str) -> None:
                plain_proxy.label = sasl_proxy.label = name

            plain_bootstrap, sasl_bootstrap = f"{HOST}:{plain_proxy.port}", f"{HOST}:{sasl_proxy.port}"
            steps: list[Callable[[], None]] = [
                lambda: _confluent(plain_bootstrap, sasl_bootstrap, label),
                lambda: _kafka_python(plain_bootstrap, label), lambda: _aiokafka(plain_bootstrap, label),
                lambda: _kcat(plain_bootstrap, label), lambda: _kafkajs(plain_bootstrap, label)]
            for step in steps:
                try:
                    step()
                except Exception as exc:  # one client missing or failing still leaves the others' frames
                    print(f"skipped a client step: {exc!r}")
        finally:
            broker.stop()
            broker.cleanup()
        return plain_proxy.connections + sasl_proxy.connections


# -- from bytes sent to corpus inputs ----------------------------------------------------------------

def frames(sent: bytes) -> Iterator[bytes]:
    """The size-prefixed frames of a connection's client-to-broker stream (a cut-off tail is dropped)."""
    pos = 0
    while pos + 4 <= len(sent):
        size = int.from_bytes(sent[pos:pos + 4], "big", signed=True)
        if size < 0 or pos + 4 + size > len(sent):
            return
        yield sent[pos + 4:pos + 4 + size]
        pos += 4 + size


def _api_name(api_key: int) -> str:
    spec = APIS.get(api_key)
    return spec.name.lower() if spec is not None else str(api_key)


def inputs(connection: RecordedConnection) -> Iterator[tuple[str, str, bytes]]:
    """(target, name prefix, input) for each frame of ``connection`` and what its frames carry."""
    mechanism = b""
    for frame in frames(bytes(connection.sent)):
        if len(frame) > MAX_FRAME_BYTES:
            continue
        try:
            request = decode_request(bytearray(frame))
        except ProtocolError:
            continue  # SASL v0 tokens go unframed by a request header: not a request
        prefix = f"{connection.label}-{_api_name(request.api_key)}-v{request.api_version}"
        yield "request_decoders", prefix, frame
        body = request.body
        if request.api_key == API_KEY_PRODUCE:
            yield from _batches(prefix, body)
        elif request.api_key == API_KEY_SASL_HANDSHAKE:
            mechanism = str(getattr(body, "mechanism", "")).encode()
        elif request.api_key == API_KEY_SASL_AUTHENTICATE:
            token = bytes(getattr(body, "auth_bytes", b""))
            yield ("sasl_plain" if mechanism == b"PLAIN" else "sasl_scram"), connection.label, token


def _batches(prefix: str, body: object) -> Iterator[tuple[str, str, bytes]]:
    for topic in getattr(body, "topic_data", []):
        for partition in topic.partition_data:
            if partition.records is None:
                continue
            data = bytes(partition.records)
            with contextlib.suppress(ProtocolError):
                for pos, header in iter_batch_headers(data):
                    end = pos + 12 + header.batch_length
                    codec = CODEC_NAMES.get(header.attributes & 0x7, "codec")
                    yield "record_batches", f"{prefix}-{codec}", data[pos:end]


def scram_conversations(found: list[tuple[str, str, bytes]]) -> list[tuple[str, str, bytes]]:
    """The sasl_scram target reads ``client-first NUL client-final``, the server nonce written ``r=*``:
    each recorded client-first with the client-final after it."""
    joined, first = [], None
    for target, label, token in found:
        if target != "sasl_scram":
            joined.append((target, label, token))
        elif token.startswith((b"n,", b"y,", b"p=")):
            first = token
        elif first is not None:
            final = b",".join(b"r=*" if part.startswith(b"r=") else part for part in token.split(b","))
            joined.append((target, label, first + b"\x00" + final))
            first = None
    return joined


def write(connections: list[RecordedConnection], root: Path = CORPUS) -> Counter[str]:
    """Each distinct input to ``root/<target>/<prefix>-<sha1[:12]>``, at most MAX_PER_KIND per prefix."""
    found = [item for connection in connections for item in inputs(connection)]
    per_kind: Counter[tuple[str, str]] = Counter()
    written: Counter[str] = Counter()
    seen: set[tuple[str, bytes]] = set()
    for target, prefix, data in scram_conversations(found):
        if not data or (target, data) in seen or per_kind[(target, prefix)] >= MAX_PER_KIND:
            continue
        seen.add((target, data))
        per_kind[(target, prefix)] += 1
        path = root / target / f"{prefix}-{hashlib.sha1(data).hexdigest()[:12]}"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            written[target] += 1
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=CORPUS)
    parser.add_argument("--replace", action="store_true", help="remove the recorded inputs written before")
    args = parser.parse_args()
    if args.replace:
        for path in args.out.glob("*/*-*"):  # the seeds of make_corpus are bare hashes
            path.unlink()
    written = write(record(), args.out)
    for target, count in sorted(written.items()):
        print(f"{target}: {count} new input(s)")


if __name__ == "__main__":
    main()
