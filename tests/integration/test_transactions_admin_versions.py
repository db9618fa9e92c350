"""DescribeTransactions, ListTransactions and EndTxn v5 on the wire, at every version pafka serves.

Transactions are driven by hand (``WireProducer``) against a real broker
process, so each state the coordinator reports is one the test put it in.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from broker.handlers import describe_transactions, end_txn, fetch, list_transactions
from protocol.errors import ErrorCode
from protocol.messages.describe_transactions import DescribeTransactionsRequest
from protocol.messages.end_txn import EndTxnRequest
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.list_transactions import ListTransactionsRequest
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.waiting import wait_until
from testing.sockets import send_request
from tests.integration.test_transactions_versions import WireProducer, _retry, _until_stable
from tests.integration.test_transactions_versions import _new as _new_producer

#: After every test: `pafka transactions find-hanging` finds nothing on the broker (conftest).
pytestmark = pytest.mark.usefixtures("no_hanging_transactions")


def _new(broker: BrokerProcess, partitions: int = 2) -> WireProducer:
    p = _new_producer(broker, partitions)
    _retry(p.find_coordinator)  # the first lookup creates __transaction_state
    return p


def _describe(broker: BrokerProcess, *tids: str) -> list[Any]:
    response = send_request(broker, describe_transactions.API_KEY, 0,
                            DescribeTransactionsRequest(transactional_ids=list(tids)))
    return list(response.transaction_states)


def _list(broker: BrokerProcess, version: int, states: list[str] | None = None,
          producer_ids: list[int] | None = None, duration_ms: int = -1, pattern: str | None = None) -> Any:
    request = ListTransactionsRequest(state_filters=states or [], producer_id_filters=producer_ids or [],
                                      duration_filter=duration_ms, transactional_id_pattern=pattern)
    return send_request(broker, list_transactions.API_KEY, version, request)


def _listed(response: Any, tids: set[str]) -> dict[str, tuple[int, str]]:
    """The listed transactions among ``tids`` (other tests' ids share the broker)."""
    assert response.error_code == 0, response
    return {t.transactional_id: (t.producer_id, t.transaction_state) for t in response.transaction_states
            if t.transactional_id in tids}


@pytest.mark.parametrize("version", range(describe_transactions.MIN_VERSION, describe_transactions.MAX_VERSION + 1))
def test_describe_transactions(broker: BrokerProcess, version: int) -> None:
    p = _new(broker)
    p.init()
    (empty,) = _describe(broker, p.tid)
    assert (empty.error_code, empty.transaction_state, empty.producer_id, empty.producer_epoch,
            empty.transaction_start_time_ms, empty.topics) == (0, "Empty", p.producer_id, 0, -1, [])
    assert empty.transaction_timeout_ms == 60_000
    before = int(time.time() * 1000)
    p.add_partitions([0, 1])
    assert p.produce(1, [b"x"]) == 0
    ongoing, unknown, invalid = _describe(broker, p.tid, f"no-such-{p.tid}", "")
    assert (ongoing.error_code, ongoing.transaction_state, ongoing.producer_id) == (0, "Ongoing", p.producer_id)
    assert [(t.topic, sorted(t.partitions)) for t in ongoing.topics] == [(p.topic, [0, 1])]
    assert before - 1000 <= ongoing.transaction_start_time_ms <= int(time.time() * 1000) + 1000
    assert (unknown.transactional_id, unknown.error_code) == (f"no-such-{p.tid}", ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
    assert invalid.error_code == ErrorCode.INVALID_REQUEST
    assert p.end(True) == 0
    _until_stable(broker, p.topic, 1)
    (done,) = _retry(lambda: _describe(broker, p.tid), lambda d: ErrorCode.CONCURRENT_TRANSACTIONS
                     if d[0].transaction_state == "PrepareCommit" else ErrorCode.NO_ERROR)
    assert (done.error_code, done.transaction_state, done.topics) == (0, "CompleteCommit", [])
    assert _describe(broker) == []


@pytest.mark.parametrize("version", range(list_transactions.MIN_VERSION, list_transactions.MAX_VERSION + 1))
def test_list_transactions_filters(broker: BrokerProcess, version: int) -> None:
    ongoing, committed, idle = _new(broker), _new(broker), _new(broker)
    for p in (ongoing, committed, idle):
        p.init()
    for p in (ongoing, committed):
        p.add_partitions([0])
        assert p.produce(0, [b"v"]) == 0
    assert committed.end(True) == 0
    _until_stable(broker, committed.topic, 0)
    tids = {ongoing.tid, committed.tid, idle.tid}
    everything = _listed(_list(broker, version), tids)
    assert everything == {ongoing.tid: (ongoing.producer_id, "Ongoing"),
                          committed.tid: (committed.producer_id, "CompleteCommit"),
                          idle.tid: (idle.producer_id, "Empty")}
    assert _listed(_list(broker, version, states=["Ongoing"]), tids) == {ongoing.tid: everything[ongoing.tid]}
    assert _listed(_list(broker, version, states=["Empty", "CompleteCommit"]), tids).keys() == {committed.tid, idle.tid}
    by_id = _list(broker, version, producer_ids=[committed.producer_id, idle.producer_id])
    assert _listed(by_id, tids).keys() == {committed.tid, idle.tid}
    both = _list(broker, version, states=["Ongoing"], producer_ids=[committed.producer_id])
    assert _listed(both, tids) == {}
    unknown = _list(broker, version, states=["Ongoing", "Sleeping"])
    assert unknown.unknown_state_filters == ["Sleeping"]
    assert _listed(unknown, tids) == {ongoing.tid: everything[ongoing.tid]}
    if version >= 1:
        time.sleep(0.3)
        # Only transactions running longer than the filter. An id that never started one has start time
        # -1, so it passes any duration (as in Kafka); those that started less than an hour ago do not.
        long_running = _listed(_list(broker, version, states=["Ongoing"], duration_ms=200), tids)
        assert long_running == {ongoing.tid: everything[ongoing.tid]}
        assert _listed(_list(broker, version, duration_ms=3_600_000), tids) == {idle.tid: everything[idle.tid]}
    if version >= 2:
        # The pattern must match the whole transactional id (Java's Matcher.matches); "" filters nothing.
        topic_part = ongoing.tid.removeprefix("tid-")
        assert _listed(_list(broker, version, pattern=f".*{topic_part}"), tids).keys() == {ongoing.tid}
        assert _listed(_list(broker, version, pattern=topic_part), tids) == {}
        assert _listed(_list(broker, version, pattern=""), tids) == everything
        both = _list(broker, version, states=["Empty", "Ongoing"], pattern=f"tid-({topic_part}|nothing)")
        assert _listed(both, tids).keys() == {ongoing.tid}
        assert _list(broker, version, pattern="(unclosed").error_code == ErrorCode.INVALID_REGULAR_EXPRESSION
    assert ongoing.end(False) == 0


def _aborted_from(broker: BrokerProcess, topic: str, offset: int) -> list[int]:
    """First offsets of the aborted transactions a read_committed Fetch from ``offset`` lists.

    (The records are written with timestamp 0 and the markers with the time now, so the log rolls a
    segment at the first marker: a fetch from 0 reads only the first segment.)
    """
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=1,
                           session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                           topics=[FetchTopic(topic=topic, partitions=[FetchPartition(
                               partition=0, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                               log_start_offset=-1, partition_max_bytes=1 << 20)])])
    (result,) = send_request(broker, fetch.API_KEY, 11, request).responses[0].partitions
    assert result.error_code == 0, result
    return [a.first_offset for a in result.aborted_transactions or []]


def _end_v5(p: WireProducer, commit: bool, epoch: int) -> Any:
    request = EndTxnRequest(transactional_id=p.tid, producer_id=p.producer_id, producer_epoch=epoch, committed=commit)
    return _retry(lambda: send_request(p.broker, end_txn.API_KEY, 5, request))


def _answer(response: Any) -> tuple[int, int, int]:
    return response.error_code, response.producer_id, response.producer_epoch


@pytest.mark.parametrize("version", range(end_txn.EPOCH_BUMP_VERSION, end_txn.MAX_VERSION + 1))
def test_end_txn_v5_bumps_the_epoch(broker: BrokerProcess, version: int) -> None:
    """Transaction version 2: each EndTxn bumps the epoch; the markers carry it, so the old epoch is fenced."""
    p = _new(broker, partitions=1)
    p.init()
    pid, e0 = p.producer_id, p.epoch
    p.add_partitions([0])
    assert p.produce(0, [b"committed"]) == 0
    assert _answer(_end_v5(p, True, e0)) == (0, pid, e0 + 1)
    assert _until_stable(broker, p.topic, 0) == (2, 2, [])
    # A late write at the old epoch is fenced by the partition: the commit marker carried the new epoch.
    assert p.produce(0, [b"late"]) in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED)
    assert _until_stable(broker, p.topic, 0) == (2, 2, [])
    assert _answer(_end_v5(p, True, e0)) == (0, pid, e0 + 1)  # a retry of the commit: answered the same
    assert p.add_partitions([0], epoch=e0) == [ErrorCode.PRODUCER_FENCED]
    # The next transaction runs at the bumped epoch, its sequences from 0.
    p.epoch = e0 + 1
    p.sequences.clear()
    assert p.add_partitions([0]) == [0]
    assert p.produce(0, [b"aborted"]) == 0
    assert _answer(_end_v5(p, False, e0 + 1)) == (0, pid, e0 + 2)
    assert _answer(_end_v5(p, False, e0 + 1)) == (0, pid, e0 + 2)  # a retry of the abort
    assert _end_v5(p, True, e0 + 1).error_code == ErrorCode.INVALID_TXN_STATE  # not a retry of a commit
    assert _until_stable(broker, p.topic, 0)[:2] == (4, 4)
    assert _aborted_from(broker, p.topic, 2) == [2]
    # An abort with nothing ongoing still bumps (the client may not know whether it began one); no marker.
    assert _answer(_end_v5(p, False, e0 + 2)) == (0, pid, e0 + 3)
    assert _end_v5(p, True, e0 + 3).error_code == ErrorCode.INVALID_TXN_STATE
    assert _end_v5(p, True, e0 + 1).error_code == ErrorCode.PRODUCER_FENCED
    (described,) = _describe(broker, p.tid)
    assert (described.transaction_state, described.producer_epoch) == ("CompleteAbort", e0 + 3)
    assert _until_stable(broker, p.topic, 0)[:2] == (4, 4)
    assert _aborted_from(broker, p.topic, 2) == [2]


