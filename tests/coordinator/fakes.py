"""An in-memory __consumer_offsets and a coordinator on a fake clock, for unit tests."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from coordinator.common.coordinator_log import AppendCallback, KeyValues, LogEntry, RecordEntry
from coordinator.common.scheduler import ManualScheduler
from coordinator.group.group_coordinator import GroupCoordinator
from coordinator.group.group_membership import GroupConfig
from coordinator.group.group_metadata import JoinGroupResult, SyncGroupResult
from coordinator.group.group_metadata_manager import GroupMetadataManager
from coordinator.group.group_requests import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    LeaveGroupResult,
    LeavingMember,
    SyncGroupRequest,
)
from protocol.consumer_protocol import encode_subscription
from protocol.errors import ErrorCode


class MemoryCoordinatorLog:
    """Appends complete at once (or, with ``hold``, when the test releases them)."""

    def __init__(self, num_partitions: int = 50) -> None:
        self.num_partitions = num_partitions
        self.records: dict[int, list[tuple[int, bytes, bytes | None]]] = {}
        self.hold = False
        self.held: list[tuple[int, KeyValues, AppendCallback]] = []
        self.fail_with: ErrorCode | None = None

    def is_local_leader(self, partition: int) -> bool:
        return 0 <= partition < self.num_partitions

    def log_end_offset(self, partition: int) -> int:
        return len(self.records.get(partition, []))

    def append(self, partition: int, records: KeyValues, timestamp: int, callback: AppendCallback, *,
               producer_id: int = -1, producer_epoch: int = -1, transactional_id: str | None = None,
               add_to_transaction: bool = False) -> None:
        # Transactional writes need a real log (markers, producer state): tests/coordinator/test_txn_offsets.py.
        assert producer_id == -1, "MemoryCoordinatorLog holds no transactions"
        if self.hold:
            self.held.append((partition, records, callback))
            return
        self._complete(partition, records, callback)

    def _complete(self, partition: int, records: KeyValues, callback: AppendCallback) -> None:
        if self.fail_with is not None:
            callback(self.fail_with, None)
            return
        log = self.records.setdefault(partition, [])
        first = len(log)
        for key, value in records:
            log.append((len(log), key, value))
        callback(ErrorCode.NO_ERROR, first)

    def release(self) -> None:
        held, self.held = self.held, []
        for partition, records, callback in held:
            self._complete(partition, records, callback)

    def read_records(self, partition: int) -> Iterator[tuple[int, bytes | None, bytes | None]]:
        return iter(list(self.records.get(partition, [])))

    def read_entries(self, partition: int) -> Iterator[LogEntry]:
        return iter([RecordEntry(*record) for record in self.records.get(partition, [])])


def make_coordinator(log: MemoryCoordinatorLog | None = None, clock: ManualScheduler | None = None,
                     **config: int) -> GroupCoordinator:
    log = log or MemoryCoordinatorLog()
    clock = clock or ManualScheduler()
    manager = GroupMetadataManager(0, log, clock, offset_metadata_max_bytes=config.pop("offset_metadata_max_bytes", 4096),
                                   offsets_retention_ms=config.pop("offsets_retention_ms", 7 * 24 * 3600 * 1000))
    settings = {"group_initial_rebalance_delay_ms": 0, **config}
    coordinator = GroupCoordinator(0, GroupConfig(**settings), manager, clock)
    with_data = [p for p in range(log.num_partitions) if log.log_end_offset(p)]
    coordinator.startup(load_partitions=[p for p in range(log.num_partitions) if p not in with_data])
    for partition in with_data:  # what the broker does off the loop, done inline
        coordinator.load_partition(partition)
    return coordinator


@dataclass
class Outcome:
    """Collects what a parked request is eventually told."""

    results: list = field(default_factory=list)

    def __call__(self, result: object) -> None:
        self.results.append(result)

    @property
    def done(self) -> bool:
        return bool(self.results)

    @property
    def result(self):  # type: ignore[no-untyped-def]
        assert len(self.results) == 1, f"expected one answer, got {self.results}"
        return self.results[0]


@dataclass
class Answer:
    """A coordinator's future, read the way a test reads an Outcome."""

    future: asyncio.Future[Any]

    @property
    def done(self) -> bool:
        return self.future.done()

    @property
    def result(self):  # type: ignore[no-untyped-def]
        assert self.future.done(), "not answered yet"
        return self.future.result()


PROTOCOLS = [("range", encode_subscription(["t"])), ("roundrobin", encode_subscription(["t"], version=1))]


def join_request(group: str = "g", member_id: str = "", instance_id: str | None = None,
                 protocols: list[tuple[str, bytes]] | None = None, session_timeout_ms: int = 10_000,
                 rebalance_timeout_ms: int = 30_000, require_known_member_id: bool = True, client_id: str = "client",
                 skip_assignment: bool = False) -> JoinGroupRequest:
    return JoinGroupRequest(group, member_id, instance_id, client_id, "/127.0.0.1", rebalance_timeout_ms,
                            session_timeout_ms, "consumer", tuple(protocols if protocols is not None else PROTOCOLS),
                            require_known_member_id=require_known_member_id,
                            supports_skip_assignment=skip_assignment)


def join(coordinator: GroupCoordinator, group: str = "g", **kwargs: Any) -> Answer:
    return Answer(coordinator.join_group(join_request(group, **kwargs)))


def join_new(coordinator: GroupCoordinator, group: str = "g", **kwargs) -> tuple[str, Outcome]:  # type: ignore[no-untyped-def]
    """KIP-394's two steps: get a member id, then join with it."""
    first = join(coordinator, group, **kwargs)
    assert first.result.error == ErrorCode.MEMBER_ID_REQUIRED
    member_id = first.result.member_id
    return member_id, join(coordinator, group, member_id=member_id, **kwargs)


def sync(coordinator: GroupCoordinator, member_id: str, generation: int, assignment: dict[str, bytes] | None = None,
         group: str = "g", instance_id: str | None = None) -> Answer:
    return Answer(coordinator.sync_group(SyncGroupRequest(group, generation, member_id, instance_id, None, None,
                                                          assignment or {})))


def heartbeat(coordinator: GroupCoordinator, group: str, member_id: str, instance_id: str | None,
              generation: int) -> ErrorCode:
    answer = coordinator.heartbeat(HeartbeatRequest(group, generation, member_id, instance_id))
    assert answer.done()
    return answer.result()


def leave(coordinator: GroupCoordinator, group: str, members: list[tuple[str, str | None]]
          ) -> tuple[ErrorCode, list[ErrorCode]]:
    answer = coordinator.leave_group(LeaveGroupRequest(group, tuple(LeavingMember(m, i) for m, i in members)))
    assert answer.done()
    result: LeaveGroupResult = answer.result()
    return result.error, result.member_errors


__all__ = [
    "Answer",
    "JoinGroupResult",
    "MemoryCoordinatorLog",
    "Outcome",
    "SyncGroupResult",
    "heartbeat",
    "join",
    "join_new",
    "join_request",
    "leave",
    "make_coordinator",
    "sync",
]
