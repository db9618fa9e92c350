"""Share consumers (confluent-kafka's, in processes of their own) in a three-broker cluster while the data
partition's leader and then the share coordinator's broker are SIGKILLed mid-consumption.

The data topic and ``__share_group_state`` have three replicas with min ISR 2, so every answered
acknowledgement is in the share coordinator's ISR before its answer; the new partition leader reloads the
share partition from the persister, which finds the moved coordinator. Checked from the consumers' logs by
testing/share_history.py with a broker "restart" at each kill (no lock and no unwritten delivery count outlives
the broker that held it): no record accepted twice, none delivered again once acknowledged, none lost."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from coordinator.share.share_coordinator_records import kafka_uuid_string
from protocol.errors import ErrorCode
from protocol.messages.find_coordinator import FindCoordinatorRequest
from pytest_pafka.cluster import Cluster
from pytest_pafka.plugin import ClusterFactory
from pytest_pafka.waiting import wait_until
from testing.share_history import HistoryError, ShareHistory, read_events
from testing.sockets import send_request
from tests.cluster.helpers import create_topic, kafka_uuid, restart_after_session
from tests.integration.test_share_consumers_history import Group

confluent_kafka = pytest.importorskip("confluent_kafka")
admin = pytest.importorskip("confluent_kafka.admin")
if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("this confluent-kafka has no share consumer", allow_module_level=True)

pytestmark = [pytest.mark.slow]

OVERRIDES = ("group.coordinator.rebalance.protocols=classic,consumer,share", "offsets.topic.replication.factor=3",
             "offsets.topic.num.partitions=3", "share.coordinator.state.topic.num.partitions=3",
             "share.coordinator.state.topic.replication.factor=3", "share.coordinator.state.topic.min.isr=2",
             "group.share.min.record.lock.duration.ms=1000")
TOPIC = "queue-records"
GROUP = "queue"
#: records a second produced all along, so the kills come while the consumers have records in flight
RATE = 2_000
LOCK_MS = 5_000
DELIVERY_LIMIT = 5
#: how much earlier than its poll a consumer may have had a record acquired (librdkafka fetches ahead)
SLACK_MS = 500
SHARE_KEY_TYPE = 2
ROOT = Path(__file__).resolve().parents[2]


def configure_group(bootstrap: str) -> None:
    entries = [admin.ConfigEntry(name, value, incremental_operation=admin.AlterConfigOpType.SET)
               for name, value in (("share.auto.offset.reset", "earliest"),
                                   ("share.record.lock.duration.ms", str(LOCK_MS)),
                                   ("share.delivery.count.limit", str(DELIVERY_LIMIT)))]
    client = admin.AdminClient({"bootstrap.servers": bootstrap})
    resource = admin.ConfigResource(admin.ResourceType.GROUP, GROUP, incremental_configs=entries)
    for future in client.incremental_alter_configs([resource]).values():
        future.result(30)


def share_coordinator(cluster: Cluster) -> int:
    """The broker leading the ``__share_group_state`` partition of the group's key for partition 0."""
    topic_id = kafka_uuid(str(cluster.read_json(f"/brokers/topics/{TOPIC}")["topic_id"]))
    key = f"{GROUP}:{kafka_uuid_string(topic_id)}:0"

    def agreed() -> int | None:
        # FindCoordinator knows key type SHARE from v6 on
        answers = {(c.error_code, c.node_id) for b in cluster.running_ids() for c in send_request(
            cluster.broker(b), 10, 6, FindCoordinatorRequest(key_type=SHARE_KEY_TYPE, coordinator_keys=[key])
        ).coordinators}
        return answers.pop()[1] if len(answers) == 1 and next(iter(answers))[0] == ErrorCode.NO_ERROR else None
    return cluster.wait_for(agreed, 90, f"every broker naming one share coordinator for {key}")


def isr(cluster: Cluster) -> list[int]:
    state = cluster.partition_state(TOPIC, 0)
    return [] if state is None else list(state["isr"])


def leader(cluster: Cluster) -> int:
    state = cluster.partition_state(TOPIC, 0)
    assert state is not None
    return int(state["leader"])


def replay(group: Group, kills: list[int]) -> ShareHistory[tuple[int, int]]:
    """The consumers' logs with a broker restart at each kill's time, through the history checker."""
    events = read_events([group.log(n) for n in group.children if group.log(n).exists()])
    history: ShareHistory[tuple[int, int]] = ShareHistory(LOCK_MS, DELIVERY_LIMIT, SLACK_MS)
    pending = sorted(kills)
    for event in events:
        at = int(str(event[-1]))
        while pending and pending[0] <= at:
            pending.pop(0)
            history.restart()
        kind, member = str(event[0]), str(event[1])
        if kind == "left":
            history.left(member)
            continue
        key = (int(str(event[2])), int(str(event[3])))
        if kind == "acquired":
            history.acquired(member, key, int(str(event[4])), at)
        elif kind == "acknowledged":
            history.acknowledged(member, key, int(str(event[4])), at)
        else:
            history.gave_up(key)
    return history


