"""Group configs and consumer-protocol groups' descriptions on real broker processes.

- confluent-kafka's AdminClient (ConfigResource of type GROUP, incremental_alter_configs) and
  ``pafka configs --entity-type groups`` on a lone broker, whose configs survive a restart, and on a
  cluster, where a change made through one broker reaches the others by notification;
- a group's ``consumer.session.timeout.ms`` and ``consumer.heartbeat.interval.ms`` taking effect for a
  consumer-protocol member (raw ConsumerGroupHeartbeat: a member that goes silent);
- ``pafka consumer-groups --describe`` of a live group of confluent-kafka ``group.protocol=consumer`` members.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from click.testing import CliRunner

from protocol.errors import ErrorCode
from protocol.messages import consumer_group_describe as cgd
from protocol.messages import consumer_group_heartbeat as cgh
from protocol.messages import find_coordinator as fc
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.cluster import Cluster
from pytest_pafka.waiting import wait_until
from testing.sockets import send_request
from testing.topics import create_topic
from tools.cli import main

confluent_kafka = pytest.importorskip("confluent_kafka")
admin_module = pytest.importorskip("confluent_kafka.admin")

SWITCH = ("group.coordinator.rebalance.protocols=classic,consumer",
          "group.consumer.heartbeat.interval.ms=1000", "group.consumer.min.heartbeat.interval.ms=500",
          "group.consumer.session.timeout.ms=4000", "group.consumer.min.session.timeout.ms=3000")

pytestmark = pytest.mark.pafka_broker_config(*SWITCH)


def cli(*args: str) -> list[str]:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


def describe_group_configs(bootstrap: str, group: str) -> dict[str, tuple[str, int]]:
    admin = admin_module.AdminClient({"bootstrap.servers": bootstrap})
    resource = admin_module.ConfigResource(admin_module.ResourceType.GROUP, group)
    entries = admin.describe_configs([resource])[resource].result(30)
    return {name: (entry.value, int(getattr(entry.source, "value", entry.source))) for name, entry in entries.items()}


def test_confluent_admin_alters_and_describes_a_groups_configs(pafka_broker: BrokerProcess) -> None:
    admin = admin_module.AdminClient({"bootstrap.servers": pafka_broker.bootstrap})
    resource = admin_module.ConfigResource(admin_module.ResourceType.GROUP, "g", incremental_configs=[
        admin_module.ConfigEntry("consumer.session.timeout.ms", "20000",
                                 incremental_operation=admin_module.AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    configs = describe_group_configs(pafka_broker.bootstrap, "g")
    assert configs["consumer.session.timeout.ms"] == ("20000", admin_module.ConfigSource.GROUP_CONFIG.value)
    assert configs["consumer.heartbeat.interval.ms"] == ("1000", admin_module.ConfigSource.DEFAULT_CONFIG.value)
    bad = admin_module.ConfigResource(admin_module.ResourceType.GROUP, "g", incremental_configs=[
        admin_module.ConfigEntry("consumer.session.timeout.ms", "100000",
                                 incremental_operation=admin_module.AlterConfigOpType.SET)])
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        admin.incremental_alter_configs([bad])[bad].result(30)
    assert "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms" \
        in str(refused.value)


def test_pafka_configs_on_a_lone_broker_survive_a_restart(pafka_broker: BrokerProcess) -> None:
    bootstrap = pafka_broker.bootstrap
    assert cli("configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "groups", "--entity-name",
               "g", "--add-config", "consumer.heartbeat.interval.ms=1500,share.isolation.level=read_committed") == [
        "Completed updating config for group g."]
    pafka_broker.restart()
    lines = cli("configs", "--bootstrap-server", pafka_broker.bootstrap, "--describe", "--entity-type", "groups",
                "--entity-name", "g")
    assert lines == [
        "Dynamic configs for group g are:",
        "  consumer.heartbeat.interval.ms=1500 sensitive=false synonyms={GROUP_CONFIG:consumer.heartbeat.interval.ms=1500}",
        "  share.isolation.level=read_committed sensitive=false synonyms={GROUP_CONFIG:share.isolation.level=read_committed}",
    ]
    cli("configs", "--bootstrap-server", pafka_broker.bootstrap, "--alter", "--entity-type", "groups",
        "--entity-name", "g", "--delete-config", "share.isolation.level")
    assert describe_group_configs(pafka_broker.bootstrap, "g")["share.isolation.level"][0] == "read_uncommitted"


@pytest.mark.pafka_cluster(brokers=2)
def test_pafka_configs_on_a_cluster_reach_every_broker(pafka_cluster: Cluster) -> None:
    first, second = (pafka_cluster.broker(i).bootstrap for i in pafka_cluster.broker_ids)
    cli("configs", "--bootstrap-server", first, "--alter", "--entity-type", "groups", "--entity-name", "g",
        "--add-config", "consumer.session.timeout.ms=50000")
    wait_until(lambda: describe_group_configs(second, "g")["consumer.session.timeout.ms"][0] == "50000", 30,
               "the change on the other broker")
    # And through a restart of that broker: it reads /config/groups at start-up.
    pafka_cluster.broker(pafka_cluster.broker_ids[1]).restart()
    wait_until(lambda: describe_group_configs(second, "g")["consumer.session.timeout.ms"][0] == "50000", 60,
               "the configs after a restart", ignoring=(confluent_kafka.KafkaException,))


def _heartbeat(broker: BrokerProcess, group: str, member_id: str, epoch: int) -> Any:
    topics = ["t"] if epoch == 0 else None
    request = cgh.ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member_id, member_epoch=epoch, rebalance_timeout_ms=30000 if epoch == 0 else -1,
        subscribed_topic_names=topics, topic_partitions=[] if epoch == 0 else None)
    return send_request(broker, 68, 0, request)


def _members(broker: BrokerProcess, group: str) -> list[str]:
    response = send_request(broker, 69, 0, cgd.ConsumerGroupDescribeRequest(group_ids=[group]))
    return [m.member_id for m in response.groups[0].members]


def test_a_groups_session_timeout_and_heartbeat_interval_take_effect(pafka_broker: BrokerProcess) -> None:
    create_topic(pafka_broker.bootstrap, "t", 2)
    cli("configs", "--bootstrap-server", pafka_broker.bootstrap, "--alter", "--entity-type", "groups",
        "--entity-name", "slow", "--add-config", "consumer.session.timeout.ms=10000,consumer.heartbeat.interval.ms=1500")
    for group in ("slow", "plain"):  # the first FindCoordinator creates __consumer_offsets
        wait_until(lambda g=group: send_request(pafka_broker, 10, 1, fc.FindCoordinatorRequest(key=g)), 30,
                   "a coordinator", until=lambda r: r.error_code == ErrorCode.NO_ERROR)
    joined = wait_until(lambda: _heartbeat(pafka_broker, "slow", "m-slow", 0), 30, "a loaded coordinator",
                        until=lambda r: r.error_code == ErrorCode.NO_ERROR)
    assert joined.heartbeat_interval_ms == 1500
    plain = _heartbeat(pafka_broker, "plain", "m-plain", 0)
    assert plain.error_code == ErrorCode.NO_ERROR and plain.heartbeat_interval_ms == 1000
    started = time.monotonic()
    # Both members go silent: the broker's 4 s session ends the plain group's member, the group's 10 s not yet.
    wait_until(lambda: not _members(pafka_broker, "plain"), 15, "the plain member's session to end")
    assert _members(pafka_broker, "slow") == ["m-slow"]
    wait_until(lambda: not _members(pafka_broker, "slow"), 20, "the slow member's session to end")
    assert time.monotonic() - started >= 5


class Member:
    def __init__(self, bootstrap: str, name: str, group: str, topic: str) -> None:
        self.consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "enable.auto.commit": False, "client.id": name})
        self.consumer.subscribe([topic])
        self.consumed = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            message = self.consumer.poll(0.1)
            if message is not None and not message.error():
                self.consumed += 1
                self.consumer.commit(message=message, asynchronous=False)
        self.consumer.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)


def test_pafka_consumer_groups_describes_a_live_consumer_group(pafka_broker: BrokerProcess) -> None:
    bootstrap = pafka_broker.bootstrap
    create_topic(bootstrap, "orders", 4)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for i in range(40):
        producer.produce("orders", value=b"x", partition=i % 4)
    assert producer.flush(30) == 0
    members = [Member(bootstrap, f"client-{i}", "live", "orders") for i in range(2)]
    try:
        wait_until(lambda: sum(m.consumed for m in members) == 40, 60, "every record")

        def stable() -> list[str]:
            return cli("consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", "live",
                       "--state", "--verbose")
        state = wait_until(stable, 30, "a stable group", until=lambda lines: "Stable" in lines[1])
        assert state[0].split() == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH",
                                    "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
        fields = state[1].split()
        assert fields[-5:-3] == ["uniform", "Stable"]
        assert fields[-3] == fields[-2]  # stable: the group epoch is the target assignment's
        assert fields[-1] == "2"
        members_lines = cli("consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", "live",
                            "--members", "--verbose")
        assert members_lines[0].split()[-4:] == ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH",
                                                 "TARGET-ASSIGNMENT"]
        rows = [line.split() for line in members_lines[1:] if line.strip()]
        assert sorted(row[3] for row in rows) == ["client-0", "client-1"]
        assert sorted(int(row[4]) for row in rows) == [2, 2]
        assert all(row[6] == row[8] for row in rows)  # stable: the current assignment is the target
        offsets = cli("consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", "live")
        table = [line.split() for line in offsets[1:] if line.strip()]
        assert [(row[1], row[2], row[3], row[4], row[5]) for row in table] == [
            ("orders", str(p), "10", "10", "0") for p in range(4)]
        assert all(row[6] != "-" for row in table)
    finally:
        for member in members:
            member.close()
