"""A history checker over random runs of the share-partition manager (in-memory Persister and log, fake clock):
members fetch, acknowledge and renew locks, locks time out, writes fail, the broker restarts from the persisted state.
From the members' log of acquisitions and answered acknowledgements: no record is acknowledged twice, none
acknowledged is acquired again (restarts included), a record is never acquired while another member's lock on
it holds, delivery counts grow with each delivery (a restart may lose counts not yet written: at-least-once),
and in the end every record is accepted, rejected or archived at the delivery limit, none lost and none done
that no member acknowledged."""

from __future__ import annotations

import asyncio
import uuid

from hypothesis import example, given, settings
from hypothesis import strategies as st

from coordinator.common.scheduler import ManualScheduler
from coordinator.share.share_partition import AcknowledgementBatch, SharePartitionConfig
from coordinator.share.share_partition_manager import ShareGroupSettings, SharePartitionManager, ShareTarget
from protocol.errors import ErrorCode
from testing.share_history import ACCEPT, REJECT, RELEASE, RENEW, ShareHistory
from tests.coordinator.share_partition_fakes import FakeReplicaManager, MemoryPersister

TOPIC_ID = uuid.UUID(int=9)
P0 = ShareTarget(TOPIC_ID, "t", 0)
LOCK_MS = 1_000
LIMIT = 4
MEMBERS = ("a", "b", "c")

operation = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 4)),
    st.tuples(st.just("fetch"), st.sampled_from(MEMBERS), st.integers(1, 6)),
    st.tuples(st.just("ack"), st.sampled_from(MEMBERS), st.sampled_from([ACCEPT, ACCEPT, RELEASE, REJECT, RENEW]),
              st.integers(-3, 3)),
    st.tuples(st.just("advance"), st.sampled_from([100, 400, 600, LOCK_MS])),
    st.tuples(st.just("fetch"), st.sampled_from(MEMBERS), st.integers(1, 6)),
    st.tuples(st.just("fail_write")),
    st.tuples(st.just("restart")),
    st.tuples(st.just("restart")),
)


class Run:
    def __init__(self) -> None:
        self.persister = MemoryPersister()
        self.replicas = FakeReplicaManager()
        self.replicas.append("t", 0, 1)
        self.history: ShareHistory[int] = ShareHistory(LOCK_MS, LIMIT)
        self.now = 0
        self.appended = 1
        self.clock = ManualScheduler()
        self.manager = self._manager()
        self.fail_next = False

    def _manager(self) -> SharePartitionManager:
        cfg = ShareGroupSettings(SharePartitionConfig(LOCK_MS, LIMIT, 8), "earliest")
        return SharePartitionManager(self.replicas, self.persister, self.clock, lambda group: cfg)

    async def fetch(self, member: str, max_records: int) -> None:
        got = await self.manager.fetch("g", member, [P0], max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                                       max_records=max_records)
        for r in got[P0].acquired:
            for offset in range(r.first_offset, r.last_offset + 1):
                self.history.acquired(member, offset, r.delivery_count, self.now)

    async def ack(self, member: str, kind: int, how_many: int) -> None:
        """Acknowledge the member's ``how_many`` lowest held offsets, or with a negative count its highest
        (out of order: what leaves acknowledged records above the start offset)."""
        held = sorted(o for o, (m, _, gen) in self.history.held.items()
                      if m == member and gen == self.history.generation)
        mine = held[:how_many] if how_many > 0 else held[how_many:]
        if not mine:
            return
        self.persister.fail_with = ErrorCode.COORDINATOR_NOT_AVAILABLE if self.fail_next else None
        self.fail_next = False
        batches = [AcknowledgementBatch(o, o, (kind,)) for o in mine]
        code, _ = (await self.manager.acknowledge("g", member, [(P0, batches)], allow_renew=True))[P0]
        self.persister.fail_with = None
        if code == ErrorCode.NO_ERROR:
            for offset in mine:
                self.history.acknowledged(member, offset, kind, self.now)
        else:
            assert code in (ErrorCode.INVALID_RECORD_STATE, ErrorCode.COORDINATOR_NOT_AVAILABLE), code
            for offset in mine:  # the member gives those records up
                self.history.gave_up(offset)

    async def step(self, op: tuple[object, ...]) -> None:
        kind = op[0]
        if kind == "append":
            self.replicas.append("t", 0, int(op[1]))  # type: ignore[call-overload]
            self.appended += int(op[1])  # type: ignore[call-overload]
        elif kind == "fetch":
            await self.fetch(str(op[1]), int(op[2]))  # type: ignore[call-overload]
        elif kind == "ack":
            await self.ack(str(op[1]), int(op[2]), int(op[3]))  # type: ignore[call-overload]
        elif kind == "advance":
            self.clock.advance(int(op[1]))  # type: ignore[call-overload]
            self.now += int(op[1])  # type: ignore[call-overload]
            await asyncio.sleep(0)  # the expiry's write
        elif kind == "fail_write":
            self.fail_next = True
        else:  # the broker restarts: what is not persisted is gone, no lock survives
            self.manager.close()
            self.manager = self._manager()
            self.history.restart()

    async def drain(self) -> None:
        """Consume everything left, accepting it: every record ends accepted or archived."""
        for _ in range(50):
            self.clock.advance(LOCK_MS)
            self.now += LOCK_MS
            await self.fetch("a", 100)
            await self.ack("a", ACCEPT, 100)
        sp = self.manager.cached("g", TOPIC_ID, 0)
        assert sp is not None and sp.start_offset == self.appended, "records left undelivered"


@settings(max_examples=500, deadline=None)
@given(st.lists(operation, max_size=60))
# Histories the checker must see whole, whatever the random draw finds:
# two acquisitions whose locks overlap, one expiring while the other holds;
@example([("fetch", "a", 1), ("append", 2), ("advance", 400), ("fetch", "b", 5), ("advance", 600),
          ("fetch", "c", 5)])
# acknowledgements out of order (done records above the start offset), then a restart;
@example([("append", 3), ("fetch", "a", 4), ("ack", "a", ACCEPT, -2), ("restart",), ("fetch", "b", 9),
          ("ack", "b", RELEASE, 3), ("fetch", "c", 9)])
# a renewed lock outliving the acquisition's;
@example([("append", 2), ("fetch", "a", 3), ("advance", 600), ("ack", "a", RENEW, 3), ("advance", 600),
          ("fetch", "b", 9), ("advance", 600), ("fetch", "c", 9)])
# a failed write among mixed acknowledgements, then lock expiry.
@example([("append", 3), ("fetch", "a", 2), ("fetch", "b", 2), ("fail_write",), ("ack", "a", ACCEPT, 2),
          ("ack", "b", REJECT, 1), ("advance", LOCK_MS), ("fetch", "c", 9), ("restart",), ("fetch", "a", 9)])
def test_random_histories_keep_the_share_group_guarantees(ops: list[tuple[object, ...]]) -> None:
    async def scenario() -> None:
        run = Run()
        for op in ops:
            await run.step(op)
        await run.drain()
        # Done only by a member's answered acknowledgement, or archived at the delivery count limit.
        run.history.check_complete(range(run.appended))
    asyncio.run(scenario())
