"""AlterReplicaLogDirs on a real broker with two log dirs: its answers at every version, and a
partition moved while a producer writes and a consumer reads (nothing lost, doubled or reordered)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from client import KafkaClient
from protocol.errors import ErrorCode
from protocol.messages import alter_replica_log_dirs as arld
from protocol.messages import describe_log_dirs as dl
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.plugin import BrokerFactory
from pytest_pafka.waiting import wait_until
from testing.sockets import send_request
from tools.cli import main
from tools.reassign_partitions_command import _execute_moves, parse_log_dirs, parse_reassignment

#: The copy's throttle here, and the producer's pace (below it: the copy catches up while it writes).
THROTTLE = 4_000_000
RECORDS_PER_S, RECORD_BYTES, PRODUCE_S = 2000, 1000, 5.0


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("jbod")
    return root / "a", root / "b"


@pytest.fixture(scope="module")
def jbod(pafka_module_broker_factory: BrokerFactory, dirs: tuple[Path, Path]) -> BrokerProcess:
    # file.delete.delay.ms 0: the replaced log is removed at the next deletion pass (every second);
    # the cleaner looks for dirty logs every 50 ms (a compacted partition is cleaned while it moves)
    return pafka_module_broker_factory(f"log.dirs={dirs[0]},{dirs[1]}", "log.segment.delete.delay.ms=0",
                                       "log.cleaner.backoff.ms=50")


@pytest.fixture(scope="module")
def admin(jbod: BrokerProcess) -> Iterator[AdminClient]:
    yield AdminClient({"bootstrap.servers": jbod.bootstrap})


def _create(admin: AdminClient, topic: str) -> None:
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(10)


def _alter(broker: BrokerProcess, topic: str, path: Path, version: int = 2, partition: int = 0) -> int:
    request = arld.AlterReplicaLogDirsRequest(dirs=[arld.AlterReplicaLogDir(
        path=str(path), topics=[arld.AlterReplicaLogDirTopic(name=topic, partitions=[partition])])])
    (result,) = send_request(broker, 34, version, request).results
    assert result.topic_name == topic
    return int(result.partitions[0].error_code)


def _placement(broker: BrokerProcess, topic: str) -> dict[str, list[bool]]:
    """DescribeLogDirs: log dir -> the is_future_key of each replica of ``topic`` there."""
    response = send_request(broker, 35, 4, dl.DescribeLogDirsRequest(topics=None))
    return {r.log_dir: [p.is_future_key for t in r.topics if t.name == topic for p in t.partitions]
            for r in response.results}


def _dir_holding(broker: BrokerProcess, topic: str, dirs: tuple[Path, Path]) -> tuple[Path, Path]:
    placement = _placement(broker, topic)
    source = next(d for d in dirs if placement[str(d.resolve())] == [False])
    return source, next(d for d in dirs if d != source)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_the_answers_at_every_version(jbod: BrokerProcess, admin: AdminClient, dirs: tuple[Path, Path],
                                      version: int) -> None:
    topic = f"arld-v{version}"
    _create(admin, topic)
    source, _ = _dir_holding(jbod, topic, dirs)
    assert _alter(jbod, topic, source.parent / "elsewhere", version) == ErrorCode.LOG_DIR_NOT_FOUND
    assert _alter(jbod, "no-such-topic", source, version) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert _alter(jbod, topic, source, version) == ErrorCode.NO_ERROR  # already there


class _Producer(threading.Thread):
    """Sequence numbers as values, paced, idempotent, acks=all."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.topic, self.acked = topic, 0
        self.errors: list[KafkaError] = []
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                   "linger.ms": 5})

    def _report(self, err: KafkaError | None, _: Message) -> None:
        if err is None:
            self.acked += 1
        else:
            self.errors.append(err)

    def run(self) -> None:
        pad, started, n = b"x" * (RECORD_BYTES - 10), time.monotonic(), 0
        while (elapsed := time.monotonic() - started) < PRODUCE_S:
            while n < elapsed * RECORDS_PER_S:
                self._producer.produce(self.topic, value=b"%09d " % n + pad, partition=0, on_delivery=self._report)
                n += 1
            self._producer.poll(0.005)
        self._producer.flush(30)


