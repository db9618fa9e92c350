"""``pafka console-producer``: kafka-console-producer.sh on pafka's client.

Reads stdin line by line (bytes, no decoding), parses each line as Kafka's
LineMessageReader does (see ``tools.line_reader``), places keyed records
with Kafka's murmur2 partitioner and keyless ones on one partition per batch
(KIP-480's sticky partitioning), and sends batches when ``batch.size`` bytes
are pending, when stdin has been idle for ``linger.ms`` or at end of input.
Retriable errors are retried ``retries`` times after a metadata refresh; other
errors are reported on stderr and make the exit status 1.
"""

from __future__ import annotations

import os
import random
import select
import stat
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator

import click

from client import (
    KafkaApiError,
    KafkaClient,
    KafkaClientError,
    KafkaConnectionError,
    ProducerRecord,
    TopicPartition,
    partition_for_key,
)
from client.errors import api_error
from protocol import compression as _compression
from protocol.errors import ErrorCode
from tools.common import fail, parse_properties
from tools.line_reader import LineFormat, LineFormatError
from tools.progress_output import command_progress

CODECS = {name: codec for codec, name in _compression.CODEC_NAMES.items()}
_ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}
_READ_SIZE = 64 * 1024
_RECORD_OVERHEAD = 20  # rough per-record bytes beyond key, value and headers


def _record_size(record: ProducerRecord) -> int:
    size = _RECORD_OVERHEAD + len(record.key or b"") + len(record.value or b"")
    return size + sum(len(k) + len(v or b"") for k, v in record.headers)


class ConsoleProducer:
    """Batches records per partition and sends them, retrying retriable errors."""

    def __init__(
        self,
        client: KafkaClient,
        topic: str,
        *,
        compression: int = _compression.NONE,
        acks: int = -1,
        batch_size: int = 16_384,
        retries: int = 3,
        retry_backoff_ms: int = 100,
        request_timeout_ms: int = 30_000,
    ) -> None:
        self.client = client
        self.topic = topic
        self.compression = compression
        self.acks = acks
        self.batch_size = batch_size
        self.retries = retries
        self.retry_backoff_ms = retry_backoff_ms
        self.request_timeout_ms = request_timeout_ms
        self.num_partitions = self._wait_for_partitions()
        self._sticky = random.randrange(self.num_partitions)
        self._pending: dict[int, list[ProducerRecord]] = defaultdict(list)
        self._pending_bytes = 0
        self.sent = 0
        self.failed = 0

    def _wait_for_partitions(self) -> int:
        """The topic's partition count, letting the broker auto-create it as Kafka's producer does."""
        error: KafkaApiError | None = None
        for attempt in range(self.retries + 1):
            meta = self.client.refresh_metadata([self.topic], allow_auto_topic_creation=True).topics.get(self.topic)
            if meta is not None and not meta.error_code and meta.partitions:
                return len(meta.partitions)
            code = meta.error_code if meta is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            error = api_error(code or ErrorCode.LEADER_NOT_AVAILABLE, api_name="Metadata", topic=self.topic)
            if not error.retriable:
                break
            time.sleep(self.retry_backoff_ms / 1000 * (attempt + 1))
        assert error is not None
        raise error

    def add(self, record: ProducerRecord) -> None:
        if record.key is not None:
            partition = partition_for_key(record.key, self.num_partitions)
        else:
            partition = self._sticky
        self._pending[partition].append(record)
        self._pending_bytes += _record_size(record)
        if self._pending_bytes >= self.batch_size:
            self.flush()

    @property
    def has_pending(self) -> bool:
        return self._pending_bytes > 0

    def flush(self) -> None:
        if not self._pending:
            return
        pending, self._pending = self._pending, defaultdict(list)
        self._pending_bytes = 0
        self._sticky = (self._sticky + 1) % self.num_partitions
        batches = {
            TopicPartition(self.topic, p): self.client.build_batch(records, compression=self.compression)
            for p, records in pending.items()
        }
        counts = {TopicPartition(self.topic, p): len(records) for p, records in pending.items()}
        for tp, error in self._send(batches).items():
            self.failed += counts[tp]
            click.echo(
                f"ERROR Error when sending message to topic {self.topic} (partition {tp.partition}, "
                f"{counts[tp]} records) with error: {error}",
                err=True,
            )
        self.sent += sum(counts.values())

    def _send(self, batches: dict[TopicPartition, bytearray]) -> dict[TopicPartition, KafkaClientError]:
        """Send, retrying the partitions that fail retriably; returns what finally failed."""
        final: dict[TopicPartition, KafkaClientError] = {}
        remaining = batches
        for attempt in range(self.retries + 1):
            failed = self._send_once(remaining)
            retriable = {tp for tp, e in failed.items() if _is_retriable(e)}
            final.update({tp: e for tp, e in failed.items() if tp not in retriable})
            if not retriable:
                break
            if attempt == self.retries:
                final.update({tp: failed[tp] for tp in retriable})
                break
            time.sleep(self.retry_backoff_ms / 1000)
            try:
                self.client.refresh_metadata([self.topic])
            except KafkaClientError:
                pass  # the retry reports the failure if the broker is still away
            remaining = {tp: batches[tp] for tp in retriable}
        return final

    def _send_once(self, batches: dict[TopicPartition, bytearray]) -> dict[TopicPartition, KafkaClientError]:
        try:
            results = self.client.produce_batches(
                batches, acks=self.acks, timeout_ms=self.request_timeout_ms, raise_errors=False
            )
        except (KafkaConnectionError, KafkaApiError) as exc:
            return dict.fromkeys(batches, exc)
        return {tp: r for tp, r in results.items() if isinstance(r, KafkaApiError)}


