"""Replication (issue 17), the scenarios themselves: RF 3, min.insync.replicas=2, acks=all; replicas
with identical logs, then follower and leader failures (real SIGKILLs). Run on a PLAINTEXT cluster
(test_replication) and on a SASL_SSL one (test_sasl_ssl_cluster): every client here reaches the
brokers with the cluster's security."""

from __future__ import annotations

import itertools

import pytest

from client.client import KafkaClient, ProducerRecord
from client.errors import KafkaApiError
from protocol.errors import ErrorCode
from pytest_pafka.cluster import Cluster
from tests.cluster.helpers import (
    CATCH_UP_TIMEOUT_S,
    assert_exactly_once,
    consume_confluent,
    create_topic,
    isr_in_zookeeper,
    latest_offset,
    latest_offset_once_led,
    log_batches,
    log_end_offset,
    partition_dir,
    produce_confluent,
    unique,
    wait_replicas_identical,
)

#: A dead broker leaves the ISR when its ZooKeeper session expires (6 s in tests) or after
#: replica.lag.time.max.ms (30 s by default), whichever the controller and leader act on first.
ISR_CHANGE_TIMEOUT_S = 45.0
IDEMPOTENT = {"enable.idempotence": True}


def acks_all_replicas_hold_identical_logs(cluster: Cluster, records: int) -> None:
    """An RF-3 topic with min.insync.replicas=2 takes ``records`` idempotent acks=all writes; every
    partition's replicas hold the same contiguous batches and stay in the ISR."""
    security, tls = cluster.client_security(), cluster.confluent_security()
    topic = unique("replicated")
    partitions = 3
    create_topic(cluster, topic, partitions, 3, {"min.insync.replicas": "2"})
    outcome = produce_confluent(cluster.bootstrap, topic, range(records), extra={**IDEMPOTENT, **tls},
                                 flush_timeout=600.0)
    assert not outcome.failed, sorted(outcome.failed.items())[:5]
    assert len(outcome.acked) == records

    assignment = cluster.topic_assignment(topic)
    total = 0
    for p in range(partitions):
        end = latest_offset(cluster.bootstrap, topic, p, security)
        assert end == 1 + max((off for part, off in outcome.acked.values() if part == p), default=-1)
        total += end
        wait_replicas_identical(cluster, topic, p, assignment[p], end)
        batches = log_batches(partition_dir(cluster, assignment[p][0], topic, p))
        assert len(batches) > 1 and batches[0].base_offset == 0
        # Contiguous: each batch starts where the one before ended.
        assert all(b.base_offset == a.last_offset + 1 for a, b in itertools.pairwise(batches))
        assert sorted(isr_in_zookeeper(cluster, topic, p)) == [1, 2, 3]
    assert total == records


def _produce_is_refused_below_min_insync(cluster: Cluster, topic: str, leader: int, acked: int) -> int:
    """With only ``leader`` in sync (fewer than min.insync.replicas), acks=all produce is refused with
    NOT_ENOUGH_REPLICAS, by our client and by librdkafka, before the append. Returns the log end."""
    security, tls = cluster.client_security(), cluster.confluent_security()
    leader_bootstrap = cluster.broker(leader).bootstrap
    end_before = latest_offset(leader_bootstrap, topic, 0, security)
    assert end_before == acked
    with KafkaClient(leader_bootstrap, timeout=30.0, security=security) as client:
        client.refresh_metadata([topic])
        with pytest.raises(KafkaApiError) as refused:
            client.produce(topic, 0, [ProducerRecord(b"refused")], acks=-1)
        assert refused.value.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    outcome = produce_confluent(leader_bootstrap, topic, range(900_000, 901_000),
                                extra={"retries": 0, "message.timeout.ms": 10_000, **tls})
    assert not outcome.acked, f"{len(outcome.acked)} records acknowledged with one in-sync replica"
    assert "NOT_ENOUGH_REPLICAS" in outcome.failed_codes, outcome.failed_codes
    # Refused before the append: the leader's log did not grow.
    assert latest_offset(leader_bootstrap, topic, 0, security) == end_before
    assert log_end_offset(log_batches(partition_dir(cluster, leader, topic, 0))) == end_before
    return end_before


