"""Batching the controller's requests per broker: Kafka's ControllerBrokerRequestBatch.

The state machines add partition states for brokers while they make one set of
changes; :meth:`ControllerRequestBatch.send_requests_to_brokers` then builds one
LeaderAndIsr, one StopReplica and one UpdateMetadata request per broker and hands
them to the channel manager. Every request carries the controller's id and epoch
and the receiving broker's epoch, so a broker can refuse a deposed controller's
requests (STALE_CONTROLLER_EPOCH) and a restarted broker a request meant for its
previous incarnation (STALE_BROKER_EPOCH).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from controller.controller_channel_manager import ControllerChannelManager, ResponseCallback
from controller.controller_context import ControllerContext, TopicPartition
from controller.zk.zk_data import BrokerInfo, LeaderIsrAndControllerEpoch
from protocol.messages.leader_and_isr import (
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrTopicState,
)
from protocol.messages.stop_replica import StopReplicaPartitionState, StopReplicaRequest, StopReplicaTopicState
from protocol.messages.update_metadata import (
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataTopicState,
)
from protocol.primitives import UUID_ZERO, Message

__all__ = [
    "EPOCH_DURING_DELETE",
    "LEADER_DURING_DELETE",
    "NO_EPOCH",
    "ControllerRequestBatch",
    "security_protocol_id",
]

#: Kafka's LeaderAndIsr.LeaderDuringDelete: UpdateMetadata's leader for a partition being deleted.
LEADER_DURING_DELETE = -2
#: Kafka's LeaderAndIsr.EpochDuringDelete: StopReplica's leader epoch while the topic is deleted.
EPOCH_DURING_DELETE = -2
#: Kafka's LeaderAndIsr.NoEpoch.
NO_EPOCH = -1

_SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


def security_protocol_id(name: str) -> int:
    """Kafka's SecurityProtocol id for UpdateMetadata's endpoints."""
    return _SECURITY_PROTOCOL_IDS.get(name.upper(), 0)


@dataclass(slots=True)
class _StopReplicaEntry:
    delete: bool
    leader_epoch: int


#: (broker id, response) -> None: what the controller does with a broker's answer.
BrokerResponseCallback = Callable[[int, Message], None]


class ControllerRequestBatch:
    """Collects partition states per broker, then sends one request of each kind to each broker."""

    def __init__(
        self,
        controller_id: int,
        context: ControllerContext,
        channel: ControllerChannelManager,
        inter_broker_listener_name: str,
        *,
        on_leader_and_isr_response: BrokerResponseCallback | None = None,
        on_stop_replica_response: BrokerResponseCallback | None = None,
    ) -> None:
        self.controller_id = controller_id
        self.context = context
        self.channel = channel
        self.listener_name = inter_broker_listener_name
        self.on_leader_and_isr_response = on_leader_and_isr_response
        self.on_stop_replica_response = on_stop_replica_response
        self.leader_and_isr: dict[int, dict[TopicPartition, LeaderAndIsrPartitionState]] = {}
        self.stop_replica: dict[int, dict[TopicPartition, _StopReplicaEntry]] = {}
        self.update_metadata_brokers: set[int] = set()
        self.update_metadata_partitions: dict[TopicPartition, UpdateMetadataPartitionState] = {}

    def new_batch(self) -> None:
        if self.leader_and_isr or self.stop_replica or self.update_metadata_brokers:
            raise RuntimeError("controller request batch still holds unsent requests")

    def clear(self) -> None:
        self.leader_and_isr.clear()
        self.stop_replica.clear()
        self.update_metadata_brokers.clear()
        self.update_metadata_partitions.clear()

    # ------------------------------------------------------------ adding

    def add_leader_and_isr_request_for_brokers(
        self,
        broker_ids: Iterable[int],
        tp: TopicPartition,
        state: LeaderIsrAndControllerEpoch,
        replicas: list[int],
        is_new: bool,
    ) -> None:
        """LeaderAndIsr for ``tp`` to each broker (and UpdateMetadata for it to every broker)."""
        lai = state.leader_and_isr
        assignment = self.context.partition_assignments.get(tp[0], {}).get(tp[1])
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            existing = self.leader_and_isr.setdefault(broker_id, {}).get(tp)
            self.leader_and_isr[broker_id][tp] = LeaderAndIsrPartitionState(
                topic_name=tp[0],
                partition_index=tp[1],
                controller_epoch=state.controller_epoch,
                leader=lai.leader,
                leader_epoch=lai.leader_epoch,
                isr=list(lai.isr),
                partition_epoch=lai.partition_epoch,
                replicas=list(replicas),
                adding_replicas=list(assignment.adding) if assignment else [],
                removing_replicas=list(assignment.removing) if assignment else [],
                is_new=is_new or (existing is not None and existing.is_new),
                leader_recovery_state=lai.leader_recovery_state,
            )
        self.add_update_metadata_request_for_brokers(self.context.live_or_shutting_down_broker_ids, [tp])

    def add_stop_replica_request_for_brokers(self, broker_ids: Iterable[int], tp: TopicPartition, delete: bool) -> None:
        info = self.context.partition_leadership_info.get(tp)
        if info is None:
            epoch = NO_EPOCH
        elif self.context.is_topic_deletion_in_progress(tp[0]):
            epoch = EPOCH_DURING_DELETE
        else:
            epoch = info.leader_and_isr.leader_epoch
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            entries = self.stop_replica.setdefault(broker_id, {})
            previous = entries.get(tp)
            entries[tp] = _StopReplicaEntry(delete or (previous is not None and previous.delete), epoch)

    def add_update_metadata_request_for_brokers(
        self, broker_ids: Iterable[int], partitions: Iterable[TopicPartition] | None = None
    ) -> None:
        """UpdateMetadata to ``broker_ids`` with ``partitions`` (None: every partition the controller leads)."""
        self.update_metadata_brokers.update(b for b in broker_ids if b >= 0)
        tps = list(self.context.partition_leadership_info) if partitions is None else list(partitions)
        for tp in tps:
            state = self._update_metadata_partition_state(tp)
            if state is not None:
                self.update_metadata_partitions[tp] = state

    def _update_metadata_partition_state(self, tp: TopicPartition) -> UpdateMetadataPartitionState | None:
        info = self.context.partition_leadership_info.get(tp)
        if info is None:
            return None
        lai = info.leader_and_isr
        replicas = self.context.partition_replica_assignment(tp)
        being_deleted = self.context.is_topic_queued_up_for_deletion(tp[0])
        return UpdateMetadataPartitionState(
            topic_name=tp[0],
            partition_index=tp[1],
            controller_epoch=info.controller_epoch,
            leader=LEADER_DURING_DELETE if being_deleted else lai.leader,
            leader_epoch=lai.leader_epoch,
            isr=list(lai.isr),
            zk_version=lai.partition_epoch,
            replicas=replicas,
            offline_replicas=[r for r in replicas
                              if not self.context.is_replica_online(r, include_shutting_down=True, tp=tp)],
        )

    # ------------------------------------------------------------ sending

    def send_requests_to_brokers(self, controller_epoch: int) -> None:
        try:
            self._send_leader_and_isr(controller_epoch)
            self._send_update_metadata(controller_epoch)
            self._send_stop_replica(controller_epoch)
        finally:
            self.clear()

    def _topic_id(self, topic: str) -> uuid.UUID:
        return self.context.topic_ids.get(topic, UUID_ZERO)

    def _send_leader_and_isr(self, controller_epoch: int) -> None:
        for broker_id, states in self.leader_and_isr.items():
            if broker_id not in self.context.live_brokers:
                continue
            by_topic: dict[str, list[LeaderAndIsrPartitionState]] = {}
            for tp, state in states.items():
                by_topic.setdefault(tp[0], []).append(state)
            leader_ids = {s.leader for s in states.values()}
            live_leaders = []
            for leader_id in sorted(leader_ids):
                broker = self.context.live_brokers.get(leader_id)
                endpoint = broker.endpoint(self.listener_name) if broker is not None else None
                if endpoint is not None:
                    live_leaders.append(LeaderAndIsrLiveLeader(broker_id=leader_id, host_name=endpoint.host,
                                                               port=endpoint.port))
            request = LeaderAndIsrRequest(
                controller_id=self.controller_id,
                controller_epoch=controller_epoch,
                broker_epoch=self.context.live_broker_epochs.get(broker_id, -1),
                topic_states=[
                    LeaderAndIsrTopicState(topic_name=topic, topic_id=self._topic_id(topic), partition_states=ps)
                    for topic, ps in by_topic.items()
                ],
                live_leaders=live_leaders,
            )
            self.channel.send_request(broker_id, request, self._callback(self.on_leader_and_isr_response, broker_id))

    def _send_update_metadata(self, controller_epoch: int) -> None:
        if not self.update_metadata_brokers:
            return
        live_brokers = [self._update_metadata_broker(b) for b in self.context.live_brokers.values()]
        by_topic: dict[str, list[UpdateMetadataPartitionState]] = {}
        for tp, state in self.update_metadata_partitions.items():
            by_topic.setdefault(tp[0], []).append(state)
        for broker_id in sorted(self.update_metadata_brokers):
            if broker_id not in self.context.live_brokers:
                continue
            request = UpdateMetadataRequest(
                controller_id=self.controller_id,
                controller_epoch=controller_epoch,
                broker_epoch=self.context.live_broker_epochs.get(broker_id, -1),
                topic_states=[
                    UpdateMetadataTopicState(topic_name=topic, topic_id=self._topic_id(topic), partition_states=ps)
                    for topic, ps in by_topic.items()
                ],
                live_brokers=live_brokers,
            )
            self.channel.send_request(broker_id, request)

    @staticmethod
    def _update_metadata_broker(broker: BrokerInfo) -> UpdateMetadataBroker:
        return UpdateMetadataBroker(
            id=broker.id,
            endpoints=[
                UpdateMetadataEndpoint(port=e.port, host=e.host, listener=e.listener_name,
                                       security_protocol=security_protocol_id(e.security_protocol))
                for e in broker.endpoints
            ],
            rack=broker.rack,
        )

    def _send_stop_replica(self, controller_epoch: int) -> None:
        for broker_id, entries in self.stop_replica.items():
            if broker_id not in self.context.live_brokers:
                continue
            by_topic: dict[str, list[StopReplicaPartitionState]] = {}
            for tp, entry in entries.items():
                by_topic.setdefault(tp[0], []).append(
                    StopReplicaPartitionState(partition_index=tp[1], leader_epoch=entry.leader_epoch,
                                              delete_partition=entry.delete)
                )
            request = StopReplicaRequest(
                controller_id=self.controller_id,
                controller_epoch=controller_epoch,
                broker_epoch=self.context.live_broker_epochs.get(broker_id, -1),
                topic_states=[StopReplicaTopicState(topic_name=t, partition_states=ps) for t, ps in by_topic.items()],
            )
            self.channel.send_request(broker_id, request, self._callback(self.on_stop_replica_response, broker_id))

    @staticmethod
    def _callback(callback: BrokerResponseCallback | None, broker_id: int) -> ResponseCallback | None:
        if callback is None:
            return None
        return lambda response: callback(broker_id, response)
