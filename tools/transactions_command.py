"""``pafka transactions``: kafka-transactions.sh on pafka's client.

    --bootstrap-server HOST:PORT list [--duration-filter MS] [--transactional-id-pattern REGEX]
    --bootstrap-server HOST:PORT describe --transactional-id ID
    --bootstrap-server HOST:PORT describe-producers [--broker-id B] --topic T --partition P
    --bootstrap-server HOST:PORT abort --topic T --partition P
        (--start-offset N | --producer-id I --producer-epoch E --coordinator-epoch C)
    --bootstrap-server HOST:PORT find-hanging (--broker-id B | --topic T [--partition P])
        [--max-transaction-timeout MINUTES]

Kafka's sub-command and option names, column headers and messages; every
table is Kafka's: each cell left-aligned to its column's width, then a tab.
The tool speaks to the brokers over the wire only (``client.transactions``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence

import click

from client import KafkaClient, KafkaClientError, TopicPartition
from client.transactions import OpenTransaction, ProducerState, TransactionAdmin
from tools.common import fail

DESCRIBE_PRODUCERS_HEADERS = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                              "LastTimestamp", "CurrentTransactionStartOffset")
DESCRIBE_HEADERS = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                    "TopicPartitions")
LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
FIND_HANGING_HEADERS = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                        "LastTimestamp", "Duration(min)")
_MS_PER_MINUTE = 60_000


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Kafka's prettyPrintTable: each cell padded to its column's width and followed by a tab."""
    widths = [max([len(h)] + [len(row[i]) for row in rows]) for i, h in enumerate(headers)]
    return ["".join(cell.ljust(w) + "\t" for cell, w in zip(row, widths, strict=True)) for row in [headers, *rows]]


def _none(value: int | None) -> str:
    return "None" if value is None else str(value)


def list_lines(admin: TransactionAdmin, duration_ms: int = -1, pattern: str | None = None) -> list[str]:
    rows = [[t.transactional_id, str(t.coordinator_id), str(t.producer_id), t.state]
            for t in admin.list_transactions(duration_ms=duration_ms, transactional_id_pattern=pattern)]
    return table(LIST_HEADERS, rows)


def describe_lines(admin: TransactionAdmin, transactional_id: str, now_ms: int) -> list[str]:
    d = admin.describe_transaction(transactional_id)
    start = d.transaction_start_time_ms
    duration = None if start is None else now_ms - start
    row = [str(d.coordinator_id), transactional_id, str(d.producer_id), str(d.producer_epoch), d.state,
           str(d.transaction_timeout_ms), _none(start), _none(duration),
           ",".join(str(tp) for tp in d.topic_partitions)]
    return table(DESCRIBE_HEADERS, [row])


def _producer_row(p: ProducerState) -> list[str]:
    coordinator_epoch = -1 if p.coordinator_epoch is None else p.coordinator_epoch
    return [str(p.producer_id), str(p.producer_epoch), str(coordinator_epoch), str(p.last_sequence),
            str(p.last_timestamp), _none(p.current_transaction_start_offset)]


def describe_producers_lines(admin: TransactionAdmin, tp: TopicPartition, broker_id: int | None = None
                             ) -> list[str]:
    producers = admin.describe_producers([tp], broker_id).get(tp, [])
    return table(DESCRIBE_PRODUCERS_HEADERS, [_producer_row(p) for p in producers])


