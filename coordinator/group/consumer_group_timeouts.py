"""The consumer protocol's timers: each member's session, its rebalance timeout while it revokes, and a
classic member's sync timeout.

Three timers per member at most, on the coordinator's ``Scheduler``:

- the session: re-armed by every heartbeat; when it fires the member is
  fenced (removed, its partitions reassigned);
- the rebalance timeout: armed when the member is told to revoke partitions,
  cancelled once it has; when it fires the member is fenced (for a classic member: armed when it is
  told to rejoin, cancelled when it does);
- the sync timeout of a classic member: armed when its JoinGroup is answered, cancelled by its SyncGroup;
  a member that does not sync within its rebalance timeout is fenced.

The heartbeat component owns one of these and decides what a firing does
(the callbacks); :meth:`shutdown` cancels every timer still pending.
"""

from __future__ import annotations

from collections.abc import Callable

from coordinator.common.scheduler import Scheduler, Timer

_Key = tuple[str, str]


class ConsumerGroupTimeouts:
    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self._sessions: dict[_Key, Timer] = {}
        self._rebalances: dict[_Key, Timer] = {}
        self._syncs: dict[_Key, Timer] = {}

    def schedule_session(self, group_id: str, member_id: str, timeout_ms: int, expire: Callable[[], None]) -> None:
        self._arm(self._sessions, (group_id, member_id), timeout_ms, expire)

    def schedule_rebalance(self, group_id: str, member_id: str, timeout_ms: int, expire: Callable[[], None]) -> None:
        """Armed once per revocation: a heartbeat of a member still revoking does not extend it."""
        if (group_id, member_id) not in self._rebalances:
            self._arm(self._rebalances, (group_id, member_id), timeout_ms, expire)

    def cancel_rebalance(self, group_id: str, member_id: str) -> None:
        _cancel(self._rebalances, (group_id, member_id))

    def schedule_sync(self, group_id: str, member_id: str, timeout_ms: int, expire: Callable[[], None]) -> None:
        self._arm(self._syncs, (group_id, member_id), timeout_ms, expire)

    def cancel_sync(self, group_id: str, member_id: str) -> None:
        _cancel(self._syncs, (group_id, member_id))

    def cancel_member(self, group_id: str, member_id: str) -> None:
        for timers in self._all:
            _cancel(timers, (group_id, member_id))

    def cancel_group(self, group_id: str) -> None:
        for timers in self._all:
            for key in [k for k in timers if k[0] == group_id]:
                timers.pop(key).cancel()

    def shutdown(self) -> None:
        for timers in self._all:
            for timer in timers.values():
                timer.cancel()
            timers.clear()

    @property
    def pending(self) -> int:
        return sum(len(timers) for timers in self._all)

    @property
    def _all(self) -> tuple[dict[_Key, Timer], ...]:
        return self._sessions, self._rebalances, self._syncs

    def _arm(self, timers: dict[_Key, Timer], key: _Key, timeout_ms: int, expire: Callable[[], None]) -> None:
        old = timers.pop(key, None)
        if old is not None:
            old.cancel()

        def fire() -> None:
            if timers.get(key) is timer:
                del timers[key]
                expire()

        timer = self.scheduler.schedule(timeout_ms, fire)
        timers[key] = timer


def _cancel(timers: dict[_Key, Timer], key: _Key) -> None:
    timer = timers.pop(key, None)
    if timer is not None:
        timer.cancel()
