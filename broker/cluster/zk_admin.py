"""Topic administration of a cluster member (Kafka's ZkAdminManager and auto-topic creation).

Any broker takes CreateTopics, DeleteTopics, CreatePartitions and topic config
changes: it validates them as the lone broker does (against the live brokers
in its metadata cache), writes them to ZooKeeper through the AdminZkClient,
and the controller acts on its watches. The answer waits, at most the
request's timeout, until the controller's UpdateMetadata shows the result here
(Kafka's DelayedCreatePartitions / DelayedDeleteTopics): every partition of a
new topic with a leader, a deleted topic gone. A timeout answers
REQUEST_TIMED_OUT; the change itself stands.

Auto-creation (Metadata, FindCoordinator) writes the topic and answers at once,
LEADER_NOT_AVAILABLE (COORDINATOR_NOT_AVAILABLE for the coordinators' topics),
as Kafka does; clients ask again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from broker.admin_manager import AdminError, TopicCreation, check_partition_increase, plan_topic_creation
from controller.admin_zk_client import AdminZkClient
from coordinator.common.internal_topics import (
    GROUP_METADATA_TOPIC_NAME,
    SHARE_GROUP_STATE_TOPIC_NAME,
    TRANSACTION_STATE_TOPIC_NAME,
)
from coordinator.share.share_coordinator import share_group_state_topic_configs
from coordinator.transaction.transaction_state_manager import transaction_topic_configs
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.cluster.metadata_cache import ZkMetadataCache
    from broker.config.dynamic_broker_config import DynamicBrokerConfig
    from controller.zk.kafka_zk_client import KafkaZkClient
    from storage.log_manager import LogManager

log = logging.getLogger(__name__)

#: The controller's LeaderAndIsr.NoLeader.
NO_LEADER = -1
#: How long a config write may wait for ZooKeeper (the append thread waits with it).
ZK_WRITE_TIMEOUT_S = 30.0


def _error_of(exc: Exception) -> AdminError:
    """Kafka's error code for what the ZooKeeper admin client raised (its errors carry one)."""
    if isinstance(exc, AdminError):
        return exc
    code = getattr(exc, "error_code", None)
    if code is None:
        if type(exc).__name__ in ("TopicExistsError", "NodeExistsError"):
            return AdminError(ErrorCode.TOPIC_ALREADY_EXISTS, str(exc))
        log.error("topic administration failed", exc_info=exc)
        return AdminError(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc) or type(exc).__name__)
    return AdminError(ErrorCode(code), getattr(exc, "message", None) or str(exc))


