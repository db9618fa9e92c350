"""What the cluster tests share: topics through a real admin client, per-broker metadata, produce and
consume with confluent-kafka, the batches of a replica's log read from its files, and coordinators.

Every client here reaches the brokers with the cluster's security (``Cluster(security=...)``): the
admin client and pafka's own clients take it from the cluster and its brokers, the confluent-kafka
helpers that take a bootstrap take it in ``extra`` (``cluster.confluent_security()``)."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from client.client import KafkaClient
from client.client_security import ClientSecurity
from client.connection import BrokerConnection
from client.errors import KafkaApiError, KafkaClientError, KafkaConnectionError
from client.metadata import ClusterMetadata, TopicPartition
from protocol.errors import ErrorCode
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.record_batch import LOG_OVERHEAD, parse_batch_header, peek_offset_and_length
from protocol.request_constants import LATEST_TIMESTAMP
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.cluster import Cluster

#: Every wait in these tests is bounded.
TOPIC_READY_TIMEOUT_S = 60.0
CONSUME_TIMEOUT_S = 120.0
#: Replicas catching up after a restart, coordinators moving after a broker's session expired.
CATCH_UP_TIMEOUT_S = 120.0
COORDINATOR_TIMEOUT_S = 90.0


def registered_endpoint(cluster: Cluster, broker_id: int, protocol: str = "SASL_PLAINTEXT") -> tuple[str, int]:
    """(host, port) of the broker's ``protocol`` endpoint, as its /brokers/ids/N registration names it."""
    registration = json.loads(cluster.kazoo.get(f"/brokers/ids/{broker_id}")[0])
    endpoint = next(e for e in registration["endpoints"] if e.startswith(f"{protocol}://"))
    host, port = endpoint.removeprefix(f"{protocol}://").rsplit(":", 1)
    return host, int(port)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def kafka_uuid(text: str) -> uuid.UUID:
    """A topic id as Kafka prints it (URL-safe base64 of the 16 bytes, no padding)."""
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    assert len(raw) == 16, text
    return uuid.UUID(bytes=raw)


