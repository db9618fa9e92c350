"""A leader cut off from ZooKeeper and the other brokers, but not from its clients
(``pytest_pafka.network_faults``), cannot acknowledge an acks=all write the new leader lacks.

Three brokers, RF 3, ``min.insync.replicas=2``. Broker 1 leads; idempotent acks=all producers run
throughout. Broker 1 is isolated: its followers cannot fetch, its AlterPartition cannot reach the
controller, its ZooKeeper session expires and the controller elects another leader at a newer
epoch. Broker 1 still believes it leads and its clients still reach it: a produce sent straight
to it is appended but never acknowledged (REQUEST_TIMED_OUT). Healed, broker 1 follows the new
leader and truncates what only it had. Every acknowledged record is in the final log exactly
once, in the order acknowledged, and all three replicas hold the same batches.
"""

from __future__ import annotations

import threading

import pytest

from client.client import KafkaClient, ProducerRecord
from client.errors import KafkaApiError
from protocol.errors import ErrorCode
from pytest_pafka.cluster import Cluster
from tests.cluster.helpers import (
    consume_confluent,
    create_topic,
    isr_in_zookeeper,
    replicas_identical,
    seq_of,
    unique,
    value_of,
)

WAIT_S = 60.0


def _produce_until(stop: threading.Event, bootstrap: str, topic: str, first_seq: int,
                   acked: dict[int, int], failed: dict[int, str]) -> None:
    """Idempotent acks=all, one record every 5 ms until ``stop``; acked: seq -> offset."""
    from confluent_kafka import Producer

    def report(err: object, msg: object) -> None:
        seq = seq_of(msg.value())  # type: ignore[attr-defined]
        if err is None:
            acked[seq] = msg.offset()  # type: ignore[attr-defined]
        else:
            failed[seq] = str(err)

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 2, "message.timeout.ms": 60_000})
    seq = first_seq
    while not stop.is_set():
        producer.produce(topic, partition=0, value=value_of(seq), on_delivery=report)
        producer.poll(0.005)
        seq += 1
    assert producer.flush(90) == 0


def test_an_isolated_leader_acknowledges_nothing_the_new_leader_lacks() -> None:
    with Cluster(3, "min.insync.replicas=2", "auto.leader.rebalance.enable=false", link_faults=True) as cluster:
        assert cluster.links is not None
        topic = unique("isolated")
        create_topic(cluster, topic, 1, 3, assignment=[[1, 2, 3]])
        acked: dict[int, int] = {}
        failed: dict[int, str] = {}
        stop = threading.Event()
        producer = threading.Thread(target=_produce_until, args=(stop, cluster.bootstrap, topic, 0, acked, failed))
        producer.start()
        try:
            cluster.wait_for(lambda: len(acked) > 100, WAIT_S, "records acknowledged before the fault")
            epoch_before = cluster.partition_state(topic, 0)["leader_epoch"]  # type: ignore[index]
            cluster.links.isolate(1)
            # Straight to broker 1, which still thinks it leads: appended, never acknowledged.
            with KafkaClient(cluster.bootstrap_of([1]), timeout=30.0) as client:
                client.refresh_metadata([topic])
                with pytest.raises(KafkaApiError) as refused:
                    client.produce(topic, 0, [ProducerRecord(b"isolated")], acks=-1, timeout_ms=3000)
            assert refused.value.error_code == ErrorCode.REQUEST_TIMED_OUT
            # The controller, hearing broker 1's session expire, elects another leader.
            cluster.wait_for(lambda: (cluster.partition_state(topic, 0) or {}).get("leader") in (2, 3), WAIT_S,
                             "a new leader")
            assert cluster.partition_state(topic, 0)["leader_epoch"] > epoch_before  # type: ignore[index]
            acked_at_election = len(acked)
            cluster.wait_for(lambda: len(acked) > acked_at_election + 100, WAIT_S, "produce on the new leader")
            cluster.links.heal()
            cluster.wait_for(lambda: sorted(isr_in_zookeeper(cluster, topic, 0)) == [1, 2, 3], WAIT_S,
                             "broker 1 back in the ISR")
        finally:
            stop.set()
            producer.join(120)
        assert not producer.is_alive()
        end = max(acked.values()) + 1
        cluster.wait_for(lambda: replicas_identical(cluster, topic, 0, [1, 2, 3]), WAIT_S, "replicas identical")
        consumed = consume_confluent(cluster.bootstrap, topic, 1, end)
        by_seq: dict[int, int] = {}
        for _, offset, value in consumed:
            seq = seq_of(value)
            assert seq not in by_seq, f"record {seq} twice"
            by_seq[seq] = offset
        assert b"isolated" not in {value for _, _, value in consumed}
        assert {seq: by_seq.get(seq) for seq in acked} == acked, "an acknowledged record was lost or moved"
        assert "Truncated" in cluster.broker(1).log_text() or "truncated to offset" in cluster.broker(1).log_text()