def follower_and_leader_failures(cluster: Cluster) -> None:
    """SIGKILLs on an RF-3 topic with min.insync.replicas=2: one follower (the ISR shrinks, produce goes
    on), the second (NOT_ENOUGH_REPLICAS, nothing appended), both back (they catch up and rejoin the
    ISR), the leader (a new one from the ISR serves every acknowledged record). Every broker runs again
    at the end."""
    security, tls = cluster.client_security(), cluster.confluent_security()
    topic = unique("failures")
    create_topic(cluster, topic, 1, 3, {"min.insync.replicas": "2"})
    state = cluster.partition_state(topic, 0)
    assert state is not None
    leader = state["leader"]
    follower1, follower2 = [b for b in cluster.topic_assignment(topic)[0] if b != leader]
    acked: set[int] = set()

    def produce(seqs: range, **extra: object) -> None:
        outcome = produce_confluent(cluster.bootstrap, topic, seqs, extra={**IDEMPOTENT, **tls, **extra})
        assert not outcome.failed, sorted(outcome.failed.items())[:5]
        acked.update(outcome.acked)

    try:
        produce(range(20_000))

        # One follower dies: the ISR shrinks to two, and acks=all produce goes on.
        cluster.kill(follower1)
        cluster.wait_for(lambda: sorted(isr_in_zookeeper(cluster, topic, 0)) == sorted([leader, follower2]),
                         ISR_CHANGE_TIMEOUT_S, f"ISR shrunk to {[leader, follower2]}")
        produce(range(20_000, 40_000))

        # A second one dies: only the leader is in sync, fewer than min.insync.replicas.
        cluster.kill(follower2)
        cluster.wait_for(lambda: isr_in_zookeeper(cluster, topic, 0) == [leader], ISR_CHANGE_TIMEOUT_S,
                         f"ISR shrunk to [{leader}]")
        end_before = _produce_is_refused_below_min_insync(cluster, topic, leader, len(acked))

        # Both come back: they catch up and rejoin the ISR, with logs identical to the leader's.
        cluster.start(follower1)
        cluster.start(follower2)
        cluster.wait_for(lambda: sorted(isr_in_zookeeper(cluster, topic, 0)) == [1, 2, 3], CATCH_UP_TIMEOUT_S,
                         "both followers back in the ISR")
        wait_replicas_identical(cluster, topic, 0, [leader, follower1, follower2], end_before)
        produce(range(40_000, 50_000))

        # The leader dies: a new leader from the ISR, and every acknowledged record is still there.
        isr_before = isr_in_zookeeper(cluster, topic, 0)
        epoch_before = cluster.partition_state(topic, 0)["leader_epoch"]  # type: ignore[index]
        cluster.kill(leader)

        def new_leader() -> int | None:
            s = cluster.partition_state(topic, 0)
            return s["leader"] if s is not None and s["leader"] not in (leader, -1) else None

        elected = cluster.wait_for(new_leader, ISR_CHANGE_TIMEOUT_S, "a new leader")
        assert elected in isr_before
        assert cluster.partition_state(topic, 0)["leader_epoch"] > epoch_before  # type: ignore[index]
        survivors = cluster.bootstrap_of([follower1, follower2])
        assert len(acked) == 50_000
        # A new leader's high watermark moves up to its log end once the other in-sync replica
        # fetches (as in Kafka); every acknowledged record is in both logs already.
        cluster.wait_for(lambda: latest_offset_once_led(survivors, topic, 0, security) == len(acked), 30.0,
                         "the new leader's high watermark at every acknowledged record", interval=0.2)
        assert_exactly_once(consume_confluent(survivors, topic, 1, len(acked), extra=tls), acked)
    finally:
        for broker_id in (leader, follower1, follower2):
            if not cluster.broker(broker_id).running:
                cluster.start(broker_id, wait_registered=False)
        cluster.wait_until_registered(cluster.broker_ids, timeout=60.0)
    # The old leader rejoins as a follower and catches up.
    cluster.wait_for(lambda: sorted(isr_in_zookeeper(cluster, topic, 0)) == [1, 2, 3], CATCH_UP_TIMEOUT_S,
                     "the old leader back in the ISR")
