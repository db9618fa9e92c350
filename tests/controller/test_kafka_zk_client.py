"""KafkaZkClient against a real ZooKeeper (Debian's 3.8 on 127.0.0.1, see pytest_pafka/zookeeper.py).

Each test runs in a chroot of its own. What is read back is checked with a plain kazoo
client: the znodes and their JSON are Kafka 3.9's.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Awaitable, Iterator
from typing import Any, TypeVar

import pytest
from kazoo.client import KazooClient

from controller.zk import zk_data as zd
from controller.zk.kafka_zk_client import (
    ControllerMovedError,
    KafkaZkClient,
    NodeExistsError,
    TopicExistsError,
    ZkBadVersionError,
    split_connect,
)
from pytest_pafka.zookeeper import ZooKeeperProcess, expire_session
from tests.in_process import wait_for

T = TypeVar("T")
SESSION_MS = 4000


def run(coro: Awaitable[T], timeout: float = 60.0) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)
    return asyncio.run(bounded())


@pytest.fixture
def raw(zookeeper: ZooKeeperProcess) -> Iterator[KazooClient]:
    """A plain kazoo client at ZooKeeper's root (no chroot), for checking what was written."""
    zk = KazooClient(hosts=zookeeper.connect_string)
    zk.start(timeout=10)
    yield zk
    zk.stop()
    zk.close()


def chroot_of(connect: str) -> str:
    return split_connect(connect)[1]


def broker(broker_id: int, rack: str | None = None) -> zd.BrokerInfo:
    return zd.BrokerInfo(broker_id, [zd.EndPoint(f"127.0.0.{broker_id}", 9092, "PLAINTEXT", "PLAINTEXT")], rack)


async def started(connect: str, session_timeout_ms: int = SESSION_MS) -> KafkaZkClient:
    client = KafkaZkClient(connect, session_timeout_ms, 10_000)
    await client.start()
    return client


def test_chroot_is_created_with_kafkas_persistent_paths(zk_connect: str, raw: KazooClient) -> None:
    nested = zk_connect + "/kafka/cluster-a"

    async def scenario() -> None:
        client = await started(nested)
        try:
            assert await client.get_children("/") == sorted(
                {"admin", "brokers", "config", "consumers", "isr_change_notification", "latest_producer_id_block",
                 "log_dir_event_notification"})
        finally:
            await client.close()
    run(scenario())
    root = chroot_of(nested)
    for path in zd.PERSISTENT_PATHS:
        assert raw.exists(root + path) is not None, path
    assert raw.exists("/brokers") is None  # nothing written outside the chroot


def test_connection_timeout_is_reported(zookeeper: ZooKeeperProcess) -> None:
    from pytest_pafka.ports import free_port

    async def scenario() -> None:
        client = KafkaZkClient(f"127.0.0.1:{free_port()}", 4000, 500)
        started_at = time.monotonic()
        with pytest.raises(Exception, match="Timed out waiting for connection"):
            await client.start()
        assert time.monotonic() - started_at < 5
        await client.close()
    run(scenario())


