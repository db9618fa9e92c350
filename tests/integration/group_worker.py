"""A consumer-group member in its own process, for tests that kill members: one per client library.

    python -m tests.integration.group_worker --client confluent-kafka --bootstrap H:P \
        --group G --topic T --events FILE [--session-timeout-ms N] [--instance-id ID] [--assignor NAME]

It subscribes, then loops: poll a batch, write ``processing`` (the records it
got), commit synchronously the offset after each partition's last record,
write ``committed`` if (and only if) the commit succeeded. Rebalance callbacks
write ``assigned`` / ``revoked``. Events are JSON lines, flushed one by one,
so a SIGKILL loses at most a partial last line. SIGTERM closes the consumer
cleanly (LeaveGroup) and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from tests.integration.group_helpers import fetch_subscription_metadata

Batch = dict[int, list[int]]  # partition -> offsets


class Events:
    def __init__(self, path: str) -> None:
        self._file = open(path, "a", buffering=1)

    def write(self, event: str, **fields: Any) -> None:
        self._file.write(json.dumps({"event": event, "t": time.time(), **fields}) + "\n")
        self._file.flush()


STOP = False


def _on_sigterm(*_: object) -> None:
    global STOP
    STOP = True


def run_confluent(args: argparse.Namespace, events: Events) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    config = {"bootstrap.servers": args.bootstrap, "group.id": args.group, "client.id": args.client_id, "enable.auto.commit": False,
              "auto.offset.reset": "earliest", "session.timeout.ms": args.session_timeout_ms,
              "heartbeat.interval.ms": max(100, args.session_timeout_ms // 10),
              "partition.assignment.strategy": args.assignor or "range", "debug": "cgrp"}
    if args.instance_id:
        config["group.instance.id"] = args.instance_id
    consumer = Consumer(config)
    consumer.subscribe([args.topic],
                       on_assign=lambda c, ps: events.write("assigned", partitions=sorted(p.partition for p in ps)),
                       on_revoke=lambda c, ps: events.write("revoked", partitions=sorted(p.partition for p in ps)))
    events.write("started")
    while not STOP:
        batch: Batch = {}
        for msg in consumer.consume(num_messages=50, timeout=0.2):
            if msg.error() is None:
                batch.setdefault(msg.partition(), []).append(msg.offset())
        if not batch:
            continue
        events.write("processing", batch=batch)
        try:
            consumer.commit(offsets=[TopicPartition(args.topic, p, max(o) + 1) for p, o in batch.items()],
                            asynchronous=False)
        except KafkaException as exc:
            events.write("commit_failed", error=str(exc))
            continue
        events.write("committed", batch=batch)
    consumer.close()
    events.write("closed")


def run_kafka_python(args: argparse.Namespace, events: Events) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata, TopicPartition
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.errors import KafkaError

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            events.write("revoked", partitions=sorted(tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned: Any) -> None:
            events.write("assigned", partitions=sorted(tp.partition for tp in assigned))

    assignor = {"roundrobin": RoundRobinPartitionAssignor}.get(args.assignor or "", RangePartitionAssignor)
    kwargs: dict[str, Any] = {}
    if args.instance_id:
        kwargs["group_instance_id"] = args.instance_id
    consumer = KafkaConsumer(bootstrap_servers=args.bootstrap, group_id=args.group, client_id=args.client_id, enable_auto_commit=False,
                             auto_offset_reset="earliest", session_timeout_ms=args.session_timeout_ms,
                             heartbeat_interval_ms=max(100, args.session_timeout_ms // 10),
                             partition_assignment_strategy=[assignor], **kwargs)
    consumer.subscribe([args.topic], listener=Listener())
    fetch_subscription_metadata(consumer)  # avoids kafka-python 3.0.12's stranded join
    events.write("started")
    while not STOP:
        records = consumer.poll(timeout_ms=200, max_records=50)
        batch: Batch = {tp.partition: [r.offset for r in rs] for tp, rs in records.items() if rs}
        if not batch:
            continue
        events.write("processing", batch=batch)
        try:
            consumer.commit({TopicPartition(args.topic, p): OffsetAndMetadata(max(o) + 1, "", -1)
                             for p, o in batch.items()})
        except KafkaError as exc:
            events.write("commit_failed", error=repr(exc))
            continue
        events.write("committed", batch=batch)
    consumer.close()
    events.write("closed")


def run_aiokafka(args: argparse.Namespace, events: Events) -> None:
    async def main() -> None:
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
        from aiokafka.coordinator.assignors.range import RangePartitionAssignor
        from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        from aiokafka.errors import KafkaError

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked: Any) -> None:
                events.write("revoked", partitions=sorted(tp.partition for tp in revoked))

            async def on_partitions_assigned(self, assigned: Any) -> None:
                events.write("assigned", partitions=sorted(tp.partition for tp in assigned))

        assignor = {"roundrobin": RoundRobinPartitionAssignor}.get(args.assignor or "", RangePartitionAssignor)
        kwargs: dict[str, Any] = {}
        if args.instance_id:
            kwargs["group_instance_id"] = args.instance_id
        consumer = AIOKafkaConsumer(bootstrap_servers=args.bootstrap, group_id=args.group, client_id=args.client_id,
                                    enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=args.session_timeout_ms,
                                    heartbeat_interval_ms=max(100, args.session_timeout_ms // 10),
                                    partition_assignment_strategy=(assignor,), **kwargs)
        consumer.subscribe([args.topic], listener=Listener())
        await consumer.start()
        events.write("started")
        while not STOP:
            records = await consumer.getmany(timeout_ms=200, max_records=50)
            batch: Batch = {tp.partition: [r.offset for r in rs] for tp, rs in records.items() if rs}
            if not batch:
                continue
            events.write("processing", batch=batch)
            try:
                await consumer.commit({TopicPartition(args.topic, p): max(o) + 1 for p, o in batch.items()})
            except KafkaError as exc:
                events.write("commit_failed", error=repr(exc))
                continue
            events.write("committed", batch=batch)
        await consumer.stop()
        events.write("closed")

    asyncio.run(main())


RUNNERS: dict[str, Callable[[argparse.Namespace, Events], None]] = {
    "confluent-kafka": run_confluent,
    "kafka-python": run_kafka_python,
    "aiokafka": run_aiokafka,
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--client", choices=sorted(RUNNERS), required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--events", required=True)
    parser.add_argument("--client-id", default="group-worker")
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--instance-id")
    parser.add_argument("--assignor")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    # The clients' group coordinators log every error the broker answers with
    # (the test reads the log for UNKNOWN_MEMBER_ID).
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    for name in ("kafka.coordinator", "aiokafka.consumer.group_coordinator"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    events = Events(args.events)
    try:
        RUNNERS[args.client](args, events)
    except Exception as exc:  # reported to the test through the events file
        events.write("crashed", error=repr(exc))
        raise


if __name__ == "__main__":
    sys.exit(main())