def test_txn_offset_commit_v5_adds_the_offsets_partition(broker: BrokerProcess) -> None:
    """Transaction version 2: TxnOffsetCommit v5 does AddOffsetsToTxn's work, so a client sends no
    AddOffsetsToTxn; its offsets become the group's with the commit marker, and an abort drops them."""
    from broker.handlers import find_coordinator, txn_offset_commit
    from protocol.messages.find_coordinator import FindCoordinatorRequest
    from tests.integration.test_transactions_versions import _committed

    p = _new(broker, partitions=2)
    p.init()
    pid, epoch = p.producer_id, p.epoch
    group = f"g-{p.topic}"
    # As a client does first: find the group's coordinator (this creates __consumer_offsets).
    _retry(lambda: send_request(broker, find_coordinator.API_KEY, 3, FindCoordinatorRequest(key=group, key_type=0)))
    # v4 without AddOffsetsToTxn: the offsets partition is not in the transaction, so the write is refused.
    assert p.add_partitions([0]) == [0]
    assert p.commit_offsets(group, {0: 1, 1: 1}, version=4) == [ErrorCode.INVALID_TXN_STATE] * 2
    assert p.commit_offsets(group, {0: 5, 1: 6}, version=txn_offset_commit.IMPLICIT_ADD_VERSION) == [0, 0]
    described = send_request(broker, describe_transactions.API_KEY, 0,
                             DescribeTransactionsRequest(transactional_ids=[p.tid])).transaction_states[0]
    assert "__consumer_offsets" in {t.topic for t in described.topics}
    assert _answer(_end_v5(p, True, epoch)) == (0, pid, epoch + 1)
    wait_until(lambda: _committed(broker, group, p.topic) == {0: 5, 1: 6}, 5.0, "the committed offsets", interval=0.02)
    # The next transaction (at the bumped epoch) commits offsets and aborts: they are dropped.
    p.epoch = epoch + 1
    assert p.commit_offsets(group, {0: 7, 1: 8}, version=txn_offset_commit.IMPLICIT_ADD_VERSION) == [0, 0]
    assert _answer(_end_v5(p, False, epoch + 1)) == (0, pid, epoch + 2)
    time.sleep(0.2)
    assert _committed(broker, group, p.topic) == {0: 5, 1: 6}


