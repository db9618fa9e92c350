"""TransactionStateManager over an in-memory __transaction_state: ownership, loading, write-ahead, listing, expiry."""

from __future__ import annotations

import pytest

from coordinator.common.scheduler import ManualScheduler
from coordinator.transaction.transaction_log import key_to_bytes, read, value_to_bytes
from coordinator.transaction.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TV_2,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from coordinator.transaction.transaction_state_manager import (
    TransactionResult,
    TransactionStateManager,
    TransactionStateManagerConfig,
    transaction_topic_configs,
)
from protocol.errors import CorruptRecordError, ErrorCode
from tests.coordinator.fakes import MemoryCoordinatorLog

S = TransactionState
DAY_MS = 24 * 3600 * 1000
EPOCH = 3  # the coordinator epoch partitions are loaded at


def _manager(log: MemoryCoordinatorLog | None = None, clock: ManualScheduler | None = None,
             **config: int) -> TransactionStateManager:
    return TransactionStateManager(0, log or MemoryCoordinatorLog(), clock or ManualScheduler(),
                                   TransactionStateManagerConfig(**config))


def _new(tid: str, pid: int = 1000, now: int = 0) -> TransactionMetadata:
    return TransactionMetadata(tid, pid, NO_PRODUCER_ID, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_PRODUCER_EPOCH,
                               60_000, S.EMPTY, set(), -1, now, TV_2)


def _write(manager: TransactionStateManager, tid: str, transit: TxnTransitMetadata,
           epoch: int = EPOCH) -> list[ErrorCode]:
    answers: list[ErrorCode] = []
    manager.append_transaction_to_log(tid, epoch, transit, answers.append)
    return answers


def _init(manager: TransactionStateManager, tid: str, pid: int = 1000) -> TransactionMetadata:
    """InitProducerId's state work: create the id, bump its epoch, write, apply."""
    error, found = manager.put_transaction_state_if_not_exists(_new(tid, pid, manager.scheduler.now_ms()))
    assert error == ErrorCode.NO_ERROR and found is not None
    m = found.transaction_metadata
    assert _write(manager, tid, m.prepare_increment_producer_epoch(60_000, None, manager.scheduler.now_ms())) == [
        ErrorCode.NO_ERROR]
    return m


def _owned(manager: TransactionStateManager, *partitions: int) -> None:
    for p in partitions:
        manager.load_partition(p, EPOCH)


def test_partition_for_is_javas_hash_code() -> None:
    manager = _manager()
    # "txn": 116*31^2 + 120*31 + 110 = 115306; "ab": 97*31 + 98 = 3105.
    assert manager.partition_for("txn") == 115306 % 50 == 6
    assert manager.partition_for("ab") == 3105 % 50 == 5
    assert manager.partition_for("polygenelubricants") == 0  # hashCode is Integer.MIN_VALUE: Utils.abs gives 0
    assert manager.partition_for("my-group") == 1906497762 % 50  # a negative hashCode
    assert _manager(MemoryCoordinatorLog(num_partitions=7)).partition_for("txn") == 115306 % 7


def test_topic_configs_are_kafkas() -> None:
    assert transaction_topic_configs(2, 104857600) == {
        "cleanup.policy": "compact", "compression.type": "uncompressed", "unclean.leader.election.enable": "false",
        "min.insync.replicas": "2", "segment.bytes": "104857600"}


def test_ownership_errors() -> None:
    manager = _manager()
    assert manager.get_transaction_state("txn") == (ErrorCode.NOT_COORDINATOR, None)
    manager.add_loading_partition(6, EPOCH)
    assert manager.get_transaction_state("txn") == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None)
    assert manager.list_transaction_states([], []).error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    manager.complete_loading(6, EPOCH, iter(()))
    assert manager.get_transaction_state("txn") == (ErrorCode.NO_ERROR, None)
    error, found = manager.put_transaction_state_if_not_exists(_new("txn"))
    assert error == ErrorCode.NO_ERROR and found is not None and found.coordinator_epoch == EPOCH
    # A second put returns the first metadata.
    assert manager.put_transaction_state_if_not_exists(_new("txn", pid=5))[1] == found
    manager.remove_transactions_for_txn_topic_partition(6, EPOCH)
    assert manager.get_transaction_state("txn") == (ErrorCode.NOT_COORDINATOR, None)


