"""What ShareFetch and ShareAcknowledge use: the share-partition manager and the share sessions.

Built at start-up when ``group.coordinator.rebalance.protocols`` lists ``share``,
with the Persister the broker wires in (the share coordinator's). A group's
``share.*`` configs (DescribeConfigs/IncrementalAlterConfigs on the GROUP
resource) shape its share partitions; absent ones take Kafka's defaults.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from coordinator.common.scheduler import Scheduler
from coordinator.share.persister import Persister
from coordinator.share.share_partition import SharePartitionConfig
from coordinator.share.share_partition_manager import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    ShareGroupSettings,
    SharePartitionManager,
    ShareReplicaReader,
)
from coordinator.share.share_session_cache import ShareSessionCache

#: Kafka's defaults of the broker's group.share.* configs these group configs fall back to; the broker passes
#: its own values with the group's overrides (coordinator_wiring.share_group_configs).
SHARE_DEFAULTS = {"share.record.lock.duration.ms": 30000, "share.delivery.count.limit": 5,
                  "share.partition.max.record.locks": 2000}


def share_group_settings(configs: Mapping[str, str]) -> ShareGroupSettings:
    """A group's share settings from its ``share.*`` group configs (validated when they were set)."""
    def number(name: str) -> int:
        return int(configs.get(name, SHARE_DEFAULTS[name]))

    partition = SharePartitionConfig(
        record_lock_duration_ms=number("share.record.lock.duration.ms"),
        delivery_count_limit=number("share.delivery.count.limit"),
        max_record_locks=number("share.partition.max.record.locks"),
        renew_acknowledge_enable=configs.get("share.renew.acknowledge.enable", "true").lower() == "true")
    isolation = configs.get("share.isolation.level", "read_uncommitted")
    return ShareGroupSettings(partition, configs.get("share.auto.offset.reset", "latest"),
                              READ_COMMITTED if isolation == "read_committed" else READ_UNCOMMITTED)


@dataclass(slots=True)
class ShareServices:
    manager: SharePartitionManager
    #: A group's share settings (its share.* group configs over Kafka's defaults).
    settings: Callable[[str], ShareGroupSettings]
    sessions: ShareSessionCache = field(default_factory=ShareSessionCache)

    def member_left(self, group_id: str, member_id: str) -> int:
        """The group coordinator removed the member (it left or its session timed out): its share session
        goes, and what it holds here is AVAILABLE again at once. Returns how many records it gave back."""
        return self.manager.release(group_id, member_id, self.sessions.remove_member(group_id, member_id))

    def close(self) -> None:
        self.manager.close()


def build_share_services(replica_manager: ShareReplicaReader, persister: Persister, scheduler: Scheduler,
                         group_configs: Callable[[str], Mapping[str, str]]) -> ShareServices:
    """``group_configs`` gives a group's config overrides (GroupConfigAdmin.current)."""
    def settings(group_id: str) -> ShareGroupSettings:
        return share_group_settings(group_configs(group_id))

    return ShareServices(SharePartitionManager(replica_manager, persister, scheduler, settings), settings)
