"""``pafka reassign-partitions``: kafka-reassign-partitions.sh on pafka's client.

Kafka's options, JSON files and messages:

- ``--generate --topics-to-move-json-file F --broker-list 1,2,3``: the current assignment of the
  topics and a proposed one over the brokers listed (Kafka's rack-unaware assignment);
- ``--execute --reassignment-json-file F [--throttle B/s]``: print the current assignment (save it
  to roll back), start the reassignments (AlterPartitionReassignments), and with ``--throttle``
  set Kafka's throttles: ``leader.replication.throttled.rate`` and
  ``follower.replication.throttled.rate`` on every broker involved, and on each topic
  ``leader.replication.throttled.replicas`` (the moving partitions' current replicas) and
  ``follower.replication.throttled.replicas`` (the replicas being added);
- ``--verify --reassignment-json-file F``: each partition's status; once every one is done, the
  throttles are removed (run it until they are, as Kafka says);
- ``--cancel --reassignment-json-file F``: cancel the reassignments still in progress (and remove
  the throttles, unless ``--preserve-throttles``).

The file: ``{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3,4]}]}``
(``log_dirs``, if present, names each replica's log directory, or "any"). With ``--execute``, a
replica given a directory is moved there (AlterReplicaLogDirs to its broker, after the
reassignments start; a replica not created yet is retried until ``--timeout``, its broker then
creating it in that directory), as Kafka's executeMoves does.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

import click

from client import AdminClient, KafkaClient, KafkaClientError
from client.admin import OngoingReassignment
from controller.replica_assignment import BrokerMetadata, assign_replicas_to_brokers
from protocol.config_types import AlterConfigOp, ConfigResourceType
from protocol.errors import ErrorCode
from protocol.messages.alter_replica_log_dirs import (
    AlterReplicaLogDir,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    AlterReplicaLogDirTopic,
)
from tools.common import fail
from tools.progress_output import report_progress
from tools.reassignment_progress import copied_bytes

TopicPartition = tuple[str, int]
#: (topic, partition, broker id): Kafka's TopicPartitionReplica.
TopicPartitionReplica = tuple[str, int, int]
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"


def parse_reassignment(text: str) -> dict[TopicPartition, list[int]]:
    """Kafka's reassignment JSON: partition -> target replicas (in order)."""
    try:
        data = json.loads(text)
        entries = data["partitions"]
        wanted: dict[TopicPartition, list[int]] = {}
        for entry in entries:
            tp = (str(entry["topic"]), int(entry["partition"]))
            replicas = [int(r) for r in entry["replicas"]]
            dirs = entry.get("log_dirs")
            if dirs is not None and len(dirs) != len(replicas):
                raise ValueError(f"log_dirs of {tp[0]}-{tp[1]} must name a directory (or \"any\") for each replica")
            if tp in wanted:
                raise ValueError(f"Duplicate reassignment partitions: {tp[0]}-{tp[1]}")
            if len(set(replicas)) != len(replicas):
                raise ValueError(f"Duplicate replica assignment found for partition {tp[0]}-{tp[1]}: {replicas}")
            wanted[tp] = replicas
    except (KeyError, TypeError, ValueError, json.JSONDecodeError) as exc:
        raise click.UsageError(f"Bad reassignment JSON: {exc}") from exc
    if not wanted:
        raise click.UsageError("Partition reassignment list cannot be empty")
    return wanted


def parse_log_dirs(text: str) -> dict[TopicPartitionReplica, str]:
    """The replicas a reassignment JSON (already checked by ``parse_reassignment``) puts in a given log dir."""
    moves: dict[TopicPartitionReplica, str] = {}
    for entry in json.loads(text)["partitions"]:
        for broker_id, log_dir in zip(entry["replicas"], entry.get("log_dirs") or (), strict=False):
            if log_dir != "any":
                moves[(str(entry["topic"]), int(entry["partition"]), int(broker_id))] = str(log_dir)
    return moves