class ZkTopicAdmin:
    """broker.topic_admin.TopicAdmin of a cluster member: changes go to ZooKeeper, refusals raise AdminError."""

    def __init__(self, broker_id: int, zk: KafkaZkClient, cache: ZkMetadataCache,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.cache = cache
        self.loop = loop
        self._client: AdminZkClient | None = None
        self._dynamic_config: DynamicBrokerConfig | None = None
        self._log_manager: LogManager | None = None

    def attach(self, dynamic_config: DynamicBrokerConfig, log_manager: LogManager) -> None:
        self._dynamic_config = dynamic_config
        self._log_manager = log_manager

    @property
    def dynamic_config(self) -> DynamicBrokerConfig:
        assert self._dynamic_config is not None, "ZkTopicAdmin.attach was not called"
        return self._dynamic_config

    @property
    def client(self) -> AdminZkClient:
        if self._client is None:
            self._client = AdminZkClient(self.zk)
        return self._client

    def live_brokers(self) -> list[int]:
        return self.cache.alive_broker_ids()

    # -- creation ---------------------------------------------------------------
    def plan_topic(self, name: str, num_partitions: int, replication_factor: int,
                   configs: Mapping[str, str | None], assignments: Mapping[int, list[int]] | None) -> TopicCreation:
        return plan_topic_creation(self.dynamic_config, name, num_partitions, replication_factor,
                                   configs, assignments, name in self.cache, self.live_brokers())

    async def create_topic(self, plan: TopicCreation, validate_only: bool) -> None:
        """Write the topic to ZooKeeper (config znode, then assignment); the controller does the rest.
        ``validate_only``: the admin client's checks against ZooKeeper, nothing written."""
        try:
            await self.client.create_topic(plan.name, plan.num_partitions, plan.replication_factor, plan.configs,
                                           plan.assignments, validate_only=validate_only)
        except Exception as exc:
            raise _error_of(exc) from None
        if not validate_only:
            log.info("[KafkaServer id=%d] created topic %s (%d partition(s), RF %d) in ZooKeeper",
                     self.broker_id, plan.name, plan.num_partitions, plan.replication_factor)

    def has_leaders(self, topic: str, partitions: int) -> bool:
        """Every partition of the topic is in the cache with a leader (DelayedCreatePartitions' test)."""
        cache = self.cache
        states = cache.partition_states(topic)
        return len(states) >= partitions and all(s.leader_id != NO_LEADER for s in states)

    async def wait_for_leaders(self, topic: str, partitions: int, timeout_ms: int) -> bool:
        """Also until the topic's overrides were read here: DescribeConfigs after the answer shows
        them, as on the lone broker."""
        cache = self.cache
        return await cache.wait_until(lambda: self.has_leaders(topic, partitions) and cache.has_topic_configs(topic),
                                      max(timeout_ms, 0) / 1000)

    async def auto_create_topic(self, name: str) -> ErrorCode:
        """Metadata-triggered creation with the broker's defaults; LEADER_NOT_AVAILABLE once written."""
        config = self.dynamic_config.config
        partitions, rf, configs = config.num_partitions, config.default_replication_factor, {}
        # The coordinators' topics take their own replication factor where enough brokers are
        # registered, else every broker there is (as the lone broker does), with a warning.
        live = len(self.live_brokers())
        if name == GROUP_METADATA_TOPIC_NAME:
            partitions, rf = config.offsets_topic_num_partitions, self._internal_rf(
                name, config.offsets_topic_replication_factor, "offsets.topic.replication.factor", live)
            configs = {"cleanup.policy": "compact", "segment.bytes": str(config.offsets_topic_segment_bytes)}
        elif name == TRANSACTION_STATE_TOPIC_NAME:
            partitions, rf = config.transaction_state_log_num_partitions, self._internal_rf(
                name, config.transaction_state_log_replication_factor, "transaction.state.log.replication.factor",
                live)
            # min.isr above the replicas there are would refuse every acks=-1 write of the coordinator.
            configs = transaction_topic_configs(min(config.transaction_state_log_min_isr, rf),
                                                config.transaction_state_log_segment_bytes)
        elif name == SHARE_GROUP_STATE_TOPIC_NAME:
            partitions, rf = config.share_coordinator_state_topic_num_partitions, self._internal_rf(
                name, config.share_coordinator_state_topic_replication_factor,
                "share.coordinator.state.topic.replication.factor", live)
            configs = share_group_state_topic_configs(min(config.share_coordinator_state_topic_min_isr, rf),
                                                      config.share_coordinator_state_topic_segment_bytes)
        try:
            plan = self.plan_topic(name, partitions, rf, dict(configs), None)
        except AdminError as exc:
            if exc.error_code == ErrorCode.TOPIC_ALREADY_EXISTS:
                return ErrorCode.LEADER_NOT_AVAILABLE
            log.warning("[KafkaServer id=%d] cannot create %s: %s", self.broker_id, name, exc.message)
            return exc.error_code
        try:
            await self.create_topic(plan, validate_only=False)
        except AdminError as exc:
            if exc.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:
                return exc.error_code
        return ErrorCode.LEADER_NOT_AVAILABLE

    def _internal_rf(self, name: str, wanted: int, config_name: str, live: int) -> int:
        if 0 < live < wanted:
            log.warning("[KafkaServer id=%d] creating %s with replication factor %d: only %d broker(s) are "
                        "registered (%s=%d)", self.broker_id, name, live, live, config_name, wanted)
            return live
        return wanted

    async def ensure_internal_topic(self, name: str) -> ErrorCode:
        """FindCoordinator's: NO_ERROR once every partition has a leader here, else the topic is
        created if missing and the answer is COORDINATOR_NOT_AVAILABLE (the client retries)."""
        topic = self.cache.get(name)
        if topic is not None:
            if self.has_leaders(name, topic.partition_count):
                return ErrorCode.NO_ERROR
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        await self.auto_create_topic(name)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE

    # -- deletion -----------------------------------------------------------------
    async def delete_topic(self, name: str) -> None:
        if name not in self.cache:
            raise AdminError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        if not self.dynamic_config.config.delete_topic_enable:
            raise AdminError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        try:
            await self.client.delete_topic(name)
        except Exception as exc:
            raise _error_of(exc) from None
        log.info("[KafkaServer id=%d] marked topic %s for deletion", self.broker_id, name)

    async def wait_until_deleted(self, names: list[str], timeout_ms: int) -> bool:
        cache = self.cache
        return await cache.wait_until(lambda: not any(n in cache for n in names), max(timeout_ms, 0) / 1000)

    # -- partitions -----------------------------------------------------------------
    async def create_partitions(self, name: str, total: int, assignments: list[list[int]] | None,
                                validate_only: bool) -> None:
        topic = self.cache.get(name)
        if topic is None:
            raise AdminError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        check_partition_increase(topic, total, assignments, self.live_brokers())
        try:
            await self.client.add_partitions(name, total, assignments, validate_only=validate_only)
        except Exception as exc:
            raise _error_of(exc) from None

    # -- configs -------------------------------------------------------------------
    def set_topic_configs_blocking(self, name: str, overrides: dict[str, str]) -> None:
        """AlterConfigs / IncrementalAlterConfigs on a topic, called on the append thread (where the
        config admin runs): /config/topics/T plus a change notification, which every broker follows;
        this broker's logs and cache take the new overrides at once."""
        loop = self.loop
        asyncio.run_coroutine_threadsafe(self.zk.set_topic_configs(name, overrides), loop).result(
            ZK_WRITE_TIMEOUT_S)
        if self._log_manager is not None:
            self._log_manager.update_topic_config(name, overrides)  # on the append thread, as the lone broker's
        loop.call_soon_threadsafe(self.cache.set_topic_configs, name, dict(overrides))