def create_topic(cluster: Cluster, name: str, partitions: int, replication_factor: int,
                 configs: Mapping[str, str] | None = None, bootstrap: str | None = None,
                 assignment: list[list[int]] | None = None) -> None:
    """CreateTopics through confluent-kafka's AdminClient, then wait until every partition has a live
    leader. ``assignment``: each partition's replicas, the first preferred (``partitions`` and
    ``replication_factor`` must then match it)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(cluster.client_config(bootstrap))
    if assignment is not None:
        assert len(assignment) == partitions and all(len(r) == replication_factor for r in assignment)
        topic = NewTopic(name, num_partitions=partitions, replica_assignment=assignment, config=dict(configs or {}))
    else:
        topic = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor,
                         config=dict(configs or {}))
    admin.create_topics([topic], operation_timeout=30)[name].result(timeout=TOPIC_READY_TIMEOUT_S)
    cluster.wait_for_topic(name, partitions, TOPIC_READY_TIMEOUT_S)
    # ZooKeeper holds the leaders before the controller's UpdateMetadata reaches every broker (as in
    # Kafka, only the broker that took CreateTopics waits for its own cache): wait for all of them.
    live = cluster.registered_ids() - set(cluster.paused_ids)
    for broker_id in sorted(live):
        broker = cluster.broker(broker_id)
        if broker.running:
            cluster.wait_for(lambda b=broker: _knows_topic(b, name, partitions), TOPIC_READY_TIMEOUT_S,
                             f"broker {broker_id}'s metadata: {name} with {partitions} led partitions")


def _knows_topic(broker: BrokerProcess, topic: str, partitions: int) -> bool:
    try:
        found = broker_metadata(broker, [topic]).topics.get(topic)
    except (KafkaClientError, OSError):
        return False
    return (found is not None and len(found.partitions) == partitions
            and all(p.leader >= 0 for p in found.partitions.values()))


def broker_metadata(broker: BrokerProcess, topics: Iterable[str] | None) -> ClusterMetadata:
    """Metadata as ``broker`` alone answers it (it is the only bootstrap server)."""
    with KafkaClient(broker.bootstrap, timeout=10.0, security=broker.client_security()) as client:
        return client.refresh_metadata(list(topics) if topics is not None else None)


def leaders_seen_by(broker: BrokerProcess, topic: str) -> dict[int, int]:
    metadata = broker_metadata(broker, [topic])
    return {p: m.leader for p, m in metadata.topics[topic].partitions.items()}


def leaders_in_zookeeper(cluster: Cluster, topic: str, partitions: int) -> dict[int, int]:
    states = {p: cluster.partition_state(topic, p) for p in range(partitions)}
    return {p: (s["leader"] if s is not None else -1) for p, s in states.items()}


def isr_in_zookeeper(cluster: Cluster, topic: str, partition: int) -> list[int]:
    state = cluster.partition_state(topic, partition)
    return list(state["isr"]) if state is not None else []


# -- records -----------------------------------------------------------------------------

def value_of(seq: int, size: int = 100) -> bytes:
    """A ``size``-byte value that starts with its sequence number."""
    head = b"%010d:" % seq
    return head + b"x" * (size - len(head))


def seq_of(value: bytes) -> int:
    return int(value[:10])


@dataclass
class ProduceOutcome:
    #: seq -> (partition, offset) of every acknowledged record
    acked: dict[int, tuple[int, int]]
    #: seq -> error text of every record whose delivery failed
    failed: dict[int, str]
    #: error codes (librdkafka names) of the failed deliveries
    failed_codes: set[str]


def produce_confluent(bootstrap: str, topic: str, seqs: Iterable[int], *, acks: str = "all",
                      extra: Mapping[str, object] | None = None, flush_timeout: float = 180.0,
                      value_size: int = 100, partition: int | None = None) -> ProduceOutcome:
    """Produce one record per seq with confluent-kafka; every delivery report collected."""
    from confluent_kafka import KafkaError, Producer

    outcome = ProduceOutcome({}, {}, set())

    def on_delivery(err: KafkaError | None, msg: object) -> None:
        seq = seq_of(msg.value())  # type: ignore[attr-defined]
        if err is None:
            outcome.acked[seq] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]
        else:
            outcome.failed[seq] = str(err)
            outcome.failed_codes.add(err.name())

    config: dict[str, object] = {"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                                 "queue.buffering.max.messages": 1_000_000, "batch.num.messages": 10_000}
    config.update(extra or {})
    producer = Producer(config)
    for seq in seqs:
        while True:
            try:
                if partition is None:
                    producer.produce(topic, key=b"%d" % seq, value=value_of(seq, value_size), on_delivery=on_delivery)
                else:
                    producer.produce(topic, partition=partition, key=b"%d" % seq, value=value_of(seq, value_size),
                                     on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    remaining = producer.flush(flush_timeout)
    assert remaining == 0, f"{remaining} records neither delivered nor failed after {flush_timeout}s"
    return outcome


def consume_confluent(bootstrap: str, topic: str, partitions: int, expected: int,
                      timeout: float = CONSUME_TIMEOUT_S,
                      extra: Mapping[str, object] | None = None) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record from the beginning, until ``expected`` arrived or ``timeout``."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer
    from confluent_kafka import TopicPartition as ConfluentPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("unused"), "enable.auto.commit": False,
                         "fetch.max.bytes": 50 * 1024 * 1024, **(extra or {})})
    out: list[tuple[int, int, bytes]] = []
    try:
        consumer.assign([ConfluentPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            out.extend((m.partition(), m.offset(), m.value()) for m in consumer.consume(10_000, timeout=1.0)
                       if m.error() is None)
        # A short grace: anything past ``expected`` (a duplicate) must show up too.
        out.extend((m.partition(), m.offset(), m.value()) for m in consumer.consume(10_000, timeout=0.5)
                   if m.error() is None)
    finally:
        consumer.close()
    return out


def assert_exactly_once(consumed: Iterable[tuple[int, int, bytes]], wanted: Iterable[int]) -> None:
    seen: dict[int, tuple[int, int]] = {}
    for partition, offset, value in consumed:
        seq = seq_of(value)
        assert seq not in seen, f"record {seq} consumed twice: {seen[seq]} and {(partition, offset)}"
        seen[seq] = (partition, offset)
    wanted_set = set(wanted)
    missing = wanted_set - set(seen)
    extra = set(seen) - wanted_set
    assert not missing, f"{len(missing)} records never consumed, first {sorted(missing)[:10]}"
    assert not extra, f"{len(extra)} records consumed that were not expected, first {sorted(extra)[:10]}"


# -- replica logs on disk ---------------------------------------------------------------------

@dataclass(frozen=True)
class BatchOnDisk:
    base_offset: int
    last_offset: int
    crc: int
    #: The partition leader epoch the batch was written in.
    epoch: int = -1


def partition_dir(cluster: Cluster, broker_id: int, topic: str, partition: int) -> Path:
    return cluster.broker(broker_id).data_dir / f"{topic}-{partition}"


def log_batches(log_dir: Path) -> list[BatchOnDisk]:
    """Every whole batch in the replica's segments, in offset order, read with pafka's own header parser.

    A batch still being written at the end of the active segment (a partial one) is left out.
    """
    batches: list[BatchOnDisk] = []
    for segment in sorted(log_dir.glob("*.log")):
        data = segment.read_bytes()
        pos = 0
        while len(data) - pos >= LOG_OVERHEAD:
            _, length = peek_offset_and_length(data, pos)
            if length <= 0 or pos + LOG_OVERHEAD + length > len(data):
                break  # preallocated zeros or a batch not yet complete
            header = parse_batch_header(data, pos)
            batches.append(BatchOnDisk(header.base_offset, header.last_offset, header.crc,
                                       header.partition_leader_epoch))
            pos += header.size_in_bytes
    return batches


def log_end_offset(batches: list[BatchOnDisk]) -> int:
    return batches[-1].last_offset + 1 if batches else 0


def replicas_identical(cluster: Cluster, topic: str, partition: int, replicas: Iterable[int]) -> bool:
    """Every replica's log holds the same batches (offsets and CRCs, in order)."""
    logs = [log_batches(partition_dir(cluster, b, topic, partition)) for b in replicas]
    return all(log == logs[0] for log in logs[1:])


