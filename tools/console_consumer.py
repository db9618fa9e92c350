"""``pafka console-consumer``: kafka-console-consumer.sh on pafka's client.

Consumes every partition of a topic (or one, with ``--partition``) without a
consumer group, fetching all partitions in one Fetch per leader, and prints
records as Kafka's DefaultMessageFormatter does::

    [CreateTime:ts<sep>][Partition:p<sep>][Offset:o<sep>][h1:v1,h2:v2<sep>][key<sep>]value<line.separator>

where ``<sep>`` is ``key.separator`` (tab), headers are joined with
``headers.separator`` (",") and a record without headers prints
``NO_HEADERS``; null keys, values and header values print ``null.literal``
("null"). Stops after ``--max-messages`` or when no record arrived for
``--timeout-ms``, then reports ``Processed a total of N messages`` on stderr.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import BinaryIO

import click

from client import (
    FetchedBatch,
    KafkaClient,
    KafkaClientError,
    KafkaConnectionError,
    OffsetOutOfRangeError,
    TopicPartition,
)
from protocol.records import Record
from protocol.request_constants import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, READ_COMMITTED, READ_UNCOMMITTED
from tools.common import fail, parse_bool, parse_properties

_MAX_WAIT_MS = 500
_RECONNECT_BACKOFF_S = 0.5


@dataclass(frozen=True, slots=True)
class MessageFormat:
    """DefaultMessageFormatter's settings (the console consumer's --property)."""

    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> MessageFormat:
        return cls(
            print_timestamp=parse_bool(props.get("print.timestamp")),
            print_partition=parse_bool(props.get("print.partition")),
            print_offset=parse_bool(props.get("print.offset")),
            print_headers=parse_bool(props.get("print.headers")),
            print_key=parse_bool(props.get("print.key")),
            print_value=parse_bool(props.get("print.value"), default=True),
            key_separator=props.get("key.separator", "\t").encode(),
            line_separator=props.get("line.separator", "\n").encode(),
            headers_separator=props.get("headers.separator", ",").encode(),
            null_literal=props.get("null.literal", "null").encode(),
        )

    def format(self, record: Record, partition: int, timestamp_type: str) -> bytes:
        columns = []
        if self.print_timestamp:
            # v2 batches always carry a timestamp type, so Kafka never prints
            # NO_TIMESTAMP for them, even for a -1 timestamp.
            columns.append(f"{timestamp_type}:{record.timestamp}".encode())
        if self.print_partition:
            columns.append(b"Partition:%d" % partition)
        if self.print_offset:
            columns.append(b"Offset:%d" % record.offset)
        if self.print_headers:
            columns.append(self._headers(record))
        if self.print_key:
            columns.append(self._or_null(record.key))
        if self.print_value:
            columns.append(self._or_null(record.value))
        return self.key_separator.join(columns) + self.line_separator

    def _or_null(self, data: bytes | None) -> bytes:
        return self.null_literal if data is None else data

    def _headers(self, record: Record) -> bytes:
        if not record.headers:
            return b"NO_HEADERS"
        return self.headers_separator.join(
            name.encode("utf-8", "surrogateescape") + b":" + self._or_null(value) for name, value in record.headers
        )


class ConsoleConsumer:
    """Fetches a topic's partitions from their start offsets and prints records."""

    def __init__(
        self,
        client: KafkaClient,
        topic: str,
        fmt: MessageFormat,
        out: BinaryIO,
        *,
        partition: int | None = None,
        offset: str = "latest",
        reset_to_earliest: bool = False,
        isolation_level: int = READ_UNCOMMITTED,
        max_partition_fetch_bytes: int = 1024 * 1024,
    ) -> None:
        self.client = client
        self.topic = topic
        self.fmt = fmt
        self.out = out
        self.reset_to_earliest = reset_to_earliest
        self.isolation_level = isolation_level
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.processed = 0
        partitions = client.partitions_for(topic)
        if partition is not None:
            if partition not in partitions:
                raise click.BadParameter(f"partition {partition} does not exist in topic {topic}")
            partitions = [partition]
        self.positions = self._start_positions([TopicPartition(topic, p) for p in partitions], offset)

    def _start_positions(self, tps: list[TopicPartition], offset: str) -> dict[TopicPartition, int]:
        if offset not in ("earliest", "latest"):
            return {tp: int(offset) for tp in tps}
        timestamp = EARLIEST_TIMESTAMP if offset == "earliest" else LATEST_TIMESTAMP
        return {tp: found.offset for tp, found in self.client.list_offsets(dict.fromkeys(tps, timestamp)).items()}

    def run(self, max_messages: int | None, timeout_ms: int | None) -> None:
        last_data = time.monotonic()
        while max_messages is None or self.processed < max_messages:
            wait_ms = _MAX_WAIT_MS
            if timeout_ms is not None:
                remaining_ms = timeout_ms - (time.monotonic() - last_data) * 1000
                if remaining_ms <= 0:
                    return
                wait_ms = max(0, min(wait_ms, int(remaining_ms)))
            try:
                if self._poll(wait_ms, max_messages):
                    last_data = time.monotonic()
            except KafkaConnectionError as exc:
                # Kafka's consumer keeps trying while the broker is away; so do we,
                # still bounded by --timeout-ms when given.
                click.echo(f"WARN {exc}; retrying", err=True)
                time.sleep(_RECONNECT_BACKOFF_S)

    def _poll(self, wait_ms: int, max_messages: int | None) -> bool:
        """One fetch of every partition; True if any record was printed."""
        results = self.client.fetch_many(
            self.positions,
            max_wait_ms=wait_ms,
            min_bytes=1,
            partition_max_bytes=self.max_partition_fetch_bytes,
            isolation_level=self.isolation_level,
        )
        printed = False
        for tp, result in results.items():
            if isinstance(result.error, OffsetOutOfRangeError):
                self._reset(tp)
                continue
            if result.error is not None:
                if result.error.retriable:
                    self.client.refresh_metadata([self.topic])
                    continue
                raise result.error
            for batch in result.batches:
                if self._print_batch(tp, batch, max_messages):
                    printed = True
                if max_messages is not None and self.processed >= max_messages:
                    break
            self.positions[tp] = result.next_offset
            if max_messages is not None and self.processed >= max_messages:
                break
        self.out.flush()
        return printed

    def _print_batch(self, tp: TopicPartition, batch: FetchedBatch, max_messages: int | None) -> bool:
        printed = False
        for record in batch.records:
            if max_messages is not None and self.processed >= max_messages:
                break
            self.out.write(self.fmt.format(record, tp.partition, batch.timestamp_type))
            self.processed += 1
            printed = True
        return printed

    def _reset(self, tp: TopicPartition) -> None:
        # auto.offset.reset: earliest with --from-beginning, else latest.
        self.positions[tp] = (
            self.client.earliest_offset(tp.topic, tp.partition)
            if self.reset_to_earliest
            else self.client.latest_offset(tp.topic, tp.partition)
        )


