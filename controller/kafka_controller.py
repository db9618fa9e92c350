"""Kafka's ZooKeeper-mode controller (KafkaController).

Every broker runs one; the one that creates the ephemeral ``/controller`` znode is
active. Becoming active bumps ``/controller_epoch`` (every later ZooKeeper write of
this controller is conditional on that znode's version, and every request it sends
carries the epoch, so a deposed controller can change nothing), rebuilds the
:class:`~controller.controller_context.ControllerContext` from ZooKeeper, tells every
broker the whole cluster state (UpdateMetadata, then LeaderAndIsr for every replica)
and elects leaders for partitions without one. From then on ZooKeeper watches
(``/brokers/ids``, ``/brokers/topics``, ``/brokers/topics/T``, ``/admin/delete_topics``)
and broker requests (ControlledShutdown, AlterPartition, ElectLeaders) become events
on the controller's single event queue.

A controller whose ZooKeeper session expires, or whose write finds the epoch moved,
resigns at once: its scheduled tasks and channel senders stop, its context is dropped,
and it goes back to watching ``/controller``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from controller.admin_zk_client import new_topic_id
from controller.controller_channel_manager import ControllerChannelManager
from controller.controller_config import ControllerConfig
from controller.controller_context import (
    ControllerContext,
    PartitionReplica,
    PartitionState,
    ReplicaAssignment,
    ReplicaState,
    TopicPartition,
)
from controller.controller_event_manager import ControllerEventManager
from controller.controller_request_batch import ControllerRequestBatch
from controller.controller_requests import ControllerRequests
from controller.log_dir_failures import new_offline_replicas, take_log_dir_events
from controller.partition_reassignment import PartitionReassignment
from controller.partition_state_machine import ElectionStrategy, PartitionStateMachine
from controller.replica_state_machine import ReplicaStateMachine
from controller.topic_deletion_manager import TopicDeletionManager
from controller.zk import zk_data as zd
from controller.zk.kafka_zk_client import ControllerMovedError, KafkaZkClient, ZkWatch
from controller.zk.zk_data import ZERO_UUID, TopicAssignment
from protocol.messages.stop_replica import StopReplicaResponse
from protocol.primitives import Message

__all__ = ["KafkaController"]

log = logging.getLogger(__name__)

CONTROLLER_PATH = "/controller"
BROKER_IDS_PATH = "/brokers/ids"
BROKER_TOPICS_PATH = "/brokers/topics"
DELETE_TOPICS_PATH = "/admin/delete_topics"
LOG_DIR_EVENT_NOTIFICATION_PATH = zd.LOG_DIR_EVENT_NOTIFICATION_PATH


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


class KafkaController(ControllerRequests, PartitionReassignment):
    """One broker's controller: elected through /controller, active while it holds it."""

    def __init__(
        self, config: ControllerConfig, broker_id: int, zk: KafkaZkClient, broker_epoch_fn: Callable[[], int]
    ) -> None:
        self.config = config
        self.broker_id = broker_id
        self.zk = zk
        self.broker_epoch_fn = broker_epoch_fn
        self.context = ControllerContext()
        self.event_manager = ControllerEventManager(broker_id)
        self.active_controller_id = -1
        #: True while this broker acts as the controller (won the election and finished nothing wrong).
        self._active = False
        self._new_components()
        self._topic_watches: dict[str, ZkWatch] = {}
        self._watches: list[ZkWatch] = []
        self._controller_watch_registered = False
        self._cluster_watches_registered = False
        self._rebalance_task: asyncio.Task[None] | None = None
        self._reelect_task: asyncio.Task[None] | None = None
        self._started = False

    def _new_components(self) -> None:
        """A fresh channel manager, request batch and state machines for one term as controller."""
        self.channel = ControllerChannelManager(
            self.broker_id,
            self.config.inter_broker_listener_name,
            request_timeout_s=self.config.controller_socket_timeout_ms / 1000,
            retry_backoff_s=self.config.controller_retry_backoff_ms / 1000,
            ssl_context=self.config.inter_broker_ssl_context,
            sasl=self.config.inter_broker_sasl,
        )
        self.batch = ControllerRequestBatch(
            self.broker_id,
            self.context,
            self.channel,
            self.config.inter_broker_listener_name,
            on_leader_and_isr_response=self._on_leader_and_isr_response,
            on_stop_replica_response=self._on_stop_replica_response,
        )
        self.partition_state_machine = PartitionStateMachine(
            self.context, self.zk, self.batch,
            unclean_leader_election_enable=self.config.unclean_leader_election_enable,
        )
        self.replica_state_machine = ReplicaStateMachine(self.context, self.zk, self.batch)
        self.topic_deletion_manager = TopicDeletionManager(
            self.context, self.zk, self.batch, self.partition_state_machine, self.replica_state_machine,
            delete_topic_enable=self.config.delete_topic_enable,
        )

    # ------------------------------------------------------------ public state

    @property
    def is_active(self) -> bool:
        return self._active

    @property
    def epoch(self) -> int:
        return self.context.epoch

    # ------------------------------------------------------------ lifecycle

    async def startup(self) -> None:
        """Start the event task and join the election (Kafka's Startup event)."""
        if self._started:
            return
        self._started = True
        self.zk.on_session_expired(self._on_session_expired)
        self.zk.on_reconnected(self._on_reconnected)
        self.event_manager.start()
        try:
            await self._enqueue("Startup", self._process_startup)
        except Exception:
            # Logged by the event manager; the /controller watch (if it got registered) retries the election.
            log.warning("controller %d: start-up election did not complete", self.broker_id)

    async def shutdown(self) -> None:
        """Stop processing events and resign (the /controller znode goes with the ZooKeeper session)."""
        self._started = False
        for watch in [*self._watches, *self._topic_watches.values()]:
            watch.cancel()
        self._watches.clear()
        self._topic_watches.clear()
        reelect, self._reelect_task = self._reelect_task, None
        if reelect is not None:
            reelect.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reelect
        await self.event_manager.close()
        self._active = False
        await self._on_controller_resignation()
        self.active_controller_id = -1

    def _enqueue(self, name: str, process: Callable[[], Awaitable[Any]]) -> asyncio.Future[Any]:
        return self.event_manager.put(name, self._guarded(process))

    def _post(self, name: str, process: Callable[[], Awaitable[Any]]) -> None:
        """Queue an event nobody waits for (its errors are logged by the event manager)."""
        self.event_manager.put(name, self._guarded(process)).add_done_callback(_retrieve)

    def _guarded(self, process: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[Any]]:
        """Run an event; a ControllerMovedError on the way means we were deposed: resign."""

        async def run() -> Any:
            try:
                return await process()
            except ControllerMovedError:
                log.warning("controller %d: controller moved to another broker; resigning", self.broker_id)
                await self._maybe_resign()
                raise

        return run

    # ------------------------------------------------------------ election

    async def _process_startup(self) -> None:
        if not self._controller_watch_registered:
            self._controller_watch_registered = True
            self._watches.append(await self.zk.watch_data(CONTROLLER_PATH, self._on_controller_znode))
        await self._elect()

    def _on_controller_znode(self, data: bytes | None) -> None:
        if not self._started:
            return
        if data is None:
            self._post("Reelect", self._process_reelect)
        else:
            self._post("ControllerChange", self._maybe_resign)

    def _on_session_expired(self) -> None:
        """Stop acting now (a new controller may already exist); clean up on the event task."""
        if not self._started:
            return
        was_active = self.is_active
        self._active = False
        self.active_controller_id = -1
        if was_active:
            log.warning("controller %d: ZooKeeper session expired; resigning", self.broker_id)
            self._stop_acting()
        self.event_manager.clear_and_put("Expire", self._on_controller_resignation).add_done_callback(_retrieve)

    def _on_reconnected(self) -> None:
        if self._started:
            self._post("Reelect", self._process_reelect)

    async def _process_reelect(self) -> None:
        await self._maybe_resign()
        await self._elect()

    async def _maybe_resign(self) -> None:
        current = await self.zk.get_controller_id()
        self.active_controller_id = -1 if current is None else current
        if self._active and self.active_controller_id != self.broker_id:
            self._active = False
            await self._on_controller_resignation()

    async def _elect(self) -> None:
        if self._active:
            return
        current = await self.zk.get_controller_id()
        if current is not None and current != -1 and current != self.broker_id:
            self.active_controller_id = current
            log.debug("controller %d: broker %d is the controller", self.broker_id, current)
            return
        if current == self.broker_id:
            # Our /controller znode survives a failover that failed part-way: take the role up again.
            recorded = await self.zk.get_controller_epoch()
            if recorded is None:
                return
            epoch, epoch_zk_version = recorded
        else:
            try:
                epoch, epoch_zk_version = await self.zk.register_controller_and_increment_epoch(self.broker_id)
            except ControllerMovedError:
                current = await self.zk.get_controller_id()
                self.active_controller_id = -1 if current is None else current
                log.info("controller %d: lost the election to broker %d", self.broker_id, self.active_controller_id)
                return
        self.context.epoch, self.context.epoch_zk_version = epoch, epoch_zk_version
        self.active_controller_id = self.broker_id
        self._active = True
        log.info("controller %d: elected controller, epoch %d", self.broker_id, epoch)
        try:
            await self._on_controller_failover()
        except Exception:
            log.exception("controller %d: failover failed; resigning and retrying", self.broker_id)
            self._active = False
            await self._on_controller_resignation()
            # We still hold /controller, so nobody else can take over: try again after a pause.
            self._schedule_reelect(1.0)
            raise

    def _schedule_reelect(self, delay_s: float) -> None:
        if self._reelect_task is not None and not self._reelect_task.done():
            return

        async def later() -> None:
            await asyncio.sleep(delay_s)
            if self._started:
                self._post("Reelect", self._process_reelect)

        self._reelect_task = asyncio.get_running_loop().create_task(later(), name=f"controller-{self.broker_id}-reelect")

    # ------------------------------------------------------------ failover and resignation

    async def _on_controller_failover(self) -> None:
        """Rebuild the context from ZooKeeper and bring every broker up to date (Kafka's onControllerFailover)."""
        await self._register_cluster_watches()
        await self._initialize_controller_context()
        markers = await self.zk.get_delete_topic_markers()
        unknown = markers - self.context.all_topics
        if unknown:
            await self.zk.remove_delete_topic_markers(unknown)
        to_delete = markers & self.context.all_topics
        await self.topic_deletion_manager.init(to_delete, set())
        # Every broker first learns the whole cluster (brokers and every partition's state)...
        self.batch.new_batch()
        self.batch.add_update_metadata_request_for_brokers(self.context.live_or_shutting_down_broker_ids, None)
        self.batch.send_requests_to_brokers(self.context.epoch)
        # ...then every live replica its partition's leader and ISR; leaderless partitions elect one.
        await self.replica_state_machine.startup()
        await self.partition_state_machine.startup()
        await self.resume_reassignments()
        await self.topic_deletion_manager.resume_deletions()
        if self.config.auto_leader_rebalance_enable:
            self._schedule_auto_leader_rebalance(self.config.auto_leader_rebalance_initial_delay_s)
        log.info("controller %d: ready (epoch %d, %d brokers, %d partitions)", self.broker_id, self.context.epoch,
                 len(self.context.live_brokers), len(self.context.partition_leadership_info))

    async def _register_cluster_watches(self) -> None:
        """Persistent watches, registered once per controller object; their events check is_active."""
        if self._cluster_watches_registered:
            return
        self._cluster_watches_registered = True
        for path, name, process in (
            (BROKER_IDS_PATH, "BrokerChange", self._process_broker_change),
            (BROKER_TOPICS_PATH, "TopicChange", self._process_topic_change),
            (DELETE_TOPICS_PATH, "TopicDeletion", self._process_topic_deletion),
            (LOG_DIR_EVENT_NOTIFICATION_PATH, "LogDirEventNotification", self._process_log_dir_event),
        ):
            self._watches.append(await self.zk.watch_children(path, self._children_handler(name, process)))

    def _children_handler(self, name: str, process: Callable[[], Awaitable[None]]) -> Callable[[list[str]], None]:
        def handler(_: list[str]) -> None:
            self._enqueue_if_active(name, process)

        return handler

    def _enqueue_if_active(self, name: str, process: Callable[[], Awaitable[Any]]) -> None:
        if self._started and self.is_active:
            self._post(name, self._only_if_active(process))

    def _only_if_active(self, process: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            if self.is_active:
                await process()

        return run

    async def _watch_topic(self, topic: str) -> None:
        if topic in self._topic_watches:
            return

        def changed(_: bytes | None) -> None:
            self._enqueue_if_active(f"PartitionModifications({topic})", lambda: self._process_partition_modifications(topic))

        self._topic_watches[topic] = await self.zk.watch_data(f"{BROKER_TOPICS_PATH}/{topic}", changed)

    def _unwatch_topic(self, topic: str) -> None:
        watch = self._topic_watches.pop(topic, None)
        if watch is not None:
            self.zk.unwatch(watch)

    async def _initialize_controller_context(self) -> None:
        brokers = await self.zk.get_all_brokers()
        self.context.add_live_brokers(brokers.values())
        topics = await self.zk.get_all_topics()
        assignments = await self._ensure_topic_ids(await self.zk.get_topic_assignments(topics))
        for topic, assignment in assignments.items():
            self._add_topic_assignment(topic, assignment)
        for topic in topics:
            await self._watch_topic(topic)
        tps = list(self.context.all_partitions())
        if tps:
            self.context.partition_leadership_info.update(await self.zk.get_partition_states(tps))
        for broker in brokers.values():
            self.channel.add_broker(broker)

    async def _ensure_topic_ids(self, assignments: dict[str, TopicAssignment]) -> dict[str, TopicAssignment]:
        """Topics written without an id (by an old tool) get one, as Kafka's controller does (setTopicIds)."""
        result = dict(assignments)
        for topic, assignment in assignments.items():
            if assignment.topic_id == ZERO_UUID:
                result[topic] = replace(assignment, topic_id=new_topic_id())
                await self.zk.set_topic_assignment(topic, result[topic], self.context.epoch_zk_version)
        return result

    def _add_topic_assignment(self, topic: str, assignment: TopicAssignment) -> list[TopicPartition]:
        """Record a topic's assignment; returns the partitions that were not known before."""
        self.context.add_topic(topic, assignment.topic_id)
        added = []
        for partition, replicas in sorted(assignment.partitions.items()):
            tp = (topic, partition)
            if partition not in self.context.partition_assignments.get(topic, {}):
                added.append(tp)
            self.context.update_partition_assignment(tp, ReplicaAssignment(
                list(replicas),
                list(assignment.adding.get(partition, [])),
                list(assignment.removing.get(partition, [])),
            ))
        return added

    def _stop_acting(self) -> None:
        """Synchronously stop everything that acts on the cluster (used on session expiry)."""
        task, self._rebalance_task = self._rebalance_task, None
        if task is not None:
            task.cancel()
        self.channel.abort()

    async def _on_controller_resignation(self) -> None:
        """Kafka's onControllerResignation: stop tasks and senders, forget the context."""
        task, self._rebalance_task = self._rebalance_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.channel.shutdown()
        self.batch.clear()
        self.context.reset()
        self._new_components()
        log.info("controller %d: resigned", self.broker_id)

    # ------------------------------------------------------------ brokers

    async def _process_broker_change(self) -> None:
        brokers = await self.zk.get_all_brokers()
        current = set(brokers)
        known = self.context.live_or_shutting_down_broker_ids
        new_ids = current - known
        dead_ids = known - current
        bounced_ids = {b for b in current & known if brokers[b].epoch != self.context.live_broker_epochs.get(b)}
        if not (new_ids or dead_ids or bounced_ids):
            return
        log.info("controller %d: broker change: new %s, dead %s, bounced %s", self.broker_id,
                 sorted(new_ids), sorted(dead_ids), sorted(bounced_ids))
        for broker_id in dead_ids | bounced_ids:
            await self.channel.remove_broker(broker_id)
        self.context.remove_live_brokers(dead_ids)
        if bounced_ids:
            self.context.remove_live_brokers(bounced_ids)
            await self._on_broker_failure(bounced_ids)
        self.context.add_live_brokers(brokers[b] for b in new_ids | bounced_ids)
        for broker_id in new_ids | bounced_ids:
            self.channel.add_broker(brokers[broker_id])
        if new_ids | bounced_ids:
            await self._on_broker_startup(new_ids | bounced_ids)
        if dead_ids:
            await self._on_broker_failure(dead_ids)

    async def _on_broker_startup(self, new_ids: set[int]) -> None:
        existing = self.context.live_or_shutting_down_broker_ids - new_ids
        self.batch.new_batch()
        # The others learn the new broker list; the new brokers learn every partition.
        self.batch.add_update_metadata_request_for_brokers(existing, [])
        self.batch.add_update_metadata_request_for_brokers(new_ids, None)
        self.batch.send_requests_to_brokers(self.context.epoch)
        replicas = [r for r in self.context.replicas_on_brokers(new_ids)
                    if not self.context.is_topic_queued_up_for_deletion(r.topic)]
        await self.replica_state_machine.handle_state_changes(replicas, ReplicaState.ONLINE)
        await self.partition_state_machine.trigger_online_partition_state_change()
        # A reassignment waiting for a replica on a broker that was down goes on (Kafka's onBrokerStartup).
        await self.resume_reassignments(new_ids)
        with_deleted = {r.topic for r in self.context.replicas_on_brokers(new_ids)} & self.context.topics_to_be_deleted
        if with_deleted:
            await self.topic_deletion_manager.resume_deletion_for_topics(with_deleted)

    async def _on_broker_failure(self, dead_ids: set[int]) -> None:
        for broker_id in dead_ids:
            self.context.shutting_down_broker_ids.discard(broker_id)
        offline_leader = [
            tp for tp, info in self.context.partition_leadership_info.items()
            if info.leader_and_isr.leader in dead_ids and not self.context.is_topic_queued_up_for_deletion(tp[0])
        ]
        await self.partition_state_machine.handle_state_changes(offline_leader, PartitionState.OFFLINE)
        await self.partition_state_machine.trigger_online_partition_state_change()
        replicas = self.context.replicas_on_brokers(dead_ids)
        live_topic_replicas = [r for r in replicas if not self.context.is_topic_queued_up_for_deletion(r.topic)]
        await self.replica_state_machine.handle_state_changes(live_topic_replicas, ReplicaState.OFFLINE)
        deleted_topic_replicas = [r for r in replicas if self.context.is_topic_queued_up_for_deletion(r.topic)]
        if deleted_topic_replicas:
            await self.replica_state_machine.handle_state_changes(deleted_topic_replicas, ReplicaState.OFFLINE)
            await self.replica_state_machine.handle_state_changes(deleted_topic_replicas, ReplicaState.DELETION_INELIGIBLE)
            self.topic_deletion_manager.mark_topic_ineligible_for_deletion({r.topic for r in deleted_topic_replicas})
        if not offline_leader:
            self.batch.new_batch()
            self.batch.add_update_metadata_request_for_brokers(self.context.live_or_shutting_down_broker_ids, [])
            self.batch.send_requests_to_brokers(self.context.epoch)

    # ------------------------------------------------------------ failed log directories

    async def _process_log_dir_event(self) -> None:
        """Kafka's onBrokerLogDirFailure: every replica of the brokers named goes Online again, so each
        broker answers the LeaderAndIsr with KAFKA_STORAGE_ERROR for the replicas in its failed dirs."""
        brokers = await take_log_dir_events(self.zk) & self.context.live_or_shutting_down_broker_ids
        if not brokers:
            return
        log.info("controller %d: log dir failure on brokers %s", self.broker_id, sorted(brokers))
        replicas = [r for r in self.context.replicas_on_brokers(brokers)
                    if not self.context.is_topic_queued_up_for_deletion(r.topic)]
        await self.replica_state_machine.handle_state_changes(replicas, ReplicaState.ONLINE)

    def _on_leader_and_isr_response(self, broker_id: int, response: Message) -> None:
        if self.is_active:
            self._post("LeaderAndIsrResponseReceived", self._only_if_active(
                lambda: self._process_leader_and_isr_response(broker_id, response)))

    async def _process_leader_and_isr_response(self, broker_id: int, response: Message) -> None:
        offline = new_offline_replicas(self.context, broker_id, response)
        if offline:
            log.info("controller %d: replicas in failed log dirs of broker %d: %s", self.broker_id, broker_id,
                     ", ".join(f"{r.topic}-{r.partition}" for r in offline))
            await self._on_replicas_become_offline(offline)

    async def _on_replicas_become_offline(self, replicas: list[PartitionReplica]) -> None:
        """Kafka's onReplicasBecomeOffline: partitions they led elect elsewhere, the ISR loses them."""
        live = [r for r in replicas if not self.context.is_topic_queued_up_for_deletion(r.topic)]
        led = [r.topic_partition for r in live if self._leads(r)]
        await self.partition_state_machine.handle_state_changes(led, PartitionState.OFFLINE)
        await self.partition_state_machine.trigger_online_partition_state_change()
        await self.replica_state_machine.handle_state_changes(live, ReplicaState.OFFLINE)
        if not led:
            self.batch.new_batch()
            self.batch.add_update_metadata_request_for_brokers(self.context.live_or_shutting_down_broker_ids, [])
            self.batch.send_requests_to_brokers(self.context.epoch)

    def _leads(self, replica: PartitionReplica) -> bool:
        info = self.context.partition_leadership_info.get(replica.topic_partition)
        return info is not None and info.leader_and_isr.leader == replica.replica

    # ------------------------------------------------------------ topics

    async def _process_topic_change(self) -> None:
        topics = await self.zk.get_all_topics()
        new_topics = topics - self.context.all_topics
        deleted_topics = self.context.all_topics - topics
        for topic in deleted_topics:
            self.context.remove_topic(topic)
            self._unwatch_topic(topic)
        if not new_topics:
            return
        for topic in new_topics:
            await self._watch_topic(topic)
        assignments = await self._ensure_topic_ids(await self.zk.get_topic_assignments(new_topics))
        added: list[TopicPartition] = []
        for topic, assignment in assignments.items():
            added.extend(self._add_topic_assignment(topic, assignment))
        log.info("controller %d: new topics %s (%d partitions)", self.broker_id, sorted(new_topics), len(added))
        await self._on_new_partition_creation(added)

    async def _process_partition_modifications(self, topic: str) -> None:
        if topic not in self.context.all_topics:
            return  # a new topic: TopicChange handles it
        if self.context.is_topic_queued_up_for_deletion(topic):
            log.info("controller %d: ignoring new partitions of %s: it is being deleted", self.broker_id, topic)
            return
        assignment = (await self.zk.get_topic_assignments({topic})).get(topic)
        if assignment is None:
            return
        added = self._add_topic_assignment(topic, assignment)
        if added:
            log.info("controller %d: new partitions %s", self.broker_id, added)
            await self._on_new_partition_creation(added)

    async def _on_new_partition_creation(self, partitions: list[TopicPartition]) -> None:
        """Kafka's onNewPartitionCreation: New, then Online with the first live replica leading."""
        replicas = self.context.replicas_for_partitions(partitions)
        await self.partition_state_machine.handle_state_changes(partitions, PartitionState.NEW)
        await self.replica_state_machine.handle_state_changes(replicas, ReplicaState.NEW)
        await self.partition_state_machine.handle_state_changes(partitions, PartitionState.ONLINE,
                                                                ElectionStrategy.offline())
        await self.replica_state_machine.handle_state_changes(replicas, ReplicaState.ONLINE)

    async def _process_topic_deletion(self) -> None:
        markers = await self.zk.get_delete_topic_markers()
        if not markers:
            return
        unknown = markers - self.context.all_topics
        if unknown:
            await self.zk.remove_delete_topic_markers(unknown)
        to_delete = markers & self.context.all_topics
        if not to_delete:
            return
        if not self.config.delete_topic_enable:
            log.info("controller %d: delete.topic.enable is false; not deleting %s", self.broker_id, sorted(to_delete))
            await self.zk.remove_delete_topic_markers(to_delete)
            return
        await self.topic_deletion_manager.enqueue_topics_for_deletion(to_delete)

    def _on_stop_replica_response(self, broker_id: int, response: Message) -> None:
        if not isinstance(response, StopReplicaResponse) or not self.is_active:
            return
        if not any(r.replica == broker_id and s is ReplicaState.DELETION_STARTED
                   for r, s in self.context.replica_states.items()):
            return
        self._post("TopicDeletionStopReplicaResponseReceived",
                      self._only_if_active(lambda: self.topic_deletion_manager.stop_replica_response_received(
                          broker_id, response)))

    # ------------------------------------------------------------ auto leader rebalance

    def _schedule_auto_leader_rebalance(self, delay_s: float) -> None:
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
        self._rebalance_task = asyncio.get_running_loop().create_task(
            self._auto_leader_rebalance_timer(delay_s), name=f"controller-{self.broker_id}-leader-rebalance"
        )

    async def _auto_leader_rebalance_timer(self, delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        while self.is_active:
            self._post("AutoPreferredReplicaLeaderElection",
                          self._only_if_active(self.check_and_trigger_auto_leader_rebalance))
            await asyncio.sleep(self.config.leader_imbalance_check_interval_seconds)