def hanging_lines(hanging: Sequence[OpenTransaction], now_ms: int) -> list[str]:
    rows = []
    for h in hanging:
        p = h.producer
        rows.append([h.topic_partition.topic, str(h.topic_partition.partition), str(p.producer_id),
                     str(p.producer_epoch), str(-1 if p.coordinator_epoch is None else p.coordinator_epoch),
                     str(p.current_transaction_start_offset), str(p.last_timestamp),
                     str((now_ms - p.last_timestamp) // _MS_PER_MINUTE)])
    return table(FIND_HANGING_HEADERS, rows)


def abort_spec(admin: TransactionAdmin, tp: TopicPartition, start_offset: int) -> tuple[int, int, int]:
    """(producer id, epoch, coordinator epoch) of the open transaction starting at ``start_offset``."""
    for p in admin.describe_producers([tp]).get(tp, []):
        if p.current_transaction_start_offset == start_offset:
            return p.producer_id, p.producer_epoch, p.coordinator_epoch or 0
    fail(f"Could not find any open transactions starting at offset {start_offset} on partition {tp}")


@click.group("transactions")
@click.option("--bootstrap-server", required=True, metavar="host:port",
              help="hostname and port for the broker to connect to (multiple comma-separated entries can be given)")
@click.option("--timeout-ms", type=int, default=30_000, show_default=True, help="Request timeout.")
@click.pass_context
def transactions_command(ctx: click.Context, bootstrap_server: str, timeout_ms: int) -> None:
    """Analyze the transactional state of producers; detect and recover from hanging transactions
    (kafka-transactions.sh)."""
    ctx.obj = (bootstrap_server, timeout_ms)


Action = Callable[[KafkaClient, TransactionAdmin], list[str]]


def _run(ctx: click.Context, action: str, body: Action) -> None:
    """Connect, run ``body(client, admin)`` for its lines, print them; a client error is Kafka's message and exit 1."""
    bootstrap_server, timeout_ms = ctx.obj
    try:
        with KafkaClient(bootstrap_server, client_id="pafka-transactions", timeout=timeout_ms / 1000 + 5) as client:
            lines = body(client, TransactionAdmin(client, timeout=timeout_ms / 1000))
    except KafkaClientError as exc:
        fail(f"{action}: {exc}. Enable debug logging for additional detail.")
    for line in lines:
        click.echo(line)
    sys.stdout.flush()


def _now_ms() -> int:
    return int(time.time() * 1000)


@transactions_command.command("list")
@click.option("--duration-filter", type=int, default=None,
              help="Duration (in millis) to filter by: if < 0, all transactions will be returned; otherwise, only "
                   "transactions running longer than this duration will be returned")
@click.option("--transactional-id-pattern", default=None,
              help="Transactional id regular expression pattern to filter by")
@click.pass_context
def list_command(ctx: click.Context, duration_filter: int | None, transactional_id_pattern: str | None) -> None:
    """list transactions"""
    duration_ms = -1 if duration_filter is None else duration_filter
    _run(ctx, "Failed to list transactions",
         lambda _client, admin: list_lines(admin, duration_ms, transactional_id_pattern))


@transactions_command.command("describe")
@click.option("--transactional-id", required=True, help="transactional id")
@click.pass_context
def describe_command(ctx: click.Context, transactional_id: str) -> None:
    """describe the state of an active transactional-id"""
    _run(ctx, f"Failed to describe transaction state of transactional-id `{transactional_id}`",
         lambda _client, admin: describe_lines(admin, transactional_id, _now_ms()))


@transactions_command.command("describe-producers")
@click.option("--broker-id", type=int, help="optional broker id to describe the producer state on a specific replica")
@click.option("--topic", required=True, help="topic name")
@click.option("--partition", type=int, required=True, help="partition number")
@click.pass_context
def describe_producers_command(ctx: click.Context, broker_id: int | None, topic: str, partition: int) -> None:
    """describe the states of active producers for a topic partition"""
    tp = TopicPartition(topic, partition)
    where = "leader" if broker_id is None else f"broker {broker_id}"
    _run(ctx, f"Failed to describe producers for partition {tp} on {where}",
         lambda _client, admin: describe_producers_lines(admin, tp, broker_id))


@transactions_command.command("abort")
@click.option("--topic", required=True, help="topic name")
@click.option("--partition", type=int, required=True, help="partition number")
@click.option("--start-offset", type=int, help="start offset of the transaction to abort")
@click.option("--producer-id", type=int, help="producer id")
@click.option("--producer-epoch", type=int, help="producer epoch")
@click.option("--coordinator-epoch", type=int, help="coordinator epoch")
@click.pass_context
def abort_command(ctx: click.Context, topic: str, partition: int, start_offset: int | None,
                  producer_id: int | None, producer_epoch: int | None, coordinator_epoch: int | None) -> None:
    """abort a hanging transaction (requires administrative privileges)"""
    if start_offset is None and producer_id is None:
        fail("The transaction to abort must be identified either with --start-offset (for brokers on 3.0 or "
             "above) or with --producer-id, --producer-epoch, and --coordinator-epoch (for older brokers)")
    if start_offset is None and producer_epoch is None:
        fail("Missing required argument --producer-epoch")
    if start_offset is None and coordinator_epoch is None:
        fail("Missing required argument --coordinator-epoch")
    tp = TopicPartition(topic, partition)

    def abort(_client: KafkaClient, admin: TransactionAdmin) -> list[str]:
        if start_offset is not None:
            spec = abort_spec(admin, tp, start_offset)
        else:
            assert producer_id is not None and producer_epoch is not None and coordinator_epoch is not None
            # A transaction hanging before any marker of its producer id has coordinator epoch -1: 0 is
            # no newer than any coordinator's, as Kafka's tool reasons.
            spec = (producer_id, producer_epoch, max(coordinator_epoch, 0))
        admin.abort_transaction(tp, *spec)
        return []

    _run(ctx, f"Failed to abort transaction on {tp}", abort)


@transactions_command.command("find-hanging")
@click.option("--broker-id", type=int, help="broker id to search for hanging transactions")
@click.option("--max-transaction-timeout", type=int, default=15, show_default=True,
              help="maximum transaction timeout in minutes to limit the scope of the search")
@click.option("--topic", help="topic name to limit search to")
@click.option("--partition", type=int, help="partition number")
@click.pass_context
def find_hanging_command(ctx: click.Context, broker_id: int | None, max_transaction_timeout: int,
                         topic: str | None, partition: int | None) -> None:
    """find hanging transactions"""
    if topic is None and broker_id is None:
        fail("The `find-hanging` command requires either --topic or --broker-id to limit the scope of the search")
    if partition is not None and topic is None:
        fail("The --partition argument requires --topic to be provided")

    def find(client: KafkaClient, admin: TransactionAdmin) -> list[str]:
        partitions = admin.partitions_to_search(topic, partition, broker_id)
        now = _now_ms()
        return hanging_lines(admin.find_hanging(partitions, max_transaction_timeout * _MS_PER_MINUTE, now), now)

    _run(ctx, "Failed to find hanging transactions", find)