def _validate_offset(offset: str | None, partition: int | None, from_beginning: bool) -> str:
    if offset is None:
        return "earliest" if from_beginning else "latest"
    if from_beginning:
        fail("Options --from-beginning and --offset cannot be specified together.")
    offset = offset.strip().lower()
    if offset in ("earliest", "latest"):
        return offset
    if not offset.isdigit():
        fail(f"The provided offset value '{offset}' is incorrect. Valid values are 'earliest', 'latest', or a non-negative long.")
    if partition is None:
        fail("The partition is required when offset is specified.")
    return offset


@click.command("console-consumer")
@click.option("--bootstrap-server", required=True, help="HOST:PORT[,HOST:PORT...] of the brokers to connect to.")
@click.option("--topic", required=True, help="The topic to consume.")
@click.option("--from-beginning", is_flag=True, help="Start from the earliest offset rather than the latest.")
@click.option("--partition", type=click.IntRange(min=0), default=None, help="Consume this partition only.")
@click.option("--offset", default=None, help="earliest, latest (default) or an offset (needs --partition).")
@click.option("--max-messages", type=click.IntRange(min=1), default=None, help="Exit after this many messages.")
@click.option("--timeout-ms", type=click.IntRange(min=0), default=None, help="Exit after this long without a message.")
@click.option("--property", "properties", multiple=True, metavar="K=V",
              help="Formatter settings: print.timestamp, print.key, print.offset, print.partition, print.headers, "
              "print.value, key.separator, line.separator, headers.separator, null.literal.")
@click.option("--isolation-level", type=click.Choice(["read_uncommitted", "read_committed"]),
              default="read_uncommitted", show_default=True)
@click.option("--consumer-property", "consumer_properties", multiple=True, metavar="K=V",
              help="Consumer settings: isolation.level, max.partition.fetch.bytes, request.timeout.ms.")
def console_consumer_command(
    bootstrap_server: str,
    topic: str,
    from_beginning: bool,
    partition: int | None,
    offset: str | None,
    max_messages: int | None,
    timeout_ms: int | None,
    properties: tuple[str, ...],
    isolation_level: str,
    consumer_properties: tuple[str, ...],
) -> None:
    """Print the records of a topic (kafka-console-consumer.sh, without a group)."""
    fmt = MessageFormat.from_properties(parse_properties(properties, "--property"))
    settings = parse_properties(consumer_properties, "--consumer-property")
    start = _validate_offset(offset, partition, from_beginning)
    isolation = settings.get("isolation.level", isolation_level)
    request_timeout_ms = int(settings.get("request.timeout.ms", 30_000))
    consumer = None
    try:
        with KafkaClient(bootstrap_server, client_id="console-consumer", timeout=request_timeout_ms / 1000) as client:
            consumer = ConsoleConsumer(
                client,
                topic,
                fmt,
                sys.stdout.buffer,
                partition=partition,
                offset=start,
                reset_to_earliest=from_beginning,
                isolation_level=READ_COMMITTED if isolation == "read_committed" else READ_UNCOMMITTED,
                max_partition_fetch_bytes=int(settings.get("max.partition.fetch.bytes", 1024 * 1024)),
            )
            consumer.run(max_messages, timeout_ms)
    except KafkaClientError as exc:
        click.echo(f"ERROR Error processing message, terminating consumer process: {exc}", err=True)
        _report(consumer)
        sys.exit(1)
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, as Kafka's tool does.
        # Point stdout at /dev/null so the interpreter's final flush cannot fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    _report(consumer)


def _report(consumer: ConsoleConsumer | None) -> None:
    click.echo(f"Processed a total of {0 if consumer is None else consumer.processed} messages", err=True)
