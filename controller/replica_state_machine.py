"""Kafka's replica state machine (ZkReplicaStateMachine).

States: NewReplica (assigned, told it exists), OnlineReplica (serving as leader or
follower), OfflineReplica (its broker died or shut down: stopped, and taken out of
the ISR), ReplicaDeletionStarted / Successful / Ineligible (topic deletion),
NonExistentReplica. Transitions queue LeaderAndIsr / StopReplica / UpdateMetadata in
the controller's request batch; taking a replica offline also shrinks it out of its
partitions' ISRs in ZooKeeper (leaving a one-member ISR as it is, as Kafka 3 does, so
the last in-sync replica stays known).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from controller.controller_context import ControllerContext, PartitionReplica, ReplicaState, TopicPartition
from controller.controller_request_batch import ControllerRequestBatch
from controller.partition_state_machine import new_leader_and_isr
from controller.zk.kafka_zk_client import KafkaZkClient, ZkBadVersionError
from controller.zk.zk_data import LEADER_NONE, LeaderAndIsr, LeaderIsrAndControllerEpoch

__all__ = ["ReplicaStateMachine"]

log = logging.getLogger(__name__)

_VALID_PREVIOUS: dict[ReplicaState, set[ReplicaState]] = {
    ReplicaState.NEW: {ReplicaState.NON_EXISTENT},
    ReplicaState.ONLINE: {ReplicaState.NEW, ReplicaState.ONLINE, ReplicaState.OFFLINE, ReplicaState.DELETION_INELIGIBLE},
    ReplicaState.OFFLINE: {ReplicaState.NEW, ReplicaState.ONLINE, ReplicaState.OFFLINE, ReplicaState.DELETION_INELIGIBLE},
    ReplicaState.DELETION_STARTED: {ReplicaState.OFFLINE},
    ReplicaState.DELETION_SUCCESSFUL: {ReplicaState.DELETION_STARTED},
    ReplicaState.DELETION_INELIGIBLE: {ReplicaState.OFFLINE, ReplicaState.DELETION_STARTED},
    ReplicaState.NON_EXISTENT: {ReplicaState.DELETION_SUCCESSFUL},
}

_MAX_ZK_RETRIES = 5


class ReplicaStateMachine:
    """Moves replicas between Kafka's replica states."""

    def __init__(self, context: ControllerContext, zk: KafkaZkClient, batch: ControllerRequestBatch) -> None:
        self.context = context
        self.zk = zk
        self.batch = batch

    def initialize_replica_states(self) -> None:
        """Online where the broker is registered, else ReplicaDeletionIneligible (Kafka's start-up rule)."""
        for tp in self.context.all_partitions():
            for replica_id in self.context.partition_replica_assignment(tp):
                replica = PartitionReplica(tp[0], tp[1], replica_id)
                if self.context.is_replica_online(replica_id, include_shutting_down=True):
                    self.context.replica_states[replica] = ReplicaState.ONLINE
                else:
                    self.context.replica_states[replica] = ReplicaState.DELETION_INELIGIBLE

    async def startup(self) -> None:
        """Tell every live replica its partition's state, and take the others offline."""
        self.initialize_replica_states()
        online = [r for r, s in self.context.replica_states.items() if s is ReplicaState.ONLINE]
        offline = [r for r, s in self.context.replica_states.items() if s is not ReplicaState.ONLINE]
        await self.handle_state_changes(online, ReplicaState.ONLINE)
        await self.handle_state_changes(offline, ReplicaState.OFFLINE)

    async def handle_state_changes(self, replicas: Iterable[PartitionReplica], target: ReplicaState) -> None:
        todo = list(replicas)
        if not todo:
            return
        self.batch.new_batch()
        try:
            by_broker: dict[int, list[PartitionReplica]] = {}
            for replica in todo:
                by_broker.setdefault(replica.replica, []).append(replica)
            for broker_id, broker_replicas in by_broker.items():
                await self._do_handle_state_changes(broker_id, broker_replicas, target)
            self.batch.send_requests_to_brokers(self.context.epoch)
        except BaseException:
            self.batch.clear()
            raise

    async def _do_handle_state_changes(self, broker_id: int, replicas: list[PartitionReplica], target: ReplicaState) -> None:
        for replica in replicas:
            self.context.replica_states.setdefault(replica, ReplicaState.NON_EXISTENT)
        valid = []
        for replica in replicas:
            current = self.context.replica_state(replica)
            if current in _VALID_PREVIOUS[target]:
                valid.append(replica)
            else:
                log.error("controller: replica %d of %s-%d cannot move from %s to %s",
                          replica.replica, replica.topic, replica.partition, current.value, target.value)
        if target is ReplicaState.NEW:
            self._to_new(broker_id, valid)
        elif target is ReplicaState.ONLINE:
            self._to_online(broker_id, valid)
        elif target is ReplicaState.OFFLINE:
            await self._to_offline(broker_id, valid)
        elif target is ReplicaState.DELETION_STARTED:
            for replica in valid:
                self.batch.add_stop_replica_request_for_brokers([broker_id], replica.topic_partition, delete=True)
                self.context.replica_states[replica] = target
        elif target is ReplicaState.NON_EXISTENT:
            for replica in valid:
                tp = replica.topic_partition
                assignment = self.context.partition_assignments.get(tp[0], {}).get(tp[1])
                if assignment is not None and broker_id in assignment.replicas:
                    assignment.replicas.remove(broker_id)
                self.context.replica_states.pop(replica, None)
        else:
            for replica in valid:
                self.context.replica_states[replica] = target

    def _to_new(self, broker_id: int, replicas: list[PartitionReplica]) -> None:
        for replica in replicas:
            tp = replica.topic_partition
            info = self.context.partition_leadership_info.get(tp)
            if info is not None:
                if info.leader_and_isr.leader == broker_id:
                    log.error("controller: replica %d of %s-%d cannot become New: it is the leader",
                              broker_id, tp[0], tp[1])
                    continue
                self.batch.add_leader_and_isr_request_for_brokers(
                    [broker_id], tp, info, self.context.partition_replica_assignment(tp), is_new=True
                )
            self.context.replica_states[replica] = ReplicaState.NEW

    def _to_online(self, broker_id: int, replicas: list[PartitionReplica]) -> None:
        for replica in replicas:
            tp = replica.topic_partition
            if self.context.replica_state(replica) is ReplicaState.NEW:
                assignment = self.context.partition_assignments.get(tp[0], {}).get(tp[1])
                if assignment is not None and broker_id not in assignment.replicas:
                    assignment.replicas.append(broker_id)
            else:
                info = self.context.partition_leadership_info.get(tp)
                if info is not None:
                    self.batch.add_leader_and_isr_request_for_brokers(
                        [broker_id], tp, info, self.context.partition_replica_assignment(tp), is_new=False
                    )
            self.context.replica_states[replica] = ReplicaState.ONLINE

    async def _to_offline(self, broker_id: int, replicas: list[PartitionReplica]) -> None:
        for replica in replicas:
            self.batch.add_stop_replica_request_for_brokers([broker_id], replica.topic_partition, delete=False)
        with_leadership = [r.topic_partition for r in replicas if r.topic_partition in self.context.partition_leadership_info]
        without = [r.topic_partition for r in replicas if r.topic_partition not in self.context.partition_leadership_info]
        updated = await self.remove_replicas_from_isr(broker_id, with_leadership)
        for tp, state in updated.items():
            if not self.context.is_topic_queued_up_for_deletion(tp[0]):
                others = [r for r in self.context.partition_replica_assignment(tp) if r != broker_id]
                self.batch.add_leader_and_isr_request_for_brokers(
                    others, tp, state, self.context.partition_replica_assignment(tp), is_new=False
                )
        self.batch.add_update_metadata_request_for_brokers(self.context.live_or_shutting_down_broker_ids, without)
        for replica in replicas:
            self.context.replica_states[replica] = ReplicaState.OFFLINE

    async def remove_replicas_from_isr(
        self, broker_id: int, tps: list[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """Take ``broker_id`` out of each partition's ISR (and leadership), in ZooKeeper and the context."""
        results: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        remaining = list(tps)
        for _ in range(_MAX_ZK_RETRIES):
            if not remaining:
                break
            current = await self.zk.get_partition_states(remaining)
            to_update: dict[TopicPartition, LeaderAndIsr] = {}
            for tp in remaining:
                state = current.get(tp)
                if state is None:
                    continue
                if state.controller_epoch > self.context.epoch:
                    log.error("controller: %s-%d was written by a newer controller epoch %d",
                              tp[0], tp[1], state.controller_epoch)
                    continue
                lai = state.leader_and_isr
                if broker_id not in lai.isr and lai.leader != broker_id:
                    results[tp] = state  # nothing to change; still tell the others
                    continue
                new_leader = LEADER_NONE if lai.leader == broker_id else lai.leader
                # A one-member ISR keeps its member (KIP-841): it is the only one that may hold everything.
                new_isr = lai.isr if len(lai.isr) == 1 else [r for r in lai.isr if r != broker_id]
                to_update[tp] = new_leader_and_isr(lai, new_leader, new_isr)
            if not to_update:
                break
            updated, failed = await self.zk.update_leader_and_isr(to_update, self.context.epoch,
                                                                  self.context.epoch_zk_version)
            for tp, lai in updated.items():
                state = LeaderIsrAndControllerEpoch(lai, self.context.epoch)
                self.context.partition_leadership_info[tp] = state
                results[tp] = state
            for tp, error in failed.items():
                if not isinstance(error, ZkBadVersionError):
                    log.error("controller: cannot remove broker %d from the ISR of %s-%d: %s", broker_id, tp[0], tp[1], error)
            remaining = [tp for tp, error in failed.items() if isinstance(error, ZkBadVersionError)]
        return results