def _is_retriable(error: KafkaClientError) -> bool:
    return isinstance(error, KafkaConnectionError) or (isinstance(error, KafkaApiError) and error.retriable)


def read_lines(fd: int, linger_s: float, on_idle: Callable[[], None], is_idle_relevant: Callable[[], bool]) -> Iterator[bytes]:
    """Lines of ``fd`` without their line ending; calls ``on_idle`` when input pauses.

    Reads the descriptor directly (not through Python's buffered stdin) so that
    ``select`` tells the truth about whether more input is waiting.
    """
    tail = b""
    while True:
        if is_idle_relevant():
            ready, _, _ = select.select([fd], [], [], linger_s)
            if not ready:
                on_idle()
        chunk = os.read(fd, _READ_SIZE)
        if not chunk:
            break
        lines = (tail + chunk).split(b"\n")
        tail = lines.pop()
        for line in lines:
            yield line[:-1] if line.endswith(b"\r") else line
    if tail:
        yield tail[:-1] if tail.endswith(b"\r") else tail


def _acks(value: str) -> int:
    acks = _ACKS.get(value.strip().lower())
    if acks is None:
        raise click.BadParameter(f"acks must be all, -1, 0 or 1, not {value!r}")
    return acks


@click.command("console-producer")
@click.option("--bootstrap-server", required=True, help="HOST:PORT[,HOST:PORT...] of the brokers to connect to.")
@click.option("--topic", required=True, help="The topic to produce to.")
@click.option(
    "--property",
    "properties",
    multiple=True,
    metavar="K=V",
    help="Line reader settings: parse.key, key.separator, parse.headers, headers.delimiter, "
    "headers.separator, headers.key.separator, null.marker, ignore.error.",
)
@click.option(
    "--compression-codec",
    type=click.Choice(sorted(CODECS)),
    is_flag=False,
    flag_value="gzip",
    default=None,
    help="Compress batches with this codec (given without a value: gzip, as Kafka's tool does).",
)
@click.option("--producer-property", "producer_properties", multiple=True, metavar="K=V",
              help="Producer settings: acks, compression.type, batch.size, linger.ms, retries, "
              "retry.backoff.ms, request.timeout.ms.")
@click.option("--request-required-acks", default=None, help="acks: all/-1, 1 or 0 (default all).")
@click.option("--batch-size", type=click.IntRange(min=1), default=None, help="Bytes of records per batch (16384).")
@click.option("--timeout", "linger_ms", type=click.IntRange(min=0), default=None,
              help="linger.ms: how long to wait for more input before sending (1000).")
