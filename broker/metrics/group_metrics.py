"""Group and transaction coordinator metrics, and consumer lag, computed at scrape time.

Lag is Kafka Exporter's: a group's committed offset against the partition's high watermark, for
the groups this broker coordinates and the partitions it has a replica of (with the usual
replication factor of 3 in a three-broker cluster, every partition).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from prometheus_client.metrics_core import Metric

from broker.metrics.families import RenderedLabels, gauge, labels_text, partition_labels
from coordinator.group.group_coordinator import GroupCoordinator
from coordinator.group.group_metadata import GroupState
from coordinator.transaction.transaction_coordinator import TransactionCoordinator
from replication.replica_manager import ReplicaManager

#: Kafka's GroupMetadataManager gauges per classic group state.
CLASSIC_STATE_GAUGES = {GroupState.STABLE: "NumGroupsStable", GroupState.PREPARING_REBALANCE: "NumGroupsPreparingRebalance",
                        GroupState.COMPLETING_REBALANCE: "NumGroupsCompletingRebalance",
                        GroupState.EMPTY: "NumGroupsEmpty", GroupState.DEAD: "NumGroupsDead"}


class GroupMetricsCollector:
    """kafka.coordinator.group GroupMetadataManager, Kafka's group-coordinator-metrics, Kafka Exporter's lag."""

    def __init__(self, groups: GroupCoordinator, replica_manager: ReplicaManager) -> None:
        self.groups = groups
        self.replica_manager = replica_manager
        self._lag_labels: RenderedLabels[tuple[str, str, int]] = RenderedLabels(_lag_labels)
        self._partition_labels: RenderedLabels[tuple[str, int]] = RenderedLabels(partition_labels)

    def collect(self) -> Iterator[Metric]:
        self._lag_labels.next_scrape()
        self._partition_labels.next_scrape()
        manager = self.groups.manager
        consumer_groups = self.groups.consumer_groups.groups
        classic = [g for group_id, g in manager.groups.items() if group_id not in consumer_groups]
        yield _gmm_gauge("NumGroups", len(classic) + len(consumer_groups))
        classic_states = Counter(g.state for g in classic)
        for state, name in CLASSIC_STATE_GAUGES.items():
            yield _gmm_gauge(name, classic_states[state])
        yield _gmm_gauge("NumOffsets", sum(len(g.offsets) for g in manager.groups.values()))
        by_protocol = gauge("kafka_server_group_coordinator_metrics_group_count",
                            "kafka.server:type=group-coordinator-metrics,protocol=*: group-count")
        by_protocol.add(len(classic), protocol="classic").add(len(consumer_groups), protocol="consumer")
        yield by_protocol.metric
        consumer_states = Counter(str(g.state) for g in consumer_groups.values())
        by_state = gauge("kafka_server_group_coordinator_metrics_consumer_group_count",
                         "kafka.server:type=group-coordinator-metrics,state=*: consumer-group-count")
        for state_name, count in sorted(consumer_states.items()):
            by_state.add(count, state=state_name.lower())
        yield by_state.metric
        yield from self._lag()

    def _lag(self) -> Iterator[Metric]:
        lag = gauge("kafka_consumergroup_lag", "Kafka Exporter: the partition's high watermark minus the group's "
                                               "committed offset")
        current = gauge("kafka_consumergroup_current_offset", "Kafka Exporter: the group's committed offset")
        partitions = self.replica_manager.partitions
        lag_labels = self._lag_labels
        # (labels, committed offset, high watermark) of each group's partitions this broker hosts.
        offsets = [(lag_labels[group_id, topic, index], entry.offset_and_metadata.offset, partition.high_watermark)
                   for group_id, group in sorted(self.groups.manager.groups.items())
                   for (topic, index), entry in sorted(group.offsets.items())
                   if (partition := partitions.get((topic, index))) is not None]
        current.add_all_rendered([(committed, labels) for labels, committed, _ in offsets])
        lag.add_all_rendered([(max(0, high_watermark - committed), labels)
                              for labels, committed, high_watermark in offsets])
        yield lag.metric
        yield current.metric
        newest = gauge("kafka_topic_partition_current_offset", "Kafka Exporter: the partition's high watermark")
        rendered = self._partition_labels
        newest.add_all_rendered([(partition.high_watermark, rendered[key])
                                 for key, partition in sorted(partitions.items()) if partition.is_leader])
        yield newest.metric


class TransactionMetricsCollector:
    """The transaction coordinator's transactions by state (no Kafka MBean counts them: a pafka name)."""

    def __init__(self, transactions: TransactionCoordinator) -> None:
        self.transactions = transactions

    def collect(self) -> Iterator[Metric]:
        states: Counter[str] = Counter()
        for entry in list(self.transactions.txn_manager.transaction_metadata_cache.values()):
            states.update(metadata.state.name for metadata in entry.metadata_per_transactional_id.values())
        family = gauge("pafka_transaction_coordinator_transactions",
                       "Transactional ids this broker coordinates, by transaction state")
        for state, count in sorted(states.items()):
            family.add(count, state=state)
        yield family.metric
        pending = len(self.transactions.marker_channel.pending)
        yield gauge("pafka_transaction_coordinator_pending_markers",
                    "Transactions whose markers are being written").add(pending).metric


def _lag_labels(key: tuple[str, str, int]) -> str:
    group_id, topic, index = key
    return labels_text(consumergroup=group_id, topic=topic, partition=str(index))


def _gmm_gauge(name: str, value: int) -> Metric:
    return gauge(f"kafka_coordinator_group_groupmetadatamanager_{name.lower()}",
                 f"kafka.coordinator.group:type=GroupMetadataManager,name={name}").add(value).metric
