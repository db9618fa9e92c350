"""The classic protocol as clients use it: assignors, static membership, join latency, concurrent rebalances."""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest

from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.waiting import wait_until
from testing.topics import create_topic
from tests.integration.group_helpers import describe_group
from tests.integration.threaded_consumer import ThreadedConsumer

PARTITIONS = 6


def settled(broker: BrokerProcess, group: str, consumers: list[ThreadedConsumer], timeout: float = 30
            ) -> dict[str, set[int]]:
    """Stable, every partition owned once, each client's callbacks agreeing with DescribeGroups."""

    def check() -> dict[str, set[int]] | None:
        state, assignment = describe_group(broker, group)
        if state != "STABLE" or set(assignment) != {c.name for c in consumers}:
            return None
        if sorted(p for ps in assignment.values() for p in ps) != list(range(PARTITIONS)):
            return None
        if any(c.owned() != assignment[c.name] for c in consumers):
            return None
        return assignment

    return wait_until(check, timeout, f"{group} to settle", interval=0.1)


pytestmark = pytest.mark.pafka_broker_config("group.initial.rebalance.delay.ms=0")



def test_lone_consumer_owns_its_partitions_within_500_ms(pafka_broker: BrokerProcess) -> None:
    """Delay 0: first on a fresh broker (__consumer_offsets is created on the way), then a new group."""
    create_topic(pafka_broker.bootstrap, "latency", PARTITIONS)
    for group in ("latency-first", "latency-second"):
        consumer = ThreadedConsumer(pafka_broker.bootstrap, group, ["latency"], group).start()
        try:
            wait_until(lambda consumer=consumer: consumer.count("assigned"), 10, "an assignment")
            took = consumer.events[0][0] - consumer.subscribed_at
            print(f"{group}: lone consumer assigned {took * 1000:.0f} ms after subscribe")
            assert consumer.owned() == set(range(PARTITIONS))
            assert took < 0.5, f"{group} assigned after {took:.3f}s"
        finally:
            consumer.stop()


@pytest.mark.parametrize("assignor", ["range", "roundrobin"])
def test_eager_assignors_split_partitions_as_the_assignor_says(pafka_broker: BrokerProcess, assignor: str) -> None:
    topic, group = f"eager-{assignor}", f"eager-{assignor}"
    create_topic(pafka_broker.bootstrap, topic, PARTITIONS)
    config = {"partition.assignment.strategy": assignor}
    consumers = [ThreadedConsumer(pafka_broker.bootstrap, group, [topic], f"c{i}", config) for i in range(2)]
    try:
        consumers[0].start()
        settled(pafka_broker, group, consumers[:1])
        consumers[1].start()
        assignment = settled(pafka_broker, group, consumers)
        shares = sorted(sorted(ps) for ps in assignment.values())
        if assignor == "range":
            assert shares == [[0, 1, 2], [3, 4, 5]]
        else:
            assert shares == [[0, 2, 4], [1, 3, 5]]
        # Eager: the first member gave everything back before getting its share.
        assert consumers[0].events[-2][1:] == ("revoked", list(range(PARTITIONS)))
    finally:
        for c in consumers:
            c.stop()


def test_cooperative_sticky_revokes_only_partitions_that_move(pafka_broker: BrokerProcess) -> None:
    topic, group = "coop", "coop-group"
    create_topic(pafka_broker.bootstrap, topic, PARTITIONS)
    config = {"partition.assignment.strategy": "cooperative-sticky"}
    consumers = [ThreadedConsumer(pafka_broker.bootstrap, group, [topic], f"c{i}", config) for i in range(3)]
    try:
        history: list[tuple[float, dict[str, set[int]]]] = []
        for i, consumer in enumerate(consumers):
            consumer.start()
            assignment = settled(pafka_broker, group, consumers[: i + 1])
            history.append((time.monotonic(), assignment))
        for (since, before), (until, after) in itertools.pairwise(history):
            for name, owned in before.items():
                consumer = next(c for c in consumers if c.name == name)
                revoked = {p for t, kind, ps in consumer.events if kind == "revoked" and since < t <= until
                           for p in ps}
                assert revoked == owned - after[name], f"{name}: revoked {revoked}, moved {owned - after[name]}"
        history_last = history[-1][1]
        assert all(len(ps) == 2 for ps in history_last.values()), history_last
        # Incremental: nobody ever revoked everything it owned to get a share back.
        assert consumers[0].count("revoked") == 2 and all(
            len(ps) < PARTITIONS for _, kind, ps in consumers[0].events if kind == "revoked")
    finally:
        for c in consumers:
            c.stop()


