"""Brokers that reach each other over SASL: ``inter.broker.listener.name=SASL_PLAINTEXT`` with SCRAM.

As Kafka's docs set it up: the brokers' own SCRAM credential is written to ZooKeeper
(``/config/users/broker``, as ``kafka-configs --zookeeper`` writes it) before they start, and each
broker authenticates to the others with the ``username``/``password`` of its listener's
ScramLoginModule entry (``sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256``). An RF-2 topic with
``min.insync.replicas=2`` takes acks=all produces only if every inter-broker connection (the
controller's requests, the follower's fetches, AlterPartition) authenticates. A credential altered
through one broker then lets a client in at the other: the change notification reached it.
"""

from __future__ import annotations

import json
from pathlib import Path

from client.connection import BrokerConnection
from client.errors import KafkaClientError
from client.sasl import SaslSettings
from client.scram import ScramCredential, ScramMechanism, secure_random_bytes
from protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    ScramCredentialUpsertion,
)
from pytest_pafka.cluster import Cluster
from pytest_pafka.waiting import wait_until
from tests.cluster.helpers import assert_replicates_two_ways, registered_endpoint

RECORDS = 1000
JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
        'password="broker-secret";')


def _connects(endpoint: tuple[str, int], settings: SaslSettings) -> bool:
    try:
        with BrokerConnection(*endpoint, sasl=settings, timeout=5):
            return True
    except KafkaClientError:
        return False


def test_rf2_topic_replicates_over_a_sasl_scram_inter_broker_listener(tmp_path: Path) -> None:
    with Cluster(2, "inter.broker.listener.name=SASL_PLAINTEXT", "min.insync.replicas=2",
                 "sasl.enabled.mechanisms=SCRAM-SHA-256", "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256",
                 f"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config={JAAS}",
                 start_brokers=False) as cluster:
        credential = ScramCredential.generate(ScramMechanism.SCRAM_SHA_256, "broker-secret", 4096)
        config = {"version": 1, "config": {"SCRAM-SHA-256": credential.to_config_string()}}
        cluster.kazoo.create("/config/users/broker", json.dumps(config).encode(), makepath=True)
        for broker in cluster.brokers.values():
            broker.overrides.append(f"listeners=PLAINTEXT://{broker.host}:{broker.port},"
                                    f"SASL_PLAINTEXT://{broker.host}:0")
        cluster.start_all(cluster.broker_ids)

        assert_replicates_two_ways(cluster, "sasl-replicated", RECORDS)
        logs = cluster.log_tails()
        assert "during SASL" not in logs and "Failed authentication" not in logs, logs  # every broker got in

        # A user created through broker 1 lands in ZooKeeper and authenticates at broker 2.
        mechanism = ScramMechanism.SCRAM_SHA_256
        salt = secure_random_bytes()
        upsertion = ScramCredentialUpsertion(name="alice@example.com", mechanism=mechanism.type_id, iterations=8192,
                                             salt=salt, salted_password=mechanism.salted_password("alice-1", salt, 8192))
        with BrokerConnection(cluster.broker(1).host, cluster.broker(1).port) as admin:
            admin.request(AlterUserScramCredentialsRequest(deletions=[], upsertions=[upsertion]))
        stored = json.loads(cluster.kazoo.get("/config/users/alice%40example.com")[0])
        assert stored["config"]["SCRAM-SHA-256"].endswith(",iterations=8192")
        changes = cluster.kazoo.get_children("/config/changes")
        notes = [json.loads(cluster.kazoo.get(f"/config/changes/{c}")[0]) for c in changes]
        assert {"version": 2, "entity_path": "users/alice%40example.com"} in notes
        other = registered_endpoint(cluster, 2)
        wait_until(lambda: _connects(other, SaslSettings("SCRAM-SHA-256", "alice@example.com", "alice-1")), 5,
                   "broker 2 never learned alice's credential", interval=0.1)
        # (alice's tries before broker 2 heard of her failed, and are logged: not checked here)
        logs = cluster.log_tails()
        assert "broker-secret" not in logs and "alice-1" not in logs and "Traceback" not in logs, logs
