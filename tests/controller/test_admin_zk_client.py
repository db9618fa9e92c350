"""AdminZkClient on a real ZooKeeper: what CreateTopics / CreatePartitions / DeleteTopics write, and Kafka's errors."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from controller.admin_zk_client import AdminZkClient, AdminZkError, new_topic_id
from controller.zk import zk_data as zd
from controller.zk.kafka_zk_client import KafkaZkClient
from protocol.errors import ErrorCode
from tests.in_process import run


async def _with_brokers(connect: str, racks: dict[int, str | None],
                        body: Callable[[AdminZkClient, KafkaZkClient], Awaitable[None]]) -> None:
    """One session per registered broker (as brokers have), and the admin client on the first."""
    sessions = []
    try:
        for broker_id, rack in racks.items():
            zk = KafkaZkClient(connect, 4000, 10_000)
            sessions.append(zk)
            await zk.start()
            await zk.register_broker(zd.BrokerInfo(broker_id, [zd.EndPoint("127.0.0.1", 9000 + broker_id, "PLAINTEXT",
                                                                           "PLAINTEXT")], rack))
        await body(AdminZkClient(sessions[0]), sessions[0])
    finally:
        for zk in sessions:
            await zk.close()


async def _error(call: Awaitable[object]) -> tuple[int, str]:
    with pytest.raises(AdminZkError) as info:
        await call
    return int(info.value.error_code), info.value.message


def test_create_topic_writes_assignment_id_and_configs_and_refuses_what_kafka_refuses(zk_connect: str) -> None:
    async def body(admin: AdminZkClient, zk: KafkaZkClient) -> None:
        created = await admin.create_topic("events", 8, 3, {"cleanup.policy": "compact"})
        stored = (await zk.get_topic_assignments(["events"]))["events"]
        assert stored.topic_id == created.topic_id != zd.ZERO_UUID
        assert stored.partitions == created.partitions
        assert sorted(stored.partitions) == list(range(8))
        for replicas in stored.partitions.values():
            assert len(set(replicas)) == 3 and set(replicas) <= {1, 2, 3, 4}
        assert (await zk.get_topic_configs(["events"]))["events"] == {"cleanup.policy": "compact"}

        assert await _error(admin.create_topic("events", 1, 1, {})) == (
            ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 'events' already exists.")
        assert await _error(admin.create_topic("x", 1, 5, {})) == (
            ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor: 5 larger than available brokers: 4.")
        assert (await _error(admin.create_topic("x", 0, 1, {})))[0] == ErrorCode.INVALID_PARTITIONS
        assert (await _error(admin.create_topic("x", -1, -1, {}, {0: [1, 9]})))[0] == ErrorCode.INVALID_REPLICATION_ASSIGNMENT
        assert (await _error(admin.create_topic("x", -1, -1, {}, {0: [1, 1]})))[0] == ErrorCode.INVALID_REPLICATION_ASSIGNMENT
        assert (await _error(admin.create_topic("x", -1, -1, {}, {0: [1], 1: [1, 2]})))[0] == ErrorCode.INVALID_REPLICATION_ASSIGNMENT
        assert (await _error(admin.create_topic("x", -1, -1, {}, {0: [1], 2: [2]})))[0] == ErrorCode.INVALID_REPLICATION_ASSIGNMENT
        await admin.create_topic("a.b", 1, 1, {})
        assert (await _error(admin.create_topic("a_b", 1, 1, {})))[0] == ErrorCode.INVALID_TOPIC  # collides
        # validate_only writes nothing.
        await admin.create_topic("dry", 2, 2, {}, validate_only=True)
        assert "dry" not in await zk.get_all_topics()
        # A manual assignment is taken as given.
        manual = await admin.create_topic("manual", -1, -1, {}, {0: [4, 2], 1: [2, 4]})
        assert (await zk.get_topic_assignments(["manual"]))["manual"].partitions == {0: [4, 2], 1: [2, 4]} == manual.partitions

    run(_with_brokers(zk_connect, {1: None, 2: None, 3: None, 4: None}, body))


def test_rack_aware_placement_from_registered_brokers(zk_connect: str) -> None:
    async def body(admin: AdminZkClient, zk: KafkaZkClient) -> None:
        racks = {1: "r1", 2: "r1", 3: "r2", 4: "r2", 5: "r3", 6: "r3"}
        created = await admin.create_topic("spread", 12, 3, {})
        for replicas in created.partitions.values():
            assert {racks[b] for b in replicas} == {"r1", "r2", "r3"}

    run(_with_brokers(zk_connect, {1: "r1", 2: "r1", 3: "r2", 4: "r2", 5: "r3", 6: "r3"}, body))


def test_partial_rack_information_is_refused(zk_connect: str) -> None:
    async def body(admin: AdminZkClient, zk: KafkaZkClient) -> None:
        code, message = await _error(admin.create_topic("t", 1, 1, {}))
        assert code == ErrorCode.UNKNOWN_SERVER_ERROR  # Kafka: AdminOperationException
        assert "Not all brokers have rack information" in message

    run(_with_brokers(zk_connect, {1: "r1", 2: None}, body))


def test_add_partitions_places_new_ones_as_kafka_does_and_checks_counts(zk_connect: str) -> None:
    async def body(admin: AdminZkClient, zk: KafkaZkClient) -> None:
        await admin.create_topic("grow", -1, -1, {}, {0: [2, 3], 1: [3, 1]})
        grown = await admin.add_partitions("grow", 5)
        stored = (await zk.get_topic_assignments(["grow"]))["grow"]
        assert stored == grown
        assert stored.partitions[0] == [2, 3] and stored.partitions[1] == [3, 1]
        # Kafka: start index = shift = partition 0's leader's index (broker 2 -> 1), from partition 2:
        # p2 first (2+1)%3=0 -> 1, follower shift 1+(1+0)%2=2 -> 3; p3 (shift 2 from p3%3==0) first 1 -> 2,
        # follower 1+(2)%2=1 -> 3; p4 first 2 -> 3, follower index 0 -> 1.
        assert {p: stored.partitions[p] for p in (2, 3, 4)} == {2: [1, 3], 3: [2, 3], 4: [3, 1]}
        assert await _error(admin.add_partitions("grow", 5)) == (ErrorCode.INVALID_PARTITIONS, "Topic already has 5 partitions.")
        assert await _error(admin.add_partitions("grow", 3)) == (
            ErrorCode.INVALID_PARTITIONS, "Topic currently has 5 partitions, which is higher than the requested 3.")
        assert (await _error(admin.add_partitions("nope", 3)))[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert (await _error(admin.add_partitions("grow", 7, [[1, 2]])))[0] == ErrorCode.INVALID_REPLICATION_ASSIGNMENT
        assert (await _error(admin.add_partitions("grow", 6, [[1]])))[0] == ErrorCode.INVALID_REPLICATION_ASSIGNMENT
        assert (await _error(admin.add_partitions("grow", 6, [[1, 7]])))[0] == ErrorCode.INVALID_REPLICATION_ASSIGNMENT
        await admin.add_partitions("grow", 6, [[3, 2]])
        assert (await zk.get_topic_assignments(["grow"]))["grow"].partitions[5] == [3, 2]

    run(_with_brokers(zk_connect, {1: None, 2: None, 3: None}, body))


def test_delete_topic_writes_the_marker(zk_connect: str) -> None:
    async def body(admin: AdminZkClient, zk: KafkaZkClient) -> None:
        await admin.create_topic("bye", 1, 1, {})
        await admin.delete_topic("bye")
        await admin.delete_topic("bye")  # already marked: accepted again, as Kafka does
        assert await zk.get_delete_topic_markers() == {"bye"}
        assert (await _error(admin.delete_topic("never"))) == (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Topic `never` to delete does not exist")
        assert await _error(admin.create_topic("bye", 1, 1, {})) == (
            ErrorCode.TOPIC_ALREADY_EXISTS, 'Topic "bye" is marked for deletion.')

    run(_with_brokers(zk_connect, {1: None}, body))


def test_topic_ids_are_random_and_never_reserved() -> None:
    ids = {new_topic_id() for _ in range(2000)}
    assert len(ids) == 2000
    assert all(i.int > 1 and not 0xF8 <= i.bytes[0] <= 0xFB for i in ids)
