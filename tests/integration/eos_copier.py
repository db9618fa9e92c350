"""An exactly-once copier in its own process (consume-transform-produce with confluent-kafka).

    python -m tests.integration.eos_copier --bootstrap H:P --input IN --output OUT \
        --group G --transactional-id TID --progress FILE

It reads every partition of ``IN`` (``read_committed``, no auto commit) from
the group's committed offsets and writes each record to ``OUT`` in
transactions of ``--batch`` records, committing its input positions in the
same transaction with ``send_offsets_to_transaction``. The output value is
``id|input partition|input offset``; the output partition is ``id % 3``, so
every output partition holds each input partition's records in input order.

The fixed transactional id makes a restarted copier fence its predecessor
(``init_transactions`` aborts whatever that one left open). Errors follow
librdkafka's documented recovery: a retriable error retries the call, an
abortable one aborts the transaction and rewinds the consumer to the
committed offsets, a fatal one exits (status 3) so the caller starts a new
copier. After each commit a line ``committed N`` (N: the sum of the
committed input positions) is appended to ``--progress``; the copier exits 0
once its committed positions reach the input's end offsets.
"""

from __future__ import annotations

import argparse
import faulthandler
import signal
import sys
import time
from typing import Any

#: How long one client call may block before the copier tries it again.
CALL_TIMEOUT_S = 10.0
#: Exit status of a copier that met a fatal error: the caller starts a new one.
FATAL_EXIT = 3


#: librdkafka re-bootstraps when every broker is down, which here is every broker kill; that
#: decommissions the broker cached as group coordinator and send_offsets_to_transaction then
#: waits forever, past its timeout (librdkafka issues 5456 and 5511). A one-broker cluster has
#: nothing to re-bootstrap to, so the copier turns it off.
NO_REBOOTSTRAP = {"metadata.recovery.strategy": "none"}


class Abortable(Exception):
    """The transaction must be aborted: rewind to the committed offsets and copy again."""


