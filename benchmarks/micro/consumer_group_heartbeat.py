"""The group coordinator's cost of one steady ConsumerGroupHeartbeat, in-process (no network, no codec).

A consumer-protocol group of ``--members`` members on one topic of ``--partitions`` partitions,
described by the broker's own topic image (``RegistryTopicImage``) over an in-memory registry,
with two brokers in racks ``a`` and ``b`` holding alternate partitions and members in racks
``a``/``b``/``c`` (``--no-racks``: no racks anywhere). The members join and reconcile until every
one holds its target; then every member heartbeats as a KIP-848 client does when nothing changed
(its id and epoch), ``--rounds`` times over, and the figure is the CPU time per heartbeat of this
thread (best of ``--repeat``). Appends to ``__consumer_offsets`` complete at once and are dropped.
``--profile`` prints cProfile's top entries of one round instead.

    .venv/bin/python benchmarks/micro/consumer_group_heartbeat.py [--members 1000] [--no-racks]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

if not __package__:  # run as a file: imports start at the repository root, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from broker.coordinator_wiring import RegistryTopicImage
from broker.metadata_store import TopicMetadata
from coordinator.common.coordinator_log import AppendCallback, KeyValues
from coordinator.common.scheduler import ManualScheduler
from coordinator.group.consumer_group import Assignment
from coordinator.group.consumer_group_heartbeat import ConsumerGroupConfig
from coordinator.group.consumer_group_requests import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResult
from coordinator.group.group_coordinator import GroupCoordinator
from coordinator.group.group_membership import GroupConfig
from coordinator.group.group_metadata_manager import GroupMetadataManager
from protocol.errors import ErrorCode

TOPIC = "t"
GROUP = "g"
PARTITIONS_OF_OFFSETS = 50


class DroppingLog:
    """A __consumer_offsets whose appends succeed at once and keep nothing."""

    def __init__(self) -> None:
        self.end = 0
        self.num_partitions = PARTITIONS_OF_OFFSETS

    def is_local_leader(self, partition: int) -> bool:
        return 0 <= partition < self.num_partitions

    def log_end_offset(self, partition: int) -> int:
        return self.end

    def append(self, partition: int, records: KeyValues, timestamp: int, callback: AppendCallback, *,
               producer_id: int = -1, producer_epoch: int = -1, transactional_id: str | None = None,
               add_to_transaction: bool = False) -> None:
        first, self.end = self.end, self.end + len(records)
        callback(ErrorCode.NO_ERROR, first)


class Registry:
    topics_version = 0

    def __init__(self, topic: TopicMetadata) -> None:
        self.topic = topic

    def get(self, name: str) -> TopicMetadata | None:
        return self.topic if name == self.topic.name else None

    def by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return self.topic if topic_id == self.topic.topic_id else None

    def __iter__(self) -> Iterator[TopicMetadata]:
        return iter([self.topic])


class Group:
    def __init__(self, members: int, partitions: int, racks: bool) -> None:
        topic = TopicMetadata(TOPIC, uuid.uuid4(), {p: [1 + p % 2] for p in range(partitions)})
        broker_racks = {1: "a", 2: "b"} if racks else {}
        image = RegistryTopicImage(Registry(topic), lambda: broker_racks)  # type: ignore[arg-type]
        self.clock = ManualScheduler()
        manager = GroupMetadataManager(0, DroppingLog(), self.clock)  # type: ignore[arg-type]
        self.coordinator = GroupCoordinator(0, GroupConfig(), manager, self.clock,
                                            consumer_config=ConsumerGroupConfig(), topics=image)
        self.coordinator.startup(load_partitions=range(PARTITIONS_OF_OFFSETS))
        self.members = [(str(uuid.uuid4()), "abc"[i % 3] if racks else None) for i in range(members)]
        self.epochs: dict[str, int] = {}
        self.owned: dict[str, Assignment] = {}

    def heartbeat(self, member_id: str, epoch: int, owned: Assignment | None = None,
                  **fields: object) -> ConsumerGroupHeartbeatResult:
        request = ConsumerGroupHeartbeatRequest(group_id=GROUP, member_id=member_id, member_epoch=epoch,
                                                client_id="bench", client_host="/127.0.0.1", owned=owned,
                                                **fields)  # type: ignore[arg-type]
        answer = self.coordinator.consumer_group_heartbeat(request).result()
        if answer.error != ErrorCode.NO_ERROR:
            raise RuntimeError(answer)
        return answer

    def _take(self, member_id: str, answer: ConsumerGroupHeartbeatResult) -> bool:
        self.epochs[member_id] = answer.member_epoch
        if answer.assignment is None or answer.assignment == self.owned.get(member_id):
            return False
        self.owned[member_id] = answer.assignment
        return True

    def form(self) -> None:
        for member_id, rack in self.members:
            self._take(member_id, self.heartbeat(member_id, 0, {}, subscribed_topic_names=(TOPIC,),
                                                 rebalance_timeout_ms=300_000, rack_id=rack))
        for _ in range(60):
            changed = [self._take(m, self.heartbeat(m, self.epochs[m], self.owned.get(m, {})))
                       for m, _rack in self.members]
            if not any(changed) and len(set(self.epochs.values())) == 1:
                return
        raise RuntimeError("the group did not settle")

    def steady_round(self) -> None:
        for member_id, _rack in self.members:
            self.heartbeat(member_id, self.epochs[member_id])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-racks", action="store_true")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    group = Group(args.members, args.partitions, racks=not args.no_racks)
    group.form()
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(group.steady_round)
        pstats.Stats(profile).sort_stats("tottime").print_stats(15)
        return
    best = min(_timed(group, args.rounds) for _ in range(args.repeat))
    racks = "no racks" if args.no_racks else "racks (2 brokers a/b, members a/b/c)"
    print(f"{args.members} members, {args.partitions} partitions, {racks}: "
          f"{best * 1e6 / (args.rounds * args.members):.1f} µs of coordinator CPU per steady heartbeat")


def _timed(group: Group, rounds: int) -> float:
    started = time.thread_time()
    for _ in range(rounds):
        group.steady_round()
    return time.thread_time() - started


if __name__ == "__main__":
    main()
