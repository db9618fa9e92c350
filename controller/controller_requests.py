"""What brokers and admins ask the controller: ControlledShutdown, AlterPartition, ElectLeaders.

Part of :class:`~controller.kafka_controller.KafkaController` (a mixin, to keep the
lifecycle and the request handling in files of a readable size). Each public method
queues an event and waits for it, so requests are handled between the controller's
other events, never concurrently with them; a broker that is not the active
controller answers NOT_CONTROLLER.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from controller.controller_context import ControllerContext, PartitionReplica, PartitionState, ReplicaState, TopicPartition
from controller.controller_event_manager import ControllerEventPreemptedError
from controller.partition_state_machine import ElectionKind, ElectionStrategy, StateChangeFailedError
from controller.zk.kafka_zk_client import ControllerMovedError, ZkBadVersionError
from controller.zk.zk_data import LEADER_NONE, LeaderAndIsr, LeaderIsrAndControllerEpoch
from protocol.errors import ErrorCode
from protocol.messages.alter_partition import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionResponsePartitionData,
    AlterPartitionResponseTopicData,
)
from protocol.primitives import UUID_ZERO

if TYPE_CHECKING:
    from controller.controller_config import ControllerConfig
    from controller.controller_request_batch import ControllerRequestBatch
    from controller.partition_state_machine import PartitionStateMachine
    from controller.replica_state_machine import ReplicaStateMachine
    from controller.zk.kafka_zk_client import KafkaZkClient

__all__ = ["CONTROLLER_DEPOSED", "ELECTION_PREFERRED", "ELECTION_UNCLEAN", "ControllerRequests"]

log = logging.getLogger(__name__)

#: ElectLeaders' election types.
ELECTION_PREFERRED = 0
ELECTION_UNCLEAN = 1

#: The controller resigned while the request waited or ran: the broker should ask the new one.
CONTROLLER_DEPOSED = (ControllerEventPreemptedError, ControllerMovedError)
_DEPOSED = CONTROLLER_DEPOSED

#: Kafka's "unknown broker epoch" in control requests: skip the epoch check.
UNKNOWN_BROKER_EPOCH = -1

#: Kafka's LeaderRecoveryState.
RECOVERED = 0
RECOVERING = 1

ElectionResults = dict[TopicPartition, tuple[int, str | None]]
#: A request's partition: (topic name as sent (v0-1), topic id as sent (v2+), partition).
_Key = tuple[str, uuid.UUID, int]


class ControllerRequests:
    """ControlledShutdown, AlterPartition, ElectLeaders and the automatic preferred-leader check."""

    if TYPE_CHECKING:
        config: ControllerConfig
        broker_id: int
        zk: KafkaZkClient
        context: ControllerContext
        batch: ControllerRequestBatch
        partition_state_machine: PartitionStateMachine
        replica_state_machine: ReplicaStateMachine

        @property
        def is_active(self) -> bool: ...

        def _enqueue(self, name: str, process: Callable[[], Awaitable[Any]]) -> asyncio.Future[Any]: ...

        async def maybe_complete_reassignments(self, tps: list[TopicPartition]) -> None: ...

    # ------------------------------------------------------------ ControlledShutdown

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[int, list[TopicPartition]]:
        """Move ``broker_id``'s leaderships away and take it out of ISRs; answer what it still leads."""
        if not self.is_active:
            return int(ErrorCode.NOT_CONTROLLER), []
        try:
            result: tuple[int, list[TopicPartition]] = await self._enqueue(
                f"ControlledShutdown({broker_id})", lambda: self._process_controlled_shutdown(broker_id, broker_epoch)
            )
        except _DEPOSED:
            return int(ErrorCode.NOT_CONTROLLER), []
        except Exception:
            log.exception("controller %d: controlled shutdown of broker %d failed", self.broker_id, broker_id)
            return int(ErrorCode.UNKNOWN_SERVER_ERROR), []
        return result

    async def _process_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[int, list[TopicPartition]]:
        if not self.is_active:
            return int(ErrorCode.NOT_CONTROLLER), []
        ctx = self.context
        if broker_epoch != UNKNOWN_BROKER_EPOCH and broker_epoch < ctx.live_broker_epochs.get(broker_id, -1):
            return int(ErrorCode.STALE_BROKER_EPOCH), []
        if broker_id not in ctx.live_or_shutting_down_broker_ids:
            return int(ErrorCode.BROKER_NOT_AVAILABLE), []
        ctx.shutting_down_broker_ids.add(broker_id)
        log.info("controller %d: controlled shutdown of broker %d", self.broker_id, broker_id)
        to_act_on = [
            tp for tp in ctx.partitions_on_broker(broker_id)
            if len(ctx.partition_replica_assignment(tp)) > 1
            and tp in ctx.partition_leadership_info
            and not ctx.is_topic_queued_up_for_deletion(tp[0])
        ]
        led = [tp for tp in to_act_on if ctx.partition_leadership_info[tp].leader_and_isr.leader == broker_id]
        followed = [tp for tp in to_act_on if tp not in led]
        await self.partition_state_machine.handle_state_changes(
            led, PartitionState.ONLINE, ElectionStrategy(ElectionKind.CONTROLLED_SHUTDOWN)
        )
        # Followers stop fetching and leave the ISR (the leaders hear the new ISR).
        await self.replica_state_machine.handle_state_changes(
            [PartitionReplica(tp[0], tp[1], broker_id) for tp in followed], ReplicaState.OFFLINE
        )
        remaining = sorted(
            tp for tp, info in ctx.partition_leadership_info.items()
            if info.leader_and_isr.leader == broker_id
            and len(ctx.partition_replica_assignment(tp)) > 1
            and not ctx.is_topic_queued_up_for_deletion(tp[0])
        )
        return int(ErrorCode.NO_ERROR), remaining

    # ------------------------------------------------------------ AlterPartition

    async def alter_partition(self, request: AlterPartitionRequest) -> AlterPartitionResponse:
        """A leader's ISR change (Kafka's processAlterPartition), checked by broker, leader and partition epoch."""
        if not self.is_active:
            return AlterPartitionResponse(error_code=int(ErrorCode.NOT_CONTROLLER))
        try:
            response: AlterPartitionResponse = await self._enqueue(
                f"AlterPartitionReceived({request.broker_id})", lambda: self._process_alter_partition(request)
            )
        except _DEPOSED:
            return AlterPartitionResponse(error_code=int(ErrorCode.NOT_CONTROLLER))
        except Exception:
            log.exception("controller %d: AlterPartition from broker %d failed", self.broker_id, request.broker_id)
            return AlterPartitionResponse(error_code=int(ErrorCode.UNKNOWN_SERVER_ERROR))
        return response

    async def _process_alter_partition(self, request: AlterPartitionRequest) -> AlterPartitionResponse:
        if not self.is_active:
            return AlterPartitionResponse(error_code=int(ErrorCode.NOT_CONTROLLER))
        ctx = self.context
        known_epoch = ctx.live_broker_epochs.get(request.broker_id)
        if known_epoch is None or (request.broker_epoch != UNKNOWN_BROKER_EPOCH and request.broker_epoch != known_epoch):
            return AlterPartitionResponse(error_code=int(ErrorCode.STALE_BROKER_EPOCH))
        names = {topic_id: name for name, topic_id in ctx.topic_ids.items()}
        errors: dict[_Key, int] = {}
        answers: dict[_Key, LeaderAndIsr] = {}
        to_write: dict[TopicPartition, LeaderAndIsr] = {}
        keys: dict[TopicPartition, _Key] = {}
        for topic in request.topics:
            # v0-1 name the topic, v2+ give its id.
            by_name = topic.topic_id == UUID_ZERO
            name = (topic.topic_name if topic.topic_name in ctx.topic_ids else None) if by_name else names.get(topic.topic_id)
            for p in topic.partitions:
                key = (topic.topic_name, topic.topic_id, p.partition_index)
                if name is None:
                    errors[key] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if by_name else ErrorCode.UNKNOWN_TOPIC_ID)
                    continue
                tp = (name, p.partition_index)
                isr = [b.broker_id for b in p.new_isr_with_epochs] if p.new_isr_with_epochs else list(p.new_isr)
                proposed = LeaderAndIsr(request.broker_id, p.leader_epoch, isr, p.leader_recovery_state, p.partition_epoch)
                outcome = self._check_alter_partition(tp, proposed)
                if isinstance(outcome, int):
                    errors[key] = outcome
                elif outcome is None:
                    to_write[tp] = proposed
                    keys[tp] = key
                else:
                    answers[key] = outcome
        if to_write:
            updated, failed = await self.zk.update_leader_and_isr(to_write, ctx.epoch, ctx.epoch_zk_version)
            for tp, lai in updated.items():
                ctx.partition_leadership_info[tp] = LeaderIsrAndControllerEpoch(lai, ctx.epoch)
                answers[keys[tp]] = lai
            for tp, error in failed.items():
                log.info("controller %d: AlterPartition of %s-%d failed in ZooKeeper: %s", self.broker_id, tp[0], tp[1], error)
                bad_version = isinstance(error, ZkBadVersionError)
                errors[keys[tp]] = int(ErrorCode.INVALID_UPDATE_VERSION if bad_version else ErrorCode.UNKNOWN_SERVER_ERROR)
            if updated:
                self.batch.new_batch()
                self.batch.add_update_metadata_request_for_brokers(ctx.live_or_shutting_down_broker_ids, list(updated))
                self.batch.send_requests_to_brokers(ctx.epoch)
                # An adding replica that joined the ISR may finish its partition's reassignment.
                await self.maybe_complete_reassignments(sorted(updated))
        return self._alter_partition_response(request, errors, answers)

    def _check_alter_partition(self, tp: TopicPartition, proposed: LeaderAndIsr) -> int | LeaderAndIsr | None:
        """An error code, the current state (already as asked: idempotent), or None: write it."""
        info = self.context.partition_leadership_info.get(tp)
        if info is None:
            return int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        current = info.leader_and_isr
        if proposed.partition_epoch > current.partition_epoch or proposed.leader_epoch > current.leader_epoch:
            # The leader knows a newer state than ours: we are probably no longer the controller.
            return int(ErrorCode.NOT_CONTROLLER)
        if proposed.leader_epoch < current.leader_epoch:
            return int(ErrorCode.FENCED_LEADER_EPOCH)
        if proposed.leader != current.leader:
            return int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if (proposed.leader == current.leader and set(proposed.isr) == set(current.isr)
                and proposed.leader_recovery_state == current.leader_recovery_state):
            return current
        if proposed.partition_epoch < current.partition_epoch:
            return int(ErrorCode.INVALID_UPDATE_VERSION)
        if proposed.leader_recovery_state == RECOVERING and len(proposed.isr) > 1:
            return int(ErrorCode.INVALID_REQUEST)
        if current.leader_recovery_state == RECOVERED and proposed.leader_recovery_state == RECOVERING:
            return int(ErrorCode.INVALID_REQUEST)
        if set(proposed.isr) - self.context.live_broker_ids:
            return int(ErrorCode.INELIGIBLE_REPLICA)
        return None

    @staticmethod
    def _alter_partition_response(
        request: AlterPartitionRequest, errors: dict[_Key, int], answers: dict[_Key, LeaderAndIsr]
    ) -> AlterPartitionResponse:
        topics = []
        for topic in request.topics:
            partitions = []
            for p in topic.partitions:
                key = (topic.topic_name, topic.topic_id, p.partition_index)
                lai = answers.get(key)
                if lai is not None:
                    partitions.append(AlterPartitionResponsePartitionData(
                        partition_index=p.partition_index, error_code=0, leader_id=lai.leader,
                        leader_epoch=lai.leader_epoch, isr=list(lai.isr),
                        leader_recovery_state=lai.leader_recovery_state, partition_epoch=lai.partition_epoch,
                    ))
                else:
                    partitions.append(AlterPartitionResponsePartitionData(
                        partition_index=p.partition_index,
                        error_code=errors.get(key, int(ErrorCode.UNKNOWN_SERVER_ERROR)),
                    ))
            topics.append(AlterPartitionResponseTopicData(topic_name=topic.topic_name, topic_id=topic.topic_id,
                                                          partitions=partitions))
        return AlterPartitionResponse(topics=topics)

    # ------------------------------------------------------------ ElectLeaders

    async def elect_leaders(self, election_type: int, partitions: list[TopicPartition] | None) -> ElectionResults:
        """ElectLeaders: PREFERRED (0) or UNCLEAN (1); ``None`` means every partition."""
        if not self.is_active:
            tps = partitions or []
            return {tp: (int(ErrorCode.NOT_CONTROLLER), None) for tp in tps}
        try:
            results: ElectionResults = await self._enqueue(
                "ReplicaLeaderElection", lambda: self._process_replica_leader_election(election_type, partitions)
            )
        except _DEPOSED:
            return {tp: (int(ErrorCode.NOT_CONTROLLER), None) for tp in partitions or []}
        except Exception as exc:
            log.exception("controller %d: leader election failed", self.broker_id)
            return {tp: (int(ErrorCode.UNKNOWN_SERVER_ERROR), str(exc)) for tp in partitions or []}
        return results

    async def _process_replica_leader_election(
        self, election_type: int, partitions: list[TopicPartition] | None
    ) -> ElectionResults:
        ctx = self.context
        tps = list(ctx.all_partitions()) if partitions is None else list(dict.fromkeys(partitions))
        if not self.is_active:
            return {tp: (int(ErrorCode.NOT_CONTROLLER), None) for tp in tps}
        results: ElectionResults = {}
        electable: list[TopicPartition] = []
        for tp in tps:
            if not ctx.partition_replica_assignment(tp) or tp not in ctx.partition_leadership_info:
                results[tp] = (int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), "The partition does not exist.")
            elif ctx.is_topic_queued_up_for_deletion(tp[0]):
                results[tp] = (int(ErrorCode.INVALID_TOPIC), "The topic is being deleted")
            elif self._election_needed(tp, election_type):
                electable.append(tp)
            else:
                results[tp] = (int(ErrorCode.ELECTION_NOT_NEEDED), "Leader election not needed for topic partition.")
        results.update(await self._on_replica_election(electable, election_type))
        return results

    def _election_needed(self, tp: TopicPartition, election_type: int) -> bool:
        leader = self.context.partition_leadership_info[tp].leader_and_isr.leader
        if election_type == ELECTION_PREFERRED:
            return leader != self.context.partition_replica_assignment(tp)[0]
        return leader == LEADER_NONE or leader not in self.context.live_broker_ids

    async def _on_replica_election(self, tps: list[TopicPartition], election_type: int) -> ElectionResults:
        if not tps:
            return {}
        if election_type == ELECTION_PREFERRED:
            strategy = ElectionStrategy(ElectionKind.PREFERRED)
            failure = int(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE)
        else:
            strategy = ElectionStrategy.offline(allow_unclean=True)
            failure = int(ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE)
        outcome = await self.partition_state_machine.handle_state_changes(tps, PartitionState.ONLINE, strategy)
        results: ElectionResults = {}
        for tp in tps:
            result = outcome.get(tp)
            if isinstance(result, LeaderAndIsr):
                results[tp] = (int(ErrorCode.NO_ERROR), None)
            elif isinstance(result, StateChangeFailedError):
                results[tp] = (failure, str(result))
            else:
                results[tp] = (int(ErrorCode.UNKNOWN_SERVER_ERROR), str(result) if result is not None else None)
        return results

    # ------------------------------------------------------------ auto leader rebalance

    async def check_and_trigger_auto_leader_rebalance(self) -> None:
        """Kafka's checkAndTriggerAutoLeaderRebalance: per preferred broker, elect preferred leaders past the threshold."""
        ctx = self.context
        by_preferred: dict[int, list[TopicPartition]] = {}
        for tp in ctx.all_partitions():
            replicas = ctx.partition_replica_assignment(tp)
            if replicas and not ctx.is_topic_queued_up_for_deletion(tp[0]):
                by_preferred.setdefault(replicas[0], []).append(tp)
        threshold = self.config.leader_imbalance_per_broker_percentage / 100
        for broker_id, tps in sorted(by_preferred.items()):
            not_led = [
                tp for tp in tps
                if tp in ctx.partition_leadership_info
                and ctx.partition_leadership_info[tp].leader_and_isr.leader != broker_id
            ]
            if not tps or len(not_led) / len(tps) <= threshold:
                continue
            candidates = [tp for tp in not_led if ctx.is_replica_online(broker_id)
                          and not ctx.is_topic_queued_up_for_deletion(tp[0])]
            if candidates:
                log.info("controller %d: leader imbalance on broker %d (%d of %d); electing preferred leaders",
                         self.broker_id, broker_id, len(not_led), len(tps))
                await self._on_replica_election(candidates, ELECTION_PREFERRED)
