"""Keys and values of the records in ``__transaction_state``, in Kafka's formats (Kafka's TransactionLog).

Each key and value starts with an int16 version; the fields follow Kafka's
TransactionLogKey / TransactionLogValue schemas:

- ``TransactionLogKey`` v0: transactionalId. The prefix is the coordinator
  record type (0, the transaction log), which is also its version.
- ``TransactionLogValue`` v0: producerId, producerEpoch, transactionTimeoutMs,
  transactionStatus (int8 state id), transactionPartitions (nullable array of
  topic + int32 partition ids), lastUpdateTimestampMs, startTimestampMs.
- ``TransactionLogValue`` v1: the same fields in the flexible encoding (compact
  strings and arrays, tagged-field sections), plus tagged fields
  PreviousProducerId (tag 0, default -1), NextProducerId (tag 1, default -1)
  and ClientTransactionVersion (tag 2, default 0), written only when they
  differ from their defaults.

Kafka writes value v1 once the ``transaction.version`` feature is at level 1
or more (a new Kafka 4 cluster is at level 2), v0 below that; an Empty
transaction's partitions are written as null. A tombstone (null value)
removes a transactional id. Anything malformed raises CorruptRecordError;
a version this code does not know is reported as such, for the loader to
skip as Kafka does (a record left by a newer broker or an aborted upgrade).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from coordinator.transaction.transaction_metadata import (
    TV_0,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from protocol.errors import CorruptRecordError
from protocol.primitives import uvarint
from protocol.readable import Readable

#: The coordinator record type of the transaction log, written as the key's version.
TRANSACTION_LOG_KEY_VERSION = 0
TRANSACTION_LOG_VALUE_VERSIONS = (0, 1)
_FIRST_FLEXIBLE_VALUE_VERSION = 1

_TAG_PREVIOUS_PRODUCER_ID = 0
_TAG_NEXT_PRODUCER_ID = 1
_TAG_CLIENT_TRANSACTION_VERSION = 2

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    """One TransactionLogValue as written; partitions None is the null array (an Empty transaction)."""

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int
    transaction_partitions: tuple[tuple[str, tuple[int, ...]], ...] | None
    transaction_last_update_timestamp_ms: int
    transaction_start_timestamp_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


def value_version_for(transaction_version_level: int) -> int:
    """The value version Kafka writes at a ``transaction.version`` feature level."""
    return 1 if transaction_version_level >= 1 else 0


# ----------------------------------------------------------------- writing

def _string(out: bytearray, s: str, flexible: bool) -> None:
    data = s.encode("utf-8")
    if len(data) > 0x7FFF:
        raise ValueError("string longer than 32767 bytes")
    out += uvarint(len(data) + 1) if flexible else _I16.pack(len(data))
    out += data


def _array_length(out: bytearray, n: int | None, flexible: bool) -> None:
    if flexible:
        out += uvarint(0 if n is None else n + 1)
    else:
        out += _I32.pack(-1 if n is None else n)


def key_to_bytes(transactional_id: str) -> bytes:
    out = bytearray(_I16.pack(TRANSACTION_LOG_KEY_VERSION))
    _string(out, transactional_id, flexible=False)
    return bytes(out)


def encode_value(value: TransactionLogValue, version: int) -> bytes:
    if version not in TRANSACTION_LOG_VALUE_VERSIONS:
        raise ValueError(f"no TransactionLogValue version {version}")
    flexible = version >= _FIRST_FLEXIBLE_VALUE_VERSION
    out = bytearray(_I16.pack(version))
    out += _I64.pack(value.producer_id)
    out += _I16.pack(value.producer_epoch)
    out += _I32.pack(value.transaction_timeout_ms)
    out += _I8.pack(value.transaction_status)
    partitions = value.transaction_partitions
    _array_length(out, None if partitions is None else len(partitions), flexible)
    for topic, ids in partitions or ():
        _string(out, topic, flexible)
        _array_length(out, len(ids), flexible)
        for p in ids:
            out += _I32.pack(p)
        if flexible:
            out += uvarint(0)  # the element's (empty) tagged fields
    out += _I64.pack(value.transaction_last_update_timestamp_ms)
    out += _I64.pack(value.transaction_start_timestamp_ms)
    if flexible:
        tagged: list[tuple[int, bytes]] = []  # ascending tags; a field at its default is left out
        if value.previous_producer_id != -1:
            tagged.append((_TAG_PREVIOUS_PRODUCER_ID, _I64.pack(value.previous_producer_id)))
        if value.next_producer_id != -1:
            tagged.append((_TAG_NEXT_PRODUCER_ID, _I64.pack(value.next_producer_id)))
        if value.client_transaction_version != 0:
            tagged.append((_TAG_CLIENT_TRANSACTION_VERSION, _I16.pack(value.client_transaction_version)))
        out += uvarint(len(tagged))
        for tag, data in tagged:
            out += uvarint(tag) + uvarint(len(data)) + data
    return bytes(out)


def group_partitions(partitions: Iterable[TopicPartition]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """Partitions by topic, in a stable order (Kafka groups them by topic too)."""
    by_topic: dict[str, list[int]] = {}
    for topic, p in sorted(partitions):
        by_topic.setdefault(topic, []).append(p)
    return tuple((topic, tuple(ids)) for topic, ids in by_topic.items())


def value_of(transit: TxnTransitMetadata, version: int) -> TransactionLogValue:
    """What a transition writes (Kafka's TransactionLog.valueToBytes, before encoding)."""
    empty = transit.txn_state == TransactionState.EMPTY
    if empty and transit.topic_partitions:
        raise ValueError(f"an Empty transaction has no partitions: {transit}")
    flexible = version >= _FIRST_FLEXIBLE_VALUE_VERSION
    return TransactionLogValue(
        transit.producer_id, transit.producer_epoch, transit.txn_timeout_ms, int(transit.txn_state),
        None if empty else group_partitions(transit.topic_partitions),
        transit.txn_last_update_timestamp, transit.txn_start_timestamp,
        transit.prev_producer_id if flexible else -1, transit.next_producer_id if flexible else -1,
        transit.client_transaction_version if flexible else 0)


def value_to_bytes(transit: TxnTransitMetadata, transaction_version_level: int) -> bytes:
    version = value_version_for(transaction_version_level)
    return encode_value(value_of(transit, version), version)


# ----------------------------------------------------------------- reading

class UnknownVersion(Exception):
    """A key or value version this broker does not know: skipped when loading, as Kafka does."""

    def __init__(self, what: str, version: int) -> None:
        super().__init__(f"unknown {what} version {version}")
        self.version = version


def _reader(data: bytes, flexible: bool = False) -> Readable:
    return Readable(data, CorruptRecordError, "__transaction_state record", flexible)


def read_key(data: bytes) -> str:
    """The transactional id of a record key."""
    r = _reader(data)
    version = r.int16()
    if version != TRANSACTION_LOG_KEY_VERSION:
        raise UnknownVersion("TransactionLogKey", version)
    transactional_id = r.string()
    if r.pos != len(data):
        raise CorruptRecordError(f"{len(data) - r.pos} trailing byte(s) after a TransactionLogKey")
    return transactional_id


def _int8(r: Readable) -> int:
    value: int = _I8.unpack(r.take(1))[0]
    return value


def _nullable_array_length(r: Readable, flexible: bool) -> int | None:
    n = r.uvarint() - 1 if flexible else r.int32()
    if n == -1:
        return None
    if n < 0:
        raise CorruptRecordError(f"__transaction_state record: invalid array length {n}")
    if n > len(r.data) - r.pos:
        raise CorruptRecordError(f"__transaction_state record: array of {n} longer than the record")
    return n


def _read_tagged(r: Readable) -> dict[int, bytes]:
    fields: dict[int, bytes] = {}
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        fields[tag] = r.take(r.uvarint())
    return fields


def _tagged_int(fields: dict[int, bytes], tag: int, size: int, default: int) -> int:
    data = fields.get(tag)
    if data is None:
        return default
    if len(data) != size:
        raise CorruptRecordError(f"__transaction_state record: tagged field {tag} has {len(data)} bytes, not {size}")
    value: int = (_I64 if size == 8 else _I16).unpack(data)[0]
    return value


def decode_value(data: bytes) -> TransactionLogValue:
    r = _reader(data)
    version = r.int16()
    if version not in TRANSACTION_LOG_VALUE_VERSIONS:
        raise UnknownVersion("TransactionLogValue", version)
    flexible = version >= _FIRST_FLEXIBLE_VALUE_VERSION
    r.flexible = flexible
    producer_id = r.int64()
    producer_epoch = r.int16()
    timeout_ms = r.int32()
    status = _int8(r)
    partitions: tuple[tuple[str, tuple[int, ...]], ...] | None = None
    count = _nullable_array_length(r, flexible)
    if count is not None:
        topics = []
        for _ in range(count):
            topic = r.string()
            n = _nullable_array_length(r, flexible)
            if n is None:
                raise CorruptRecordError("__transaction_state record: null partition ids")
            topics.append((topic, tuple(r.int32() for _ in range(n))))
            r.skip_tagged_fields()
        partitions = tuple(topics)
    last_update = r.int64()
    start = r.int64()
    tagged = _read_tagged(r) if flexible else {}
    if r.pos != len(data):
        raise CorruptRecordError(f"{len(data) - r.pos} trailing byte(s) after a TransactionLogValue")
    return TransactionLogValue(
        producer_id, producer_epoch, timeout_ms, status, partitions, last_update, start,
        _tagged_int(tagged, _TAG_PREVIOUS_PRODUCER_ID, 8, -1), _tagged_int(tagged, _TAG_NEXT_PRODUCER_ID, 8, -1),
        _tagged_int(tagged, _TAG_CLIENT_TRANSACTION_VERSION, 2, TV_0))


def metadata_of(transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
    """The metadata a loaded value stands for (Kafka's TransactionLog.read)."""
    state = TransactionState.from_id(value.transaction_status)
    if state is None:
        raise CorruptRecordError(f"unknown transaction state id {value.transaction_status} for {transactional_id!r}")
    partitions: set[TopicPartition] = set()
    if state != TransactionState.EMPTY:
        partitions = {(topic, p) for topic, ids in value.transaction_partitions or () for p in ids}
    # The last epoch is not persisted: -1 after a load, as in Kafka.
    return TransactionMetadata(
        transactional_id, value.producer_id, value.previous_producer_id, value.next_producer_id,
        value.producer_epoch, -1, value.transaction_timeout_ms, state, partitions,
        value.transaction_start_timestamp_ms, value.transaction_last_update_timestamp_ms,
        value.client_transaction_version)


def read(key: bytes, value: bytes | None) -> tuple[str, TransactionMetadata | None]:
    """(transactional id, its metadata or None for a tombstone); UnknownVersion or CorruptRecordError."""
    transactional_id = read_key(key)
    if value is None:
        return transactional_id, None
    return transactional_id, metadata_of(transactional_id, decode_value(value))