def format_reassignment(assignment: Mapping[TopicPartition, list[int]]) -> str:
    """The JSON Kafka prints (and reads back): version 1, partitions in (topic, partition) order."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())]}, separators=(",", ":"))


def _current_assignment(client: KafkaClient, topics: Iterable[str]) -> dict[TopicPartition, list[int]]:
    cluster = client.refresh_metadata(sorted(set(topics)))
    current: dict[TopicPartition, list[int]] = {}
    for name in sorted(set(topics)):
        topic = cluster.topics.get(name)
        if topic is None or topic.error_code or not topic.partitions:
            raise click.ClickException(f"Topic {name} not found")
        for p, meta in topic.partitions.items():
            current[(name, p)] = list(meta.replicas)
    return current


# -- the actions -------------------------------------------------------------------------------------------
def _generate(client: KafkaClient, topics_file: Path, broker_list: str) -> None:
    data = json.loads(topics_file.read_text())
    topics = [str(t["topic"]) for t in data["topics"]]
    brokers = [BrokerMetadata(int(b)) for b in broker_list.split(",") if b.strip()]
    current = _current_assignment(client, topics)
    proposed: dict[TopicPartition, list[int]] = {}
    for topic in topics:
        partitions = sorted(p for t, p in current if t == topic)
        factor = len(current[(topic, partitions[0])])
        for p, replicas in assign_replicas_to_brokers(brokers, len(partitions), factor).items():
            proposed[(topic, p)] = replicas
    click.echo("Current partition replica assignment")
    click.echo(format_reassignment(current))
    click.echo("")
    click.echo("Proposed partition reassignment configuration")
    click.echo(format_reassignment(proposed))


def _execute(client: KafkaClient, admin: AdminClient, wanted: dict[TopicPartition, list[int]],
             throttle: int | None) -> None:
    current = _current_assignment(client, {t for t, _ in wanted})
    missing = [tp for tp in wanted if tp not in current]
    if missing:
        raise click.ClickException(f"Topic partitions {', '.join(f'{t}-{p}' for t, p in missing)} not found")
    click.echo("Current partition replica assignment")
    click.echo("")
    click.echo(format_reassignment({tp: current[tp] for tp in wanted}))
    click.echo("")
    click.echo("Save this to use as the --reassignment-json-file option during rollback")
    if throttle is not None:
        _set_throttles(admin, wanted, current, throttle)
        click.echo("Warning: You must run --verify periodically, until the reassignment completes, to ensure "
                   "the throttle is removed.")
        click.echo(f"The inter-broker throttle limit was set to {throttle} B/s")
    errors = admin.alter_partition_reassignments(wanted)
    failed = {tp: e for tp, e in errors.items() if e is not None}
    for tp in sorted(wanted):
        if tp not in failed:
            click.echo(f"Successfully started partition reassignment for {tp[0]}-{tp[1]}")
    if failed:
        for (t, p), error in sorted(failed.items()):
            click.echo(f"Error reassigning partition(s):\n{t}-{p}: {error}", err=True)
        sys.exit(1)
    _report_copying(client, admin.list_partition_reassignments(list(wanted)))


def _execute_moves(client: KafkaClient, moves: Mapping[TopicPartitionReplica, str], timeout_s: float) -> None:
    """Kafka's executeMoves: AlterReplicaLogDirs to each replica's broker until every move has started
    (REPLICA_NOT_AVAILABLE: not created yet, asked again) or the timeout passes."""
    pending, deadline = dict(moves), time.monotonic() + timeout_s
    while pending:
        started = _alter_replica_log_dirs(client, pending)
        for replica in started:
            del pending[replica]
        if started:
            names = ",".join(sorted(f"{b}-{t}-{p}" for t, p, b in started))
            click.echo(f"Successfully started log directory move{'s' if len(started) > 1 else ''} for: {names}")
        if pending and time.monotonic() >= deadline:
            names = ",".join(sorted(f"{b}-{t}-{p}" for t, p, b in pending))
            raise click.ClickException(f"Timed out before log directory move could be started for: {names}")
        if pending:
            time.sleep(0.5)


def _alter_replica_log_dirs(client: KafkaClient, moves: Mapping[TopicPartitionReplica, str]
                            ) -> list[TopicPartitionReplica]:
    """One AlterReplicaLogDirs per broker; the replicas whose move started (REPLICA_NOT_AVAILABLE: not yet)."""
    started = []
    for broker_id in sorted({b for _, _, b in moves}):
        by_dir: dict[str, dict[str, list[int]]] = {}
        for (topic, partition, b), log_dir in moves.items():
            if b == broker_id:
                by_dir.setdefault(log_dir, {}).setdefault(topic, []).append(partition)
        request = AlterReplicaLogDirsRequest(dirs=[AlterReplicaLogDir(path=d, topics=[
            AlterReplicaLogDirTopic(name=t, partitions=ps) for t, ps in topics.items()]) for d, topics in by_dir.items()])
        response = client.connection(broker_id).request(request)
        assert isinstance(response, AlterReplicaLogDirsResponse)
        for result in response.results:
            for answer in result.partitions:
                replica = (result.topic_name, answer.partition_index, broker_id)
                if answer.error_code == ErrorCode.NO_ERROR:
                    started.append(replica)
                elif answer.error_code != ErrorCode.REPLICA_NOT_AVAILABLE:
                    raise click.ClickException(f"Failed to alter dir for {broker_id}-{replica[0]}-{replica[1]}: "
                                               f"{ErrorCode(answer.error_code).name}")
    return started


def _report_copying(client: KafkaClient, ongoing: Mapping[TopicPartition, OngoingReassignment]) -> None:
    """On stderr: how much of what the new replicas need they hold (nothing when no partition is moving)."""
    if not ongoing:
        return
    copied, wanted = copied_bytes(client, ongoing)
    report_progress(f"Copied to the new replicas of {len(ongoing)} partition(s)", copied, wanted, "B",
                    prints_to_stdout=True)


def _set_throttles(admin: AdminClient, wanted: Mapping[TopicPartition, list[int]],
                   current: Mapping[TopicPartition, list[int]], rate: int) -> None:
    """Kafka's throttles for a move: the rates on every broker involved; per topic, the moving
    partitions' current replicas throttled as leaders and their new replicas as followers."""
    moving = {tp: target for tp, target in wanted.items() if target != current[tp]}
    leaders: dict[str, list[str]] = {}
    followers: dict[str, list[str]] = {}
    brokers: set[int] = set()
    for (topic, p), target in sorted(moving.items()):
        origin = current[(topic, p)]
        leaders.setdefault(topic, []).extend(f"{p}:{b}" for b in origin)
        followers.setdefault(topic, []).extend(f"{p}:{b}" for b in target if b not in origin)
        brokers.update(origin, target)
    for topic in sorted(leaders):
        ops = [(LEADER_REPLICAS, AlterConfigOp.SET, ",".join(leaders[topic]))]
        if followers.get(topic):
            ops.append((FOLLOWER_REPLICAS, AlterConfigOp.SET, ",".join(followers[topic])))
        admin.incremental_alter_configs(ConfigResourceType.TOPIC, topic, ops)
    for broker_id in sorted(brokers):
        admin.incremental_alter_configs(ConfigResourceType.BROKER, str(broker_id), [
            (LEADER_RATE, AlterConfigOp.SET, str(rate)), (FOLLOWER_RATE, AlterConfigOp.SET, str(rate))])


