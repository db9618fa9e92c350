"""KIP-392 with real clients on a three-rack pafka cluster (broker.rack=RACK1..3, Kafka's
RackAwareReplicaSelector): librdkafka's own test 0101, and confluent-kafka consumers with
``client.rack`` that must fetch only from their rack's replica (checked from each broker's
``kafka_server_brokertopicmetrics_bytesout_total`` for the topic), read every record exactly
once, survive that replica's SIGKILL and return, and read committed transactions alone; the group
assignors, classic (KIP-881, in the client) and the consumer protocol's, give members their rack's partitions."""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from pytest_pafka.cluster import Cluster
from pytest_pafka.plugin import ClusterFactory
from pytest_pafka.waiting import wait_until
from tests.cluster.helpers import produce_confluent, seq_of, unique, value_of

#: librdkafka's checkout, built (its src/ and src-cpp/ libraries); the test-runner may come from
#: another tests/ dir (LIBRDKAFKA_TESTS): 0101 needs one built with RapidJSON, for its statistics.
LIBRDKAFKA = Path(os.environ.get("LIBRDKAFKA", "/work/librdkafka"))
LIBRDKAFKA_TESTS = Path(os.environ.get("LIBRDKAFKA_TESTS", str(LIBRDKAFKA / "tests")))
SELECTOR = "replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector"
RACKS = {broker_id: [f"broker.rack=RACK{broker_id}"] for broker_id in (1, 2, 3)}
OVERRIDES = (SELECTOR, "default.replication.factor=3", "num.partitions=1", "offsets.topic.replication.factor=3",
             "transaction.state.log.replication.factor=3", "transaction.state.log.min.isr=2")


def _rack_cluster(factory: ClusterFactory) -> Cluster:
    cluster = factory(*OVERRIDES, broker_overrides=RACKS)
    cluster.wait_until_serving(cluster.broker_ids)
    return cluster


