"""A partition moved between a broker's two log dirs (AlterReplicaLogDirs) under load, throttled.

One pafka broker (a subprocess) with ``log.dirs`` of two directories and a one-partition
topic filled with ``--prefill-mb`` MB; ``replica.alter.log.dirs.io.max.bytes.per.second`` is
set to ``--throttle-mb`` MB/s. Then a producer (confluent-kafka, acks=all, idempotent)
writes ``--produce-mb-s`` MB/s for ``--produce-s`` s, a consumer reads from the start, and
AlterReplicaLogDirs moves the partition to the other dir. DescribeLogDirs is asked every
0.5 s for the future replica's size.

Printed (JSON): the copy rate while the future replica grew (its size over the time it was
seen growing) against the throttle, the move's length, the broker's CPU per MB copied
(process CPU time from /proc, robust to the shared machine's contention), and the records
lost, duplicated and reordered between what the producer had acknowledged and what the
consumer read (sequence numbers in the values). Run:

    .venv/bin/python -m benchmarks.suite.alter_log_dirs --prefill-mb 200 --throttle-mb 10 \\
        --produce-mb-s 20 --produce-s 10
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from protocol.messages import alter_replica_log_dirs as arld
from protocol.messages import describe_log_dirs as dl
from pytest_pafka.broker_process import BrokerProcess
from testing.sockets import send_request

TOPIC = "jbod-move"
VALUE_BYTES = 10_000
MB = 1_000_000


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (/proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Produced:
    """Sequence numbers as values: ``next`` is the next to send, ``acked`` how many came back."""

    next: int = 0
    acked: int = 0
    errors: list[str] = field(default_factory=list)


def produce(bootstrap: str, state: Produced, mb_per_s: float | None, seconds: float | None, count: int | None) -> None:
    """Paced at ``mb_per_s`` for ``seconds``, or ``count`` records as fast as they go."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "batch.size": 1_000_000})
    pad = b"x" * (VALUE_BYTES - 12)

    def report(err: KafkaError | None, _: Message) -> None:
        if err is None:
            state.acked += 1
        else:
            state.errors.append(str(err))

    started, first = time.monotonic(), state.next
    while True:
        elapsed = time.monotonic() - started
        if (seconds is not None and elapsed >= seconds) or (count is not None and state.next - first >= count):
            break
        due = count if mb_per_s is None else int(elapsed * mb_per_s * MB / VALUE_BYTES) + 1
        while state.next - first < (due or 0):
            try:
                producer.produce(TOPIC, value=b"%011d " % state.next + pad, partition=0, on_delivery=report)
            except BufferError:
                producer.poll(0.01)
                continue
            state.next += 1
        producer.poll(0.002)
    producer.flush(120)


def consume(bootstrap: str, seen: list[int], stop: threading.Event) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "jbod-check", "enable.auto.commit": False,
                         "fetch.max.bytes": 20 * MB})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    idle_since = None
    while True:
        msgs = consumer.consume(1000, 0.2)
        good = [m for m in msgs if m.error() is None]
        seen += [int(m.value()[:11]) for m in good]  # type: ignore[index]
        if good:
            idle_since = None
        elif stop.is_set():
            idle_since = idle_since or time.monotonic()
            if time.monotonic() - idle_since > 3:
                break
    consumer.close()


def placement(broker: BrokerProcess) -> dict[str, list[tuple[bool, int]]]:
    """Log dir -> (is future, size) of each replica of the topic there."""
    response = send_request(broker, 35, 4, dl.DescribeLogDirsRequest(topics=None))
    return {r.log_dir: [(p.is_future_key, p.partition_size) for t in r.topics if t.name == TOPIC
                        for p in t.partitions] for r in response.results}


def verify(acked: int, seen: list[int]) -> dict[str, int]:
    """Records lost (acked, never read), duplicated (read twice) and reordered (read after a larger)."""
    duplicated = len(seen) - len(set(seen))
    reordered = sum(1 for a, b in itertools.pairwise(seen) if b <= a)
    lost = len(set(range(acked)) - set(seen))
    return {"acked": acked, "read": len(seen), "lost": lost, "duplicated": duplicated, "reordered": reordered}


