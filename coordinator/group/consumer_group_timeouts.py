"""The consumer protocol's timers: each member's session, its rebalance timeout while it revokes, and a
classic member's sync timeout.

Three timers per member at most, on the coordinator's ``Scheduler``:

- the session: extended by every heartbeat; when it runs out the member is
  fenced (removed, its partitions reassigned). A heartbeat only moves the
  session's deadline; the timer, when it fires before the deadline, waits out
  the rest (every member heartbeats every few seconds, so cancelling and
  scheduling a timer per heartbeat would cost more than one wake-up per
  session timeout);
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
from dataclasses import dataclass

from coordinator.common.scheduler import Scheduler, Timer

_Key = tuple[str, str]


@dataclass(slots=True)
class _Session:
    """A member's session: when it runs out, what then, and the timer armed for it (due at or before the
    deadline)."""

    deadline_ms: int
    due_ms: int
    expire: Callable[[], None]
    timer: Timer


class ConsumerGroupTimeouts:
    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self._sessions: dict[_Key, _Session] = {}
        self._rebalances: dict[_Key, Timer] = {}
        self._syncs: dict[_Key, Timer] = {}

    def schedule_session(self, group_id: str, member_id: str, timeout_ms: int, expire: Callable[[], None]) -> None:
        """The member's session runs out ``timeout_ms`` from now (whatever its earlier deadline), then ``expire``."""
        key = (group_id, member_id)
        deadline = self.scheduler.now_ms() + max(timeout_ms, 0)
        session = self._sessions.get(key)
        if session is not None and session.due_ms <= deadline:
            session.deadline_ms, session.expire = deadline, expire
            return
        if session is not None:  # a shorter timeout than the armed timer's: arm anew
            session.timer.cancel()
        self._sessions[key] = self._arm_session(key, deadline, expire)

    def _arm_session(self, key: _Key, deadline: int, expire: Callable[[], None]) -> _Session:
        def fire() -> None:
            if self._sessions.get(key) is not session:
                return
            now = self.scheduler.now_ms()
            if now < session.deadline_ms:  # extended since the timer was armed: wait out the rest
                session.due_ms = session.deadline_ms
                session.timer = self.scheduler.schedule(session.deadline_ms - now, fire)
                return
            del self._sessions[key]
            session.expire()

        session = _Session(deadline, deadline, expire, self.scheduler.schedule(deadline - self.scheduler.now_ms(), fire))
        return session

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
        session = self._sessions.pop((group_id, member_id), None)
        if session is not None:
            session.timer.cancel()
        for timers in self._member_timers:
            _cancel(timers, (group_id, member_id))

    def cancel_group(self, group_id: str) -> None:
        for key in [k for k in self._sessions if k[0] == group_id]:
            self._sessions.pop(key).timer.cancel()
        for timers in self._member_timers:
            for key in [k for k in timers if k[0] == group_id]:
                timers.pop(key).cancel()

    def shutdown(self) -> None:
        for session in self._sessions.values():
            session.timer.cancel()
        self._sessions.clear()
        for timers in self._member_timers:
            for timer in timers.values():
                timer.cancel()
            timers.clear()

    @property
    def pending(self) -> int:
        return len(self._sessions) + sum(len(timers) for timers in self._member_timers)

    @property
    def _member_timers(self) -> tuple[dict[_Key, Timer], ...]:
        return self._rebalances, self._syncs

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
