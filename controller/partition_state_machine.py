"""Kafka's partition state machine (ZkPartitionStateMachine).

States: NewPartition (assigned, no leader yet), OnlinePartition (has a live leader),
OfflinePartition (its leader died), NonExistentPartition (deleted or never created).
Moving a partition online writes its state znode (created for a new partition with the
first live replica as leader and the live replicas as ISR; otherwise a conditional
update after a leader election) and queues LeaderAndIsr for its replicas and
UpdateMetadata for every broker in the controller's request batch.

Every ZooKeeper write is conditional on the controller epoch znode's version, so a
deposed controller's write fails with ControllerMovedError instead of landing.
"""

from __future__ import annotations

import collections
import enum
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace

from controller.controller_context import ControllerContext, PartitionState, TopicPartition
from controller.controller_request_batch import ControllerRequestBatch
from controller.leader_election import (
    controlled_shutdown_leader,
    offline_partition_leader,
    preferred_replica_leader,
    reassign_partition_leader,
)
from controller.zk.kafka_zk_client import KafkaZkClient, NodeExistsError, ZkBadVersionError
from controller.zk.zk_data import DEFAULT_ENTITY, LeaderAndIsr, LeaderIsrAndControllerEpoch

__all__ = [
    "ElectionStrategy",
    "PartitionStateMachine",
    "StateChangeFailedError",
    "new_leader_and_isr",
]

#: Leader election durations kept for the quantiles (Kafka's histograms keep a 1,028-sample reservoir).
ELECTION_TIMES_KEPT = 1028

log = logging.getLogger(__name__)

_VALID_PREVIOUS: dict[PartitionState, set[PartitionState]] = {
    PartitionState.NEW: {PartitionState.NON_EXISTENT},
    PartitionState.ONLINE: {PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE},
    PartitionState.OFFLINE: {PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE},
    PartitionState.NON_EXISTENT: {PartitionState.OFFLINE},
}

UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"

#: Updates that lose a race on a znode's version are re-read and retried this often.
_MAX_ZK_RETRIES = 5


class StateChangeFailedError(Exception):
    """Kafka's StateChangeFailedException: this partition could not make the transition."""


class ElectionKind(enum.Enum):
    OFFLINE = "OfflinePartitionLeaderElectionStrategy"
    REASSIGN = "ReassignPartitionLeaderElectionStrategy"
    PREFERRED = "PreferredReplicaPartitionLeaderElectionStrategy"
    CONTROLLED_SHUTDOWN = "ControlledShutdownPartitionLeaderElectionStrategy"


@dataclass(frozen=True, slots=True)
class ElectionStrategy:
    """Which algorithm picks the leader; ``allow_unclean`` forces unclean offline election (ElectLeaders UNCLEAN)."""

    kind: ElectionKind
    allow_unclean: bool = False

    @classmethod
    def offline(cls, allow_unclean: bool = False) -> ElectionStrategy:
        return cls(ElectionKind.OFFLINE, allow_unclean)


def new_leader_and_isr(current: LeaderAndIsr, leader: int, isr: list[int], recovery_state: int | None = None) -> LeaderAndIsr:
    """Kafka's LeaderAndIsr.newLeaderAndIsr: a new leader epoch (the znode write bumps the partition epoch)."""
    return replace(
        current,
        leader=leader,
        leader_epoch=current.leader_epoch + 1,
        isr=list(isr),
        leader_recovery_state=current.leader_recovery_state if recovery_state is None else recovery_state,
    )