def _consume(bootstrap: str, topic: str, expected: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "arld-check", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen: list[int] = []
    deadline = time.monotonic() + 30
    try:
        while len(seen) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.append(int(msg.value()[:9]))  # type: ignore[index]
    finally:
        consumer.close()
    return seen


def test_a_partition_moves_under_load(jbod: BrokerProcess, admin: AdminClient, dirs: tuple[Path, Path]) -> None:
    topic = "arld-load"
    _create(admin, topic)
    resource = ConfigResource("broker", "0", incremental_configs=[ConfigEntry(
        "replica.alter.log.dirs.io.max.bytes.per.second", str(THROTTLE),
        incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(10)
    source, target = _dir_holding(jbod, topic, dirs)
    producer = _Producer(jbod.bootstrap, topic)
    producer.start()
    time.sleep(1.5)  # some data first: the copy has work to do while the producer goes on
    assert _alter(jbod, topic, target.resolve()) == ErrorCode.NO_ERROR
    assert _placement(jbod, topic)[str(target.resolve())] in ([True], [False])  # moving (or already moved)
    wait_until(lambda: _placement(jbod, topic)[str(target.resolve())] == [False], 20, "the swap")
    acked_at_swap = producer.acked
    producer.join(40)
    assert acked_at_swap < producer.acked  # the swap came while the producer was writing
    assert not producer.errors and producer.acked >= RECORDS_PER_S * PRODUCE_S * 0.9

    assert _consume(jbod.bootstrap, topic, producer.acked) == list(range(producer.acked))
    assert (target / f"{topic}-0").is_dir() and not (source / f"{topic}-0").exists()
    wait_until(lambda: not [p for p in source.iterdir() if p.name.startswith(topic)], 10, "the old log's removal")
    assert "Traceback" not in jbod.log_text()


def test_reassign_partitions_sends_the_log_dirs_of_its_plan(jbod: BrokerProcess, admin: AdminClient,
                                                            dirs: tuple[Path, Path],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    topic = "arld-cli"
    _create(admin, topic)
    _, target = _dir_holding(jbod, topic, dirs)
    plan = json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [0], "log_dirs": [str(target.resolve())]},
        {"topic": "arld-v1", "partition": 0, "replicas": [0], "log_dirs": ["any"]}]})
    assert parse_reassignment(plan) == {(topic, 0): [0], ("arld-v1", 0): [0]}
    moves = parse_log_dirs(plan)
    assert moves == {(topic, 0, 0): str(target.resolve())}
    with KafkaClient(jbod.bootstrap) as client:
        _execute_moves(client, moves, 5)
    assert capsys.readouterr().out == f"Successfully started log directory move for: 0-{topic}-0\n"
    wait_until(lambda: _placement(jbod, topic)[str(target.resolve())] == [False], 10, "the move")


def test_log_dirs_describes_both_dirs_and_a_moved_replica(jbod: BrokerProcess, admin: AdminClient,
                                                          dirs: tuple[Path, Path]) -> None:
    topic = "arld-describe"
    _create(admin, topic)
    _create(admin, f"{topic}-other")
    producer = Producer({"bootstrap.servers": jbod.bootstrap})
    producer.produce(topic, b"v" * 100, partition=0)
    assert producer.flush(10) == 0
    source, target = _dir_holding(jbod, topic, dirs)
    (before,) = _log_dirs(jbod, "--topic-list", topic)[str(source.resolve())]
    assert before["partition"] == f"{topic}-0" and int(before["size"]) > 100  # type: ignore[call-overload]
    assert _alter(jbod, topic, target.resolve()) == ErrorCode.NO_ERROR
    wait_until(lambda: _log_dirs(jbod, "--topic-list", topic)[str(source.resolve())] == [], 10, "the move")
    (moved,) = _log_dirs(jbod, "--topic-list", topic, "--broker-list", "0")[str(target.resolve())]
    assert moved == {**before, "partition": f"{topic}-0", "offsetLag": 0, "isFuture": False}
    everything = _log_dirs(jbod)
    assert any(p["partition"] == f"{topic}-other-0" for ps in everything.values() for p in ps)
    result = CliRunner().invoke(main, ["log-dirs", "--describe", "--bootstrap-server", jbod.bootstrap,
                                       "--broker-list", "0,7"])
    assert result.exit_code == 1
    assert "The given brokers do not exist from --broker-list: 7. Current existent brokers: 0" in result.output


def _log_dirs(broker: BrokerProcess, *options: str) -> dict[str, list[dict[str, object]]]:
    """``pafka log-dirs --describe``: its two progress lines, then its JSON as log dir -> partitions."""
    result = CliRunner().invoke(main, ["log-dirs", "--describe", "--bootstrap-server", broker.bootstrap, *options])
    assert result.exit_code == 0, result.output
    querying, received, line = result.output.splitlines()
    assert (querying, received) == ("Querying brokers for log directories information",
                                    "Received log directory information from brokers 0")
    assert line.startswith('{"brokers":[{"broker":0,"logDirs":[{"partitions":[') and line.endswith('"version":1}')
    (broker_json,) = json.loads(line)["brokers"]
    assert all(d["error"] is None for d in broker_json["logDirs"])
    return {d["logDir"]: d["partitions"] for d in broker_json["logDirs"]}


def _cleaned_up_to(dir: Path, topic: str) -> int:
    """The cleaner's checkpoint of ``topic``-0 in ``dir`` (-1 when it has none)."""
    checkpoint = dir / "cleaner-offset-checkpoint"
    lines = checkpoint.read_text().splitlines()[2:] if checkpoint.exists() else []
    return max([int(offset) for t, p, offset in map(str.split, lines) if (t, p) == (topic, "0")], default=-1)


def _set_alter_log_dirs_throttle(admin: AdminClient, rate: int) -> None:
    resource = ConfigResource("broker", "0", incremental_configs=[ConfigEntry(
        "replica.alter.log.dirs.io.max.bytes.per.second", str(rate), incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(10)


def test_a_compacted_partition_moves_while_the_cleaner_runs(jbod: BrokerProcess, admin: AdminClient,
                                                            dirs: tuple[Path, Path]) -> None:
    topic, keys = "arld-compacted", 500
    configs = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01"}
    for future in admin.create_topics([NewTopic(topic, 1, 1, config=configs)]).values():
        future.result(10)
    source, target = _dir_holding(jbod, topic, dirs)
    producer = Producer({"bootstrap.servers": jbod.bootstrap, "linger.ms": 5})
    latest: dict[bytes, bytes] = {}

    def produce(seconds: float, per_s: int) -> None:
        """Paced; each key rewritten every ``keys`` records, so the cleaner always has work."""
        started, first = time.monotonic(), len(latest) and max(int(v[:9]) for v in latest.values()) + 1
        n = first
        while (elapsed := time.monotonic() - started) < seconds:
            while n - first < elapsed * per_s:
                key, value = b"k%03d" % (n % keys), b"%09d " % n + b"x" * 990
                producer.produce(topic, value, key, partition=0)
                latest[key] = value
                n += 1
            producer.poll(0.01)
        assert producer.flush(10) == 0

    produce(1.0, 2000)
    wait_until(lambda: _cleaned_up_to(source, topic) > 0, 10, "a first cleaning pass")
    # about 500 KB to copy at 200 KB/s, while 50 KB/s more arrive and the cleaner runs on every segment
    _set_alter_log_dirs_throttle(admin, 200_000)
    assert _alter(jbod, topic, target.resolve()) == ErrorCode.NO_ERROR
    produce(2.0, 50)
    wait_until(lambda: _placement(jbod, topic)[str(target.resolve())] == [False], 30, "the swap")
    _set_alter_log_dirs_throttle(admin, 100_000_000)
    assert _cleaned_up_to(source, topic) == -1  # the cleaner's checkpoint moved with the log
    moved_at = _cleaned_up_to(target, topic)
    assert moved_at > 0
    produce(0.5, 1000)
    wait_until(lambda: _cleaned_up_to(target, topic) > moved_at, 10, "cleaning of the moved log")

    consumer = Consumer({"bootstrap.servers": jbod.bootstrap, "group.id": "arld-compacted"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen: dict[bytes, bytes] = {}
    deadline = time.monotonic() + 20
    while seen != latest and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen[msg.key()] = msg.value()  # type: ignore[index]
    consumer.close()
    assert seen == latest
    log_text = jbod.log_text()
    assert "Traceback" not in log_text and "log cleaning failed" not in log_text