def _clear_throttles(client: KafkaClient, admin: AdminClient, topics: Iterable[str]) -> None:
    brokers = sorted(client.refresh_metadata([]).brokers)
    click.echo("")
    click.echo(f"Clearing broker-level throttles on brokers {','.join(map(str, brokers))}")
    for broker_id in brokers:
        admin.incremental_alter_configs(ConfigResourceType.BROKER, str(broker_id), [
            (LEADER_RATE, AlterConfigOp.DELETE, None), (FOLLOWER_RATE, AlterConfigOp.DELETE, None)])
    for topic in sorted(set(topics)):
        click.echo(f"Clearing topic-level throttles on topic {topic}")
        admin.incremental_alter_configs(ConfigResourceType.TOPIC, topic, [
            (LEADER_REPLICAS, AlterConfigOp.DELETE, None), (FOLLOWER_REPLICAS, AlterConfigOp.DELETE, None)])


def _verify(client: KafkaClient, admin: AdminClient, wanted: dict[TopicPartition, list[int]],
            preserve_throttles: bool) -> bool:
    """Print each partition's status; True when every reassignment is done."""
    ongoing: dict[TopicPartition, OngoingReassignment] = admin.list_partition_reassignments(list(wanted))
    current = _current_assignment(client, {t for t, _ in wanted})
    click.echo("Status of partition reassignment:")
    done = True
    for (t, p), target in sorted(wanted.items()):
        if (t, p) in ongoing:
            done = False
            click.echo(f"Reassignment of partition {t}-{p} is still in progress.")
        elif current.get((t, p)) == target:
            click.echo(f"Reassignment of partition {t}-{p} is completed.")
        else:
            done = False
            click.echo(f"There is no active reassignment of partition {t}-{p}, but replica set is "
                       f"{current.get((t, p))} rather than {target}.")
    _report_copying(client, {tp: reassignment for tp, reassignment in ongoing.items() if tp in wanted})
    if done and not preserve_throttles:
        _clear_throttles(client, admin, {t for t, _ in wanted})
    return done


