"""A consumer finds out that the log it read was truncated under it (KIP-320), with confluent-kafka.

Broker 1 leads alone and takes records broker 2 never got; a consumer reads them. Broker 1 dies,
broker 2 is elected uncleanly (``unclean.leader.election.enable``) and takes new records at the
same offsets. On the leader change the client asks the new leader OffsetForLeaderEpoch for the
epoch of the last record it consumed; the answer ends below its position, so it knows the log was
truncated. With a reset policy it goes back to the divergence point, as Kafka's clients do, and
reads the new records instead of skipping them (without the check it would fetch past the new
leader's log end and reset to the end, never reading them); with ``auto.offset.reset=error`` it
reports "Partition log truncation detected" to the application.
"""

from __future__ import annotations

import time

import pytest

from pytest_pafka.cluster import Cluster
from pytest_pafka.plugin import ClusterFactory
from tests.cluster.helpers import create_topic, isr_in_zookeeper, unique, value_of

A, B = 1, 2
WAIT_S = 60.0


@pytest.fixture
def cluster(pafka_cluster_factory: ClusterFactory) -> Cluster:
    return pafka_cluster_factory("auto.leader.rebalance.enable=false", "unclean.leader.election.enable=true",
                                 "controlled.shutdown.max.retries=1", "controlled.shutdown.retry.backoff.ms=200",
                                 brokers=2)


def _send(cluster: Cluster, topic: str, seqs: range, acks: str) -> None:
    from confluent_kafka import Producer

    errors: list[object] = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap_of(cluster.running_ids()), "acks": acks,
                         "message.timeout.ms": 30_000})
    for seq in seqs:
        producer.produce(topic, partition=0, value=value_of(seq),
                         on_delivery=lambda err, _m: errors.append(err) if err is not None else None)
    assert producer.flush(40) == 0 and not errors, errors


@pytest.mark.parametrize("reset", ["latest", "error"])
def test_a_consumer_detects_the_truncation_and_reads_the_new_records(cluster: Cluster, reset: str) -> None:
    from confluent_kafka import Consumer, TopicPartition

    topic = unique("diverged")
    create_topic(cluster, topic, 1, 2, assignment=[[A, B]])
    _send(cluster, topic, range(5), acks="all")  # on both replicas
    cluster.terminate(B)
    cluster.wait_for(lambda: isr_in_zookeeper(cluster, topic, 0) == [A], WAIT_S, "broker 2 out of the ISR")
    _send(cluster, topic, range(5, 10), acks="1")  # on broker 1 only

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": unique("g"),
                         "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 500,
                         "auto.offset.reset": reset})
    seen: list[tuple[int, bytes]] = []
    errors: list[str] = []

    def poll_until(count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(seen) < count and time.monotonic() < deadline:
            for m in consumer.consume(100, timeout=0.5):
                if m.error() is None:
                    seen.append((m.offset(), m.value()))
                else:
                    errors.append(f"{m.error().name()}: {m.error().str()}")

    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        poll_until(10, WAIT_S)
        assert [o for o, _ in seen] == list(range(10))
        # Broker 1 dies with offsets 5-9; broker 2 leads uncleanly and takes three new records there.
        cluster.kill(A)
        cluster.start(B)
        cluster.wait_until_serving([B])
        cluster.wait_for(lambda: (cluster.partition_state(topic, 0) or {}).get("leader") == B, WAIT_S,
                         "broker 2 to lead")
        _send(cluster, topic, range(100, 103), acks="1")
        poll_until(13, WAIT_S if reset != "error" else 15.0)
    finally:
        consumer.close()
    if reset == "error":
        # Told, and left where it was: nothing past the truncation is read as if it followed on.
        assert any("log truncation detected at offset 10" in e for e in errors), errors
        assert len(seen) == 10
    else:
        # Back to the divergence point, offset 5: the new leader's records are read, none skipped.
        assert seen[10:] == [(5 + i, value_of(100 + i)) for i in range(3)], (seen[10:], errors)