def test_transitions_are_written_before_they_are_applied() -> None:
    log = MemoryCoordinatorLog()
    manager = _manager(log)
    _owned(manager, 6)
    m = _init(manager, "txn")
    assert (m.state, m.producer_epoch) == (S.EMPTY, 0)
    log.hold = True
    answers = _write(manager, "txn", m.prepare_add_partitions({("t", 0)}, 10, TV_2))
    assert answers == [] and m.state == S.EMPTY and m.pending_state == S.ONGOING  # in the log's hands
    log.release()
    assert answers == [ErrorCode.NO_ERROR] and m.state == S.ONGOING and m.pending_state is None
    tid, written = read(*log.records[6][-1][1:])  # type: ignore[arg-type]
    assert tid == "txn" and written is not None and written.state == S.ONGOING
    assert written.topic_partitions == {("t", 0)}


@pytest.mark.parametrize(("append_error", "told"), [
    (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_COORDINATOR),
    (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.UNKNOWN_SERVER_ERROR),
])
def test_a_failed_append_changes_nothing(append_error: ErrorCode, told: ErrorCode) -> None:
    log = MemoryCoordinatorLog()
    manager = _manager(log)
    _owned(manager, 6)
    m = _init(manager, "txn")
    log.fail_with = append_error
    assert _write(manager, "txn", m.prepare_add_partitions({("t", 0)}, 10, TV_2)) == [told]
    assert m.state == S.EMPTY and m.pending_state is None and m.topic_partitions == set()


def test_a_failed_append_the_caller_retries_keeps_the_pending_state() -> None:
    log = MemoryCoordinatorLog()
    manager = _manager(log)
    _owned(manager, 6)
    m = _init(manager, "txn")
    log.fail_with = ErrorCode.REQUEST_TIMED_OUT
    answers: list[ErrorCode] = []
    manager.append_transaction_to_log("txn", EPOCH, m.prepare_add_partitions({("t", 0)}, 10, TV_2), answers.append,
                                      retry_on_error=lambda e: e == ErrorCode.COORDINATOR_NOT_AVAILABLE)
    assert answers == [ErrorCode.COORDINATOR_NOT_AVAILABLE] and m.pending_state == S.ONGOING


def test_a_transition_is_not_applied_if_the_coordinator_moved_meanwhile() -> None:
    log = MemoryCoordinatorLog()
    manager = _manager(log)
    _owned(manager, 6)
    m = _init(manager, "txn")
    # Written with a stale coordinator epoch: refused before the append.
    assert _write(manager, "txn", m.prepare_add_partitions({("t", 0)}, 10, TV_2), epoch=EPOCH - 1) == [
        ErrorCode.NOT_COORDINATOR]
    m.pending_state = None
    log.hold = True
    answers = _write(manager, "txn", m.prepare_add_partitions({("t", 0)}, 10, TV_2))
    manager.remove_transactions_for_txn_topic_partition(6, EPOCH)  # leadership left during the append
    log.release()
    assert answers == [ErrorCode.NOT_COORDINATOR] and m.state == S.EMPTY


def test_restart_reloads_the_latest_state_and_tombstones() -> None:
    log = MemoryCoordinatorLog()
    clock = ManualScheduler()
    manager = _manager(log, clock)
    _owned(manager, 5, 6)
    a = _init(manager, "txn")
    _write(manager, "txn", a.prepare_add_partitions({("t", 0), ("u", 2)}, 10, TV_2))
    _write(manager, "txn", a.prepare_abort_or_commit(S.PREPARE_COMMIT, TV_2, NO_PRODUCER_ID, 20, False))
    b = _init(manager, "ab", pid=2000)
    # "gone" shares partition 6 with "txn" and is deleted by a tombstone later in the log.
    gone = next(f"gone-{i}" for i in range(1000) if manager.partition_for(f"gone-{i}") == 6)
    _init(manager, gone, pid=3000)
    log.records[6].append((len(log.records[6]), key_to_bytes(gone), None))
    expected = {tid: (m.producer_id, m.producer_epoch, m.state, set(m.topic_partitions), m.txn_start_timestamp)
                for tid, m in (("txn", a), ("ab", b))}

    reloaded = _manager(log, clock)
    reloaded.load_partition(5, EPOCH + 1)
    pending = reloaded.load_partition(6, EPOCH + 1)
    assert pending == []  # no coordinator to finish prepared transactions: left as the log has them
    got = {}
    for tid in ("txn", "ab", gone):
        error, found = reloaded.get_transaction_state(tid)
        assert error == ErrorCode.NO_ERROR
        if found is not None:
            m = found.transaction_metadata
            got[tid] = (m.producer_id, m.producer_epoch, m.state, m.topic_partitions, m.txn_start_timestamp)
            assert found.coordinator_epoch == EPOCH + 1
    assert got == expected
    assert expected["txn"][2] == S.PREPARE_COMMIT and expected["txn"][1] == 1  # V2: EndTxn bumped the epoch