def _retrying(call: Any, *args: Any, deadline_s: float = 60.0) -> Any:
    """``call(*args)`` again while it fails retriably (bounded); abortable and fatal errors go up."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return call(*args)
        except KafkaException as exc:
            error = exc.args[0]
            if error.fatal():
                raise
            if error.txn_requires_abort():
                raise Abortable(error.str()) from exc
            if not error.retriable() or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


class Copier:
    def __init__(self, args: argparse.Namespace) -> None:
        from confluent_kafka import Consumer, Producer

        self.args = args
        self.consumer = Consumer({
            "bootstrap.servers": args.bootstrap, "group.id": args.group, "isolation.level": "read_committed",
            "enable.auto.commit": False, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 50,
            "socket.timeout.ms": 5000, "reconnect.backoff.max.ms": 500, **NO_REBOOTSTRAP})
        self.producer = Producer({
            "bootstrap.servers": args.bootstrap, "transactional.id": args.transactional_id, "linger.ms": 5,
            "transaction.timeout.ms": 20_000, "message.timeout.ms": 20_000, "socket.timeout.ms": 5000,
            "reconnect.backoff.max.ms": 500, **NO_REBOOTSTRAP, **({"debug": args.debug} if args.debug else {})})
        self.progress = open(args.progress, "a", buffering=1)
        self.input_partitions = args.input_partitions
        self.ends: list[int] = []

    # -- input ----------------------------------------------------------------------------
    def _tps(self, offsets: list[int] | None = None) -> list[Any]:
        from confluent_kafka import TopicPartition

        if offsets is None:
            return [TopicPartition(self.args.input, p) for p in range(self.input_partitions)]
        return [TopicPartition(self.args.input, p, o) for p, o in enumerate(offsets)]

    def committed(self) -> list[int]:
        """The group's committed input positions (0 where none is committed yet)."""
        stored = _retrying(self.consumer.committed, self._tps(), CALL_TIMEOUT_S)
        for tp in stored:
            if tp.error is not None:
                raise Abortable(str(tp.error))
        return [max(tp.offset, 0) for tp in stored]

    def rewind(self) -> list[int]:
        """Assign the input at the committed positions: whatever was read past them is read again."""
        positions = self.committed()
        self.consumer.assign(self._tps(positions))
        return positions

    def input_ends(self) -> list[int]:
        return [_retrying(self.consumer.get_watermark_offsets, tp, CALL_TIMEOUT_S)[1] for tp in self._tps()]

    # -- one transaction ---------------------------------------------------------------------
    def read_batch(self, positions: list[int]) -> list[Any]:
        """Up to ``--batch`` records; fewer when the input has no more for a moment."""
        batch: list[Any] = []
        idle_deadline = time.monotonic() + 1.0
        while len(batch) < self.args.batch and time.monotonic() < idle_deadline:
            for message in self.consumer.consume(self.args.batch - len(batch), 0.1):
                if message.error() is not None:
                    if message.error().fatal():
                        raise SystemExit(FATAL_EXIT)
                    continue  # a transport error while the broker is away: the consumer reconnects
                if message.offset() < positions[message.partition()]:
                    continue  # fetched before a rewind
                batch.append(message)
                positions[message.partition()] = message.offset() + 1
            if positions == self.ends:
                break
        return batch

    def copy_batch(self, batch: list[Any], positions: list[int]) -> None:
        from confluent_kafka import KafkaException

        _retrying(self.producer.begin_transaction)
        for message in batch:
            record_id = int(message.value())
            value = f"{record_id}|{message.partition()}|{message.offset()}".encode()
            while True:
                try:
                    self.producer.produce(self.args.output, value, key=message.key(),
                                          partition=record_id % self.args.output_partitions)
                    break
                except BufferError:
                    self.producer.poll(0.1)
                except KafkaException as exc:
                    if exc.args[0].txn_requires_abort():
                        raise Abortable(exc.args[0].str()) from exc
                    raise
            self.producer.poll(0)
        _retrying(self.producer.send_offsets_to_transaction, self._tps(positions),
                  self.consumer.consumer_group_metadata(), CALL_TIMEOUT_S)
        _retrying(self.producer.commit_transaction, CALL_TIMEOUT_S)
        self.progress.write(f"committed {sum(positions)}\n")

    def abort(self) -> None:
        _retrying(self.producer.abort_transaction, CALL_TIMEOUT_S)

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> int:
        _retrying(self.producer.init_transactions, CALL_TIMEOUT_S)
        self.ends = self.input_ends()
        positions = self.rewind()
        self.progress.write(f"started {sum(positions)}\n")
        while positions != self.ends:
            committed = list(positions)
            batch = self.read_batch(positions)
            if not batch:
                continue
            try:
                self.copy_batch(batch, positions)
            except Abortable as exc:
                self.progress.write(f"aborting: {exc}\n")
                self.abort()
                positions = self.rewind()
                if positions != committed:
                    self.progress.write(f"rewound to {positions} (read from {committed})\n")
        self.progress.write("done\n")
        return 0


def main() -> int:
    from confluent_kafka import KafkaException

    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--transactional-id", required=True)
    parser.add_argument("--progress", required=True)
    parser.add_argument("--input-partitions", type=int, default=2)
    parser.add_argument("--output-partitions", type=int, default=3)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--debug", default="", help="librdkafka debug contexts of the producer")
    args = parser.parse_args()
    # SIGUSR1 prints every thread's stack: how a test finds where a stuck copier waits.
    faulthandler.register(signal.SIGUSR1)
    copier = Copier(args)
    try:
        return copier.run()
    except (KafkaException, Abortable) as exc:
        # Fatal (fenced, or a call that kept failing): the documented way out is a new producer.
        copier.progress.write(f"fatal: {exc}\n")
        return FATAL_EXIT


if __name__ == "__main__":
    sys.exit(main())
