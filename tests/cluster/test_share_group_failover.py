"""A share group (KIP-932) when its coordinator's broker is killed in a three-broker cluster.

``__consumer_offsets`` has three replicas and the share group's records are
written to it with acks=-1: the broker that takes over the partition loads the
group from them, so its members (raw ShareGroupHeartbeat v1) go on with the
epochs and the assignment they had, without joining again.
"""

from __future__ import annotations

from typing import Any

import pytest

from protocol.errors import ErrorCode
from protocol.messages import share_group_describe as sgd
from protocol.messages import share_group_heartbeat as sgh
from protocol.request_constants import CoordinatorType
from pytest_pafka.plugin import ClusterFactory
from pytest_pafka.waiting import wait_until
from testing.sockets import send_request
from tests.cluster.helpers import agreed_coordinator, create_topic

pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.slow]

OVERRIDES = ("group.coordinator.rebalance.protocols=classic,share", "offsets.topic.replication.factor=3",
             "offsets.topic.num.partitions=6")
WAIT_S = 90.0


def _heartbeat(broker: Any, member_id: str, epoch: int, topics: list[str] | None = None) -> Any:
    return send_request(broker, 76, 1, sgh.ShareGroupHeartbeatRequest(
        group_id="sg-failover", member_id=member_id, member_epoch=epoch, subscribed_topic_names=topics))


def test_members_keep_their_epochs_when_the_coordinators_broker_is_killed(
        pafka_cluster_factory: ClusterFactory) -> None:
    cluster = pafka_cluster_factory(*OVERRIDES)
    group = "sg-failover"
    create_topic(cluster, "st-failover", 3, 3)
    old = agreed_coordinator(cluster, group, CoordinatorType.GROUP)
    first = wait_until(lambda: _heartbeat(cluster.broker(old), "m0", 0, ["st-failover"]), WAIT_S,
                       "the coordinator loaded", until=lambda r: r.error_code == ErrorCode.NO_ERROR)
    second = _heartbeat(cluster.broker(old), "m1", 0, ["st-failover"])
    assert first.error_code == second.error_code == ErrorCode.NO_ERROR
    # The members share the three partitions once their share state is initialized; heartbeats go on until
    # both are at the group's assignment epoch with every partition assigned.
    answers = {"m0": first, "m1": second}

    def settled() -> Any:
        for member, answer in answers.items():
            beat = _heartbeat(cluster.broker(old), member, answer.member_epoch)
            assert beat.error_code == ErrorCode.NO_ERROR
            answers[member] = beat
        return send_request(cluster.broker(old), 77, 1, sgd.ShareGroupDescribeRequest(group_ids=[group])).groups[0]

    wait_until(settled, WAIT_S, "both members assigned at the group's assignment epoch", until=lambda d: (
        all(m.member_epoch == d.assignment_epoch for m in d.members)
        and {p for m in d.members for tp in m.assignment.topic_partitions for p in tp.partitions} == {0, 1, 2}))
    first, second = answers["m0"], answers["m1"]
    epochs = {"m0": first.member_epoch, "m1": second.member_epoch}
    assert epochs["m0"] == epochs["m1"]
    before = send_request(cluster.broker(old), 77, 1, sgd.ShareGroupDescribeRequest(group_ids=[group])).groups[0]
    marks = {b: len(cluster.broker(b).log_text()) for b in cluster.broker_ids}
    cluster.kill(old)
    new = agreed_coordinator(cluster, group, CoordinatorType.GROUP, not_on=old)
    loaded = f"[GroupId {group}] Loaded share group at epoch {before.group_epoch} with 2 member(s)."
    wait_until(lambda: loaded in cluster.broker(new).log_text()[marks[new]:], WAIT_S,
               f"broker {new} loading the share group from its records")
    for member, epoch in epochs.items():
        answer = _heartbeat(cluster.broker(new), member, epoch)
        assert (answer.error_code, answer.member_epoch) == (ErrorCode.NO_ERROR, epoch)
    after = send_request(cluster.broker(new), 77, 1, sgd.ShareGroupDescribeRequest(group_ids=[group])).groups[0]
    assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
    assert sorted((m.member_id, m.member_epoch, [tp.partitions for tp in m.assignment.topic_partitions])
                  for m in after.members) == sorted(
        (m.member_id, m.member_epoch, [tp.partitions for tp in m.assignment.topic_partitions])
        for m in before.members)
    assert "joins the share group" not in cluster.broker(new).log_text()[marks[new]:]
