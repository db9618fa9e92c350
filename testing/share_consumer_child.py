"""A confluent-kafka share consumer in a process of its own, logging what it saw for testing/share_history.py.

    python -m testing.share_consumer_child --bootstrap HOST:PORT --group G --topic T --name c1 --log c1.jsonl
        [--policy accept|mixed|hold] [--stop-file PATH] [--deadline-s 120]

It acknowledges explicitly and commits each batch synchronously; an acknowledgement is logged only once the
broker answered it without error, with the time it was sent (the broker applied it no earlier). An acquisition
is logged with the time the poll began. ``--policy``:

* ``accept``: accept every record;
* ``mixed``: offset % 10 == 0 is released on its first delivery, == 1 rejected, == 2 released on every delivery
  (archived at the delivery count limit), the rest accepted;
* ``hold``: acquire one batch, log it, write ``<log>.holding`` and wait to be killed.

It stops when the stop file exists (closing, which leaves the group) or at the deadline."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, TextIO

import confluent_kafka

from testing.share_history import ACCEPT, REJECT, RELEASE


def now_ms() -> int:
    return int(time.time() * 1000)


def decide(policy: str, offset: int, delivery_count: int) -> int:
    if policy != "mixed":
        return ACCEPT
    kind = offset % 10
    if (kind == 0 and delivery_count == 1) or kind == 2:
        return RELEASE
    return REJECT if kind == 1 else ACCEPT


def write(log: TextIO, *event: object) -> None:
    log.write(json.dumps(list(event)) + "\n")


def acknowledge_batch(consumer: Any, log: TextIO, name: str, batch: list[Any], policy: str) -> None:
    kinds = {}
    for message in batch:
        kind = decide(policy, message.offset(), message.delivery_count())
        consumer.acknowledge(message, kind)
        kinds[(message.partition(), message.offset())] = kind
    sent = now_ms()
    try:
        results = consumer.commit_sync(30)
    except confluent_kafka.KafkaException:
        results = dict.fromkeys({confluent_kafka.TopicPartition(m.topic(), m.partition()) for m in batch}, "failed")
    failed = {tp.partition for tp, error in results.items() if error is not None}
    for (partition, offset), kind in kinds.items():
        if partition in failed:
            write(log, "failed", name, partition, offset, sent)
        else:
            write(log, "acknowledged", name, partition, offset, kind, sent)


def consume(consumer: Any, args: argparse.Namespace, log: TextIO) -> None:
    deadline = time.monotonic() + args.deadline_s
    while time.monotonic() < deadline and not (args.stop_file and Path(args.stop_file).exists()):
        began = now_ms()
        batch = [m for m in consumer.poll(0.5) if m.error() is None]
        for message in batch:
            write(log, "acquired", args.name, message.partition(), message.offset(), message.delivery_count(),
                  began)
        log.flush()
        if not batch:
            continue
        if args.policy == "hold":
            Path(args.log + ".holding").write_text(str(len(batch)))
            time.sleep(3600)
        acknowledge_batch(consumer, log, args.name, batch, args.policy)
        log.flush()


def main() -> None:
    parser = argparse.ArgumentParser()
    for option in ("--bootstrap", "--group", "--topic", "--name", "--log"):
        parser.add_argument(option, required=True)
    parser.add_argument("--policy", default="accept", choices=["accept", "mixed", "hold"])
    parser.add_argument("--stop-file")
    parser.add_argument("--deadline-s", type=float, default=120.0)
    args = parser.parse_args()
    consumer = confluent_kafka.ShareConsumer({
        "bootstrap.servers": args.bootstrap, "group.id": args.group, "client.id": args.name,
        "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([args.topic])
    with open(args.log, "a") as log:
        try:
            consume(consumer, args, log)
        finally:
            write(log, "left", args.name, now_ms())
            log.flush()
            consumer.close()


if __name__ == "__main__":
    main()
