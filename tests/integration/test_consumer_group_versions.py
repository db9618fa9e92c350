"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69) at every version a broker advertises, on the wire.

v0 lets the coordinator name a joining member; v1 (KIP-1082) requires the
member to name itself and adds regular expression subscriptions; Describe v1
adds each member's type.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from broker.handlers import consumer_group_describe, consumer_group_heartbeat
from client.admin import AdminClient, NewTopic
from client.client import KafkaClient
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from protocol.messages.find_coordinator import FindCoordinatorRequest
from pytest_pafka import BrokerProcess

pytestmark = pytest.mark.pafka_broker_config("group.coordinator.rebalance.protocols=classic,consumer")

TOPIC = "versions"
HEARTBEAT_VERSIONS = range(consumer_group_heartbeat.MIN_VERSION, consumer_group_heartbeat.MAX_VERSION + 1)
DESCRIBE_VERSIONS = range(consumer_group_describe.MIN_VERSION, consumer_group_describe.MAX_VERSION + 1)


@pytest.fixture(scope="module")
def client(pafka_module_broker: BrokerProcess) -> Iterator[KafkaClient]:
    with KafkaClient(pafka_module_broker.bootstrap) as kafka:
        AdminClient(kafka).create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=1)])
        kafka.bootstrap_connection().request(FindCoordinatorRequest(key_type=0, coordinator_keys=["any"]), version=4)
        yield kafka


def _heartbeat(client: KafkaClient, version: int, **fields: object) -> ConsumerGroupHeartbeatResponse:
    settings: dict[str, object] = {"member_epoch": 0, "rebalance_timeout_ms": 30_000, "topic_partitions": []}
    request = ConsumerGroupHeartbeatRequest(**{**settings, **fields})  # type: ignore[arg-type]
    response = client.bootstrap_connection().request(request, version=version)
    assert isinstance(response, ConsumerGroupHeartbeatResponse)
    return response


@pytest.mark.parametrize("version", HEARTBEAT_VERSIONS)
def test_heartbeat_joins_at_every_version(client: KafkaClient, version: int) -> None:
    group = f"hb-v{version}"
    named = str(uuid.uuid4()) if version >= 1 else ""
    joined = _heartbeat(client, version, group_id=group, member_id=named, subscribed_topic_names=[TOPIC])
    assert (joined.error_code, joined.member_epoch, joined.heartbeat_interval_ms) == (ErrorCode.NO_ERROR, 1, 5000)
    assert joined.member_id and (version == 0 or joined.member_id == named)  # v0: the coordinator names it
    assert joined.assignment is not None
    assert [tp.partitions for tp in joined.assignment.topic_partitions] == [[0, 1]]
    left = _heartbeat(client, version, group_id=group, member_id=joined.member_id, member_epoch=-1)
    assert (left.error_code, left.member_epoch) == (ErrorCode.NO_ERROR, -1)


def test_v1_requires_the_member_to_name_itself(client: KafkaClient) -> None:
    refused = _heartbeat(client, 1, group_id="hb-unnamed", member_id="", subscribed_topic_names=[TOPIC])
    assert (refused.error_code, refused.error_message) == (ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")


def test_v1_subscribes_with_a_regular_expression(client: KafkaClient) -> None:
    joined = _heartbeat(client, 1, group_id="hb-regex", member_id=str(uuid.uuid4()), subscribed_topic_regex="vers.*")
    assert (joined.error_code, joined.member_epoch) == (ErrorCode.NO_ERROR, 1)


@pytest.mark.parametrize("version", DESCRIBE_VERSIONS)
def test_describe_at_every_version(client: KafkaClient, version: int) -> None:
    group, member = f"described-v{version}", str(uuid.uuid4())
    assert _heartbeat(client, 1, group_id=group, member_id=member, subscribed_topic_names=[TOPIC]).error_code == 0
    response = client.bootstrap_connection().request(ConsumerGroupDescribeRequest(group_ids=[group]), version=version)
    assert isinstance(response, ConsumerGroupDescribeResponse)
    (described,) = response.groups
    assert (described.error_code, described.group_state, described.group_epoch) == (ErrorCode.NO_ERROR, "Stable", 1)
    (only,) = described.members
    # MemberType is a v1 field: a v0 answer leaves it at its default, unknown (-1).
    assert (only.member_id, only.member_epoch, only.member_type) == (member, 1, 1 if version >= 1 else -1)
