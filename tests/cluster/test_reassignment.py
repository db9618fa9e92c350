"""Partition reassignment (KIP-455) on four real brokers: ``pafka reassign-partitions`` in
kafka-reassign-partitions.sh's habits, AlterPartitionReassignments' checks, cancellation,
and a move under acks=all load bounded by Kafka's replication throttle."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from client import AdminClient, KafkaClient
from client.errors import KafkaApiError
from protocol.config_types import ConfigResourceType
from protocol.errors import ErrorCode
from pytest_pafka.cluster import Cluster
from pytest_pafka.waiting import wait_until
from tests.cluster.helpers import (
    assert_exactly_once,
    consume_confluent,
    create_topic,
    isr_in_zookeeper,
    partition_dir,
    produce_confluent,
    replicas_identical,
    unique,
)
from tools.cli import main

WAIT_S = 60.0


@pytest.fixture(scope="module")
def cluster4() -> Iterator[Cluster]:
    with Cluster(4, "auto.leader.rebalance.enable=false") as cluster:
        yield cluster
        print(cluster.log_tails())


def reassign(cluster: Cluster, *args: str) -> tuple[int, str, str]:
    """``pafka reassign-partitions`` in this process: (exit code, stdout, stderr)."""
    result = CliRunner().invoke(main, ["reassign-partitions", "--bootstrap-server", cluster.bootstrap, *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def _plan(tmp_path: Path, topic: str, replicas: list[int]) -> Path:
    path = tmp_path / f"{topic}.json"
    path.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": replicas}]}))
    return path


def _verify_until_done(cluster: Cluster, plan: Path) -> str:
    def verify() -> str:
        code, out, err = reassign(cluster, "--verify", "--reassignment-json-file", str(plan))
        assert code == 0, err
        return out

    return wait_until(verify, WAIT_S, "the reassignment completed", interval=0.3, until=lambda out: "is completed" in out)


def test_the_cli_moves_a_partition_and_verify_reports_it_done(cluster4: Cluster, tmp_path: Path) -> None:
    topic = unique("moved")
    create_topic(cluster4, topic, 1, 3, assignment=[[1, 2, 3]])
    outcome = produce_confluent(cluster4.bootstrap, topic, range(2000), partition=0)
    assert len(outcome.acked) == 2000
    plan = _plan(tmp_path, topic, [2, 3, 4])
    code, out, err = reassign(cluster4, "--execute", "--reassignment-json-file", str(plan))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert json.loads(lines[2]) == {"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [1, 2, 3], "log_dirs": ["any", "any", "any"]}]}
    assert f"Successfully started partition reassignment for {topic}-0" in lines
    out = _verify_until_done(cluster4, plan)
    assert f"Reassignment of partition {topic}-0 is completed." in out
    assert "Clearing broker-level throttles on brokers 1,2,3,4" in out
    # ZooKeeper, the replicas and the data all moved: broker 1's copy is deleted.
    assert cluster4.topic_assignment(topic) == {0: [2, 3, 4]}
    assert cluster4.read_json(f"/brokers/topics/{topic}")["adding_replicas"] == {}
    cluster4.wait_for(lambda: sorted(isr_in_zookeeper(cluster4, topic, 0)) == [2, 3, 4], WAIT_S, "ISR 2,3,4")
    cluster4.wait_for(lambda: not partition_dir(cluster4, 1, topic, 0).exists(), WAIT_S, "broker 1's copy deleted")
    cluster4.wait_for(lambda: replicas_identical(cluster4, topic, 0, [2, 3, 4]), WAIT_S, "replicas identical")
    assert_exactly_once(consume_confluent(cluster4.bootstrap, topic, 1, 2000), range(2000))


def test_generate_proposes_an_assignment_over_the_brokers_listed(cluster4: Cluster, tmp_path: Path) -> None:
    topic = unique("proposed")
    create_topic(cluster4, topic, 3, 2, assignment=[[1, 2], [2, 3], [3, 1]])
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    code, out, err = reassign(cluster4, "--generate", "--topics-to-move-json-file", str(topics),
                              "--broker-list", "2,3,4")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "Current partition replica assignment"
    current, proposed = json.loads(lines[1]), json.loads(lines[4])
    assert [p["replicas"] for p in current["partitions"]] == [[1, 2], [2, 3], [3, 1]]
    assert lines[3] == "Proposed partition reassignment configuration"
    assert all(len(p["replicas"]) == 2 and set(p["replicas"]) <= {2, 3, 4} for p in proposed["partitions"])


def test_the_controller_checks_each_request(cluster4: Cluster) -> None:
    topic = unique("checked")
    create_topic(cluster4, topic, 1, 2, assignment=[[1, 2]])
    with KafkaClient(cluster4.bootstrap) as client:
        admin = AdminClient(client)
        errors = admin.alter_partition_reassignments({
            (topic, 0): [1, 9], ("no-such-topic", 0): [1, 2], (topic, 1): [1, 2]})
        codes = {tp: (e.error_code if isinstance(e, KafkaApiError) else None) for tp, e in errors.items()}
        assert codes == {(topic, 0): ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                         ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         (topic, 1): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        errors = admin.alter_partition_reassignments({(topic, 0): [2, 2]})
        assert isinstance(errors[(topic, 0)], KafkaApiError)
        assert errors[(topic, 0)].error_code == ErrorCode.INVALID_REPLICATION_ASSIGNMENT
        errors = admin.alter_partition_reassignments({(topic, 0): None})
        assert isinstance(errors[(topic, 0)], KafkaApiError)
        assert errors[(topic, 0)].error_code == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
        assert admin.list_partition_reassignments() == {}
    assert cluster4.topic_assignment(topic) == {0: [1, 2]}


def _segment_bytes(cluster: Cluster, broker_id: int, topic: str) -> int:
    directory = partition_dir(cluster, broker_id, topic, 0)
    return sum(f.stat().st_size for f in directory.glob("*.log")) if directory.exists() else 0


THROTTLE = 1_000_000  # B/s
BACKLOG = 200_000  # records of 100 B before the move: 20 MB to copy


def test_a_move_under_acks_all_load_loses_nothing_and_keeps_to_the_throttle(cluster4: Cluster,
                                                                             tmp_path: Path) -> None:
    """{1,2,3} -> {2,3,4} with --throttle while an idempotent acks=all producer runs: only retriable
    errors, every acknowledged record still there once, and broker 4 copies at the throttle
    (within 20 %, measured once the quota's first windows have passed)."""
    topic = unique("throttled")
    create_topic(cluster4, topic, 1, 3, assignment=[[1, 2, 3]])
    assert len(produce_confluent(cluster4.bootstrap, topic, range(BACKLOG), partition=0).acked) == BACKLOG
    stop = threading.Event()
    outcome: list[object] = []

    def load() -> None:
        seq = BACKLOG
        while not stop.is_set():
            outcome.append(produce_confluent(cluster4.bootstrap, topic, range(seq, seq + 200), partition=0,
                                             extra={"enable.idempotence": True}))
            seq += 200
            time.sleep(0.2)

    producer = threading.Thread(target=load, daemon=True)
    producer.start()
    plan = _plan(tmp_path, topic, [2, 3, 4])
    try:
        code, out, err = reassign(cluster4, "--execute", "--reassignment-json-file", str(plan),
                                  "--throttle", str(THROTTLE))
        assert code == 0, err
        assert f"The inter-broker throttle limit was set to {THROTTLE} B/s" in out
        target = _segment_bytes(cluster4, 1, topic)
        samples: list[tuple[float, int]] = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            copied = _segment_bytes(cluster4, 4, topic)
            samples.append((time.monotonic(), copied))
            if copied >= target:
                break
            time.sleep(0.25)
        out = _verify_until_done(cluster4, plan)
        assert "Clearing topic-level throttles on topic " + topic in out
    finally:
        stop.set()
        producer.join(60)
    # The steady part of the copy: from 50 % to 90 % of what the leader had when it started.
    start = next((t, b) for t, b in samples if b >= target * 0.5)
    end = next((t, b) for t, b in samples if b >= target * 0.9)
    rate = (end[1] - start[1]) / (end[0] - start[0])
    print(f"broker 4 copied at {rate:,.0f} B/s (throttle {THROTTLE:,} B/s)")
    assert 0.8 * THROTTLE <= rate <= 1.2 * THROTTLE, f"copied at {rate:,.0f} B/s with a {THROTTLE:,} B/s throttle"
    # The throttles are gone, the move is done, nothing acknowledged is lost.
    with KafkaClient(cluster4.bootstrap) as client:
        topic_configs = AdminClient(client).describe_configs(ConfigResourceType.TOPIC, topic)
    assert topic_configs["leader.replication.throttled.replicas"].value in ("", None)
    assert cluster4.topic_assignment(topic) == {0: [2, 3, 4]}
    acked: set[int] = set(range(BACKLOG))
    for result in outcome:
        acked |= set(result.acked)  # type: ignore[attr-defined]
        retriable = {"NOT_LEADER_OR_FOLLOWER", "_MSG_TIMED_OUT", "REQUEST_TIMED_OUT", "NOT_ENOUGH_REPLICAS",
                     "LEADER_NOT_AVAILABLE", "_TRANSPORT"}
        assert result.failed_codes <= retriable, result.failed_codes  # type: ignore[attr-defined]
    consumed = consume_confluent(cluster4.bootstrap, topic, 1, len(acked))
    seen = [int(value[:10]) for _, _, value in consumed]
    assert len(seen) == len(set(seen)), "a record twice"
    assert acked <= set(seen), f"{len(acked - set(seen))} acknowledged records lost"


def test_a_cancelled_move_goes_back_to_the_original_replicas(cluster4: Cluster, tmp_path: Path) -> None:
    topic = unique("cancelled")
    create_topic(cluster4, topic, 1, 2, assignment=[[1, 2]])
    assert len(produce_confluent(cluster4.bootstrap, topic, range(100_000), partition=0).acked) == 100_000
    plan = _plan(tmp_path, topic, [3, 4])
    # A slow copy (10 KB/s, after the quota's first windows) stays in progress long enough to cancel.
    code, _, err = reassign(cluster4, "--execute", "--reassignment-json-file", str(plan), "--throttle", "10000")
    assert code == 0, err
    assert re.fullmatch(r"Copied to the new replicas of 1 partition\(s\): [\d.]+ MiB of [\d.]+ MiB \([\d.]+%\)\n", err), err
    with KafkaClient(cluster4.bootstrap) as client:
        ongoing = AdminClient(client).list_partition_reassignments()
    assert ongoing[(topic, 0)].adding == [3, 4] and ongoing[(topic, 0)].removing == [1, 2]
    code, out, err = reassign(cluster4, "--verify", "--reassignment-json-file", str(plan))
    assert f"Reassignment of partition {topic}-0 is still in progress." in out
    # how far the copy got, on stderr (no terminal here: a line): two new replicas of the leader's bytes
    copied = re.fullmatch(r"Copied to the new replicas of 1 partition\(s\): ([\d.]+) MiB of ([\d.]+) MiB \(([\d.]+)%\)\n",
                          err)
    assert copied is not None, err
    assert float(copied.group(2)) > 0 and float(copied.group(3)) < 100, err
    code, out, err = reassign(cluster4, "--cancel", "--reassignment-json-file", str(plan))
    assert code == 0 and f"Successfully cancelled partition reassignment for {topic}-0" in out, err
    assert cluster4.topic_assignment(topic) == {0: [1, 2]}
    with KafkaClient(cluster4.bootstrap) as client:
        assert AdminClient(client).list_partition_reassignments() == {}
    for broker_id in (3, 4):
        cluster4.wait_for(lambda b=broker_id: not partition_dir(cluster4, b, topic, 0).exists(), WAIT_S,
                          f"broker {broker_id}'s copy deleted")
    assert_exactly_once(consume_confluent(cluster4.bootstrap, topic, 1, 100_000), range(100_000))


def test_a_new_controller_carries_on_a_move_the_old_one_started(tmp_path: Path) -> None:
    """The adding broker is paused, so the move waits in phase 1; the controller dies and the
    next one, reading adding/removing replicas from ZooKeeper, finishes the move once the adding
    broker is back and caught up."""
    with Cluster(4, "auto.leader.rebalance.enable=false") as cluster:
        controller = cluster.controller_id()
        assert controller is not None
        adding = max(b for b in range(1, 5) if b != controller)
        origin = [b for b in range(1, 5) if b != adding]
        target = [*origin[1:], adding]
        topic = unique("resumed")
        create_topic(cluster, topic, 1, 3, assignment=[origin])
        assert len(produce_confluent(cluster.bootstrap, topic, range(5000), partition=0).acked) == 5000
        cluster.pause(adding)
        try:
            with KafkaClient(cluster.bootstrap_of(origin)) as client:
                assert AdminClient(client).alter_partition_reassignments({(topic, 0): target}) == {(topic, 0): None}
            znode = cluster.read_json(f"/brokers/topics/{topic}")
            assert znode["adding_replicas"] == {"0": [adding]} and znode["removing_replicas"] == {"0": [origin[0]]}
            cluster.kill(controller)
            cluster.wait_for(lambda: cluster.controller_id() not in (None, controller), WAIT_S, "a new controller")
        finally:
            cluster.resume(adding)
        cluster.start(controller)  # it may be one of the target replicas: the move waits for it too
        cluster.wait_for(lambda: cluster.topic_assignment(topic) == {0: target}, WAIT_S, "the move to finish")
        assert cluster.read_json(f"/brokers/topics/{topic}")["adding_replicas"] == {}
        cluster.wait_for(lambda: replicas_identical(cluster, topic, 0, target), WAIT_S, "replicas identical")
        assert_exactly_once(consume_confluent(cluster.bootstrap_of(target), topic, 1, 5000), range(5000))
