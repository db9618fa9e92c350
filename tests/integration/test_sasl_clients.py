"""Real clients over SASL: confluent-kafka, kafka-python, aiokafka and KafkaJS, and Debian's kcat.

One broker serves PLAINTEXT (for the admin calls), SASL_PLAINTEXT and SASL_SSL, each SASL listener
with PLAIN (users from its JAAS config) and SCRAM-SHA-256/512 (users created with
AlterUserScramCredentials). Every client produces and consumes over both SASL listeners with every
mechanism; wrong passwords and unknown users are refused, and a stream of refused clients does not
hold up a producer next to them.
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from client.connection import BrokerConnection
from client.scram import ScramMechanism, secure_random_bytes
from protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    ScramCredentialUpsertion,
)
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.ports import free_port
from pytest_pafka.tls import TlsCertificates
from pytest_pafka.waiting import wait_until
from tests.integration.client_round_trips import (
    aiokafka_round_trip,
    confluent_round_trip,
    create_topic,
    kafka_python_round_trip,
)
from tests.integration.kafkajs_runner import kafkajs_round_trip, run_kafkajs

HOST = "127.0.0.1"
RECORDS = 100
VALUE_SIZE = 1000
DEADLINE_S = 30.0
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def _plain_jaas() -> str:
    return ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


@dataclass(frozen=True)
class SaslClient:
    """How a client reaches a SASL listener: bootstrap, protocol, mechanism, credentials, CA."""

    bootstrap: str
    protocol: str
    mechanism: str
    username: str
    password: str
    ca: str


@dataclass(frozen=True)
class Listeners:
    broker: BrokerProcess
    certs: TlsCertificates
    bootstraps: dict[str, str]

    def client(self, protocol: str, mechanism: str, password: str | None = None,
               username: str | None = None) -> SaslClient:
        user = username or ("alice" if mechanism == "PLAIN" else "bob")
        return SaslClient(self.bootstraps[protocol], protocol, mechanism, user,
                          password or f"{user}-secret", str(self.certs.ca))


@pytest.fixture(scope="module")
def listeners(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Listeners]:
    certs = TlsCertificates.create(tmp_path_factory.mktemp("tls"))
    plain, sasl_plain, sasl_ssl = free_port(), free_port(), free_port()
    with BrokerProcess(
            f"listeners=PLAINTEXT://{HOST}:{plain},SASL_PLAINTEXT://{HOST}:{sasl_plain},SASL_SSL://{HOST}:{sasl_ssl}",
            f"sasl.enabled.mechanisms={','.join(MECHANISMS)}",
            f"listener.name.sasl_plaintext.plain.sasl.jaas.config={_plain_jaas()}",
            f"listener.name.sasl_ssl.plain.sasl.jaas.config={_plain_jaas()}",
            *certs.broker_overrides(), port=plain) as broker:
        with BrokerConnection(HOST, plain) as admin:
            for mechanism in ScramMechanism:
                salt = secure_random_bytes()
                upsertion = ScramCredentialUpsertion(
                    name="bob", mechanism=mechanism.type_id, iterations=4096, salt=salt,
                    salted_password=mechanism.salted_password("bob-secret", salt, 4096))
                admin.request(AlterUserScramCredentialsRequest(deletions=[], upsertions=[upsertion]))
        yield Listeners(broker, certs, {"SASL_PLAINTEXT": f"{HOST}:{sasl_plain}", "SASL_SSL": f"{HOST}:{sasl_ssl}"})
        print(broker.log_text()[-6000:])


def _values(tag: str) -> list[bytes]:
    return [f"{tag}-{i:05d}-".encode().ljust(VALUE_SIZE, b"x") for i in range(RECORDS)]


# -- confluent-kafka ---------------------------------------------------------------------------
def _confluent_config(client: SaslClient) -> dict[str, object]:
    config: dict[str, object] = {"bootstrap.servers": client.bootstrap, "security.protocol": client.protocol,
                                 "sasl.mechanisms": client.mechanism, "sasl.username": client.username,
                                 "sasl.password": client.password}
    if client.protocol == "SASL_SSL":
        config["ssl.ca.location"] = client.ca
    return config


# -- kafka-python -----------------------------------------------------------------------------
def _kafka_python_config(client: SaslClient) -> dict[str, object]:
    return {"bootstrap_servers": client.bootstrap, "security_protocol": client.protocol,
            "sasl_mechanism": client.mechanism, "sasl_plain_username": client.username,
            "sasl_plain_password": client.password,
            "ssl_cafile": client.ca if client.protocol == "SASL_SSL" else None}


# -- aiokafka ---------------------------------------------------------------------------------
def _aiokafka_settings(client: SaslClient) -> dict[str, object]:
    from aiokafka.helpers import create_ssl_context

    settings: dict[str, object] = {"bootstrap_servers": client.bootstrap, "security_protocol": client.protocol,
                                   "sasl_mechanism": client.mechanism, "sasl_plain_username": client.username,
                                   "sasl_plain_password": client.password}
    if client.protocol == "SASL_SSL":
        settings["ssl_context"] = create_ssl_context(cafile=client.ca)
    return settings


# -- KafkaJS ----------------------------------------------------------------------------------
def _kafkajs_options(client: SaslClient) -> dict[str, str | int]:
    options: dict[str, str | int] = {"brokers": client.bootstrap, "mechanism": client.mechanism,
                                     "username": client.username, "password": client.password}
    if client.protocol == "SASL_SSL":
        options["ca"] = client.ca
    return options


ROUND_TRIPS: dict[str, Callable[[SaslClient, str, list[bytes]], list[bytes]]] = {
    "confluent-kafka": lambda c, t, v: confluent_round_trip(_confluent_config(c), t, v, DEADLINE_S),
    "kafka-python": lambda c, t, v: kafka_python_round_trip(_kafka_python_config(c), t, v, DEADLINE_S),
    "aiokafka": lambda c, t, v: aiokafka_round_trip(_aiokafka_settings(c), t, v, DEADLINE_S),
    "kafkajs": lambda c, t, v: kafkajs_round_trip(_kafkajs_options(c), t, v, DEADLINE_S)}


@pytest.mark.parametrize("client", list(ROUND_TRIPS))
@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_produce_and_consume_over_sasl(listeners: Listeners, client: str, protocol: str, mechanism: str) -> None:
    topic = f"sasl-{client}-{protocol}-{mechanism}".lower()
    create_topic(listeners.broker.bootstrap, topic)
    values = _values(topic)
    assert ROUND_TRIPS[client](listeners.client(protocol, mechanism), topic, values) == values


def test_kcat_over_sasl_ssl_scram(listeners: Listeners) -> None:
    topic = "sasl-kcat"
    create_topic(listeners.broker.bootstrap, topic)
    client = listeners.client("SASL_SSL", "SCRAM-SHA-256")
    options = ["-b", client.bootstrap, "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-256",
               "-X", f"sasl.username={client.username}", "-X", f"sasl.password={client.password}",
               "-X", f"ssl.ca.location={client.ca}"]
    lines = [f"kcat-{i}" for i in range(20)]
    subprocess.run(["kcat", *options, "-P", "-t", topic], input="\n".join(lines) + "\n", text=True, check=True,
                   timeout=30)
    consumed = subprocess.run(["kcat", *options, "-C", "-t", topic, "-o", "beginning", "-e", "-q"], text=True,
                              capture_output=True, check=True, timeout=30)
    assert consumed.stdout.split() == lines


@pytest.mark.parametrize(("mechanism", "username", "password"), [
    ("PLAIN", "alice", "not-alices-password"), ("PLAIN", "mallory", "mallorys-guess"),
    ("SCRAM-SHA-256", "bob", "not-bobs-password"), ("SCRAM-SHA-512", "mallory", "mallorys-other-guess")])
def test_wrong_passwords_and_unknown_users_are_refused(listeners: Listeners, mechanism: str, username: str,
                                                       password: str) -> None:
    from aiokafka.errors import KafkaError as AioKafkaError
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    for protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        client = listeners.client(protocol, mechanism, password, username)
        assert _confluent_authentication_error(client) == "_AUTHENTICATION"
        # kafka-python 3.0 drops bytes that arrive with the connection's end, so it never reads the
        # SASL_AUTHENTICATION_FAILED answer sent just before the close (as Kafka sends it) and
        # retries until its bootstrap timeout: the broker's log shows each refusal.
        refusals = _failed_authentications(listeners)
        with pytest.raises(KafkaError):
            KafkaProducer(**_kafka_python_config(client), bootstrap_timeout_ms=1000)
        assert _failed_authentications(listeners) > refusals
        refusals = _failed_authentications(listeners)
        with pytest.raises(AioKafkaError):
            asyncio.run(_aiokafka_start(client))
        assert _failed_authentications(listeners) > refusals
        [refused] = run_kafkajs("authenticate", _kafkajs_options(client))["refused"]
        assert refused["error"] == "KafkaJSSASLAuthenticationError", refused
    assert password not in listeners.broker.log_text()


def _failed_authentications(listeners: Listeners) -> int:
    return listeners.broker.log_text().count("Failed authentication with")


def _confluent_authentication_error(client: SaslClient) -> str:
    """The name of the first error librdkafka reports to a producer of ``client`` (within 10 s)."""
    from confluent_kafka import Producer

    errors: list[str] = []
    producer = Producer({**_confluent_config(client), "error_cb": lambda error: errors.append(error.name())})
    # poll() serves the error callback; it returns a count (never negative), so the errors decide.
    first_errors = wait_until(lambda: producer.poll(0.05) >= 0 and errors, 10, "librdkafka to report an error",
                              interval=0)
    return first_errors[0]


async def _aiokafka_start(client: SaslClient) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(**_aiokafka_settings(client), request_timeout_ms=3000)
    try:
        await producer.start()
    finally:
        await producer.stop()


def test_refused_clients_do_not_hold_up_the_others(listeners: Listeners) -> None:
    """Threads keep failing SCRAM over SASL_SSL (bounded in count and time) while a producer over the
    same listener sends; each of its acks=all round trips stays far below the failures' 100 ms delay."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    topic = "sasl-under-load"
    create_topic(listeners.broker.bootstrap, topic)
    bad = listeners.client("SASL_SSL", "SCRAM-SHA-256", "not-bobs-password")
    stop = threading.Event()
    attempts = [0]

    def refused_loop() -> None:
        deadline = time.monotonic() + 20
        while not stop.is_set() and attempts[0] < 200 and time.monotonic() < deadline:
            try:
                AdminClient({**_confluent_config(bad), "reconnect.backoff.ms": 10}).list_topics(timeout=0.5)
            except Exception:  # refused, as expected
                pass
            attempts[0] += 1

    threads = [threading.Thread(target=refused_loop, daemon=True) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        producer = Producer({**_confluent_config(listeners.client("SASL_SSL", "SCRAM-SHA-256")), "acks": "all"})
        latencies = []
        for i in range(50):
            started = time.monotonic()
            producer.produce(topic, value=f"v{i}".encode())
            assert producer.flush(10) == 0
            latencies.append(time.monotonic() - started)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    assert attempts[0] >= 4
    latencies.sort()
    assert latencies[len(latencies) // 2] < 0.1, latencies
