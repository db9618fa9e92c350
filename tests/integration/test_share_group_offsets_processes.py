"""Share group offsets (KIP-932) on a real broker process, over the wire and through ``pafka share-groups``.

Raw DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and
DeleteShareGroupOffsets (92) with pafka's codecs: a member's share partitions
are described with their start offsets (none yet: -1) and lag; a group with a
member cannot be altered or have its offsets deleted (NON_EMPTY_GROUP); once
empty, a reset changes the start offset a later describe shows (with the lag
from the partition's end), and a delete forgets the topic's state. The CLI
does the same as kafka-share-groups.sh: list, describe members/state/offsets,
reset offsets (dry run, then --execute), delete offsets and delete the group.
"""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from protocol.errors import ErrorCode
from protocol.messages import alter_share_group_offsets as alter
from protocol.messages import api_versions as av
from protocol.messages import delete_share_group_offsets as delete
from protocol.messages import describe_share_group_offsets as describe
from protocol.messages import find_coordinator as fc
from protocol.messages import share_group_heartbeat as sgh
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.waiting import wait_until
from testing.share_groups import until_assigned
from testing.sockets import send_request
from testing.topics import create_topic
from tests.integration.group_helpers import pafka_tool

pytestmark = pytest.mark.pafka_broker_config("group.coordinator.rebalance.protocols=classic,consumer,share")

TOPIC = "queue"
RECORDS = 10


def _heartbeat(broker: BrokerProcess, member_id: str, epoch: int, topics: list[str] | None = None,
               group: str = "sg") -> Any:
    return send_request(broker, 76, 1, sgh.ShareGroupHeartbeatRequest(
        group_id=group, member_id=member_id, member_epoch=epoch, subscribed_topic_names=topics))


def _join(broker: BrokerProcess, group: str = "sg") -> Any:
    """A member with both partitions of the topic (their share state initialized)."""
    # FindCoordinator creates __consumer_offsets, as a client's first step.
    wait_until(lambda: send_request(broker, 10, 1, fc.FindCoordinatorRequest(key=group)), 30, "a coordinator",
               until=lambda r: r.error_code == ErrorCode.NO_ERROR)
    joined = wait_until(lambda: _heartbeat(broker, "member-a", 0, [TOPIC], group), 30, "a loaded coordinator",
                        until=lambda r: r.error_code == ErrorCode.NO_ERROR)
    return until_assigned(lambda epoch: _heartbeat(broker, "member-a", epoch, group=group), joined,
                          lambda r: sum(len(tp.partitions) for tp in r.assignment.topic_partitions) == 2,
                          "member-a assigned both partitions")


def _describe(broker: BrokerProcess, group: str = "sg", version: int = 1, topics: Any = None) -> Any:
    return send_request(broker, 90, version, describe.DescribeShareGroupOffsetsRequest(groups=[
        describe.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=topics)])).groups[0]


def _offsets(group: Any) -> dict[tuple[str, int], tuple[int, int, int]]:
    return {(t.topic_name, p.partition_index): (p.start_offset, p.lag, p.error_code)
            for t in group.topics for p in t.partitions}


def _alter(broker: BrokerProcess, offsets: dict[str, dict[int, int]], group: str = "sg") -> Any:
    return send_request(broker, 91, 0, alter.AlterShareGroupOffsetsRequest(group_id=group, topics=[
        alter.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=[
            alter.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o) for p, o in ps.items()])
        for t, ps in offsets.items()]))


def _delete(broker: BrokerProcess, topics: list[str], group: str = "sg") -> Any:
    return send_request(broker, 92, 0, delete.DeleteShareGroupOffsetsRequest(group_id=group, topics=[
        delete.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics]))


