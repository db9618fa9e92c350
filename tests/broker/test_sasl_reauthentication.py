"""Re-authentication (KIP-368) on a real broker: ``connections.max.reauth.ms``.

A client authenticating with SaslAuthenticate v1+ is told its session's
lifetime; re-authenticating on the same connection (same mechanism, same
principal) extends it; a session past its end is closed on its next request;
a client changing principal or mechanism is refused; and librdkafka, which
implements KIP-368, keeps producing and consuming across many re-authentications.
"""

from __future__ import annotations

import time

import pytest

from client.connection import BrokerConnection
from client.errors import KafkaClientError
from client.sasl import SaslClientError, SaslSettings
from client.scram import ScramMechanism
from protocol.messages.metadata import MetadataRequest
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.plugin import BrokerFactory
from pytest_pafka.ports import free_port
from tests.broker.test_sasl_listeners import PLAIN_JAAS, _upsert

HOST = "127.0.0.1"
LIFETIME_MS = 1500


@pytest.fixture(scope="module")
def broker(pafka_module_broker_factory: BrokerFactory) -> tuple[BrokerProcess, int]:
    plain, sasl = free_port(), free_port()
    process = pafka_module_broker_factory(f"listeners=PLAINTEXT://{HOST}:{plain},SASL_PLAINTEXT://{HOST}:{sasl}",
                                          "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256",
                                          f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}",
                                          f"connections.max.reauth.ms={LIFETIME_MS}",
                                          # PLAIN's sessions on this listener never end: the per-mechanism form wins.
                                          "listener.name.sasl_plaintext.plain.connections.max.reauth.ms=0",
                                          "connection.failed.authentication.delay.ms=10", port=plain)
    with BrokerConnection(HOST, plain) as admin:
        assert _upsert(admin, "bob", ScramMechanism.SCRAM_SHA_256, "bob-secret").results[0].error_code == 0
        assert _upsert(admin, "carol", ScramMechanism.SCRAM_SHA_256, "carol-secret").results[0].error_code == 0
    return process, sasl


def _metadata(connection: BrokerConnection) -> None:
    connection.request(MetadataRequest(topics=[]), version=9)


def test_a_session_ends_after_its_lifetime_unless_renewed(broker: tuple[BrokerProcess, int]) -> None:
    process, port = broker
    bob = SaslSettings("SCRAM-SHA-256", "bob", "bob-secret")
    with BrokerConnection(HOST, port, sasl=bob) as renewed, BrokerConnection(HOST, port, sasl=bob) as left:
        assert renewed.session_lifetime_ms == left.session_lifetime_ms == LIFETIME_MS
        time.sleep(LIFETIME_MS / 2000)
        renewed.reauthenticate()
        assert renewed.session_lifetime_ms == LIFETIME_MS
        time.sleep(LIFETIME_MS * 0.7 / 1000)  # past the first session's end, within the renewed one's
        _metadata(renewed)
        with pytest.raises((KafkaClientError, OSError)):
            _metadata(left)
    assert "SASL session expired without re-authentication" in process.log_text()


def test_plain_sessions_follow_the_per_mechanism_setting(broker: tuple[BrokerProcess, int]) -> None:
    _, port = broker
    with BrokerConnection(HOST, port, sasl=SaslSettings("PLAIN", "alice", "alice-secret")) as alice:
        assert alice.session_lifetime_ms == 0
        time.sleep(LIFETIME_MS / 1000 + 0.3)
        _metadata(alice)  # never expires


def test_re_authentication_may_not_change_principal_or_mechanism(broker: tuple[BrokerProcess, int]) -> None:
    _, port = broker
    with BrokerConnection(HOST, port, sasl=SaslSettings("SCRAM-SHA-256", "bob", "bob-secret")) as connection:
        connection.sasl = SaslSettings("SCRAM-SHA-256", "carol", "carol-secret")
        with pytest.raises(SaslClientError, match="Cannot change principals during re-authentication"):
            connection.reauthenticate()
    with BrokerConnection(HOST, port, sasl=SaslSettings("SCRAM-SHA-256", "bob", "bob-secret")) as connection:
        connection.sasl = SaslSettings("PLAIN", "alice", "alice-secret")
        with pytest.raises(SaslClientError, match="ILLEGAL_SASL_STATE"):
            connection.reauthenticate()


def test_librdkafka_keeps_working_across_re_authentications(broker: tuple[BrokerProcess, int]) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    process, port = broker
    config = {"bootstrap.servers": f"{HOST}:{port}", "security.protocol": "SASL_PLAINTEXT",
              "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": "bob", "sasl.password": "bob-secret"}
    topic = "reauth"
    admin = AdminClient(config)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    errors: list[str] = []
    producer = Producer({**config, "linger.ms": 5})
    consumer = Consumer({**config, "group.id": "reauth-g", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    sent, read = 0, 0
    expired_before = process.log_text().count("SASL session expired")
    try:
        deadline = time.monotonic() + 4 * LIFETIME_MS / 1000  # four session lifetimes
        while time.monotonic() < deadline:
            producer.produce(topic, value=str(sent).encode(), on_delivery=lambda e, _m: e and errors.append(str(e)))
            sent += 1
            producer.poll(0)
            read += sum(1 for m in consumer.consume(100, 0.01) if m.error() is None)
        assert producer.flush(30) == 0
        end = time.monotonic() + 30
        while read < sent and time.monotonic() < end:
            read += sum(1 for m in consumer.consume(1000, 0.2) if m.error() is None)
    finally:
        consumer.close()
    assert not errors and read == sent, (errors[:3], read, sent)
    # Neither client's session was left to expire: each re-authenticated in time.
    assert process.log_text().count("SASL session expired") == expired_before