def test_load_hands_prepared_transactions_to_the_coordinator() -> None:
    log = MemoryCoordinatorLog()
    manager = _manager(log)
    _owned(manager, 6)
    m = _init(manager, "txn")
    _write(manager, "txn", m.prepare_add_partitions({("t", 0)}, 10, TV_2))
    _write(manager, "txn", m.prepare_abort_or_commit(S.PREPARE_ABORT, TV_2, NO_PRODUCER_ID, 20, False))

    reloaded = _manager(log)
    sent: list[tuple[int, TransactionResult, str, S]] = []
    reloaded.send_txn_markers = lambda epoch, result, md, transit: sent.append(
        (epoch, result, md.transactional_id, transit.txn_state))
    pending = reloaded.load_partition(6, EPOCH + 1)
    assert sent == [(EPOCH + 1, TransactionResult.ABORT, "txn", S.COMPLETE_ABORT)]
    assert len(pending) == 1 and pending[0].txn_metadata.pending_state == S.COMPLETE_ABORT
    # The coordinator writes the markers, then the completion, which the partition (no longer loading) accepts.
    assert _write(reloaded, "txn", pending[0].transit_metadata, epoch=EPOCH + 1) == [ErrorCode.NO_ERROR]
    assert pending[0].txn_metadata.state == S.COMPLETE_ABORT


def test_a_load_for_an_older_epoch_installs_nothing() -> None:
    log = MemoryCoordinatorLog()
    manager = _manager(log)
    manager.add_loading_partition(6, EPOCH)
    manager.remove_transactions_for_txn_topic_partition(6, EPOCH)
    manager.add_loading_partition(6, EPOCH + 1)
    assert manager.complete_loading(6, EPOCH, iter(())) == []
    assert manager.get_transaction_state("txn") == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None)


def test_a_corrupt_record_refuses_the_partition() -> None:
    log = MemoryCoordinatorLog()
    manager = _manager(log)
    _owned(manager, 6)
    _init(manager, "txn")
    log.records[6].append((len(log.records[6]), key_to_bytes("txn"), b"\x00\x01\x00"))
    reloaded = _manager(log)
    with pytest.raises(CorruptRecordError, match="offset 1 of __transaction_state-6"):
        reloaded.load_partition(6, EPOCH)
    assert reloaded.get_transaction_state("txn") == (ErrorCode.NOT_COORDINATOR, None)


def test_records_of_unknown_versions_are_skipped() -> None:
    log = MemoryCoordinatorLog()
    manager = _manager(log)
    _owned(manager, 6)
    _init(manager, "txn")
    log.records[6].append((1, b"\x00\x07\x00\x03txn", b"anything"))  # unknown key version
    log.records[6].append((2, key_to_bytes("txn"), b"\x00\x09" + b"\x00" * 40))  # unknown value version
    reloaded = _manager(log)
    reloaded.load_partition(6, EPOCH)
    error, found = reloaded.get_transaction_state("txn")
    assert error == ErrorCode.NO_ERROR and found is not None and found.transaction_metadata.producer_epoch == 0


def test_list_transactions_filters() -> None:
    clock = ManualScheduler(start_ms=0)
    manager = _manager(clock=clock)
    _owned(manager, *range(50))
    ids = [f"txn-{i}" for i in range(4)]
    ms = [_init(manager, tid, pid=1000 + i) for i, tid in enumerate(ids)]
    _write(manager, ids[0], ms[0].prepare_add_partitions({("t", 0)}, 0, TV_2))
    clock.advance(5000)
    _write(manager, ids[1], ms[1].prepare_add_partitions({("t", 1)}, 5000, TV_2))
    clock.advance(5000)

    def listed(pids: list[int] = [], states: list[str] = [], duration: int = -1) -> set[str]:  # noqa: B006
        result = manager.list_transaction_states(pids, states, duration)
        assert result.error_code == ErrorCode.NO_ERROR
        return {t.transactional_id for t in result.transaction_states}

    assert listed() == set(ids)
    assert listed(states=["Ongoing"]) == {ids[0], ids[1]}
    assert listed(pids=[1001, 1003]) == {ids[1], ids[3]}
    assert listed(pids=[1001], states=["Empty"]) == set()
    assert listed(states=["Ongoing"], duration=7000) == {ids[0]}  # open 10 s; the other 5 s
    result = manager.list_transaction_states([], ["Ongoing", "Bogus"])
    assert result.unknown_state_filters == ["Bogus"]
    assert {(t.transactional_id, t.producer_id, t.state_name) for t in result.transaction_states} == {
        (ids[0], 1000, "Ongoing"), (ids[1], 1001, "Ongoing")}
    ms[2].state = S.DEAD  # being expired
    assert ids[2] not in listed()


