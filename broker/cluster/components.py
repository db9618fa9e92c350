"""The controller-side and replication-side pieces a cluster member runs, as it uses them.

The controller (``controller.kafka_controller``, ``controller.controller_config``),
the ZooKeeper admin client (``controller.admin_zk_client``), the AlterPartition
sender (``replication.alter_partition_manager``) and the replica manager's
cluster-mode calls (``replication.replica_state_changes``) are built beside this
package. A broker needs only a few of their calls: the Protocols below name
exactly those, and the factories build each piece from the broker's config.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from broker.config.broker_config import BrokerConfig
from protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
from protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse

TopicPartition = tuple[str, int]
#: (broker id, host, port) of the controller on the inter-broker listener.
ControllerNode = tuple[int, str, int]


class Controller(Protocol):
    """What the broker asks of its KafkaController (every broker runs one; one is active)."""

    @property
    def is_active(self) -> bool: ...

    async def startup(self) -> None: ...

    async def shutdown(self) -> None: ...

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[int, list[TopicPartition]]: ...

    async def alter_partition(self, request: AlterPartitionRequest) -> AlterPartitionResponse: ...

    async def elect_leaders(self, election_type: int, partitions: list[TopicPartition] | None
                            ) -> dict[TopicPartition, tuple[int, str | None]]: ...


class AdminZkClient(Protocol):
    """Topic changes written to ZooKeeper; the controller acts on them through its watches.
    Refusals raise an exception carrying Kafka's ``error_code`` and ``message``."""

    async def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str],
                           assignment: dict[int, list[int]] | None = None, *, validate_only: bool = False) -> Any: ...

    async def add_partitions(self, name: str, total: int, assignments: list[list[int]] | None = None, *,
                             validate_only: bool = False) -> Any: ...

    async def delete_topic(self, name: str) -> None: ...


class AlterPartitionSender(Protocol):
    async def shutdown(self) -> None: ...


class ReplicaStateChanges(Protocol):
    """The replica manager's cluster-mode side (Kafka's ReplicaManager under a ZooKeeper controller)."""

    controller_epoch: int
    replication_config: Any

    def become_leader_or_follower(self, request: LeaderAndIsrRequest) -> Awaitable[LeaderAndIsrResponse]: ...

    def stop_replicas(self, request: StopReplicaRequest) -> Awaitable[StopReplicaResponse]: ...

    def set_alter_partition_manager(self, manager: Any) -> None: ...

    def start_replication(self) -> None: ...

    async def shutdown_replication(self) -> None: ...


def _attr(module: str, name: str) -> Any:
    return getattr(importlib.import_module(module), name)


def controller_config(config: BrokerConfig) -> Any:
    """The controller's settings, under Kafka's names, from the broker's."""
    config_class = _attr("controller.controller_config", "ControllerConfig")
    return config_class(
        inter_broker_listener_name=config.inter_broker_listener,
        unclean_leader_election_enable=config.unclean_leader_election_enable,
        delete_topic_enable=config.delete_topic_enable,
        auto_leader_rebalance_enable=config.auto_leader_rebalance_enable,
        leader_imbalance_per_broker_percentage=config.leader_imbalance_per_broker_percentage,
        leader_imbalance_check_interval_seconds=float(config.leader_imbalance_check_interval_seconds),
        controller_socket_timeout_ms=config.controller_socket_timeout_ms,
    )


def replication_config(config: BrokerConfig) -> Any:
    """The replica manager's settings (replica.*, num.replica.fetchers) from the broker's."""
    config_class = _attr("replication.replication_config", "ReplicationConfig")
    return config_class(
        replica_lag_time_max_ms=config.replica_lag_time_max_ms,
        num_replica_fetchers=config.num_replica_fetchers,
        replica_fetch_wait_max_ms=config.replica_fetch_wait_max_ms,
        replica_fetch_min_bytes=config.replica_fetch_min_bytes,
        replica_fetch_max_bytes=config.replica_fetch_max_bytes,
        replica_fetch_response_max_bytes=config.replica_fetch_response_max_bytes,
        replica_fetch_backoff_ms=config.replica_fetch_backoff_ms,
        replica_socket_timeout_ms=config.replica_socket_timeout_ms,
    )


def build_controller(config: BrokerConfig, broker_id: int, zk: Any, broker_epoch_fn: Callable[[], int]) -> Controller:
    controller: Controller = _attr("controller.kafka_controller", "KafkaController")(
        controller_config(config), broker_id, zk, broker_epoch_fn)
    return controller


def build_admin_zk_client(zk: Any) -> AdminZkClient:
    client: AdminZkClient = _attr("controller.admin_zk_client", "AdminZkClient")(zk)
    return client


def build_alter_partition_manager(config: BrokerConfig, broker_id: int, broker_epoch_fn: Callable[[], int],
                                  controller_node_fn: Callable[[], ControllerNode | None]) -> AlterPartitionSender:
    manager: AlterPartitionSender = _attr("replication.alter_partition_manager", "AlterPartitionManager")(
        broker_id, broker_epoch_fn, controller_node_fn,
        request_timeout_ms=config.controller_socket_timeout_ms)
    return manager
