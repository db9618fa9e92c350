"""Topic administration as the handlers see it, the same in both modes.

CreateTopics, DeleteTopics, CreatePartitions, the topic config changes,
Metadata's auto-creation and FindCoordinator's internal topics call a
:class:`TopicAdmin`. The handlers do every check a request shares in both
modes (duplicates, name and id, the version's error codes); a
:class:`TopicAdmin` only makes the change and says when this broker sees it.

* :class:`LocalTopicAdmin` (the lone broker) applies the change to its
  metadata store and partitions on the append thread: it is seen at once.
* ``broker.cluster.zk_admin.ZkTopicAdmin`` (a cluster member) writes it to
  ZooKeeper; the controller acts on it and this broker sees it once the
  controller's UpdateMetadata arrives.

One convention for both: a refused change raises
:class:`~broker.admin_manager.AdminError` with Kafka's error code and message.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

from broker.admin_manager import AdminError, AdminManager, TopicCreation
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.metadata_store import TopicMetadata
    from replication.append_thread import AppendThread
    from replication.replica_manager import ReplicaManager

log = logging.getLogger(__name__)


class TopicAdmin(Protocol):
    """Make a topic change so and wait until this broker sees it; refusals raise AdminError."""

    def plan_topic(self, name: str, num_partitions: int, replication_factor: int,
                   configs: Mapping[str, str | None], assignments: Mapping[int, list[int]] | None) -> TopicCreation:
        """Kafka's checks of a creation against the topics and live brokers this broker knows."""
        ...

    async def create_topic(self, plan: TopicCreation, validate_only: bool) -> None:
        """Create the planned topic (``validate_only``: only the checks the change itself makes)."""
        ...

    async def wait_for_leaders(self, topic: str, partitions: int, timeout_ms: int) -> bool:
        """True once the topic's first ``partitions`` partitions have leaders here; False after the timeout."""
        ...

    async def delete_topic(self, name: str) -> None: ...

    async def wait_until_deleted(self, names: list[str], timeout_ms: int) -> bool:
        """True once none of the topics is known here; False after the timeout."""
        ...

    async def create_partitions(self, name: str, total: int, assignments: list[list[int]] | None,
                                validate_only: bool) -> None: ...

    def set_topic_configs_blocking(self, name: str, overrides: dict[str, str]) -> None:
        """Replace a topic's overrides (the config admin calls it on the append thread)."""
        ...

    async def auto_create_topic(self, name: str) -> ErrorCode:
        """Metadata's auto-creation: NO_ERROR once the topic is usable here, else the code Metadata
        answers for it (LEADER_NOT_AVAILABLE while the cluster creates it)."""
        ...

    async def ensure_internal_topic(self, name: str) -> ErrorCode:
        """FindCoordinator's: NO_ERROR once the coordinators' topic is usable here (created if
        missing), else COORDINATOR_NOT_AVAILABLE."""
        ...


def _barrier() -> None:
    """Runs on the append thread after whatever was queued there before it."""


class LocalTopicAdmin:
    """The lone broker's: every change on the append thread (files and fsyncs), seen at once.

    ``topics_deleted`` is the broker's reaction to topics leaving its metadata (their committed
    offsets go): the lone broker's deletion is its metadata update."""

    def __init__(self, admin: AdminManager, append_thread: AppendThread, replica_manager: ReplicaManager,
                 topics_deleted: Callable[[set[str]], None]) -> None:
        self.admin = admin
        self.append_thread = append_thread
        self.replica_manager = replica_manager
        self.topics_deleted = topics_deleted

    def plan_topic(self, name: str, num_partitions: int, replication_factor: int,
                   configs: Mapping[str, str | None], assignments: Mapping[int, list[int]] | None) -> TopicCreation:
        return self.admin.plan_topic(name, num_partitions, replication_factor, configs, assignments)

    async def create_topic(self, plan: TopicCreation, validate_only: bool) -> None:
        if not validate_only:
            await self.append_thread.run(self._create, plan)

    def _create(self, plan: TopicCreation) -> TopicMetadata:
        # Planned on the event loop: a creation queued before this one may have taken the name.
        if plan.name in self.admin.metadata:
            raise AdminError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{plan.name}' already exists.")
        return self.admin.create_topic(plan)

    async def wait_for_leaders(self, topic: str, partitions: int, timeout_ms: int) -> bool:
        return True  # the lone broker leads every partition it created

    async def delete_topic(self, name: str) -> None:
        await self.append_thread.run(self.admin.delete_topic, name)
        self.topics_deleted({name})

    async def wait_until_deleted(self, names: list[str], timeout_ms: int) -> bool:
        return True

    async def create_partitions(self, name: str, total: int, assignments: list[list[int]] | None,
                                validate_only: bool) -> None:
        await self.append_thread.run(self.admin.create_partitions, name, total, validate_only, assignments)

    def set_topic_configs_blocking(self, name: str, overrides: dict[str, str]) -> None:
        self.admin.set_topic_configs(name, overrides)

    async def auto_create_topic(self, name: str) -> ErrorCode:
        try:
            await self.append_thread.run(self.admin.auto_create_topic, name)
        except AdminError as exc:
            if exc.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:
                return exc.error_code
            # a concurrent request created it: usable as soon as it is hosted
            await self.append_thread.run(_barrier)
        return ErrorCode.NO_ERROR

    async def ensure_internal_topic(self, name: str) -> ErrorCode:
        topic = self.admin.metadata.get(name)
        if topic is not None:
            if len(self.replica_manager.partitions_of(name)) < topic.partition_count:
                # Listed but not hosted yet: a creation is running on the append thread.
                await self.append_thread.run(_barrier)
            return ErrorCode.NO_ERROR
        try:
            await self.append_thread.run(self.admin.auto_create_topic, name)
        except AdminError as exc:
            if exc.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:  # a concurrent request created it: fine
                log.warning("[KafkaServer id=%d] cannot create %s: %s", self.admin.broker_id, name, exc.message)
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NO_ERROR