def test_static_member_restart_gets_its_partitions_back_without_rebalance(pafka_broker: BrokerProcess) -> None:
    topic, group = "static", "static-group"
    create_topic(pafka_broker.bootstrap, topic, PARTITIONS)
    static = {"group.instance.id": "instance-a", "session.timeout.ms": 10000}
    a = ThreadedConsumer(pafka_broker.bootstrap, group, [topic], "a", static).start()
    b = ThreadedConsumer(pafka_broker.bootstrap, group, [topic], "b", {"group.instance.id": "instance-b"}).start()
    restarted = None
    try:
        assignment = settled(pafka_broker, group, [a, b])
        b_callbacks = len(b.events)
        generations = pafka_broker.log_text().count("Stabilized group static-group")
        a.stop()  # a static member does not send LeaveGroup on close (KIP-345)
        restarted = ThreadedConsumer(pafka_broker.bootstrap, group, [topic], "a", static).start()
        wait_until(lambda: restarted.count("assigned"), 10, "the restarted member's assignment")
        assert restarted.owned() == assignment["a"]
        time.sleep(1)  # heartbeats of b: a rebalance would reach it now
        assert len(b.events) == b_callbacks and b.owned() == assignment["b"]
        assert pafka_broker.log_text().count("Stabilized group static-group") == generations
        assert settled(pafka_broker, group, [restarted, b]) == assignment
    finally:
        for c in (b, restarted):
            if c is not None:
                c.stop()


@pytest.mark.slow
def test_two_groups_in_a_chain_rebalance_concurrently_without_unknown_member(pafka_broker: BrokerProcess) -> None:
    """Group "relay" reads A and writes B; group "sink" reads B. Members of both join at once."""
    from confluent_kafka import Producer

    create_topic(pafka_broker.bootstrap, "chain-a", PARTITIONS)
    create_topic(pafka_broker.bootstrap, "chain-b", PARTITIONS)
    total = 3000
    producer = Producer({"bootstrap.servers": pafka_broker.bootstrap, "linger.ms": 5})
    for i in range(total):
        producer.produce("chain-a", str(i).encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    relay_out = Producer({"bootstrap.servers": pafka_broker.bootstrap, "linger.ms": 1})
    sunk: dict[str, int] = {}

    def relay(consumer: ThreadedConsumer, messages: list[Any]) -> None:
        for m in messages:
            relay_out.produce("chain-b", m.value(), partition=m.partition())
        relay_out.flush(10)
        consumer.consumer.commit(asynchronous=False)

    def sink(consumer: ThreadedConsumer, messages: list[Any]) -> None:
        for m in messages:
            sunk[m.value().decode()] = sunk.get(m.value().decode(), 0) + 1
        consumer.consumer.commit(asynchronous=False)

    relays = [ThreadedConsumer(pafka_broker.bootstrap, "relay", ["chain-a"], f"relay-{i}", on_batch=relay)
              for i in range(4)]
    sinks = [ThreadedConsumer(pafka_broker.bootstrap, "sink", ["chain-b"], f"sink-{i}", on_batch=sink) for i in range(4)]
    everyone = relays + sinks
    try:
        for r, s in zip(relays[:2], sinks[:2], strict=True):  # joins interleaved across both groups
            r.start()
            s.start()
        wait_until(lambda: len(sunk) >= 300, 60, "records flowing through the chain")
        for r, s in zip(relays[2:], sinks[2:], strict=True):  # both groups rebalance again, mid-stream
            r.start()
            s.start()
        settled(pafka_broker, "relay", relays, timeout=60)
        settled(pafka_broker, "sink", sinks, timeout=60)
        wait_until(lambda: len(sunk) == total, 120, f"{total} records through the chain")
        for c in everyone:
            assert not c.unknown_member_lines(), f"{c.name} was told UNKNOWN_MEMBER_ID: {c.unknown_member_lines()[:3]}"
            assert not [e for e in c.errors if "UNKNOWN_MEMBER" in e], c.errors
            assigned = [ps for _, kind, ps in c.events if kind == "assigned"]
            assert assigned and all(assigned), f"{c.name} got an empty assignment: {c.events}"
            assert len(c.owned()) in (1, 2), c.owned()
    finally:
        for c in everyone:
            c.stop()