def test_broker_registration_json_epoch_and_removal_on_close(zk_connect: str, raw: KazooClient) -> None:
    root = chroot_of(zk_connect)

    async def scenario() -> None:
        one, two = await started(zk_connect), await started(zk_connect)
        try:
            epoch = await one.register_broker(broker(1, rack="r1"))
            data, stat = await asyncio.to_thread(raw.get, f"{root}/brokers/ids/1")
            assert epoch == stat.czxid
            assert stat.ephemeralOwner == one.session_id
            value = json.loads(data)
            assert value["version"] == 5
            assert value["endpoints"] == ["PLAINTEXT://127.0.0.1:9092"]
            assert value["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
            assert (value["host"], value["port"], value["rack"], value["jmx_port"]) == ("127.0.0.1", 9092, "r1", -1)
            assert isinstance(value["timestamp"], str)
            with pytest.raises(NodeExistsError):
                await two.register_broker(broker(1))
            await two.register_broker(broker(2))
            brokers = await two.get_all_brokers()
            assert sorted(brokers) == [1, 2]
            assert brokers[1] == zd.BrokerInfo(1, broker(1, "r1").endpoints, "r1", epoch)
            assert brokers[2].epoch > epoch
            await one.close()
            assert sorted(await two.get_all_brokers()) == [2]  # the ephemeral went with the session
        finally:
            await one.close()
            await two.close()
    run(scenario())


def test_cluster_id_and_broker_sequence_ids(zk_connect: str, raw: KazooClient) -> None:
    async def scenario() -> None:
        clients = [await started(zk_connect) for _ in range(3)]
        try:
            ids = await asyncio.gather(*(c.create_or_get_cluster_id(f"proposal-{i}") for i, c in enumerate(clients)))
            assert len(set(ids)) == 1 and ids[0].startswith("proposal-")
            seqs = await asyncio.gather(*(c.generate_broker_sequence_id() for c in clients for _ in range(5)))
            assert sorted(seqs) == list(range(1, 16))
        finally:
            for c in clients:
                await c.close()
    run(scenario())
    data, _ = raw.get(chroot_of(zk_connect) + "/cluster/id")
    assert json.loads(data)["version"] == "1"


def test_controller_election_race_has_one_winner(zk_connect: str) -> None:
    async def scenario() -> None:
        clients = [await started(zk_connect) for _ in range(5)]
        try:
            outcomes = await asyncio.gather(
                *(c.register_controller_and_increment_epoch(i) for i, c in enumerate(clients)), return_exceptions=True)
            winners = [i for i, o in enumerate(outcomes) if not isinstance(o, BaseException)]
            assert len(winners) == 1, outcomes
            assert all(isinstance(o, ControllerMovedError) for i, o in enumerate(outcomes) if i != winners[0])
            epoch, version = outcomes[winners[0]]  # type: ignore[misc]
            assert epoch == 1
            assert await clients[0].get_controller_epoch() == (1, version)
            assert await clients[0].get_controller_id() == winners[0]
            # The controller's session ends: the next election bumps the epoch.
            await clients[winners[0]].close()
            survivor = clients[(winners[0] + 1) % 5]
            assert await survivor.get_controller_id() is None
            assert (await survivor.register_controller_and_increment_epoch(9))[0] == 2
            assert await survivor.get_controller_id() == 9
        finally:
            for c in clients:
                await c.close()
    run(scenario())


def test_stale_controller_epoch_version_is_refused(zk_connect: str, raw: KazooClient) -> None:
    root = chroot_of(zk_connect)
    tp = ("orders", 0)

    async def scenario() -> None:
        old, new = await started(zk_connect), await started(zk_connect)
        try:
            epoch, version = await old.register_controller_and_increment_epoch(1)
            assignment = zd.TopicAssignment(uuid.uuid4(), {0: [1, 2]})
            await old.create_topic("orders", assignment, {"min.insync.replicas": "2"})
            with pytest.raises(TopicExistsError):
                await new.create_topic("orders", assignment, {})
            initial = zd.LeaderIsrAndControllerEpoch(zd.LeaderAndIsr(1, 0, [1, 2]), epoch)
            assert await old.create_partition_states({tp: initial}, version) == {}
            states = await old.get_partition_states([tp, ("orders", 1)])
            assert states == {tp: initial}
            # A write at the current partition epoch succeeds and moves it on.
            written, failed = await old.update_leader_and_isr(
                {tp: zd.LeaderAndIsr(1, 0, [1], partition_epoch=0)}, epoch, version)
            assert failed == {} and written[tp].partition_epoch == 1
            # A write at a stale partition epoch fails for that partition only.
            written, failed = await old.update_leader_and_isr(
                {tp: zd.LeaderAndIsr(1, 0, [1, 2], partition_epoch=0)}, epoch, version)
            assert written == {} and set(failed) == {tp} and isinstance(failed[tp], ZkBadVersionError)
            # Another controller takes over (the old one lost its /controller, e.g. its session expired).
            await asyncio.to_thread(raw.delete, root + "/controller")
            new_epoch, new_version = await new.register_controller_and_increment_epoch(2)
            assert new_epoch == epoch + 1
            with pytest.raises(ControllerMovedError):
                await old.update_leader_and_isr({tp: zd.LeaderAndIsr(2, 1, [2], partition_epoch=1)}, epoch, version)
            with pytest.raises(ControllerMovedError):
                await old.create_partition_states({("orders", 1): initial}, version)
            unchanged = await new.get_partition_states([tp])
            assert unchanged[tp].leader_and_isr == zd.LeaderAndIsr(1, 0, [1], partition_epoch=1)
            assert unchanged[tp].controller_epoch == epoch
            written, failed = await new.update_leader_and_isr(
                {tp: zd.LeaderAndIsr(2, 1, [2], partition_epoch=1)}, new_epoch, new_version)
            assert failed == {} and written[tp].partition_epoch == 2
        finally:
            await old.close()
            await new.close()
    run(scenario())
    data, stat = raw.get(root + "/brokers/topics/orders/partitions/0/state")
    assert json.loads(data) == {"controller_epoch": 2, "leader": 2, "version": 1, "leader_epoch": 1, "isr": [2]}
    assert stat.version == 2
    assert json.loads(raw.get(root + "/config/topics/orders")[0]) == {"version": 1, "config": {"min.insync.replicas": "2"}}
    assert json.loads(raw.get(root + "/brokers/topics/orders")[0])["partitions"] == {"0": [1, 2]}


def test_topic_configs_changes_and_deletion(zk_connect: str, raw: KazooClient) -> None:
    root = chroot_of(zk_connect)

    async def scenario() -> None:
        client = await started(zk_connect)
        try:
            topic_id = uuid.uuid4()
            await client.create_topic("t", zd.TopicAssignment(topic_id, {0: [1], 1: [2]}), {})
            assert await client.get_all_topics() == {"t"}
            assert (await client.get_topic_assignments(["t", "missing"]))["t"].topic_id == topic_id
            await client.set_topic_configs("t", {"retention.ms": "1000"})
            assert await client.get_topic_configs(["t", "other"]) == {"t": {"retention.ms": "1000"}, "other": {}}
            await client.set_broker_configs(zd.DEFAULT_ENTITY, {"log.retention.ms": "5"})
            assert await client.get_broker_configs("<default>") == {"log.retention.ms": "5"}
            assert await client.get_broker_configs("1") == {}
            changes = await client.get_children("/config/changes")
            assert [c[:14] for c in changes] == ["config_change_"] * 2
            bodies = [json.loads((await client.get_data("/config/changes/" + c))[0]) for c in changes]  # type: ignore[index]
            assert bodies == [{"version": 2, "entity_path": "topics/t"}, {"version": 2, "entity_path": "brokers/<default>"}]
            assert await client.create_delete_topic_marker("t") is True
            assert await client.create_delete_topic_marker("t") is False
            assert await client.get_delete_topic_markers() == {"t"}
            epoch, version = await client.register_controller_and_increment_epoch(1)
            state = zd.LeaderIsrAndControllerEpoch(zd.LeaderAndIsr(1, 0, [1]), epoch)
            await client.create_partition_states({("t", 0): state, ("t", 1): state}, version)
            await client.delete_topic_znodes("t", version)
            await client.remove_delete_topic_markers(["t"])
            assert await client.get_all_topics() == set()
            assert await client.get_delete_topic_markers() == set()
            assert await client.get_topic_configs(["t"]) == {"t": {}}
        finally:
            await client.close()
    run(scenario())
    assert raw.exists(root + "/brokers/topics/t") is None


def test_watches_fire_on_the_event_loop_and_rearm(zk_connect: str) -> None:
    async def scenario() -> None:
        watcher, other = await started(zk_connect), await started(zk_connect)
        loop_thread = threading.get_ident()
        children: list[list[str]] = []
        data: list[bytes | None] = []
        threads: set[int] = set()

        def on_children(value: list[str]) -> None:
            threads.add(threading.get_ident())
            children.append(value)

        def on_data(value: bytes | None) -> None:
            threads.add(threading.get_ident())
            data.append(value)
        try:
            await watcher.watch_children(zd.BROKER_IDS_PATH, on_children)
            await watcher.watch_data("/controller", on_data)
            assert children == [[]] and data == [None]  # fired once at registration, before the call returned
            for broker_id in (1, 2, 3):
                await other.register_broker(broker(broker_id))
                await wait_for(lambda b=broker_id: bool(children) and str(b) in children[-1])  # type: ignore[misc]
            assert children[-1] == ["1", "2", "3"]
            await other.register_controller_and_increment_epoch(3)
            await wait_for(lambda: data[-1] is not None)
            assert zd.decode_controller(data[-1]) == 3  # type: ignore[arg-type]
            await other.close()  # every ephemeral goes: children [] and /controller deleted
            await wait_for(lambda: children[-1] == [] and data[-1] is None)
            assert threads == {loop_thread}
        finally:
            await watcher.close()
            await other.close()
    run(scenario())


def test_session_expiry_gives_a_new_session_and_callbacks(zookeeper: ZooKeeperProcess, zk_connect: str) -> None:
    async def scenario() -> None:
        client, observer = await started(zk_connect), await started(zk_connect)
        events: list[str] = []
        seen: list[list[str]] = []
        reregistered = asyncio.Event()

        def expired() -> None:
            events.append("expired")

        def reconnected() -> None:
            events.append("reconnected")

            async def again() -> None:
                await client.register_broker(broker(1))
                reregistered.set()
            asyncio.get_running_loop().create_task(again())
        try:
            client.on_session_expired(expired)
            client.on_reconnected(reconnected)
            await client.register_broker(broker(1))
            await client.watch_children(zd.BROKER_IDS_PATH, seen.append)
            old_session = client.session_id
            assert client.client_id is not None
            await asyncio.to_thread(expire_session, zookeeper.connect_string, client.client_id)
            assert await observer.get_all_brokers() == {}  # the ephemeral went with the session
            await asyncio.wait_for(reregistered.wait(), 30)
            assert events == ["expired", "reconnected"]
            assert client.session_id not in (None, old_session)
            assert sorted(await observer.get_all_brokers()) == [1]
            # The watch survived the new session: it still sees changes.
            await observer.register_broker(broker(2))
            await wait_for(lambda: seen[-1] == ["1", "2"])
            assert [] in seen  # the gap was seen too
        finally:
            await client.close()
            await observer.close()
    run(scenario())


def test_ten_thousand_producer_ids_from_three_clients_are_distinct(zk_connect: str, raw: KazooClient) -> None:
    block_size = 100

    async def scenario() -> list[tuple[int, int]]:
        clients = [await started(zk_connect) for _ in range(3)]
        try:
            claims = [c.claim_producer_id_block(broker_id, block_size)
                      for broker_id, c in enumerate(clients) for _ in range(34)]
            blocks: list[tuple[int, int]] = list(await asyncio.gather(*claims))
            return blocks
        finally:
            for c in clients:
                await c.close()
    blocks = run(scenario(), timeout=120)
    ids = [i for first, last in blocks for i in range(first, last + 1)]
    assert len(ids) >= 10_000
    assert len(set(ids)) == len(ids)
    assert sorted(ids) == list(range(len(ids)))  # contiguous from 0: no block lost either
    data, stat = raw.get(chroot_of(zk_connect) + "/latest_producer_id_block")
    last = json.loads(data)
    assert last["version"] == 1 and last["block_end"] == str(len(ids) - 1) and isinstance(last["block_start"], str)
    assert stat.version == len(blocks)


def test_isr_change_notification_is_sequential(zk_connect: str, raw: KazooClient) -> None:
    async def scenario() -> str:
        client = await started(zk_connect)
        try:
            return await client.create_isr_change_notification([("t", 1), ("t", 0)])
        finally:
            await client.close()
    path = run(scenario())
    assert path.startswith("/isr_change_notification/isr_change_")
    data, _ = raw.get(chroot_of(zk_connect) + path)
    assert json.loads(data) == {"version": 1, "partitions": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}]}




