"""Real clients over TLS: confluent-kafka, kafka-python, aiokafka and KafkaJS on one broker serving three listeners.

PLAINTEXT, SSL (no client certificate) and MTLS (mapped to SSL, ``ssl.client.auth=required`` through
its listener prefix) side by side. Each client produces and consumes over SSL without a certificate
and over MTLS with one; records are large enough that a fetch answer's record ranges exceed what the
broker reads inline, so the TLS path that replaces sendfile carries them. A client presenting a
certificate of an untrusted CA, or not trusting the broker's CA, is refused.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.ports import free_port
from pytest_pafka.tls import TlsCertificates
from tests.integration.client_round_trips import (
    aiokafka_round_trip,
    confluent_round_trip,
    create_topic,
    kafka_python_round_trip,
)
from tests.integration.kafkajs_runner import kafkajs_round_trip

RECORDS = 300
#: 300 records of 1,000 bytes: a fetch answer carries ~300 KB of one partition's records.
VALUE_SIZE = 1000
DEADLINE_S = 60.0


@dataclass(frozen=True)
class TlsClient:
    """How a client reaches one listener: its bootstrap and its certificate files."""

    bootstrap: str
    ca: Path
    cert: Path | None = None
    key: Path | None = None


@dataclass(frozen=True)
class Listeners:
    broker: BrokerProcess
    certs: TlsCertificates
    ssl: str
    mtls: str


@pytest.fixture(scope="module")
def listeners(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Listeners]:
    certs = TlsCertificates.create(tmp_path_factory.mktemp("tls"))
    host, plain, ssl_port, mtls_port = "127.0.0.1", free_port(), free_port(), free_port()
    with BrokerProcess(
            f"listeners=PLAINTEXT://{host}:{plain},SSL://{host}:{ssl_port},MTLS://{host}:{mtls_port}",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
            "listener.name.mtls.ssl.client.auth=required",
            *certs.broker_overrides(), port=plain) as broker:
        yield Listeners(broker, certs, f"{host}:{ssl_port}", f"{host}:{mtls_port}")
        print(broker.log_text()[-6000:])


def _values(tag: str) -> list[bytes]:
    return [f"{tag}-{i:05d}-".encode().ljust(VALUE_SIZE, b"x") for i in range(RECORDS)]


# -- confluent-kafka ---------------------------------------------------------------------------
def _confluent_config(client: TlsClient) -> dict[str, object]:
    config: dict[str, object] = {"bootstrap.servers": client.bootstrap, "security.protocol": "SSL",
                                 "ssl.ca.location": str(client.ca)}
    if client.cert is not None:
        config.update({"ssl.certificate.location": str(client.cert), "ssl.key.location": str(client.key)})
    return config


def _kafka_python_config(client: TlsClient) -> dict[str, object]:
    return {"bootstrap_servers": client.bootstrap, "security_protocol": "SSL", "ssl_cafile": str(client.ca),
            "ssl_certfile": str(client.cert) if client.cert else None,
            "ssl_keyfile": str(client.key) if client.key else None}


def _aiokafka_settings(client: TlsClient) -> dict[str, object]:
    from aiokafka.helpers import create_ssl_context

    context = create_ssl_context(cafile=str(client.ca), certfile=str(client.cert) if client.cert else None,
                                 keyfile=str(client.key) if client.key else None)
    return {"bootstrap_servers": client.bootstrap, "security_protocol": "SSL", "ssl_context": context}


def _kafkajs_options(client: TlsClient) -> dict[str, str | int]:
    options: dict[str, str | int] = {"brokers": client.bootstrap, "ca": str(client.ca)}
    if client.cert is not None:
        options.update({"cert": str(client.cert), "key": str(client.key)})
    return options


ROUND_TRIPS: dict[str, Callable[[TlsClient, str, list[bytes]], list[bytes]]] = {
    "confluent-kafka": lambda c, t, v: confluent_round_trip(_confluent_config(c), t, v, DEADLINE_S),
    "kafka-python": lambda c, t, v: kafka_python_round_trip(_kafka_python_config(c), t, v, DEADLINE_S),
    "aiokafka": lambda c, t, v: aiokafka_round_trip(_aiokafka_settings(c), t, v, DEADLINE_S),
    "kafkajs": lambda c, t, v: kafkajs_round_trip(_kafkajs_options(c), t, v, DEADLINE_S)}


@pytest.mark.parametrize("client", list(ROUND_TRIPS))
@pytest.mark.parametrize("listener", ["SSL", "MTLS"])
def test_produce_and_consume_over_tls(listeners: Listeners, client: str, listener: str) -> None:
    certs = listeners.certs
    if listener == "SSL":
        tls = TlsClient(listeners.ssl, certs.ca)
    else:
        tls = TlsClient(listeners.mtls, certs.ca, certs.client_cert, certs.client_key)
    topic = f"tls-{client}-{listener}".lower()
    create_topic(listeners.broker.bootstrap, topic)  # over PLAINTEXT, beside the TLS listeners
    values = _values(topic)
    assert ROUND_TRIPS[client](tls, topic, values) == values
    # What arrived over TLS reads the same over PLAINTEXT.
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": listeners.broker.bootstrap, "group.id": "unused"})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < len(values) and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                got.append(message.value())
        assert got == values
    finally:
        consumer.close()


def test_untrusted_client_certificate_is_refused(listeners: Listeners) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError

    certs = listeners.certs
    untrusted = TlsClient(listeners.mtls, certs.ca, certs.untrusted_client_cert, certs.untrusted_client_key)
    with pytest.raises(KafkaTimeoutError, match="Unable to bootstrap"):
        KafkaProducer(**_kafka_python_config(untrusted), bootstrap_timeout_ms=3000)
    _assert_refused_by_librdkafka(untrusted)
    # Without any certificate, the same listener refuses too; the trusted one is let in.
    _assert_refused_by_librdkafka(TlsClient(listeners.mtls, certs.ca))
    assert _confluent_topics(TlsClient(listeners.mtls, certs.ca, certs.client_cert, certs.client_key))


def test_client_not_trusting_the_broker_fails(listeners: Listeners, caplog: pytest.LogCaptureFixture) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError

    not_trusting = TlsClient(listeners.ssl, listeners.certs.untrusted_ca)
    with caplog.at_level(logging.WARNING, logger="kafka"), pytest.raises(KafkaTimeoutError):
        KafkaProducer(**_kafka_python_config(not_trusting), bootstrap_timeout_ms=3000)
    assert "CERTIFICATE_VERIFY_FAILED" in caplog.text
    _assert_refused_by_librdkafka(not_trusting)


def _confluent_topics(client: TlsClient) -> list[str]:
    from confluent_kafka.admin import AdminClient

    return list(AdminClient(_confluent_config(client)).list_topics(timeout=5).topics)


def _assert_refused_by_librdkafka(client: TlsClient) -> None:
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException):
        _confluent_topics(client)
