"""Share group offsets (KIP-932) in a three-broker cluster: the lag of partitions led by other brokers.

The topic has one partition on each broker (one replica each), so the share
group's coordinator leads at most one of them: DescribeShareGroupOffsets v1
answers every partition's lag all the same, the coordinator asking the other
partitions' leaders for their end offsets (ListOffsets on the inter-broker
listener) as Kafka's group coordinator does. The start offsets are set by
AlterShareGroupOffsets on a group it creates, through the share coordinators
(``__share_group_state`` with three replicas).
"""

from __future__ import annotations

from typing import Any

import pytest

from protocol.errors import ErrorCode
from protocol.messages import alter_share_group_offsets as alter
from protocol.messages import describe_share_group_offsets as describe
from protocol.request_constants import CoordinatorType
from pytest_pafka.plugin import ClusterFactory
from pytest_pafka.waiting import wait_until
from testing.sockets import send_request
from tests.cluster.helpers import agreed_coordinator, create_topic, produce_confluent

pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.slow]

OVERRIDES = ("group.coordinator.rebalance.protocols=classic,consumer,share", "offsets.topic.replication.factor=3",
             "offsets.topic.num.partitions=3", "share.coordinator.state.topic.replication.factor=3",
             "share.coordinator.state.topic.num.partitions=3")
WAIT_S = 90.0
TOPIC = "lagging"
RECORDS = 20


def _partitions(group: Any) -> dict[int, tuple[int, int, int]]:
    return {p.partition_index: (p.start_offset, p.lag, p.error_code) for t in group.topics for p in t.partitions}


def test_the_lag_of_partitions_led_elsewhere_comes_from_their_leaders(pafka_cluster_factory: ClusterFactory) -> None:
    cluster = pafka_cluster_factory(*OVERRIDES)
    brokers = sorted(cluster.broker_ids)
    create_topic(cluster, TOPIC, len(brokers), 1, assignment=[[b] for b in brokers])
    for partition in range(len(brokers)):
        outcome = produce_confluent(cluster.bootstrap, TOPIC, range(partition * 100, partition * 100 + RECORDS),
                                    partition=partition)
        assert not outcome.failed and len(outcome.acked) == RECORDS
    group = "sg-lag"
    coordinator = cluster.broker(agreed_coordinator(cluster, group, CoordinatorType.GROUP))
    request = alter.AlterShareGroupOffsetsRequest(group_id=group, topics=[alter.AlterShareGroupOffsetsRequestTopic(
        topic_name=TOPIC, partitions=[alter.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=p)
                                      for p in range(len(brokers))])])
    altered = wait_until(lambda: send_request(coordinator, 91, 0, request, timeout=60), WAIT_S,
                         "the start offsets altered", until=lambda r: r.error_code == ErrorCode.NO_ERROR and all(
                             p.error_code == 0 for t in r.responses for p in t.partitions))
    assert [p.partition_index for t in altered.responses for p in t.partitions] == list(range(len(brokers)))
    described = send_request(coordinator, 90, 1, describe.DescribeShareGroupOffsetsRequest(groups=[
        describe.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]), timeout=60).groups[0]
    assert described.error_code == ErrorCode.NO_ERROR
    assert _partitions(described) == {p: (p, RECORDS - p, 0) for p in range(len(brokers))}
