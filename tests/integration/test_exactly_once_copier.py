"""Exactly-once consume-transform-produce across broker and copier crashes (the shape of Kafka's
transactions system test).

A copier process (tests/integration/eos_copier.py, confluent-kafka) copies a
2-partition input topic to a 3-partition output topic in transactions of 100
records, committing its input offsets in each transaction. Meanwhile the
broker (persistent log dir) is SIGKILLed and restarted 5 times and the copier
SIGKILLed and restarted 5 times, at seeded random points of its progress. At
the end a ``read_committed`` reader of the output sees every input record
exactly once, each input partition's records in input order within every
output partition, and the group's committed offsets are the input's end.
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.plugin import BrokerFactory
from testing.topics import create_topic
from testing.transactions import assert_no_hanging_transactions

REPO_ROOT = Path(__file__).resolve().parents[2]
RECORDS = 30_000
INPUT_PARTITIONS = 2
OUTPUT_PARTITIONS = 3
BROKER_KILLS = 5
COPIER_KILLS = 5
SEED = 16
#: The whole run (copy, kills and restarts) must be over by then.
DEADLINE_S = 150.0
INPUT, OUTPUT, GROUP, TID = "eos-in", "eos-out", "eos-copier", "eos-copier-tid"


@dataclass
class CopierProcess:
    """The copier subprocess; restarted (same transactional id) whenever it is killed or gives up."""

    bootstrap: str
    root: Path
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    exits: list[int] = field(default_factory=list)

    @property
    def progress_path(self) -> Path:
        return self.root / "copier.progress"

    def start(self) -> None:
        self.starts += 1
        with open(self.root / "copier.log", "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.integration.eos_copier", "--bootstrap", self.bootstrap,
                 "--input", INPUT, "--output", OUTPUT, "--group", GROUP, "--transactional-id", TID,
                 "--progress", str(self.progress_path), "--debug", os.environ.get("EOS_COPIER_DEBUG", "")],
                stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT)

    def kill(self) -> bool:
        """SIGKILL; False if the copier had exited already."""
        assert self.process is not None
        running = self.process.poll() is None
        if running:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)
        return running

    def committed(self) -> int:
        """The input positions the copier last reported committed (0 before any commit)."""
        if not self.progress_path.exists():
            return 0
        counts = [int(line.split()[1]) for line in self.progress_path.read_text().splitlines()
                  if line.startswith("committed ")]
        return counts[-1] if counts else 0

    def poll(self) -> int | None:
        """The exit status once the copier has finished; a copier that failed is started again."""
        assert self.process is not None
        status = self.process.poll()
        if status is None or status == 0:
            return status
        self.exits.append(status)
        self.start()
        return None


@pytest.fixture
def broker(tmp_path: Path, pafka_broker_factory: BrokerFactory) -> Iterator[BrokerProcess]:
    process = pafka_broker_factory("transaction.abort.timed.out.transaction.cleanup.interval.ms=1000",
                                   data_dir=tmp_path / "data")
    yield process
    # What the broker said of the copier's transactional id, and its warnings, then its last lines.
    lines = process.log_text().splitlines()
    print("\n".join([line for line in lines if TID in line or " WARNING " in line or " ERROR " in line][-60:]))
    print("\n".join(lines[-20:]))


def _produce_input(bootstrap: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20})
    for record_id in range(RECORDS):
        while True:
            try:
                producer.produce(INPUT, str(record_id).encode(), key=str(record_id).encode(),
                                 partition=record_id % INPUT_PARTITIONS)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(30) == 0


def _schedule(rng: random.Random) -> list[tuple[float, str]]:
    """Ten crashes, broker and copier shuffled, each at a progress fraction spread over the copy."""
    kinds = ["broker"] * BROKER_KILLS + ["copier"] * COPIER_KILLS
    rng.shuffle(kinds)
    step = 0.85 / len(kinds)
    return [(0.03 + step * i + rng.uniform(0, step * 0.8), kind) for i, kind in enumerate(kinds)]


def _run_with_crashes(broker: BrokerProcess, copier: CopierProcess, rng: random.Random
                      ) -> list[tuple[str, int, float]]:
    """Copy to the end, crashing at each scheduled point; the crashes done: (what, progress, seconds)."""
    done: list[tuple[str, int, float]] = []
    schedule = _schedule(rng)
    started = time.monotonic()
    deadline = started + DEADLINE_S
    last_crash_at = -1
    copier.start()
    while True:
        assert time.monotonic() < deadline, (f"copy not finished in {DEADLINE_S} s; crashes so far {done}, "
                                             f"progress {copier.committed()}/{RECORDS}, copier exits {copier.exits}")
        if copier.poll() == 0:
            return done
        progress = copier.committed()
        # The next crash once its point is reached and the copier committed since the last one.
        if schedule and progress >= schedule[0][0] * RECORDS and progress > last_crash_at:
            _, kind = schedule.pop(0)
            last_crash_at = progress
            time.sleep(rng.uniform(0, 0.2))  # somewhere inside the next transaction
            if kind == "broker":
                broker.kill()
                time.sleep(rng.uniform(0, 0.5))
                broker.start()
            else:
                assert copier.kill(), "the copier finished before its crash"
                copier.start()
            done.append((kind, progress, round(time.monotonic() - started, 2)))
        time.sleep(0.01)


def _describe_transaction(bootstrap: str) -> str:
    """What the coordinator says of the copier's transactional id (pafka transactions describe)."""
    described = subprocess.run([sys.executable, "-m", "tools", "transactions", "--bootstrap-server", bootstrap,
                                "--timeout-ms", "5000", "describe", "--transactional-id", TID],
                               capture_output=True, text=True, timeout=30, cwd=REPO_ROOT)
    return described.stdout + described.stderr