class PartitionStateMachine:
    """Moves partitions between Kafka's partition states, writing ZooKeeper and batching requests."""

    def __init__(
        self,
        context: ControllerContext,
        zk: KafkaZkClient,
        batch: ControllerRequestBatch,
        *,
        unclean_leader_election_enable: bool = False,
    ) -> None:
        self.context = context
        self.zk = zk
        self.batch = batch
        self.unclean_leader_election_enable = unclean_leader_election_enable
        #: Kafka's ControllerStats, as plain counters (the broker's metrics read them): leader elections
        #: done, the last ones' durations, and how many were unclean.
        self.elections = 0
        self.election_times_ms: collections.deque[float] = collections.deque(maxlen=ELECTION_TIMES_KEPT)
        self.unclean_elections = 0

    # ------------------------------------------------------------ startup

    def initialize_partition_states(self) -> None:
        """Online if the recorded leader is registered, Offline if not, New if no state znode yet."""
        for tp in self.context.all_partitions():
            info = self.context.partition_leadership_info.get(tp)
            if info is None:
                self.context.partition_states[tp] = PartitionState.NEW
            elif self.context.is_replica_online(info.leader_and_isr.leader, include_shutting_down=True):
                self.context.partition_states[tp] = PartitionState.ONLINE
            else:
                self.context.partition_states[tp] = PartitionState.OFFLINE

    async def startup(self) -> None:
        self.initialize_partition_states()
        await self.trigger_online_partition_state_change()

    async def trigger_online_partition_state_change(self, topics: set[str] | None = None) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        """Elect leaders for every New/Offline partition (of ``topics``) not being deleted."""
        candidates = [
            tp
            for tp in self.context.partitions_in_states({PartitionState.NEW, PartitionState.OFFLINE})
            if not self.context.is_topic_queued_up_for_deletion(tp[0]) and (topics is None or tp[0] in topics)
        ]
        if not candidates:
            return {}
        return await self.handle_state_changes(candidates, PartitionState.ONLINE, ElectionStrategy.offline())

    # ------------------------------------------------------------ transitions

    async def handle_state_changes(
        self,
        partitions: Iterable[TopicPartition],
        target: PartitionState,
        strategy: ElectionStrategy | None = None,
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        """Move ``partitions`` to ``target`` and send the batched requests.

        Returns, for the partitions that went online, their new LeaderAndIsr or the
        reason they did not. ControllerMovedError propagates (the caller resigns).
        """
        tps = list(partitions)
        if not tps:
            return {}
        self.batch.new_batch()
        try:
            results = await self._do_handle_state_changes(tps, target, strategy)
            self.batch.send_requests_to_brokers(self.context.epoch)
        except BaseException:
            self.batch.clear()
            raise
        return results

    async def _do_handle_state_changes(
        self, tps: list[TopicPartition], target: PartitionState, strategy: ElectionStrategy | None
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        results: dict[TopicPartition, LeaderAndIsr | Exception] = {}
        valid: list[TopicPartition] = []
        for tp in tps:
            current = self.context.partition_state(tp)
            if current in _VALID_PREVIOUS[target]:
                valid.append(tp)
            else:
                error = StateChangeFailedError(f"partition {tp[0]}-{tp[1]} cannot move from {current.value} to {target.value}")
                log.error("controller: %s", error)
                results[tp] = error
        if target is PartitionState.NEW:
            for tp in valid:
                self.context.partition_states[tp] = PartitionState.NEW
        elif target is PartitionState.ONLINE:
            uninitialized = [tp for tp in valid if self.context.partition_state(tp) is PartitionState.NEW]
            to_elect = [tp for tp in valid if self.context.partition_state(tp) is not PartitionState.NEW]
            if uninitialized:
                results.update(await self._initialize_leader_and_isr(uninitialized))
            if to_elect:
                results.update(await self.elect_leader_for_partitions(to_elect, strategy or ElectionStrategy.offline()))
            for tp, result in results.items():
                if isinstance(result, LeaderAndIsr):
                    self.context.partition_states[tp] = PartitionState.ONLINE
        elif target is PartitionState.OFFLINE:
            for tp in valid:
                self.context.partition_states[tp] = PartitionState.OFFLINE
        else:
            for tp in valid:
                self.context.partition_states[tp] = PartitionState.NON_EXISTENT
                self.context.partition_leadership_info.pop(tp, None)
        return results

    async def _initialize_leader_and_isr(self, tps: list[TopicPartition]) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        """A new partition's first state: leader = first live replica, ISR = the live replicas."""
        results: dict[TopicPartition, LeaderAndIsr | Exception] = {}
        to_create: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for tp in tps:
            live = [r for r in self.context.partition_replica_assignment(tp) if self.context.is_replica_online(r, tp=tp)]
            if not live:
                results[tp] = StateChangeFailedError(
                    f"Controller {self.batch.controller_id} epoch {self.context.epoch} encountered error during state "
                    f"change of partition {tp[0]}-{tp[1]} from New to Online, assigned replicas are "
                    f"[{','.join(map(str, self.context.partition_replica_assignment(tp)))}], live brokers are "
                    f"[{','.join(map(str, sorted(self.context.live_broker_ids)))}]. No assigned replica is alive."
                )
                continue
            to_create[tp] = LeaderIsrAndControllerEpoch(LeaderAndIsr(live[0], 0, live), self.context.epoch)
        if not to_create:
            return results
        to_create = await self._create_partition_states(to_create)
        adopted_leaderless: list[TopicPartition] = []
        for tp, state in to_create.items():
            self.context.partition_leadership_info[tp] = state
            if not self.context.is_replica_online(state.leader_and_isr.leader, include_shutting_down=True):
                # A state another controller wrote, whose leader is gone: elect one as for an offline partition.
                self.context.partition_states[tp] = PartitionState.OFFLINE
                adopted_leaderless.append(tp)
                continue
            replicas = self.context.partition_replica_assignment(tp)
            self.batch.add_leader_and_isr_request_for_brokers(state.leader_and_isr.isr, tp, state, replicas, is_new=True)
            results[tp] = state.leader_and_isr
        if adopted_leaderless:
            results.update(await self.elect_leader_for_partitions(adopted_leaderless, ElectionStrategy.offline()))
        return results

    async def _create_partition_states(
        self, states: dict[TopicPartition, LeaderIsrAndControllerEpoch]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """Create the state znodes; where one already exists (a previous controller got there), adopt it."""
        failed = await self.zk.create_partition_states(states, self.context.epoch_zk_version)
        created = {tp: state for tp, state in states.items() if tp not in failed}
        existing_tps = [tp for tp, error in failed.items() if isinstance(error, NodeExistsError)]
        for tp, error in failed.items():
            if not isinstance(error, NodeExistsError):
                log.error("controller: cannot create the state of %s-%d: %s", tp[0], tp[1], error)
        if existing_tps:
            created.update(await self.zk.get_partition_states(existing_tps))
        return created

    async def elect_leader_for_partitions(
        self, tps: list[TopicPartition], strategy: ElectionStrategy
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        """Elect with ``strategy``, retrying partitions whose znode changed under us."""
        results: dict[TopicPartition, LeaderAndIsr | Exception] = {}
        remaining = tps
        started = time.perf_counter()
        for _ in range(_MAX_ZK_RETRIES):
            if not remaining:
                break
            done, remaining = await self._do_elect_leader_for_partitions(remaining, strategy)
            results.update(done)
        for tp in remaining:
            results[tp] = StateChangeFailedError(f"partition {tp[0]}-{tp[1]}: state znode kept changing during election")
        if tps:
            self.elections += 1
            self.election_times_ms.append((time.perf_counter() - started) * 1000)
        return results

    async def _do_elect_leader_for_partitions(
        self, tps: list[TopicPartition], strategy: ElectionStrategy
    ) -> tuple[dict[TopicPartition, LeaderAndIsr | Exception], list[TopicPartition]]:
        results: dict[TopicPartition, LeaderAndIsr | Exception] = {}
        current = await self.zk.get_partition_states(tps)
        valid: dict[TopicPartition, LeaderAndIsr] = {}
        for tp in tps:
            state = current.get(tp)
            if state is None:
                results[tp] = StateChangeFailedError(f"partition {tp[0]}-{tp[1]}: no state znode")
            elif state.controller_epoch > self.context.epoch:
                results[tp] = StateChangeFailedError(
                    f"partition {tp[0]}-{tp[1]}: leader and ISR written by controller epoch "
                    f"{state.controller_epoch}, newer than ours ({self.context.epoch})"
                )
            else:
                valid[tp] = state.leader_and_isr
        unclean_topics = await self._unclean_topics(valid, strategy)
        to_update: dict[TopicPartition, LeaderAndIsr] = {}
        recipients: dict[TopicPartition, list[int]] = {}
        for tp, lai in valid.items():
            assignment = self.context.partition_replica_assignment(tp)
            live_or_shutting = [r for r in assignment if self.context.is_replica_online(r, include_shutting_down=True, tp=tp)]
            elected = self._elect(tp, lai, assignment, strategy, tp[0] in unclean_topics)
            if elected is None:
                results[tp] = StateChangeFailedError(
                    f"Failed to elect leader for partition {tp[0]}-{tp[1]} under strategy {strategy.kind.value}"
                )
                continue
            to_update[tp] = elected
            recipients[tp] = live_or_shutting
        if not to_update:
            return results, []
        updated, failed = await self.zk.update_leader_and_isr(to_update, self.context.epoch, self.context.epoch_zk_version)
        for tp, lai in updated.items():
            state = LeaderIsrAndControllerEpoch(lai, self.context.epoch)
            self.context.partition_leadership_info[tp] = state
            self.batch.add_leader_and_isr_request_for_brokers(
                recipients[tp], tp, state, self.context.partition_replica_assignment(tp), is_new=False
            )
            results[tp] = lai
        retry = []
        for tp, error in failed.items():
            if isinstance(error, ZkBadVersionError):
                log.info("controller: leader and ISR update of %s-%d lost a race (%s); retrying", tp[0], tp[1], error)
                retry.append(tp)
            else:
                results[tp] = StateChangeFailedError(f"partition {tp[0]}-{tp[1]}: {error}")
        return results, retry

    def _elect(
        self, tp: TopicPartition, lai: LeaderAndIsr, assignment: list[int], strategy: ElectionStrategy, unclean: bool
    ) -> LeaderAndIsr | None:
        live = [r for r in assignment if self.context.is_replica_online(r, tp=tp)]
        if strategy.kind is ElectionKind.OFFLINE:
            leader, was_unclean = offline_partition_leader(assignment, lai.isr, live, unclean)
            if leader is None:
                return None
            if was_unclean:
                self.unclean_elections += 1
                log.warning("controller: unclean leader election for %s-%d: broker %d, not in ISR %s",
                            tp[0], tp[1], leader, lai.isr)
                return new_leader_and_isr(lai, leader, [leader])
            return new_leader_and_isr(lai, leader, [r for r in lai.isr if r in live])
        if strategy.kind is ElectionKind.REASSIGN:
            target = self.context.partition_assignments.get(tp[0], {}).get(tp[1])
            reassignment = [r for r in assignment if target is None or r not in target.removing]
            leader = reassign_partition_leader(reassignment, lai.isr, live)
            return None if leader is None else new_leader_and_isr(lai, leader, lai.isr)
        if strategy.kind is ElectionKind.PREFERRED:
            leader = preferred_replica_leader(assignment, lai.isr, live)
            return None if leader is None else new_leader_and_isr(lai, leader, lai.isr)
        shutting_down = self.context.shutting_down_broker_ids
        leader = controlled_shutdown_leader(assignment, lai.isr, live, shutting_down)
        if leader is None:
            return None
        return new_leader_and_isr(lai, leader, [r for r in lai.isr if r not in shutting_down])

    async def _unclean_topics(self, states: dict[TopicPartition, LeaderAndIsr], strategy: ElectionStrategy) -> set[str]:
        """Topics whose partitions may elect a leader outside the ISR, when they have no live ISR member."""
        if strategy.kind is not ElectionKind.OFFLINE:
            return set()
        needing = {
            tp[0]
            for tp, lai in states.items()
            if not any(self.context.is_replica_online(r, tp=tp) for r in lai.isr)
        }
        if not needing:
            return set()
        if strategy.allow_unclean:
            return needing
        configs = await self.zk.get_topic_configs(needing)
        default = await self._broker_unclean_default()
        allowed = set()
        for topic in needing:
            value = configs.get(topic, {}).get(UNCLEAN_LEADER_ELECTION_ENABLE)
            if default if value is None else value.strip().lower() == "true":
                allowed.add(topic)
        return allowed

    async def _broker_unclean_default(self) -> bool:
        """The controller's broker setting: its dynamic per-broker value, the cluster default, or the static one."""
        for entity in (str(self.batch.controller_id), DEFAULT_ENTITY):
            value = (await self.zk.get_broker_configs(entity)).get(UNCLEAN_LEADER_ELECTION_ENABLE)
            if value is not None:
                return value.strip().lower() == "true"
        return self.unclean_leader_election_enable