def test_timed_out_transactions() -> None:
    clock = ManualScheduler(start_ms=0)
    manager = _manager(clock=clock)
    _owned(manager, *range(50))
    a, b = _init(manager, "a"), _init(manager, "b")
    _write(manager, "a", a.prepare_add_partitions({("t", 0)}, 0, TV_2))
    _write(manager, "b", b.prepare_add_partitions({("t", 0)}, 0, TV_2))
    clock.advance(60_000)
    assert manager.timed_out_transactions() == []  # not past the timeout yet
    clock.advance(1)
    b.prepare_abort_or_commit(S.PREPARE_ABORT, TV_2, NO_PRODUCER_ID, clock.now_ms(), False)  # already ending
    assert [(t.transactional_id, t.producer_id, t.producer_epoch) for t in manager.timed_out_transactions()] == [
        ("a", 1000, 0)]


def test_idle_transactional_ids_expire_with_tombstones() -> None:
    log = MemoryCoordinatorLog()
    clock = ManualScheduler(start_ms=0)
    manager = _manager(log, clock, transactional_id_expiration_ms=DAY_MS, remove_expired_transactional_ids_interval_ms=3_600_000)
    _owned(manager, *range(50))
    idle, busy, recent = _init(manager, "idle"), _init(manager, "busy"), None
    _write(manager, "busy", busy.prepare_add_partitions({("t", 0)}, 0, TV_2))
    clock.advance(DAY_MS - 3_600_000)
    recent = _init(manager, "recent")
    manager.enable_transactional_id_expiration()
    clock.advance(3_600_000)  # one expiry pass, a day after "idle" was last updated
    assert manager.get_transaction_state("idle") == (ErrorCode.NO_ERROR, None)
    assert manager.get_transaction_state("busy")[1] is not None  # ongoing: never expired
    assert manager.get_transaction_state("recent")[1] is not None
    p = manager.partition_for("idle")
    assert log.records[p][-1][1:] == (key_to_bytes("idle"), None)
    assert idle.pending_state == S.DEAD and recent.pending_state is None
    # Reloaded, the tombstone keeps it gone.
    reloaded = _manager(log, clock)
    reloaded.load_partition(p, EPOCH)
    assert reloaded.get_transaction_state("idle") == (ErrorCode.NO_ERROR, None)


def test_a_failed_tombstone_keeps_the_id() -> None:
    log = MemoryCoordinatorLog()
    clock = ManualScheduler(start_ms=0)
    manager = _manager(log, clock, transactional_id_expiration_ms=1000)
    _owned(manager, *range(50))
    m = _init(manager, "idle")
    clock.advance(1000)
    log.fail_with = ErrorCode.NOT_ENOUGH_REPLICAS
    removed: list[int] = []
    manager.remove_expired_transactional_ids(removed.append)
    assert removed == [0] and m.pending_state is None and manager.get_transaction_state("idle")[1] is not None
    log.fail_with = None
    manager.remove_expired_transactional_ids(removed.append)
    assert removed == [0, 1] and manager.get_transaction_state("idle") == (ErrorCode.NO_ERROR, None)


def test_tombstones_are_batched_under_the_size_limit() -> None:
    log = MemoryCoordinatorLog(num_partitions=1)
    clock = ManualScheduler(start_ms=0)
    manager = _manager(log, clock, transactional_id_expiration_ms=1000, max_batch_bytes=400)
    _owned(manager, 0)
    for i in range(20):
        _init(manager, f"transactional-id-{i:03}")
    appends_before = len(log.records[0])
    calls: list[int] = []
    original = log.append

    def counting(partition, records, timestamp, callback):  # type: ignore[no-untyped-def]
        calls.append(len(records))
        original(partition, records, timestamp, callback)

    log.append = counting  # type: ignore[method-assign]
    clock.advance(1000)
    removed: list[int] = []
    manager.remove_expired_transactional_ids(removed.append)
    assert removed == [20] and sum(calls) == 20 and len(calls) > 1
    assert len(log.records[0]) == appends_before + 20


def test_validate_transaction_timeout() -> None:
    manager = _manager(transaction_max_timeout_ms=900_000)
    assert manager.validate_transaction_timeout_ms(900_000)
    assert not manager.validate_transaction_timeout_ms(900_001)
    assert not manager.validate_transaction_timeout_ms(0)


def test_the_value_version_follows_the_transaction_version_level() -> None:
    for level, version in ((0, 0), (2, 1)):
        log = MemoryCoordinatorLog()
        manager = _manager(log, transaction_version_level=level)
        _owned(manager, 6)
        _init(manager, "txn")
        value = log.records[6][-1][2]
        assert value is not None and value[:2] == bytes([0, version])
        assert value == value_to_bytes(
            manager.get_transaction_state("txn")[1].transaction_metadata.prepare_no_transit(),  # type: ignore[union-attr]
            level)
