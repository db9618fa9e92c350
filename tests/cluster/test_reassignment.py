"""Partition reassignment (KIP-455) on four real brokers: ``pafka reassign-partitions`` in
kafka-reassign-partitions.sh's habits, AlterPartitionReassignments' checks, cancellation,
and a move under acks=all load bounded by Kafka's replication throttle."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from broker.cli import main
from client import AdminClient, KafkaClient
from client.errors import KafkaApiError
from protocol.errors import ErrorCode
from testing.cluster import Cluster
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
    deadline = time.monotonic() + WAIT_S
    while True:
        code, out, err = reassign(cluster, "--verify", "--reassignment-json-file", str(plan))
        assert code == 0, err
        if "is completed" in out:
            return out
        assert time.monotonic() < deadline, out
        time.sleep(0.3)


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


def _threaded(target: object) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)  # type: ignore[arg-type]
    thread.start()
    return thread
