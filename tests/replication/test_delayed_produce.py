"""The produce purgatory: acks=all produces complete in high-watermark order, and an
append or a follower's fetch costs what it completes, not how many produces wait."""

from __future__ import annotations

import asyncio

from protocol.errors import ErrorCode
from replication.delayed_produce import ProducePurgatory, TopicPartition

TP: TopicPartition = ("t", 0)
OTHER: TopicPartition = ("t", 1)


class FakePartitions:
    """A high watermark per partition and a leader flag, checked the way Partition checks."""

    def __init__(self) -> None:
        self.high_watermark: dict[TopicPartition, int] = {TP: 0, OTHER: 0}
        self.is_leader = True
        self.isr_too_small = False
        self.checks = 0

    def check(self, tp: TopicPartition, needed: int) -> tuple[bool, int]:
        self.checks += 1
        if not self.is_leader:
            return False, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.high_watermark[tp] >= needed:
            if self.isr_too_small:
                return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            return True, ErrorCode.NO_ERROR
        return False, ErrorCode.NO_ERROR


async def _settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


def test_produces_complete_in_high_watermark_order_at_a_cost_of_what_completes() -> None:
    async def scenario() -> None:
        state = FakePartitions()
        purgatory = ProducePurgatory(state.check)
        waits = [asyncio.ensure_future(purgatory.wait({TP: offset}, 30)) for offset in range(1, 1001)]
        await _settle()
        assert not any(w.done() for w in waits)
        state.checks = 0
        state.high_watermark[TP] = 10
        purgatory.check_and_complete(TP)
        # Ten produces complete; the scan stops at the first one still short.
        assert state.checks == 11
        await _settle()
        assert [w.done() for w in waits[:11]] == [True] * 10 + [False]
        assert all(w.result() == {} for w in waits[:10])
        state.checks = 0
        purgatory.check_and_complete(TP)  # nothing moved: one check, not 990
        assert state.checks == 1
        state.high_watermark[TP] = 1000
        purgatory.check_and_complete(TP)
        await _settle()
        assert all(w.done() and w.result() == {} for w in waits)
        assert not purgatory.watching

    asyncio.run(scenario())


def test_a_produce_registered_out_of_order_still_completes_when_reached() -> None:
    async def scenario() -> None:
        state = FakePartitions()
        purgatory = ProducePurgatory(state.check)
        late = asyncio.ensure_future(purgatory.wait({TP: 50}, 30))
        await _settle()
        early = asyncio.ensure_future(purgatory.wait({TP: 5}, 30))
        await _settle()
        state.high_watermark[TP] = 5
        purgatory.check_and_complete(TP)
        await _settle()
        assert early.done() and not late.done()
        state.high_watermark[TP] = 50
        purgatory.check_and_complete(TP)
        await _settle()
        assert late.done() and late.result() == {}

    asyncio.run(scenario())


def test_leadership_loss_completes_every_waiter_and_isr_shrink_only_those_reached() -> None:
    async def scenario() -> None:
        state = FakePartitions()
        purgatory = ProducePurgatory(state.check)
        waits = [asyncio.ensure_future(purgatory.wait({TP: offset}, 30)) for offset in (1, 2, 3)]
        await _settle()
        state.high_watermark[TP] = 2
        state.isr_too_small = True
        purgatory.check_and_complete(TP)
        await _settle()
        assert [w.done() for w in waits] == [True, True, False]
        assert waits[0].result() == {TP: ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND}
        state.is_leader = False
        purgatory.check_and_complete(TP)
        await _settle()
        assert waits[2].result() == {TP: ErrorCode.NOT_LEADER_OR_FOLLOWER}
        assert not purgatory.watching

    asyncio.run(scenario())


def test_a_timed_out_produce_leaves_and_the_others_still_complete() -> None:
    async def scenario() -> None:
        state = FakePartitions()
        purgatory = ProducePurgatory(state.check)
        short = asyncio.ensure_future(purgatory.wait({TP: 3, OTHER: 3}, 0.05))
        other = asyncio.ensure_future(purgatory.wait({TP: 4}, 30))
        await _settle()
        state.high_watermark[OTHER] = 3
        purgatory.check_and_complete(OTHER)
        assert await short == {TP: ErrorCode.REQUEST_TIMED_OUT}
        assert purgatory.is_watched(TP) and not purgatory.is_watched(OTHER)
        state.high_watermark[TP] = 4
        purgatory.check_and_complete(TP)
        assert await other == {}
        assert not purgatory.watching

    asyncio.run(scenario())
