"""The controller's side of a broker's failed log directory (Kafka's onBrokerLogDirFailure).

A broker whose log directory fails writes ``/log_dir_event_notification/log_dir_event_<seq>``
naming itself. The controller reads and deletes those notifications and sends that broker a
LeaderAndIsr for every replica it holds (the replicas go Online again); the broker answers
KAFKA_STORAGE_ERROR for those in the failed directory. From then on the controller counts
those replicas offline (``ControllerContext.replicas_on_offline_dirs``): they lead nothing,
the partitions they led elect a leader elsewhere and the ISR loses them. This module keeps
the parts that need no state machine: reading the notifications and reading the answers.
"""

from __future__ import annotations

import logging

from controller.controller_context import ControllerContext, PartitionReplica
from controller.zk import zk_data as zd
from controller.zk.kafka_zk_client import KafkaZkClient
from protocol.errors import ErrorCode
from protocol.messages.leader_and_isr import LeaderAndIsrResponse
from protocol.primitives import Message

__all__ = ["new_offline_replicas", "take_log_dir_events"]

log = logging.getLogger(__name__)


async def take_log_dir_events(zk: KafkaZkClient) -> set[int]:
    """The brokers named by the pending log dir event notifications, which are deleted."""
    root = zd.LOG_DIR_EVENT_NOTIFICATION_PATH
    children = [c for c in await zk.get_children(root) if c.startswith(zd.LOG_DIR_EVENT_PREFIX)]
    if not children:
        return set()
    paths = [f"{root}/{c}" for c in children]
    found = await zk.get_data_and_ctime(paths)
    brokers: set[int] = set()
    for path, (data, _) in found.items():
        try:
            brokers.add(zd.decode_log_dir_event(data))
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring the log dir event %s: %s", path, exc)
    await zk.delete_paths(paths)
    return brokers


def _storage_errors(context: ControllerContext, response: LeaderAndIsrResponse) -> set[tuple[str, int]]:
    """The partitions a LeaderAndIsr answer reports KAFKA_STORAGE_ERROR for (by topic id from v5)."""
    code = ErrorCode.KAFKA_STORAGE_ERROR
    failed = {(e.topic_name, e.partition_index) for e in response.partition_errors if e.error_code == code}
    if response.topics:
        names = {topic_id: topic for topic, topic_id in context.topic_ids.items()}
        for topic in response.topics:
            name = names.get(topic.topic_id)
            if name is not None:
                failed.update((name, e.partition_index) for e in topic.partition_errors if e.error_code == code)
    return failed


def new_offline_replicas(context: ControllerContext, broker_id: int, response: Message) -> list[PartitionReplica]:
    """Record the replicas a broker's LeaderAndIsr answer reports offline; those not known offline before."""
    if not isinstance(response, LeaderAndIsrResponse):
        return []
    failed = _storage_errors(context, response)
    if not failed:
        return []
    known = context.replicas_on_offline_dirs.setdefault(broker_id, set())
    new = sorted(failed - known)
    known.update(new)
    return [PartitionReplica(topic, partition, broker_id) for topic, partition in new]
