"""The controller-side and replication-side pieces a cluster member runs, as it uses them.

The controller (``controller.kafka_controller``), the ZooKeeper admin client
(``controller.admin_zk_client``) and the AlterPartition sender
(``replication.alter_partition_manager``) are built beside this package. A
broker only needs a few of their calls; the Protocols below name exactly those,
and the factories build each piece from the broker's config.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any, Protocol

from protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse

from broker.config.broker_config import BrokerConfig

TopicPartition = tuple[str, int]


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
    """Topic changes written to ZooKeeper; the controller acts on them through its watches."""

    async def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str],
                           assignment: dict[int, list[int]] | None = None) -> None: ...

    async def add_partitions(self, name: str, total: int, assignment: dict[int, list[int]] | None = None,
                             validate_only: bool = False) -> dict[int, list[int]]: ...

    async def delete_topic(self, name: str) -> None: ...


def _attr(module: str, name: str) -> Any:
    return getattr(importlib.import_module(module), name)


def _config_for(config_class: Any, config: BrokerConfig) -> Any:
    """The controller's config from the broker's: its fields are named as BrokerConfig's."""
    from_broker = getattr(config_class, "from_broker_config", None)
    if from_broker is not None:
        return from_broker(config)
    names = [f.name for f in dataclasses.fields(config_class)]
    return config_class(**{name: getattr(config, name) for name in names if hasattr(config, name)})


def build_controller(config: BrokerConfig, broker_id: int, zk: Any, broker_epoch_fn: Callable[[], int]) -> Controller:
    controller_class = _attr("controller.kafka_controller", "KafkaController")
    config_class = _attr("controller.kafka_controller", "ControllerConfig")
    controller: Controller = controller_class(_config_for(config_class, config), broker_id, zk, broker_epoch_fn)
    return controller


def build_admin_zk_client(zk: Any) -> AdminZkClient:
    client: AdminZkClient = _attr("controller.admin_zk_client", "AdminZkClient")(zk)
    return client


def build_alter_partition_manager(broker_id: int, broker_epoch_fn: Callable[[], int],
                                  controller_node_fn: Callable[[], tuple[int, str, int] | None]) -> Any:
    manager_class = _attr("replication.alter_partition_manager", "AlterPartitionManager")
    return manager_class(broker_id, broker_epoch_fn, controller_node_fn)
