"""Producing for the Spark tests (confluent-kafka, an independent client); topics come from testing.topics."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Produced:
    """One record as produced and as the broker acknowledged it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int


def add_partitions(bootstrap: str, topic: str, total: int) -> None:
    from client import AdminClient, KafkaClient

    with KafkaClient(bootstrap) as client:
        AdminClient(client).create_partitions({topic: total})


def produce(bootstrap: str, topic: str, records: Sequence[tuple[int, bytes | None, bytes | None,
                                                                Sequence[tuple[str, bytes | None]], int]]
            ) -> list[Produced]:
    """Produce ``(partition, key, value, headers, timestamp_ms)`` with confluent-kafka; the acknowledged records."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 5000,
                         "queue.buffering.max.messages": 500_000, "enable.idempotence": True})
    acked: list[Produced] = []
    errors: list[str] = []

    def on_delivery(headers: tuple[tuple[str, bytes | None], ...]):  # type: ignore[no-untyped-def]
        # Delivery reports do not carry headers: remember the ones sent.
        def delivered(err, msg) -> None:  # type: ignore[no-untyped-def]
            if err is not None:
                errors.append(str(err))
                return
            acked.append(Produced(msg.partition(), msg.offset(), msg.key(), msg.value(), headers, msg.timestamp()[1]))
        return delivered

    for partition, key, value, headers, ts in records:
        while True:
            try:
                producer.produce(topic, value=value, key=key, partition=partition, headers=list(headers) or None,
                                 timestamp=ts, on_delivery=on_delivery(tuple(headers)))
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0, "records left unacknowledged"
    assert not errors, errors[:5]
    return acked
