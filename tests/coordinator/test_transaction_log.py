"""__transaction_state keys and values, byte for byte as Kafka's TransactionLogKey / TransactionLogValue schemas lay them out."""

from __future__ import annotations

import struct

import pytest

from coordinator.transaction.transaction_log import (
    TransactionLogValue,
    UnknownVersion,
    decode_value,
    encode_value,
    key_to_bytes,
    metadata_of,
    read,
    read_key,
    value_of,
    value_to_bytes,
    value_version_for,
)
from coordinator.transaction.transaction_metadata import TV_0, TV_1, TV_2, TransactionState, TxnTransitMetadata
from protocol.errors import CorruptRecordError

PID = 0x0102030405060708


def _transit(state: TransactionState, partitions: frozenset[tuple[str, int]] = frozenset(), *,
             prev: int = -1, next_: int = -1, tv: int = TV_2) -> TxnTransitMetadata:
    return TxnTransitMetadata(PID, prev, next_, 7, -1, 60_000, state, partitions, 1000 if partitions else -1, 2000, tv)


def test_key_is_the_record_type_then_the_transactional_id() -> None:
    assert key_to_bytes("txn") == b"\x00\x00" + b"\x00\x03" + b"txn"
    assert read_key(key_to_bytes("tx-\u00e9")) == "tx-\u00e9"
    with pytest.raises(UnknownVersion):
        read_key(b"\x00\x01\x00\x01a")  # a group-coordinator record type, not ours
    with pytest.raises(CorruptRecordError):
        read_key(b"\x00\x00\x00\x05ab")  # truncated
    with pytest.raises(CorruptRecordError):
        read_key(key_to_bytes("a") + b"x")  # trailing bytes


def test_value_v0_empty_transaction_has_null_partitions() -> None:
    data = value_to_bytes(_transit(TransactionState.EMPTY), TV_0)
    expected = (b"\x00\x00" + struct.pack(">q", PID) + b"\x00\x07" + struct.pack(">i", 60_000) + b"\x00"
                + b"\xff\xff\xff\xff" + struct.pack(">q", 2000) + struct.pack(">q", -1))
    assert data == expected
    value = decode_value(data)
    assert value.transaction_partitions is None and value.transaction_status == 0
    assert value.client_transaction_version == 0 and value.previous_producer_id == -1


