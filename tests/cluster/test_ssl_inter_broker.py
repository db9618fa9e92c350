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

from pytest_pafka.cluster import Cluster
from pytest_pafka.tls import TlsCertificates
from tests.cluster.helpers import assert_replicates_two_ways

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

        assert_replicates_two_ways(cluster, "tls-replicated", RECORDS)
        logs = cluster.log_tails()
        assert "authentication failed" not in logs and "Traceback" not in logs, logs
