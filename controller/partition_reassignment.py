"""Partition reassignment (Kafka's KIP-455 in ZooKeeper mode): AlterPartitionReassignments,
ListPartitionReassignments, and the controller's onPartitionReassignment.

Part of :class:`~controller.kafka_controller.KafkaController` (a mixin, like
``controller_requests``). Moving a partition from its original replicas (ORS) to
target replicas (TRS) goes in two phases, each recorded in ``/brokers/topics/T``
(``adding_replicas`` / ``removing_replicas``) so that a new controller resumes it:

1. the replica set becomes TRS + ORS (target first), with AR = TRS - ORS adding and
   RR = ORS - TRS removing; the leader epoch is bumped and every replica hears the
   new set (LeaderAndIsr); the adding replicas start as New replicas and fetch;
2. when every target replica is in the ISR (an AlterPartition from the leader says
   so), the set becomes TRS: a new leader is elected from TRS if the current one is
   not in it (else the epoch is bumped again), the removing replicas are stopped,
   taken out of the ISR and deleted, and every broker learns the result.

A new reassignment of a partition being reassigned replaces the old one (its adding
replicas that are not in the new target are stopped and deleted); a cancellation
(null replicas) reassigns back to the original replicas. Throttling the copy is the
operator's business (``pafka reassign-partitions --throttle`` sets Kafka's throttle
configs), as in Kafka.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from controller.controller_context import (
    ControllerContext,
    PartitionReplica,
    PartitionState,
    ReplicaAssignment,
    ReplicaState,
    TopicPartition,
)
from controller.controller_requests import CONTROLLER_DEPOSED as _DEPOSED
from controller.partition_state_machine import ElectionKind, ElectionStrategy, new_leader_and_isr
from controller.zk.zk_data import LeaderIsrAndControllerEpoch, TopicAssignment
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from controller.controller_request_batch import ControllerRequestBatch
    from controller.partition_state_machine import PartitionStateMachine
    from controller.replica_state_machine import ReplicaStateMachine
    from controller.topic_deletion_manager import TopicDeletionManager
    from controller.zk.kafka_zk_client import KafkaZkClient

__all__ = ["PartitionReassignment", "ReassignmentResults", "reassign_to"]

log = logging.getLogger(__name__)

#: Per partition: (error code, message).
ReassignmentResults = dict[TopicPartition, tuple[int, str | None]]


def origin_replicas(assignment: ReplicaAssignment) -> list[int]:
    return [r for r in assignment.replicas if r not in assignment.adding]


def target_replicas(assignment: ReplicaAssignment) -> list[int]:
    return [r for r in assignment.replicas if r not in assignment.removing]


def reassign_to(current: ReplicaAssignment, target: list[int]) -> ReplicaAssignment:
    """The assignment while moving from ``current``'s original replicas to ``target``
    (Kafka's ReplicaAssignment.reassignTo): target first, then the original replicas."""
    origin = origin_replicas(current)
    full = list(dict.fromkeys([*target, *origin]))
    return ReplicaAssignment(full, [r for r in full if r not in origin], [r for r in full if r not in target])


class PartitionReassignment:
    """AlterPartitionReassignments, ListPartitionReassignments and their completion."""

    if TYPE_CHECKING:
        broker_id: int
        zk: KafkaZkClient
        context: ControllerContext
        batch: ControllerRequestBatch
        partition_state_machine: PartitionStateMachine
        replica_state_machine: ReplicaStateMachine
        topic_deletion_manager: TopicDeletionManager

        @property
        def is_active(self) -> bool: ...

        def _enqueue(self, name: str, process: Callable[[], Awaitable[Any]]) -> asyncio.Future[Any]: ...

    # ------------------------------------------------------------ the requests

    async def alter_partition_reassignments(self, wanted: Mapping[TopicPartition, list[int] | None]
                                            ) -> ReassignmentResults:
        """Start (replicas) or cancel (None) each partition's reassignment."""
        if not self.is_active:
            return dict.fromkeys(wanted, (int(ErrorCode.NOT_CONTROLLER), None))
        try:
            results: ReassignmentResults = await self._enqueue(
                "ApiPartitionReassignment", lambda: self._process_api_reassignments(dict(wanted)))
        except _DEPOSED:
            return dict.fromkeys(wanted, (int(ErrorCode.NOT_CONTROLLER), None))
        return results

    async def list_partition_reassignments(self, partitions: list[TopicPartition] | None
                                           ) -> dict[TopicPartition, ReplicaAssignment] | None:
        """The reassignments in progress (of ``partitions``, or all); None: not the controller."""
        if not self.is_active:
            return None
        try:
            found: dict[TopicPartition, ReplicaAssignment] = await self._enqueue(
                "ListPartitionReassignments", lambda: self._process_list(partitions))
        except _DEPOSED:
            return None
        return found

    async def _process_list(self, partitions: list[TopicPartition] | None) -> dict[TopicPartition, ReplicaAssignment]:
        ctx = self.context
        tps = list(ctx.all_partitions()) if partitions is None else partitions
        found = {}
        for tp in tps:
            assignment = ctx.partition_assignments.get(tp[0], {}).get(tp[1])
            if assignment is not None and (assignment.adding or assignment.removing):
                found[tp] = assignment
        return found

    async def _process_api_reassignments(self, wanted: dict[TopicPartition, list[int] | None]) -> ReassignmentResults:
        ctx = self.context
        results: ReassignmentResults = {}
        to_move: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in wanted.items():
            current = ctx.partition_assignments.get(tp[0], {}).get(tp[1])
            if current is None or tp not in ctx.partition_leadership_info:
                results[tp] = (int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), "The partition does not exist.")
            elif ctx.is_topic_queued_up_for_deletion(tp[0]):
                results[tp] = (int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), "The topic is being deleted.")
            elif target is None:
                if not (current.adding or current.removing):
                    results[tp] = (int(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS),
                                   f"No ongoing reassignment for partition {tp[0]}-{tp[1]}.")
                else:
                    to_move[tp] = reassign_to(current, origin_replicas(current))
            elif (problem := self._invalid_target(target)) is not None:
                results[tp] = (int(ErrorCode.INVALID_REPLICATION_ASSIGNMENT), problem)
            else:
                to_move[tp] = reassign_to(current, target)
        for tp, reassignment in to_move.items():
            try:
                await self._on_partition_reassignment(tp, reassignment)
                results[tp] = (int(ErrorCode.NO_ERROR), None)
            except _DEPOSED:
                raise
            except Exception as exc:
                log.exception("controller %d: reassignment of %s-%d failed", self.broker_id, *tp)
                results[tp] = (int(ErrorCode.UNKNOWN_SERVER_ERROR), str(exc))
        return results

    def _invalid_target(self, target: list[int]) -> str | None:
        """Kafka's checks of a target replica list: not empty, no duplicates, known brokers."""
        if not target:
            return "Empty replica list specified in partition reassignment."
        if len(set(target)) != len(target):
            return f"Duplicate replica ids in partition reassignment replica list: {target}"
        unknown = sorted(set(target) - self.context.live_or_shutting_down_broker_ids)
        if unknown:
            return f"The proposed assignment contains non-existent brokerIDs: {','.join(map(str, unknown))}"
        return None

    # ------------------------------------------------------------ onPartitionReassignment

    async def _on_partition_reassignment(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        """Phase 1 or, when every target replica is in the ISR, phase 2 (module docstring)."""
        ctx = self.context
        previous = ctx.partition_assignments[tp[0]][tp[1]]
        # Replicas a replaced reassignment was adding and this one does not want: stopped and deleted.
        unneeded = [r for r in previous.adding if r not in reassignment.replicas]
        ctx.update_partition_assignment(tp, reassignment)
        await self._write_assignment(tp[0])
        if unneeded:
            await self._stop_removed_replicas(tp, unneeded)
        state = (await self.zk.get_partition_states([tp])).get(tp)
        target = target_replicas(reassignment)
        if state is None or not set(target) <= set(state.leader_and_isr.isr):
            log.info("controller %d: reassigning %s-%d to %s (adding %s, removing %s)", self.broker_id, *tp,
                     target, reassignment.adding, reassignment.removing)
            await self._bump_leader_epoch(tp)
            new = [PartitionReplica(tp[0], tp[1], r) for r in reassignment.adding
                   if ctx.replica_state(PartitionReplica(tp[0], tp[1], r)) is ReplicaState.NON_EXISTENT]
            await self.replica_state_machine.handle_state_changes(new, ReplicaState.NEW)
            return
        await self._complete_reassignment(tp, reassignment, target)

    async def _complete_reassignment(self, tp: TopicPartition, reassignment: ReplicaAssignment,
                                     target: list[int]) -> None:
        ctx = self.context
        await self.replica_state_machine.handle_state_changes(
            [PartitionReplica(tp[0], tp[1], r) for r in reassignment.adding], ReplicaState.ONLINE)
        completed = ReplicaAssignment(list(target))
        ctx.update_partition_assignment(tp, completed)
        leader = ctx.partition_leadership_info[tp].leader_and_isr.leader
        if leader not in target or not ctx.is_replica_online(leader):
            await self.partition_state_machine.handle_state_changes(
                [tp], PartitionState.ONLINE, ElectionStrategy(ElectionKind.REASSIGN))
        else:
            await self._bump_leader_epoch(tp)
        await self._stop_removed_replicas(tp, reassignment.removing)
        await self._write_assignment(tp[0])
        self.batch.new_batch()
        self.batch.add_update_metadata_request_for_brokers(ctx.live_or_shutting_down_broker_ids, [tp])
        self.batch.send_requests_to_brokers(ctx.epoch)
        log.info("controller %d: reassignment of %s-%d to %s completed", self.broker_id, *tp, target)
        await self.topic_deletion_manager.resume_deletion_for_topics({tp[0]})

    async def maybe_complete_reassignments(self, tps: list[TopicPartition]) -> None:
        """After an ISR change: finish the reassignments whose target replicas are now all in sync."""
        ctx = self.context
        for tp in tps:
            assignment = ctx.partition_assignments.get(tp[0], {}).get(tp[1])
            info = ctx.partition_leadership_info.get(tp)
            if assignment is None or info is None or not (assignment.adding or assignment.removing):
                continue
            if set(target_replicas(assignment)) <= set(info.leader_and_isr.isr):
                await self._on_partition_reassignment(tp, assignment)

    async def resume_reassignments(self, on_brokers: set[int] | None = None) -> None:
        """Carry on the reassignments in progress (of partitions with a replica on ``on_brokers``):
        a new controller resumes what ZooKeeper records (Kafka's initializePartitionReassignments),
        and a broker that comes back hears of the move it is part of (its onBrokerStartup)."""
        ctx = self.context
        ongoing = [(tp, a) for tp in list(ctx.all_partitions())
                   if ((a := ctx.partition_assignments[tp[0]][tp[1]]).adding or a.removing)
                   and (on_brokers is None or on_brokers & set(a.replicas))]
        for tp, assignment in ongoing:
            if not ctx.is_topic_queued_up_for_deletion(tp[0]):
                await self._on_partition_reassignment(tp, assignment)

    # ------------------------------------------------------------ the steps

    async def _write_assignment(self, topic: str) -> None:
        """/brokers/topics/T from the context: replicas, adding and removing of every partition."""
        ctx = self.context
        partitions = ctx.partition_assignments[topic]
        await self.zk.set_topic_assignment(topic, TopicAssignment(
            ctx.topic_ids[topic],
            {p: list(a.replicas) for p, a in partitions.items()},
            {p: list(a.adding) for p, a in partitions.items() if a.adding},
            {p: list(a.removing) for p, a in partitions.items() if a.removing},
        ), ctx.epoch_zk_version)

    async def _bump_leader_epoch(self, tp: TopicPartition) -> None:
        """Kafka's updateLeaderEpochAndSendRequest: a new leader epoch, same leader and ISR, and
        LeaderAndIsr to every replica of the (new) set so each learns it."""
        ctx = self.context
        state = (await self.zk.get_partition_states([tp])).get(tp)
        if state is None:
            return
        lai = state.leader_and_isr
        updated, failed = await self.zk.update_leader_and_isr(
            {tp: new_leader_and_isr(lai, lai.leader, list(lai.isr))}, ctx.epoch, ctx.epoch_zk_version)
        if tp in failed:
            raise failed[tp]
        info = LeaderIsrAndControllerEpoch(updated[tp], ctx.epoch)
        ctx.partition_leadership_info[tp] = info
        replicas = ctx.partition_replica_assignment(tp)
        self.batch.new_batch()
        self.batch.add_leader_and_isr_request_for_brokers(
            [r for r in replicas if ctx.is_replica_online(r, include_shutting_down=True)], tp, info, replicas,
            is_new=False)
        self.batch.send_requests_to_brokers(ctx.epoch)

    async def _stop_removed_replicas(self, tp: TopicPartition, removed: list[int]) -> None:
        """Offline (out of the ISR, StopReplica), then deleted (StopReplica with delete)."""
        if not removed:
            return
        replicas = [PartitionReplica(tp[0], tp[1], r) for r in removed]
        machine = self.replica_state_machine
        await machine.handle_state_changes(replicas, ReplicaState.OFFLINE)
        await machine.handle_state_changes(replicas, ReplicaState.DELETION_STARTED)
        await machine.handle_state_changes(replicas, ReplicaState.DELETION_SUCCESSFUL)
        await machine.handle_state_changes(replicas, ReplicaState.NON_EXISTENT)