@pytest.fixture
def broker(pafka_broker: BrokerProcess) -> BrokerProcess:
    """A broker with the topic: ``RECORDS`` records in partition 0, none in partition 1."""
    from confluent_kafka import Producer

    create_topic(pafka_broker.bootstrap, TOPIC, 2)
    producer = Producer({"bootstrap.servers": pafka_broker.bootstrap})
    for i in range(RECORDS):
        producer.produce(TOPIC, f"r{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    return pafka_broker


def test_offsets_are_described_reset_and_deleted_over_the_wire(broker: BrokerProcess) -> None:
    keys = {k.api_key: (k.min_version, k.max_version)
            for k in send_request(broker, 18, 3, av.ApiVersionsRequest(
                client_software_name="pafka-tests", client_software_version="1")).api_keys}
    assert (keys[90], keys[91], keys[92]) == ((0, 1), (0, 0), (0, 0))
    member = _join(broker)
    # Initialized by the group coordinator at -1: the partitions' leaders resolve it on first read.
    assert _offsets(_describe(broker)) == {(TOPIC, 0): (-1, -1, 0), (TOPIC, 1): (-1, -1, 0)}
    missing = _describe(broker, "nope")
    assert (missing.error_code, missing.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group nope not found.")
    unknown = _describe(broker, topics=[describe.DescribeShareGroupOffsetsRequestTopic(topic_name="nothing",
                                                                                       partitions=[0])])
    assert _offsets(unknown) == {("nothing", 0): (0, -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)}

    busy = _alter(broker, {TOPIC: {0: 3}})
    assert (busy.error_code, busy.error_message) == (ErrorCode.NON_EMPTY_GROUP, "The group is not empty.")
    assert [p.error_code for t in busy.responses for p in t.partitions] == [ErrorCode.NON_EMPTY_GROUP]
    assert _delete(broker, [TOPIC]).error_code == ErrorCode.NON_EMPTY_GROUP

    assert _heartbeat(broker, "member-a", -1).member_epoch == -1 and member.member_epoch > 0
    altered = _alter(broker, {TOPIC: {0: 3, 5: 0}, "nothing": {0: 0}})
    assert altered.error_code == 0
    assert {(t.topic_name, p.partition_index): p.error_code for t in altered.responses for p in t.partitions} == {
        (TOPIC, 0): 0, (TOPIC, 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("nothing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    # The reset start offset, and the lag from it to the partition's end (KIP-1226, v1).
    assert _offsets(_describe(broker))[(TOPIC, 0)] == (3, RECORDS - 3, 0)
    v0 = _describe(broker, version=0)
    assert _offsets(v0)[(TOPIC, 0)] == (3, -1, 0)  # v0 has no lag

    deleted = _delete(broker, [TOPIC, "nothing"])
    assert deleted.error_code == 0
    assert [(t.topic_name, t.error_code) for t in deleted.responses] == [
        (TOPIC, 0), ("nothing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert _describe(broker).topics == []
    assert _delete(broker, [TOPIC], group="nope").error_code == ErrorCode.GROUP_ID_NOT_FOUND
    # Altering an absent group creates it empty, with those start offsets (as Kafka's, for the tool's reset).
    assert _alter(broker, {TOPIC: {0: 1}}, group="fresh").error_code == 0
    assert _offsets(_describe(broker, "fresh")) == {(TOPIC, 0): (1, RECORDS - 1, 0)}


def share_groups(broker: BrokerProcess, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return pafka_tool(broker.bootstrap, "share-groups", *args, check=check)


def table(output: str) -> list[dict[str, str]]:
    lines = [line for line in output.splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if line.startswith(("GROUP", "TOPIC")))
    header = lines[start].split()
    return [dict(zip(header, line.split(), strict=False)) for line in lines[start + 1:]]


def test_share_groups_cli_lists_describes_resets_and_deletes(broker: BrokerProcess) -> None:
    member = _join(broker)
    assert share_groups(broker, "--list").stdout.split() == ["sg"]
    assert table(share_groups(broker, "--list", "--state").stdout) == [{"GROUP": "sg", "STATE": "Stable"}]
    members = table(share_groups(broker, "--describe", "--group", "sg", "--members").stdout)
    assert [(m["CONSUMER-ID"], m["#PARTITIONS"], m["ASSIGNMENT"]) for m in members] == [
        ("member-a", "2", f"{TOPIC}:0,1")]
    state = share_groups(broker, "--describe", "--group", "sg", "--state").stdout.splitlines()
    assert state[0].split() == ["GROUP", "COORDINATOR", "(ID)", "STATE", "#MEMBERS"]
    assert state[1].split()[0] == "sg" and state[1].split()[-3:] == ["(0)", "Stable", "1"]
    offsets = table(share_groups(broker, "--describe", "--group", "sg", "--offsets").stdout)
    assert [(o["PARTITION"], o["START-OFFSET"], o["LAG"]) for o in offsets] == [("0", "-", "-"), ("1", "-", "-")]
    busy = share_groups(broker, "--reset-offsets", "--group", "sg", "--topic", TOPIC, "--to-latest", "--execute",
                        check=False)
    assert busy.returncode != 0 and "Share group 'sg' is not empty." in busy.stderr
    busy = share_groups(broker, "--delete", "--group", "sg", check=False)
    assert busy.returncode != 0 and "Share group 'sg' is not EMPTY." in busy.stdout

    assert _heartbeat(broker, "member-a", -1).member_epoch == -1 and member.member_epoch > 0
    plan = table(share_groups(broker, "--reset-offsets", "--group", "sg", "--topic", TOPIC, "--to-latest",
                              "--dry-run").stdout)
    assert [(p["PARTITION"], p["NEW-OFFSET"]) for p in plan] == [("0", str(RECORDS)), ("1", "0")]
    unchanged = table(share_groups(broker, "--describe", "--group", "sg").stdout)
    assert [o["START-OFFSET"] for o in unchanged] == ["-", "-"]  # a dry run changes nothing
    share_groups(broker, "--reset-offsets", "--group", "sg", "--topic", f"{TOPIC}:0", "--to-earliest", "--execute")
    reset = table(share_groups(broker, "--describe", "--group", "sg").stdout)
    assert [(o["PARTITION"], o["START-OFFSET"], o["LAG"]) for o in reset] == [("0", "0", str(RECORDS)),
                                                                               ("1", "-", "-")]
    share_groups(broker, "--reset-offsets", "--group", "sg", "--all-topics", "--to-latest", "--execute")
    latest = table(share_groups(broker, "--describe", "--group", "sg").stdout)
    assert [(o["START-OFFSET"], o["LAG"]) for o in latest] == [(str(RECORDS), "0"), ("0", "0")]
    assert share_groups(broker, "--describe", "--group", "sg", "--members").stdout.strip() == (
        "Share group 'sg' has no active members.")

    removed = table(share_groups(broker, "--delete-offsets", "--group", "sg", "--topic", TOPIC).stdout)
    assert removed == [{"TOPIC": TOPIC, "STATUS": "Successful"}]
    assert table(share_groups(broker, "--describe", "--group", "sg").stdout) == []
    # Only a share group is deleted by the tool (a consumer group of the name is no share group).
    refused = share_groups(broker, "--delete", "--group", "not-a-share-group", check=False)
    assert refused.returncode != 0 and ("* Group 'not-a-share-group' could not be deleted due to: Group "
                                        "'not-a-share-group' is not a share group.") in refused.stdout
    assert share_groups(broker, "--delete", "--group", "sg").stdout.strip() == (
        "Deletion of requested share groups ('sg') was successful.")
    assert share_groups(broker, "--list").stdout.split() == []
    gone = share_groups(broker, "--describe", "--group", "sg", check=False)
    assert gone.returncode != 0
    assert "Error: Executing share group command failed due to Group sg not found." in gone.stderr
    # A reset of an absent group creates it with those start offsets, as kafka-share-groups.sh does.
    share_groups(broker, "--reset-offsets", "--group", "later", "--topic", f"{TOPIC}:0", "--to-earliest", "--execute")
    assert [(o["GROUP"], o["START-OFFSET"]) for o in table(share_groups(broker, "--describe", "--group", "later",
                                                                         "--offsets").stdout)] == [("later", "0")]
    verbose = table(share_groups(broker, "--describe", "--group", "later", "--verbose").stdout)
    assert [(o["LEADER-EPOCH"], o["START-OFFSET"], o["LAG"]) for o in verbose] == [("-", "0", str(RECORDS))]