def _bytes_out(cluster: Cluster, broker_id: int, topic: str) -> float:
    """The consumer bytes broker ``broker_id`` sent of ``topic`` (0 when it is down)."""
    try:
        with urllib.request.urlopen(cluster.broker(broker_id).metrics_url, timeout=5) as answer:
            text = answer.read().decode()
    except OSError:
        return 0.0
    match = re.search(rf'^kafka_server_brokertopicmetrics_bytesout_total\{{topic="{re.escape(topic)}"\}} (\S+)$',
                      text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def _all_bytes_out(cluster: Cluster, topic: str) -> dict[int, float]:
    return {b: _bytes_out(cluster, b, topic) for b in cluster.broker_ids}


def _create_topic(cluster: Cluster, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(cluster.client_config())
    admin.create_topics([NewTopic(topic, partitions, 3)])[topic].result(30)
    wait_until(lambda: all(len((cluster.partition_state(topic, p) or {}).get("isr", [])) == 3
                           for p in range(partitions)), 30, "every replica in sync")


def _leader(cluster: Cluster, topic: str, partition: int) -> int:
    return int((cluster.partition_state(topic, partition) or {})["leader"])


def _consume(cluster: Cluster, topic: str, partitions: int, expected: int, rack: str,
             extra: dict[str, object] | None = None, timeout: float = 90.0) -> tuple[list[int], list[str]]:
    """Every record's seq from the beginning with ``client.rack``; the errors seen."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({**cluster.client_config(), "group.id": unique("rack"), "enable.auto.commit": False,
                         "client.rack": rack, **(extra or {})})
    seqs: list[int] = []
    errors: list[str] = []
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while len(seqs) < expected and time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=0.5):
                if message.error() is None:
                    seqs.append(seq_of(message.value()))
                else:
                    errors.append(f"{message.error().name()} retriable={message.error().retriable()}")
        # A duplicate past ``expected`` shows here.
        seqs.extend(seq_of(m.value()) for m in consumer.consume(1000, timeout=1.0) if m.error() is None)
    finally:
        consumer.close()
    return seqs, errors


def test_librdkafka_0101_fetches_from_the_rack_local_follower(pafka_cluster_factory: ClusterFactory,
                                                              tmp_path: Path) -> None:
    runner = LIBRDKAFKA_TESTS / "test-runner"
    if not runner.exists():
        pytest.skip(f"librdkafka's test-runner is not built at {runner}")
    cluster = _rack_cluster(pafka_cluster_factory)
    conf = tmp_path / "test.conf"
    conf.write_text(f"metadata.broker.list={cluster.bootstrap}\nbroker.address.family=v4\n"
                    "test.timeout.multiplier=2\n")
    libraries = [str(LIBRDKAFKA / "src"), str(LIBRDKAFKA / "src-cpp"), os.environ.get("LD_LIBRARY_PATH", "")]
    env = {**os.environ, "LD_LIBRARY_PATH": ":".join(p for p in libraries if p), "RDKAFKA_TEST_CONF": str(conf),
           "TEST_KAFKA_VERSION": "4.0.0", "TESTS": "0101", "TEST_REPORT": str(tmp_path / "report.json")}
    done = subprocess.run([str(runner), "-L", "-p1"], cwd=runner.parent, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    output = done.stdout + done.stderr
    output = re.sub(r"\x1b\[[0-9;]*m", "", output)
    print(output[-6000:])
    if "RapidJSON >=1.1.0 not available" in output:
        pytest.skip(f"{runner} was built without RapidJSON: 0101 skips itself")
    assert done.returncode == 0, output[-3000:]
    assert re.search(r"0101_fetch_from_follower\s*\|\s*PASSED", output), output[-3000:]
    # "rxbytes for replica on broker N: B (preferred replica)": the follower in the client's rack
    # served the records, the others (the leader among them) almost nothing.
    found = re.findall(r"rxbytes for replica on broker (\d+): (\d+)(?: \(leader\))?( \(preferred replica\))?", output)
    rxbytes = {int(broker): (int(count), bool(mark)) for broker, count, mark in found}
    preferred = [n for n, is_preferred in rxbytes.values() if is_preferred]
    others = [n for n, is_preferred in rxbytes.values() if not is_preferred]
    assert len(preferred) == 1 and len(others) == 2 and preferred[0] > 1000 * 100, rxbytes
    assert all(n < preferred[0] / 10 for n in others), rxbytes


def test_consumers_fetch_only_from_their_rack(pafka_cluster_factory: ClusterFactory) -> None:
    cluster = _rack_cluster(pafka_cluster_factory)
    topic, partitions, count = unique("racks"), 3, 3000
    _create_topic(cluster, topic, partitions)
    outcome = produce_confluent(cluster.bootstrap, topic, range(count))
    assert not outcome.failed
    for broker_id in cluster.broker_ids:
        _read_from_rack_only(cluster, topic, partitions, count, broker_id)


def _read_from_rack_only(cluster: Cluster, topic: str, partitions: int, count: int, broker_id: int) -> None:
    """A consumer in ``broker_id``'s rack reads every record once, all of them sent by that broker
    (librdkafka's first fetch of a partition goes to its leader, which answers with no records)."""
    before = _all_bytes_out(cluster, topic)
    seqs, errors = _consume(cluster, topic, partitions, count, f"RACK{broker_id}")
    assert sorted(seqs) == list(range(count)) and not errors
    after = wait_until(lambda: _all_bytes_out(cluster, topic), 10, "the rack's replica's bytes counted",
                       until=lambda now: now[broker_id] - before[broker_id] >= count * 100)
    sent = {b: after[b] - before[b] for b in cluster.broker_ids}
    assert all(sent[b] == 0 for b in cluster.broker_ids if b != broker_id), sent


def test_reading_goes_on_when_the_rack_replica_dies_and_returns(pafka_cluster_factory: ClusterFactory) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    cluster = _rack_cluster(pafka_cluster_factory)
    topic = unique("rack-kill")
    _create_topic(cluster, topic, 1)
    rack_broker = next(b for b in cluster.broker_ids if b != _leader(cluster, topic, 0))
    count = 6000
    producing = threading.Thread(target=_produce_slowly, args=(cluster, topic, count))
    consumer = Consumer({**cluster.client_config(), "group.id": unique("rack"), "enable.auto.commit": False,
                         "client.rack": f"RACK{rack_broker}"})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    seqs: list[int] = []
    errors: list[tuple[str, bool]] = []

    def read_for(seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and len(seqs) < count:
            for message in consumer.consume(1000, timeout=0.2):
                if message.error() is None:
                    seqs.append(seq_of(message.value()))
                else:
                    errors.append((message.error().name(), message.error().retriable()))

    try:
        producing.start()
        read_for(4)
        served_before = _bytes_out(cluster, rack_broker, topic)
        assert served_before > 0
        cluster.kill(rack_broker)
        read_for(8)
        cluster.start(rack_broker)
        read_for(8)
        producing.join(120)
        deadline = time.monotonic() + 90
        while len(seqs) < count and time.monotonic() < deadline:
            read_for(1)
        read_for(1.5)
    finally:
        consumer.close()
    assert sorted(seqs) == list(range(count)), (len(seqs), len(set(seqs)))
    assert all(retriable or name.startswith("_") for name, retriable in errors), errors


def _produce_slowly(cluster: Cluster, topic: str, count: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({**cluster.client_config(), "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    for seq in range(count):
        producer.produce(topic, value=value_of(seq))
        producer.poll(0)
        if seq % 200 == 199:
            time.sleep(0.1)
    assert producer.flush(90) == 0


def test_read_committed_from_a_follower(pafka_cluster_factory: ClusterFactory) -> None:
    from confluent_kafka import Producer

    cluster = _rack_cluster(pafka_cluster_factory)
    topic = unique("rack-txn")
    _create_topic(cluster, topic, 1)
    rack_broker = next(b for b in cluster.broker_ids if b != _leader(cluster, topic, 0))
    producer = Producer({**cluster.client_config(), "transactional.id": unique("txn")})
    producer.init_transactions(30)
    committed: list[int] = []
    for round_ in range(10):
        producer.begin_transaction()
        seqs = range(round_ * 100, round_ * 100 + 100)
        for seq in seqs:
            producer.produce(topic, value=value_of(seq))
        if round_ % 3 == 1:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
            committed.extend(seqs)
    producer.begin_transaction()  # left open: the LSO stays below these
    for seq in range(5000, 5100):
        producer.produce(topic, value=value_of(seq))
    producer.flush(30)
    before = _all_bytes_out(cluster, topic)
    seqs, errors = _consume(cluster, topic, 1, len(committed), f"RACK{rack_broker}",
                            {"isolation.level": "read_committed"}, timeout=60)
    producer.abort_transaction(30)
    assert sorted(seqs) == committed and not errors
    after = _all_bytes_out(cluster, topic)
    assert after[rack_broker] > before[rack_broker]
    assert all(after[b] == before[b] for b in cluster.broker_ids if b != rack_broker), (before, after)


#: (group.protocol, assignor): librdkafka's rack-aware classic assignors (KIP-881: racks in the
#: subscription, partition racks from Metadata) and the consumer protocol's server-side ones.
RACK_ASSIGNORS = (("classic", "range"), ("classic", "cooperative-sticky"), ("consumer", "range"),
                  ("consumer", "uniform"))


def test_group_assignors_give_each_member_its_racks_partitions(pafka_cluster_factory: ClusterFactory) -> None:
    """Six partitions of one replica each, two per rack, and a member in each rack: every assignor
    gives each member exactly the two partitions whose replica is in its rack."""
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = _rack_cluster(pafka_cluster_factory)
    topic = unique("rack-assign")
    placement = [[broker_id] for broker_id in (1, 2, 3, 1, 2, 3)]
    admin = AdminClient(cluster.client_config())
    admin.create_topics([NewTopic(topic, len(placement), replica_assignment=placement)])[topic].result(30)
    expected = {f"RACK{b}": {p for p, replicas in enumerate(placement) if replicas == [b]} for b in cluster.broker_ids}
    for protocol, assignor in RACK_ASSIGNORS:
        assert _rack_assignments(cluster, topic, protocol, assignor) == expected, (protocol, assignor)


def _rack_assignments(cluster: Cluster, topic: str, protocol: str, assignor: str) -> dict[str, set[int]]:
    """The partitions each member of a fresh group (one member per rack) holds once the group is stable."""
    from confluent_kafka import Consumer

    setting = ({"partition.assignment.strategy": assignor} if protocol == "classic"
               else {"group.remote.assignor": assignor})
    group = unique(f"rack-{protocol}-{assignor}")
    consumers = {f"RACK{b}": Consumer({**cluster.client_config(), "group.id": group, "group.protocol": protocol,
                                       "client.rack": f"RACK{b}", **setting}) for b in cluster.broker_ids}
    try:
        for consumer in consumers.values():
            consumer.subscribe([topic])

        def held() -> dict[str, set[int]]:
            for consumer in consumers.values():
                consumer.poll(0.2)
            return {rack: {tp.partition for tp in c.assignment()} for rack, c in consumers.items()}

        return wait_until(held, 60, f"{protocol}/{assignor}: all six partitions held, two per member",
                          until=lambda now: sorted(p for ps in now.values() for p in ps) == list(range(6))
                          and all(len(ps) == 2 for ps in now.values()))
    finally:
        for consumer in consumers.values():
            consumer.close()