def _read_output(bootstrap: str) -> dict[int, list[tuple[int, int, int]]]:
    """Every committed output record, per output partition: (id, input partition, input offset)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-verifier", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                         "fetch.wait.max.ms": 50})
    try:
        consumer.assign([TopicPartition(OUTPUT, p, 0) for p in range(OUTPUT_PARTITIONS)])
        seen: dict[int, list[tuple[int, int, int]]] = {p: [] for p in range(OUTPUT_PARTITIONS)}
        count, quiet_until = 0, None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            messages = consumer.consume(1000, 0.2)
            for m in messages:
                if m.error() is None:
                    record_id, partition, offset = (int(x) for x in m.value().split(b"|"))
                    seen[m.partition()].append((record_id, partition, offset))
                    count += 1
            # Read on a little past the expected count: a duplicate must get its chance to show up.
            if count >= RECORDS and quiet_until is None:
                quiet_until = time.monotonic() + 2.0
            if quiet_until is not None and time.monotonic() > quiet_until:
                break
        return seen
    finally:
        consumer.close()


def _committed_offsets(bootstrap: str) -> tuple[list[int], list[int]]:
    """(the group's committed input offsets, the input's end offsets)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    try:
        tps = [TopicPartition(INPUT, p) for p in range(INPUT_PARTITIONS)]
        committed = [tp.offset for tp in consumer.committed(tps, 20)]
        ends = [consumer.get_watermark_offsets(tp, 20)[1] for tp in tps]
        return committed, ends
    finally:
        consumer.close()


def test_copy_is_exactly_once_across_broker_and_copier_kills(broker: BrokerProcess, tmp_path: Path) -> None:
    create_topic(broker.bootstrap, INPUT, INPUT_PARTITIONS)
    create_topic(broker.bootstrap, OUTPUT, OUTPUT_PARTITIONS)
    _produce_input(broker.bootstrap)
    copier = CopierProcess(broker.bootstrap, tmp_path)
    started = time.monotonic()
    try:
        crashes = _run_with_crashes(broker, copier, random.Random(SEED))
    except AssertionError:
        print(_describe_transaction(broker.bootstrap))  # e.g. an id left prepared: its state says so
        raise
    finally:
        if copier.process is not None and copier.process.poll() is None:
            os.kill(copier.process.pid, signal.SIGUSR1)  # its stacks, into copier.log
            time.sleep(0.5)
            copier.kill()
        print(f"copier starts {copier.starts}, failed exits {copier.exits}, "
              f"{time.monotonic() - started:.1f} s")
        print((tmp_path / "copier.log").read_text(errors="replace")[-4000:]
              if (tmp_path / "copier.log").exists() else "")
        print("\n".join(line for line in copier.progress_path.read_text().splitlines()
                        if not line.startswith("committed"))[-4000:] if copier.progress_path.exists() else "")
    print("crashes (what, progress, seconds):", crashes)
    assert sorted(kind for kind, _, _ in crashes) == ["broker"] * BROKER_KILLS + ["copier"] * COPIER_KILLS
    assert all(progress < RECORDS for _, progress, _ in crashes)

    output = _read_output(broker.bootstrap)
    ids = sorted(record_id for records in output.values() for record_id, _, _ in records)
    missing = sorted(set(range(RECORDS)) - set(ids))
    duplicates = sorted({i for i, j in itertools.pairwise(ids) if i == j})
    assert (missing[:10], duplicates[:10], len(ids)) == ([], [], RECORDS)
    for out_partition, records in output.items():
        assert all(record_id % OUTPUT_PARTITIONS == out_partition for record_id, _, _ in records)
        for in_partition in range(INPUT_PARTITIONS):
            offsets = [offset for _, p, offset in records if p == in_partition]
            assert offsets == sorted(offsets), f"output {out_partition}: input {in_partition} out of order"
    # The input was produced in id order, alternating partitions: offset o of partition p is id 2o + p.
    assert all(record_id == INPUT_PARTITIONS * offset + p
               for records in output.values() for record_id, p, offset in records)

    committed, ends = _committed_offsets(broker.bootstrap)
    assert ends == [RECORDS // INPUT_PARTITIONS] * INPUT_PARTITIONS
    assert committed == ends
    assert_no_hanging_transactions(broker.bootstrap)
