"""Brokers that reach each other over TLS: ``inter.broker.listener.name=SSL`` with client certificates.

Two brokers serve PLAINTEXT (for the clients) and SSL (``ssl.client.auth=required`` through the
listener prefix, port 0: the bound port is what each registers). Every broker-to-broker connection
(the controller's LeaderAndIsr/UpdateMetadata, the follower's fetches, AlterPartition) goes to the
SSL endpoints with the broker's own key store as its client certificate, so an RF-2 topic with
``min.insync.replicas=2`` takes acks=all produces only if replication over TLS works.
"""

from __future__ import annotations

import json
from pathlib import Path

from testing.cluster import Cluster
from testing.tls import TlsCertificates
from tests.cluster.helpers import (
    consume_confluent,
    create_topic,
    isr_in_zookeeper,
    produce_confluent,
    replicas_identical,
    unique,
)

RECORDS = 2000


def test_rf2_topic_replicates_over_the_ssl_inter_broker_listener(tmp_path: Path) -> None:
    certs = TlsCertificates.create(tmp_path / "tls")
    with Cluster(2, "inter.broker.listener.name=SSL", "min.insync.replicas=2",
                 "listener.name.ssl.ssl.client.auth=required", *certs.broker_overrides(),
                 start_brokers=False) as cluster:
        for broker in cluster.brokers.values():
            broker.overrides.append(f"listeners=PLAINTEXT://{broker.host}:{broker.port},SSL://{broker.host}:0")
        cluster.start_all(cluster.broker_ids)
        for broker_id in cluster.broker_ids:
            registration = json.loads(cluster.kazoo.get(f"/brokers/ids/{broker_id}")[0])
            ssl_endpoint = next(e for e in registration["endpoints"] if e.startswith("SSL://"))
            assert not ssl_endpoint.endswith(":0"), registration  # the bound port
            assert registration["listener_security_protocol_map"]["SSL"] == "SSL"

        topic = unique("tls-replicated")
        create_topic(cluster, topic, partitions=1, replication_factor=2)
        outcome = produce_confluent(cluster.bootstrap, topic, range(RECORDS), acks="all", value_size=1000)
        assert not outcome.failed, sorted(outcome.failed.values())[:3]
        assert len(outcome.acked) == RECORDS
        assert sorted(isr_in_zookeeper(cluster, topic, 0)) == [1, 2]
        cluster.wait_for(lambda: replicas_identical(cluster, topic, 0, [1, 2]), 30.0, "both replicas' logs equal")
        assert len(consume_confluent(cluster.bootstrap, topic, 1, RECORDS)) == RECORDS
        logs = cluster.log_tails()
        assert "authentication failed" not in logs and "Traceback" not in logs, logs
