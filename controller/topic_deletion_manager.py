"""Kafka's TopicDeletionManager: deleting a topic marked under /admin/delete_topics.

A topic queued for deletion is announced to every broker with UpdateMetadata (leader
-2: "being deleted", so the brokers drop it from their metadata), then each live
replica is taken offline and sent StopReplica with ``delete_partition``; a replica on
a dead broker is ineligible until its broker returns. When every replica reports a
successful delete, the partitions go to NonExistent and the topic's znodes (assignment,
partition states, config, deletion marker) are removed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from controller.controller_context import ControllerContext, PartitionReplica, PartitionState, ReplicaState
from controller.controller_request_batch import ControllerRequestBatch
from controller.partition_state_machine import PartitionStateMachine
from controller.replica_state_machine import ReplicaStateMachine
from controller.zk.kafka_zk_client import KafkaZkClient
from protocol.messages.stop_replica import StopReplicaResponse

__all__ = ["TopicDeletionManager"]

log = logging.getLogger(__name__)


class TopicDeletionManager:
    """Drives queued topic deletions through the replica and partition state machines."""

    def __init__(
        self,
        context: ControllerContext,
        zk: KafkaZkClient,
        batch: ControllerRequestBatch,
        partition_state_machine: PartitionStateMachine,
        replica_state_machine: ReplicaStateMachine,
        *,
        delete_topic_enable: bool,
        on_topic_deleted: Callable[[str], None] | None = None,
    ) -> None:
        self.context = context
        self.zk = zk
        self.batch = batch
        self.psm = partition_state_machine
        self.rsm = replica_state_machine
        self.delete_topic_enable = delete_topic_enable
        self.on_topic_deleted = on_topic_deleted

    async def init(self, topics_to_delete: set[str], ineligible: set[str]) -> None:
        """At failover: queue the marked topics (or drop the markers when deletion is disabled)."""
        if self.delete_topic_enable:
            self.context.topics_to_be_deleted.update(topics_to_delete)
            self.context.topics_ineligible_for_deletion.update(ineligible & topics_to_delete)
        elif topics_to_delete:
            log.info("controller: delete.topic.enable is false; removing deletion markers for %s", sorted(topics_to_delete))
            await self.zk.remove_delete_topic_markers(topics_to_delete)

    async def enqueue_topics_for_deletion(self, topics: set[str]) -> None:
        if not self.delete_topic_enable:
            return
        self.context.topics_to_be_deleted.update(topics)
        await self.resume_deletions()

    def mark_topic_ineligible_for_deletion(self, topics: set[str]) -> None:
        if self.delete_topic_enable:
            self.context.topics_ineligible_for_deletion.update(topics & self.context.topics_to_be_deleted)

    def is_topic_ineligible(self, topic: str) -> bool:
        return topic in self.context.topics_ineligible_for_deletion

    async def resume_deletion_for_topics(self, topics: set[str]) -> None:
        queued = topics & self.context.topics_to_be_deleted
        if queued:
            self.context.topics_ineligible_for_deletion.difference_update(queued)
            await self.resume_deletions()

    def _replicas_of(self, topic: str) -> list[PartitionReplica]:
        return [r for r in self.context.replica_states if r.topic == topic]

    def _all_replicas_in(self, topic: str, state: ReplicaState) -> bool:
        replicas = self._replicas_of(topic)
        return all(self.context.replica_states[r] is state for r in replicas)

    def _any_replica_in(self, topic: str, state: ReplicaState) -> bool:
        return any(self.context.replica_states[r] is state for r in self._replicas_of(topic))

    async def resume_deletions(self) -> None:
        for topic in sorted(self.context.topics_to_be_deleted):
            if self._all_replicas_in(topic, ReplicaState.DELETION_SUCCESSFUL):
                await self._complete_delete_topic(topic)
                continue
            if self._any_replica_in(topic, ReplicaState.DELETION_STARTED):
                continue  # waiting for StopReplica answers
            if self._any_replica_in(topic, ReplicaState.DELETION_INELIGIBLE):
                # Retry: the ineligible replicas go offline again, then deletion restarts for them.
                ineligible = [r for r in self._replicas_of(topic)
                              if self.context.replica_states[r] is ReplicaState.DELETION_INELIGIBLE
                              and self.context.is_replica_online(r.replica, include_shutting_down=True)]
                if ineligible:
                    await self.rsm.handle_state_changes(ineligible, ReplicaState.OFFLINE)
                    self.context.topics_ineligible_for_deletion.discard(topic)
            if self._eligible(topic):
                await self._on_topic_deletion(topic)

    def _eligible(self, topic: str) -> bool:
        """Queued, no StopReplica outstanding, and not waiting for a dead replica's broker."""
        return (
            topic in self.context.topics_to_be_deleted
            and not self._any_replica_in(topic, ReplicaState.DELETION_STARTED)
            and topic not in self.context.topics_ineligible_for_deletion
        )

    async def _on_topic_deletion(self, topic: str) -> None:
        log.info("controller: deleting topic %s", topic)
        self.context.topics_with_deletion_started.add(topic)
        partitions = self.context.partitions_for_topic(topic)
        # Every broker learns first that the topic is going (UpdateMetadata, leader -2).
        self.batch.new_batch()
        self.batch.add_update_metadata_request_for_brokers(self.context.live_or_shutting_down_broker_ids, partitions)
        self.batch.send_requests_to_brokers(self.context.epoch)
        replicas = [
            r for r in self.context.replicas_for_partitions(partitions)
            if self.context.replica_state(r) is not ReplicaState.DELETION_SUCCESSFUL
        ]
        dead = [r for r in replicas if not self.context.is_replica_online(r.replica, include_shutting_down=True)]
        live = [r for r in replicas if r not in dead]
        await self.rsm.handle_state_changes(dead, ReplicaState.OFFLINE)
        await self.rsm.handle_state_changes(dead, ReplicaState.DELETION_INELIGIBLE)
        if dead:
            self.context.topics_ineligible_for_deletion.add(topic)
        await self.rsm.handle_state_changes(live, ReplicaState.OFFLINE)
        await self.rsm.handle_state_changes(live, ReplicaState.DELETION_STARTED)

    async def stop_replica_response_received(self, broker_id: int, response: StopReplicaResponse) -> None:
        """A broker answered StopReplica(delete): its replicas are deleted, or ineligible on error."""
        failed = {(e.topic_name, e.partition_index) for e in response.partition_errors if e.error_code != 0}
        started = [
            r for r, s in self.context.replica_states.items()
            if r.replica == broker_id and s is ReplicaState.DELETION_STARTED
            and r.topic in self.context.topics_to_be_deleted
        ]
        if response.error_code != 0:
            failed = {r.topic_partition for r in started}
        bad = [r for r in started if r.topic_partition in failed]
        good = [r for r in started if r.topic_partition not in failed]
        if bad:
            await self.rsm.handle_state_changes(bad, ReplicaState.DELETION_INELIGIBLE)
            self.mark_topic_ineligible_for_deletion({r.topic for r in bad})
        await self.rsm.handle_state_changes(good, ReplicaState.DELETION_SUCCESSFUL)
        await self.resume_deletions()

    async def _complete_delete_topic(self, topic: str) -> None:
        replicas = self._replicas_of(topic)
        await self.rsm.handle_state_changes(replicas, ReplicaState.NON_EXISTENT)
        partitions = self.context.partitions_for_topic(topic)
        for tp in partitions:
            self.context.partition_states.setdefault(tp, PartitionState.OFFLINE)
        await self.psm.handle_state_changes(partitions, PartitionState.OFFLINE)
        await self.psm.handle_state_changes(partitions, PartitionState.NON_EXISTENT)
        await self.zk.delete_topic_znodes(topic, self.context.epoch_zk_version)
        await self.zk.remove_delete_topic_markers({topic})
        self.context.remove_topic(topic)
        log.info("controller: deletion of topic %s completed", topic)
        if self.on_topic_deleted is not None:
            self.on_topic_deleted(topic)
