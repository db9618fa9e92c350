"""Produce and Fetch on the wire: CRC failures, batch shape rules and KIP-227 incremental sessions."""

from __future__ import annotations

from client import AdminClient, KafkaClient, NewTopic
from protocol.errors import ErrorCode
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic
from protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from protocol.records import Record, build_batch
from testing.broker_process import BrokerProcess
from testing.sockets import send_request


def _create(broker: BrokerProcess, topic: str, partitions: int) -> None:
    with KafkaClient(broker.bootstrap) as client:
        AdminClient(client).create_topics([NewTopic(topic, partitions, 1)])


def _produce(broker: BrokerProcess, topic: str, partition: int, batch: bytes | bytearray) -> int:
    request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=partition, records=bytes(batch))])])
    response = send_request(broker, 0, 9, request)
    return response.responses[0].partition_responses[0].error_code


def _batch(*values: bytes) -> bytearray:
    return build_batch([Record(offset=i, timestamp=1_700_000_000_000 + i, key=None, value=v)
                        for i, v in enumerate(values)])


def test_a_batch_failing_its_crc_gets_corrupt_message_and_nothing_is_written(broker: BrokerProcess) -> None:
    _create(broker, "crc", 1)
    corrupt = _batch(b"hello", b"world")
    corrupt[-1] ^= 0xFF  # inside the CRC-covered part
    assert _produce(broker, "crc", 0, corrupt) == ErrorCode.CORRUPT_MESSAGE
    assert _produce(broker, "crc", 0, _batch(b"fine")) == ErrorCode.NO_ERROR
    with KafkaClient(broker.bootstrap) as client:
        assert [r.value for r in client.fetch("crc", 0, 0).records] == [b"fine"]


def test_v3_plus_produce_needs_exactly_one_batch(broker: BrokerProcess) -> None:
    _create(broker, "one-batch", 1)
    assert _produce(broker, "one-batch", 0, _batch(b"a") + _batch(b"b")) == ErrorCode.INVALID_RECORD
    assert _produce(broker, "one-batch", 0, b"") == ErrorCode.INVALID_RECORD
    assert _produce(broker, "no-such-topic", 0, _batch(b"a")) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _fetch(broker: BrokerProcess, session_id: int, epoch: int, partitions: list[tuple[str, int, int]],
           forgotten: list[tuple[str, list[int]]] = ()):  # type: ignore[no-untyped-def]
    topics: dict[str, list[FetchPartition]] = {}
    for topic, partition, offset in partitions:
        topics.setdefault(topic, []).append(FetchPartition(partition=partition, fetch_offset=offset,
                                                           partition_max_bytes=1 << 20, current_leader_epoch=-1))
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                           session_id=session_id, session_epoch=epoch,
                           topics=[FetchTopic(topic=t, partitions=p) for t, p in topics.items()],
                           forgotten_topics_data=[ForgottenTopic(topic=t, partitions=p) for t, p in forgotten],
                           rack_id="")
    return send_request(broker, 1, 12, request)


def _answered(response) -> set[tuple[str, int]]:  # type: ignore[no-untyped-def]
    return {(t.topic, p.partition_index) for t in response.responses for p in t.partitions}


def test_incremental_fetch_session_sends_only_what_changed(broker: BrokerProcess) -> None:
    _create(broker, "sess", 2)
    assert _produce(broker, "sess", 0, _batch(b"a")) == ErrorCode.NO_ERROR

    full = _fetch(broker, 0, 0, [("sess", 0, 0), ("sess", 1, 0)])  # epoch 0: new session
    assert full.error_code == 0 and full.session_id != 0
    assert _answered(full) == {("sess", 0), ("sess", 1)}
    session = full.session_id

    # Nothing changed: an incremental fetch carries no partitions at all.
    quiet = _fetch(broker, session, 1, [("sess", 0, 1)])
    assert quiet.error_code == 0 and quiet.session_id == session and _answered(quiet) == set()

    # New data on partition 1 only: only partition 1 comes back.
    assert _produce(broker, "sess", 1, _batch(b"b")) == ErrorCode.NO_ERROR
    changed = _fetch(broker, session, 2, [])
    assert _answered(changed) == {("sess", 1)}

    # A forgotten partition is never answered again; the epoch must advance by one.
    _fetch(broker, session, 3, [], forgotten=[("sess", [1])])
    assert _produce(broker, "sess", 1, _batch(b"c")) == ErrorCode.NO_ERROR
    assert _answered(_fetch(broker, session, 4, [])) == set()
    assert _fetch(broker, session, 4, []).error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert _fetch(broker, session + 1, 1, []).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND

    # Epoch -1 closes the session: its id is unknown afterwards.
    final = _fetch(broker, session, -1, [("sess", 0, 0)])
    assert final.session_id == 0 and _answered(final) == {("sess", 0)}
    assert _fetch(broker, session, 5, []).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