class HoldingGroup(Group):
    """Consumers that hold each batch a moment before acknowledging it (tests/cluster/share_holding_child.py)."""

    def start(self, name: str, policy: str = "accept") -> int:
        self.children[name] = subprocess.Popen(
            [sys.executable, "-m", "tests.cluster.share_holding_child", "--bootstrap", self.bootstrap, "--group",
             self.group, "--topic", self.topic, "--name", name, "--log", str(self.log(name)), "--policy", policy,
             "--stop-file", str(self.stop_file(name)), "--deadline-s", "600"], cwd=ROOT)
        return self.children[name].pid


class SteadyProducer:
    """An idempotent producer writing ``RATE`` records a second to partition 0 until stopped; the
    (partition, offset) of every record the broker answered."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all",
                                                  "enable.idempotence": True})
        self.keys: set[tuple[int, int]] = set()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _delivered(self, error: object, message: object) -> None:
        assert error is None, error
        self.keys.add((message.partition(), message.offset()))  # type: ignore[attr-defined]

    def _run(self) -> None:
        sent = 0
        while not self.stopping.wait(0.1):
            for _ in range(RATE // 10):
                self.producer.produce(TOPIC, value=b"v%d" % sent, partition=0, on_delivery=self._delivered)
                sent += 1
            self.producer.poll(0)

    def stop(self) -> set[tuple[int, int]]:
        self.stopping.set()
        self.thread.join(30)
        assert self.producer.flush(120) == 0
        return self.keys


def accepted(group: Group) -> int:
    """How many records the consumers' logs name as accepted (each once)."""
    return len({tuple(e[2:4]) for e in read_events([group.log(n) for n in group.children if group.log(n).exists()])
                if e[0] == "acknowledged" and e[4] == 1})


def wait_accepted(group: Group, count: int, timeout_s: float) -> None:
    wait_until(lambda: accepted(group), timeout_s, f"{count} records accepted", until=lambda n: n >= count,
               interval=1.0)


def kill(cluster: Cluster, broker_id: int, kills: list[int]) -> None:
    kills.append(int(time.time() * 1000))
    cluster.kill(broker_id)


def test_share_consumers_lose_nothing_when_the_leader_and_the_share_coordinator_die(
        pafka_cluster_factory: ClusterFactory, tmp_path: Path) -> None:
    cluster = pafka_cluster_factory(*OVERRIDES)
    create_topic(cluster, TOPIC, 1, 3, {"min.insync.replicas": "2"})
    configure_group(cluster.bootstrap)
    producer = SteadyProducer(cluster.bootstrap)
    group = HoldingGroup(cluster.bootstrap, TOPIC, tmp_path, GROUP)
    kills: list[int] = []
    try:
        for i in range(3):
            group.start(f"c{i}")
        wait_accepted(group, 5 * RATE, 180)
        first = leader(cluster)
        kill(cluster, first, kills)
        done = accepted(group)
        wait_accepted(group, done + 5 * RATE, 240)
        restart_after_session(cluster, first)
        cluster.wait_for(lambda: len(isr(cluster)) == 3, 120, "the ISR whole again")
        second = share_coordinator(cluster)
        kill(cluster, second, kills)
        done = accepted(group)
        wait_accepted(group, done + 5 * RATE, 240)
        keys = producer.stop()
        wait_accepted(group, len(keys), 300)
        group.close()
    finally:
        producer.stopping.set()
        group.close()
    history = replay(group, kills)
    history.check_complete(keys)
    assert history.accepted == keys and not history.rejected
    redelivered = {k for k, n in history.deliveries.items() if n > 1}
    assert len(redelivered) < len(keys) // 4, len(redelivered)
    failed = sum(1 for e in read_events([group.log(n) for n in group.children]) if e[0] == "failed")
    print(f"{len(keys)} records; kills: partition leader {first}, share coordinator {second}; "
          f"{failed} acknowledgements failed, {len(redelivered)} records redelivered")


def test_the_replay_sees_a_second_accept(tmp_path: Path) -> None:
    """The check is not vacuous: an answered ACCEPT delivered again fails it."""
    group = Group("unused", TOPIC, tmp_path)
    group.children["c0"] = None  # type: ignore[assignment]
    group.log("c0").write_text('["acquired", "c0", 0, 7, 1, 10]\n["acknowledged", "c0", 0, 7, 1, 20]\n'
                               '["acquired", "c0", 0, 7, 1, 30]\n')
    with pytest.raises(HistoryError):
        replay(group, [25])
