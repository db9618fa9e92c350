"""A consumer-protocol group (KIP-848) when its coordinator's broker crashes in a three-broker cluster.

``__consumer_offsets`` has three replicas (``offsets.topic.replication.factor=3``),
and the group's records are written to it with acks=-1: the broker that
takes over the partition loads the group from them, so its members go on with
the epochs and partitions they had, and nothing committed is consumed again;
a regular expression's resolved topics move with the group (its
ConsumerGroupRegularExpression record), so the new coordinator needs no new epoch.
"""

from __future__ import annotations

import time

import pytest

from protocol.request_constants import CoordinatorType
from pytest_pafka.plugin import ClusterFactory
from tests.cluster.helpers import agreed_coordinator, create_topic
from tests.integration.test_consumer_protocol_groups import (
    HEARTBEAT_INTERVAL_MS,
    PARTITIONS,
    SWITCH,
    Ledger,
    group_epochs,
    members,
    produce,
    wait_until,
)
from tests.integration.test_consumer_protocol_regex import PARTITIONS as REGEX_PARTITIONS
from tests.integration.test_consumer_protocol_regex import RegexMember, every_partition, owned_by_all

pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.slow]

OVERRIDES = (*SWITCH, "offsets.topic.replication.factor=3", "offsets.topic.num.partitions=6")
WAIT_S = 90.0


def test_members_keep_their_epochs_when_the_coordinators_broker_is_killed(
        pafka_cluster_factory: ClusterFactory) -> None:
    cluster = pafka_cluster_factory(*OVERRIDES)
    group, topic, per_partition = "cg-failover", "ct-failover", 10
    create_topic(cluster, topic, PARTITIONS, 3)
    produce(cluster, topic, per_partition)
    ledger = Ledger()
    with members(cluster, ["m0", "m1"], group, topic, ledger) as group_members:
        wait_until(lambda: len(ledger.consumed) == per_partition * PARTITIONS and len(ledger.owners) == PARTITIONS
                   and all(len(ledger.owned_by(m.name)) == 6 for m in group_members), WAIT_S,
                   "every record and a balanced assignment")
        owned = {m.name: ledger.owned_by(m.name) for m in group_members}
        old = agreed_coordinator(cluster, group, CoordinatorType.GROUP)
        epoch = group_epochs(cluster.broker(old).log_text(), group)[-1]
        marks = {b: len(cluster.broker(b).log_text()) for b in cluster.broker_ids}
        cluster.kill(old)
        new = agreed_coordinator(cluster, group, CoordinatorType.GROUP, not_on=old)
        loaded = f"[GroupId {group}] Loaded consumer group at epoch {epoch} with 2 member(s)."
        wait_until(lambda: loaded in cluster.broker(new).log_text()[marks[new]:], WAIT_S,
                   f"broker {new} loading the group from its records")
        produce(cluster, topic, per_partition)
        wait_until(lambda: len(ledger.consumed) == 2 * per_partition * PARTITIONS, WAIT_S, "every record")
        time.sleep(2 * HEARTBEAT_INTERVAL_MS / 1000)  # a few heartbeats more to the new coordinator
        after = cluster.broker(new).log_text()[marks[new]:]
        assert {m.name: ledger.owned_by(m.name) for m in group_members} == owned
    assert group_epochs(after, group) == [] and "joins the consumer group" not in after, after[-3000:]
    assert not ledger.overlaps
    assert [key for key, n in ledger.consumed.items() if n > 1] == []


def test_a_regex_groups_resolved_topics_move_with_its_coordinator(pafka_cluster_factory: ClusterFactory) -> None:
    cluster = pafka_cluster_factory(*OVERRIDES)
    group = "cg-regex-failover"
    for topic in ("orders-a", "orders-b"):
        create_topic(cluster, topic, REGEX_PARTITIONS, 3)
    regex_members = [RegexMember(cluster.bootstrap, f"r{i}", group) for i in range(2)]
    try:
        wait_until(lambda: owned_by_all(regex_members) == every_partition("orders-a", "orders-b")
                   and all(len(m.snapshot()[0]) == REGEX_PARTITIONS for m in regex_members), WAIT_S,
                   "a balanced assignment of both topics")
        time.sleep(2 * HEARTBEAT_INTERVAL_MS / 1000)  # the members' epochs settled too
        owned = [m.snapshot()[0] for m in regex_members]
        old = agreed_coordinator(cluster, group, CoordinatorType.GROUP)
        epoch = group_epochs(cluster.broker(old).log_text(), group)[-1]
        marks = {b: len(cluster.broker(b).log_text()) for b in cluster.broker_ids}
        cluster.kill(old)
        new = agreed_coordinator(cluster, group, CoordinatorType.GROUP, not_on=old)
        loaded = f"[GroupId {group}] Loaded consumer group at epoch {epoch} with 2 member(s)."
        wait_until(lambda: loaded in cluster.broker(new).log_text()[marks[new]:], WAIT_S,
                   f"broker {new} loading the group from its records")
        time.sleep(3 * HEARTBEAT_INTERVAL_MS / 1000)  # a few heartbeats to the new coordinator
        after = cluster.broker(new).log_text()[marks[new]:]
        assert [m.snapshot()[0] for m in regex_members] == owned
    finally:
        for member in regex_members:
            member.close()
    assert group_epochs(after, group) == [] and "joins the consumer group" not in after, after[-3000:]