def _cancel(client: KafkaClient, admin: AdminClient, wanted: dict[TopicPartition, list[int]],
            preserve_throttles: bool) -> None:
    errors = admin.alter_partition_reassignments(dict.fromkeys(wanted))
    for (t, p), error in sorted(errors.items()):
        if error is None:
            click.echo(f"Successfully cancelled partition reassignment for {t}-{p}")
        else:
            click.echo(f"Error cancelling partition reassignment for {t}-{p}: {error}", err=True)
    if not preserve_throttles:  # as Kafka's --cancel does
        _clear_throttles(client, admin, {t for t, _ in wanted})


@click.command("reassign-partitions")
@click.option("--bootstrap-server", required=True, help="HOST:PORT[,HOST:PORT...] of the brokers to connect to.")
@click.option("--generate", "action", flag_value="generate", help="Propose an assignment of the topics given.")
@click.option("--execute", "action", flag_value="execute", help="Start the reassignment in the JSON file.")
@click.option("--verify", "action", flag_value="verify", help="Check the reassignment in the JSON file.")
@click.option("--cancel", "action", flag_value="cancel", help="Cancel the reassignment in the JSON file.")
@click.option("--reassignment-json-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The partitions and their target replicas.")
@click.option("--topics-to-move-json-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help='With --generate: {"version":1,"topics":[{"topic":"t"}]}.')
@click.option("--broker-list", help="With --generate: the brokers to assign to, e.g. 1,2,3.")
@click.option("--throttle", type=click.IntRange(min=1), help="With --execute: the replication limit in B/s.")
@click.option("--preserve-throttles", is_flag=True, help="With --verify/--cancel: leave the throttles in place.")
@click.option("--timeout", "timeout_s", type=int, default=30, show_default=True, help="Request timeout in seconds.")
def reassign_partitions_command(bootstrap_server: str, action: str | None, reassignment_json_file: Path | None,
                                topics_to_move_json_file: Path | None, broker_list: str | None,
                                throttle: int | None, preserve_throttles: bool, timeout_s: int) -> None:
    """Move partitions between brokers (kafka-reassign-partitions.sh)."""
    if action is None:
        fail("Command must include exactly one action: --generate, --execute, --verify or --cancel")
    if action == "generate" and (topics_to_move_json_file is None or not broker_list):
        fail("--generate requires --topics-to-move-json-file and --broker-list")
    if action != "generate" and reassignment_json_file is None:
        fail(f"--{action} requires --reassignment-json-file")
    try:
        with KafkaClient(bootstrap_server, client_id="pafka-reassign-partitions", timeout=timeout_s + 5) as client:
            admin = AdminClient(client, timeout_ms=timeout_s * 1000)
            if action == "generate":
                _generate(client, topics_to_move_json_file, broker_list)  # type: ignore[arg-type]
                return
            wanted = parse_reassignment(reassignment_json_file.read_text())  # type: ignore[union-attr]
            if action == "execute":
                _execute(client, admin, wanted, throttle)
                moves = parse_log_dirs(reassignment_json_file.read_text())  # type: ignore[union-attr]
                if moves:
                    _execute_moves(client, moves, timeout_s)
            elif action == "verify":
                _verify(client, admin, wanted, preserve_throttles)
            else:
                _cancel(client, admin, wanted, preserve_throttles)
    except KafkaClientError as exc:
        fail(f"Error: {exc}")
    sys.stdout.flush()