@click.option("--sync", is_flag=True, help="Send each line as soon as it is read.")
def console_producer_command(
    bootstrap_server: str,
    topic: str,
    properties: tuple[str, ...],
    compression_codec: str | None,
    producer_properties: tuple[str, ...],
    request_required_acks: str | None,
    batch_size: int | None,
    linger_ms: int | None,
    sync: bool,
) -> None:
    """Produce the lines of stdin to a topic (kafka-console-producer.sh)."""
    try:
        fmt = LineFormat.from_properties(parse_properties(properties, "--property"))
    except LineFormatError as exc:
        fail(str(exc))
    settings = parse_properties(producer_properties, "--producer-property")
    acks = _acks(request_required_acks or settings.get("acks", "all"))
    codec_name = compression_codec or settings.get("compression.type", "none")
    if codec_name not in CODECS:
        fail(f"unknown compression codec {codec_name!r}: one of {', '.join(sorted(CODECS))}")
    batch = batch_size or int(settings.get("batch.size", 16_384))
    linger = linger_ms if linger_ms is not None else int(settings.get("linger.ms", 1000))
    if sync:
        batch = 1
    timeout_ms = int(settings.get("request.timeout.ms", 30_000))
    try:
        with KafkaClient(bootstrap_server, client_id="console-producer", timeout=timeout_ms / 1000 + 5) as client:
            producer = ConsoleProducer(
                client,
                topic,
                compression=CODECS[codec_name],
                acks=acks,
                batch_size=batch,
                retries=int(settings.get("retries", 3)),
                retry_backoff_ms=int(settings.get("retry.backoff.ms", 100)),
                request_timeout_ms=timeout_ms,
            )
            _produce_stdin(producer, fmt, linger / 1000)
    except KafkaClientError as exc:
        fail(f"ERROR {exc}")
    except KeyboardInterrupt:
        sys.exit(130)
    if producer.failed:
        sys.exit(1)


def _stdin_lines(producer: ConsoleProducer, linger_s: float) -> Iterator[bytes]:
    stdin = sys.stdin.buffer
    try:
        fd = stdin.fileno()
    except (OSError, ValueError):
        fd = None  # an in-memory stdin (tests, embedding): no idle detection needed
    if fd is not None:
        return read_lines(fd, linger_s, producer.flush, lambda: producer.has_pending)
    return (line.rstrip(b"\n").removesuffix(b"\r") for line in stdin)


def _regular_file(fd: int) -> tuple[str, int, int] | None:
    """stdin redirected from a file: its path, the position reading starts at and its size; else None."""
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            return None
        start = os.lseek(fd, 0, os.SEEK_CUR)
    except OSError:
        return None
    try:
        name = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        name = "stdin"
    return name, start, status.st_size


def _produce_stdin(producer: ConsoleProducer, fmt: LineFormat, linger_s: float) -> None:
    lines = _stdin_lines(producer, linger_s)
    try:
        fd = sys.stdin.buffer.fileno()
    except (OSError, ValueError):
        fd = -1
    source = _regular_file(fd) if fd >= 0 else None
    try:
        if source is None:
            _produce_lines(producer, fmt, lines, None)
        else:
            # A file can be large: say how much of it has been read (and so sent, or batched to be).
            name, start, size = source
            with command_progress(f"Producing {name}", size - start, "B", prints_to_stdout=False) as progress:
                _produce_lines(producer, fmt, lines, lambda: progress.update_to(os.lseek(fd, 0, os.SEEK_CUR) - start))
                producer.flush()  # done means sent
    finally:
        producer.flush()


def _produce_lines(producer: ConsoleProducer, fmt: LineFormat, lines: Iterator[bytes],
                   after_line: Callable[[], None] | None) -> None:
    for number, line in enumerate(lines, 1):
        try:
            record = fmt.parse(line, number)
        except LineFormatError as exc:
            producer.flush()
            fail(f"ERROR {exc}")
        producer.add(record)
        if after_line is not None:
            after_line()