def test_value_v0_partitions_grouped_by_topic() -> None:
    data = value_to_bytes(_transit(TransactionState.ONGOING, frozenset({("b", 2), ("a", 1), ("b", 0)})), TV_0)
    partitions = (b"\x00\x00\x00\x02" + b"\x00\x01a" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x01"
                  + b"\x00\x01b" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x02")
    assert data == (b"\x00\x00" + struct.pack(">q", PID) + b"\x00\x07" + struct.pack(">i", 60_000) + b"\x01"
                    + partitions + struct.pack(">q", 2000) + struct.pack(">q", 1000))
    assert decode_value(data).transaction_partitions == (("a", (1,)), ("b", (0, 2)))


def test_value_v1_is_flexible_and_omits_default_tagged_fields() -> None:
    data = value_to_bytes(_transit(TransactionState.ONGOING, frozenset({("topicA", 0)}), tv=TV_0), TV_1)
    partitions = b"\x02" + b"\x07topicA" + b"\x02" + b"\x00\x00\x00\x00" + b"\x00"
    assert data == (b"\x00\x01" + struct.pack(">q", PID) + b"\x00\x07" + struct.pack(">i", 60_000) + b"\x01"
                    + partitions + struct.pack(">q", 2000) + struct.pack(">q", 1000) + b"\x00")
    assert len(data) == 48  # what Kafka 4 writes for an Ongoing one-partition transaction at TV_1


def test_value_v1_tagged_fields_in_tag_order() -> None:
    transit = _transit(TransactionState.PREPARE_COMMIT, frozenset({("t", 3)}), prev=5, next_=9, tv=TV_2)
    data = value_to_bytes(transit, TV_2)
    tail = (b"\x03" + b"\x00\x08" + struct.pack(">q", 5) + b"\x01\x08" + struct.pack(">q", 9)
            + b"\x02\x02" + b"\x00\x02")
    assert data.endswith(tail)
    value = decode_value(data)
    assert (value.previous_producer_id, value.next_producer_id, value.client_transaction_version) == (5, 9, 2)
    assert value.transaction_status == TransactionState.PREPARE_COMMIT


def test_prev_producer_id_is_the_producer_id_before_the_transition() -> None:
    # TxnTransitMetadata.prev_producer_id is what Kafka writes as PreviousProducerId.
    value = value_of(_transit(TransactionState.EMPTY, prev=42), 1)
    assert value.previous_producer_id == 42
    assert value_of(_transit(TransactionState.EMPTY, prev=42), 0).previous_producer_id == -1  # v0 has no such field


def test_versions_written_per_transaction_version_level() -> None:
    assert [value_version_for(level) for level in (TV_0, TV_1, TV_2)] == [0, 1, 1]
    with pytest.raises(ValueError):
        value_to_bytes(_transit(TransactionState.EMPTY, frozenset({("t", 0)})), TV_2)  # Empty with partitions


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("state", list(TransactionState))
def test_every_state_round_trips(version: int, state: TransactionState) -> None:
    partitions = frozenset() if state == TransactionState.EMPTY else frozenset({("x", 0), ("x", 1), ("y", 7)})
    transit = _transit(state, partitions, prev=3 if version else -1, next_=4 if version else -1,
                       tv=TV_2 if version else TV_0)
    transactional_id, metadata = read(key_to_bytes("tid"), encode_value(value_of(transit, version), version))
    assert transactional_id == "tid" and metadata is not None
    assert metadata.state == state and metadata.topic_partitions == set(partitions)
    assert (metadata.producer_id, metadata.producer_epoch, metadata.last_producer_epoch) == (PID, 7, -1)
    assert (metadata.txn_timeout_ms, metadata.txn_start_timestamp, metadata.txn_last_update_timestamp) == (
        60_000, transit.txn_start_timestamp, 2000)
    assert (metadata.prev_producer_id, metadata.next_producer_id) == ((3, 4) if version else (-1, -1))
    assert metadata.client_transaction_version == transit.client_transaction_version
    assert metadata.pending_state is None


def test_tombstone_removes() -> None:
    assert read(key_to_bytes("gone"), None) == ("gone", None)


def test_unknown_tagged_fields_are_skipped() -> None:
    data = value_to_bytes(_transit(TransactionState.EMPTY, tv=TV_0), TV_2)
    assert data.endswith(b"\x00")  # no tagged field differs from its default
    extended = data[:-1] + b"\x01" + b"\x05\x03abc"  # tag 5, 3 bytes: from a newer broker
    assert decode_value(extended) == decode_value(data)


def test_corrupt_values_are_refused() -> None:
    good = value_to_bytes(_transit(TransactionState.ONGOING, frozenset({("t", 0)})), TV_2)
    for bad in (good[:-3], good[:10], good + b"\x00", b"\x00"):
        with pytest.raises(CorruptRecordError):
            decode_value(bad)
    with pytest.raises(UnknownVersion):
        decode_value(b"\x00\x02" + good[2:])
    # A known tag with the wrong size.
    with pytest.raises(CorruptRecordError):
        decode_value(good[:-1] + b"\x01\x02\x01\x02")
    # A state id Kafka does not have.
    bad_state = TransactionLogValue(1, 0, 1000, 9, None, 0, -1)
    with pytest.raises(CorruptRecordError):
        metadata_of("t", decode_value(encode_value(bad_state, 1)))
    # A partitions array longer than the record.
    v0 = bytearray(value_to_bytes(_transit(TransactionState.ONGOING, frozenset({("t", 0)})), TV_0))
    v0[17:21] = struct.pack(">i", 1000)
    with pytest.raises(CorruptRecordError):
        decode_value(bytes(v0))