def latest_offset(bootstrap: str, topic: str, partition: int, security: ClientSecurity | None = None) -> int:
    """The leader's high watermark, as ListOffsets(latest) reports it."""
    with KafkaClient(bootstrap, timeout=10.0, security=security) as client:
        client.refresh_metadata([topic])
        tp = TopicPartition(topic, partition)
        return client.list_offsets({tp: LATEST_TIMESTAMP})[tp].offset


def latest_offset_once_led(bootstrap: str, topic: str, partition: int,
                           security: ClientSecurity | None = None) -> int | None:
    """``latest_offset``, or None while the partition's leadership is moving. After a leader dies,
    ZooKeeper shows the new leader before the controller's UpdateMetadata reaches every broker:
    until then a survivor names the dead leader (its connection is refused) or none
    (LEADER_NOT_AVAILABLE), and the new leader may answer a retriable error such as
    OFFSET_NOT_AVAILABLE while its high watermark is below its epoch's start."""
    try:
        return latest_offset(bootstrap, topic, partition, security)
    except KafkaConnectionError:
        return None
    except KafkaApiError as error:
        if error.retriable:
            return None
        raise


def wait_replicas_identical(cluster: Cluster, topic: str, partition: int, replicas: list[int], end_offset: int) -> None:
    def identical() -> bool:
        if not replicas_identical(cluster, topic, partition, replicas):
            return False
        return log_end_offset(log_batches(partition_dir(cluster, replicas[0], topic, partition))) == end_offset

    cluster.wait_for(identical, CATCH_UP_TIMEOUT_S, f"{topic}-{partition}: replicas {replicas} identical up to {end_offset}",
                     interval=0.5)


def assert_replicates_two_ways(cluster: Cluster, prefix: str, records: int) -> None:
    """An RF-2 topic on brokers 1 and 2 takes ``records`` acks=all writes, keeps both replicas in
    its ISR with identical logs, and reads back whole: replication works over whatever the
    cluster's inter-broker listener is."""
    topic = unique(prefix)
    create_topic(cluster, topic, partitions=1, replication_factor=2)
    outcome = produce_confluent(cluster.bootstrap, topic, range(records), acks="all", value_size=1000)
    assert not outcome.failed, sorted(outcome.failed.values())[:3]
    assert len(outcome.acked) == records
    assert sorted(isr_in_zookeeper(cluster, topic, 0)) == [1, 2]
    cluster.wait_for(lambda: replicas_identical(cluster, topic, 0, [1, 2]), 30.0, "both replicas' logs equal")
    assert len(consume_confluent(cluster.bootstrap, topic, 1, records)) == records


# -- coordinators -----------------------------------------------------------------------------

def find_coordinator(cluster: Cluster, broker_id: int, key: str, key_type: int) -> tuple[int, int]:
    """(error, node id) of FindCoordinator v4 asked of broker ``broker_id`` alone."""
    broker = cluster.broker(broker_id)
    security = broker.client_security()
    with BrokerConnection(broker.host, broker.port, timeout=10.0, ssl_context=security.ssl_context,
                          sasl=security.sasl) as connection:
        response = connection.request(FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key]), version=4)
    assert isinstance(response, FindCoordinatorResponse), response
    (found,) = response.coordinators
    return found.error_code, found.node_id


def agreed_coordinator(cluster: Cluster, key: str, key_type: int, not_on: int | None = None) -> int:
    """The coordinator every running broker names, once they all agree on one (not ``not_on``,
    a broker just killed: it is named until its ZooKeeper session expires). Bounded wait."""
    def agreed() -> int | None:
        answers = {find_coordinator(cluster, b, key, key_type) for b in cluster.running_ids()}
        if len(answers) == 1:
            error, node = answers.pop()
            if error == ErrorCode.NO_ERROR and node != not_on:
                return node
        return None
    return cluster.wait_for(agreed, COORDINATOR_TIMEOUT_S, f"every broker naming one coordinator for {key}")


def restart_after_session(cluster: Cluster, broker_id: int) -> None:
    """Start a stopped broker again once its old registration is gone (with its session, if killed)."""
    cluster.wait_for(lambda: broker_id not in cluster.registered_ids(), COORDINATOR_TIMEOUT_S,
                     f"broker {broker_id}'s old session to expire")
    cluster.start(broker_id)