def set_throttle(admin: AdminClient, bytes_per_s: int) -> None:
    resource = ConfigResource("broker", "0", incremental_configs=[ConfigEntry(
        "replica.alter.log.dirs.io.max.bytes.per.second", str(bytes_per_s),
        incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(10)


def move(broker: BrokerProcess, target: Path) -> dict[str, float]:
    """Send the move; sample the future replica until it is swapped in. Its figures."""
    request = arld.AlterReplicaLogDirsRequest(dirs=[arld.AlterReplicaLogDir(
        path=str(target), topics=[arld.AlterReplicaLogDirTopic(name=TOPIC, partitions=[0])])])
    cpu_before, started = cpu_seconds(broker.pid or 0), time.monotonic()
    (result,) = send_request(broker, 34, 2, request).results
    assert result.partitions[0].error_code == 0, result
    samples: list[tuple[float, int]] = []
    while True:
        time.sleep(0.5)
        here = placement(broker)[str(target)]
        if here == [] or here[0][0]:
            samples.append((time.monotonic(), here[0][1] if here else 0))
        elif here and not here[0][0]:
            break
    took, final_size = time.monotonic() - started, here[0][1]
    growing = [s for s in samples if s[1] > 0]
    (t0, s0), (t1, s1) = growing[0], growing[-1]
    return {"move_s": round(took, 1), "moved_mb": round(final_size / MB, 1),
            "copy_rate_mb_s": round((s1 - s0) / (t1 - t0) / MB, 2),
            "whole_move_rate_mb_s": round(final_size / took / MB, 2),
            "broker_cpu_s": round(cpu_seconds(broker.pid or 0) - cpu_before, 1)}


def run(args: argparse.Namespace) -> dict[str, object]:
    root = Path(tempfile.mkdtemp(prefix="pafka-jbod-"))
    a, b = root / "a", root / "b"
    with BrokerProcess(f"log.dirs={a},{b}", "log.segment.delete.delay.ms=0", data_dir=root / "data") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
            future.result(10)
        state = Produced()
        produce(broker.bootstrap, state, None, None, args.prefill_mb * MB // VALUE_BYTES)
        set_throttle(admin, args.throttle_mb * MB)
        source = next(Path(d) for d, replicas in placement(broker).items() if replicas)
        target = (b if source == a.resolve() else a).resolve()
        seen: list[int] = []
        stop = threading.Event()
        reader = threading.Thread(target=consume, args=(broker.bootstrap, seen, stop), daemon=True)
        writer = threading.Thread(target=produce, args=(broker.bootstrap, state, args.produce_mb_s, args.produce_s,
                                                        None), daemon=True)
        reader.start()
        writer.start()
        figures = move(broker, target)
        writer.join()
        stop.set()
        reader.join(300)
        leftovers = sorted(p.name for p in source.iterdir() if p.name.startswith(TOPIC))
    return {"throttle_mb_s": args.throttle_mb, "produce_mb_s": args.produce_mb_s, "produce_s": args.produce_s,
            "prefill_mb": args.prefill_mb, **figures,
            "copy_rate_vs_throttle": round(figures["copy_rate_mb_s"] / args.throttle_mb, 3),
            "broker_cpu_ms_per_mb_moved": round(figures["broker_cpu_s"] * 1000 / figures["moved_mb"], 1),
            "source_dir_left": leftovers, "producer_errors": state.errors[:3], **verify(state.acked, seen)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prefill-mb", type=int, default=200)
    parser.add_argument("--throttle-mb", type=int, default=10)
    parser.add_argument("--produce-mb-s", type=float, default=20)
    parser.add_argument("--produce-s", type=float, default=10)
    print(json.dumps(run(parser.parse_args()), indent=2))


if __name__ == "__main__":
    main()