def test_every_kazoo_call_runs_on_the_one_dedicated_thread(zk_connect: str, monkeypatch: pytest.MonkeyPatch) -> None:
    callers: list[tuple[int, str]] = []
    original = KazooClient._call

    def recording_call(self: KazooClient, request: Any, async_object: Any) -> Any:
        callers.append((threading.get_ident(), threading.current_thread().name))
        return original(self, request, async_object)
    monkeypatch.setattr(KazooClient, "_call", recording_call)

    async def scenario() -> None:
        client = await started(zk_connect + "/deeper")
        seen: list[list[str]] = []
        try:
            await client.watch_children(zd.BROKER_IDS_PATH, seen.append)
            await asyncio.gather(
                client.register_broker(broker(1)), client.get_all_brokers(), client.claim_producer_id_block(1),
                client.register_controller_and_increment_epoch(1), client.get_partition_states([("t", 0)]))
            await wait_for(lambda: seen[-1] == ["1"])  # the re-armed watch's reads count too
        finally:
            await client.close()
    run(scenario())
    assert len(callers) > 20
    assert {name.split("_")[0] for _, name in callers} == {"kafka-zk"}
    assert len({ident for ident, _ in callers}) == 1


CHILD = r"""
import asyncio, sys
from controller.zk.kafka_zk_client import KafkaZkClient
from controller.zk import zk_data as zd

async def main() -> None:
    client = KafkaZkClient(sys.argv[1], 2000, 10000)
    await client.start()
    info = zd.BrokerInfo(1, [zd.EndPoint("127.0.0.1", 9092, "PLAINTEXT", "PLAINTEXT")], None)
    done = asyncio.Event()

    def expired() -> None:
        print("expired", flush=True)

    def reconnected() -> None:
        print("reconnected", flush=True)

        async def again() -> None:
            await client.register_broker(info)
            print("registered", flush=True)
            done.set()
        tasks.add(asyncio.get_running_loop().create_task(again()))
    tasks: set[asyncio.Task[None]] = set()
    client.on_session_expired(expired)
    client.on_reconnected(reconnected)
    await client.register_broker(info)
    print("registered", flush=True)
    await asyncio.wait_for(done.wait(), 60)
    await client.close()

asyncio.run(main())
"""


def test_a_process_paused_past_its_session_timeout_gets_a_new_session(zookeeper: ZooKeeperProcess, zk_connect: str) -> None:
    import subprocess
    import sys
    from pathlib import Path

    from pytest_pafka.zookeeper import pause_until_session_expired

    root = Path(__file__).resolve().parents[2]
    child = subprocess.Popen([sys.executable, "-c", CHILD, zk_connect], cwd=root, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "registered"
        paused = pause_until_session_expired(child.pid, zookeeper.connect_string, chroot_of(zk_connect) + "/brokers/ids/1")
        assert paused >= 1.5  # about the 2,000 ms session timeout
        lines = [child.stdout.readline().strip() for _ in range(3)]
        assert lines == ["expired", "reconnected", "registered"]
        assert child.wait(timeout=30) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