def test_produce_v12_adds_its_partition_and_a_late_one_is_fenced(broker: BrokerProcess) -> None:
    """Transaction version 2: a Produce v12+ within a transaction adds its partition itself (no
    AddPartitionsToTxn); after EndTxn v5 a late write at the old epoch is fenced, never added."""
    from broker.handlers import produce
    from tests.integration.test_hanging_transactions import _produce_request

    p = _new(broker, partitions=2)
    p.init()
    pid, epoch = p.producer_id, p.epoch

    def produce_v12(partition: int, value: bytes) -> int:
        response = send_request(broker, produce.API_KEY, produce.IMPLICIT_ADD_VERSION,
                                _produce_request(p, partition, [value]))
        return int(response.responses[0].partition_responses[0].error_code)

    assert produce_v12(0, b"implicitly-added") == 0
    described = send_request(broker, describe_transactions.API_KEY, 0,
                             DescribeTransactionsRequest(transactional_ids=[p.tid])).transaction_states[0]
    assert {(t.topic, tuple(t.partitions)) for t in described.topics} == {(p.topic, (0,))}
    assert _answer(_end_v5(p, True, epoch)) == (0, pid, epoch + 1)
    assert _until_stable(broker, p.topic, 0) == (2, 2, [])
    # The old epoch is fenced by the coordinator when it would add partition 1, and by partition 0 itself.
    assert produce_v12(1, b"late") == ErrorCode.INVALID_PRODUCER_EPOCH
    assert produce_v12(0, b"late") == ErrorCode.INVALID_PRODUCER_EPOCH
    assert _until_stable(broker, p.topic, 1) == (0, 0, [])
    assert _until_stable(broker, p.topic, 0) == (2, 2, [])
