"""BrokerTopicMetrics, ReplicaManager and Log metrics, read at scrape time from the replica manager.

Counters come from :class:`~replication.broker_topic_stats.BrokerTopicStats` (kept in place on the
request path); the gauges walk the hosted partitions once per scrape.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.metrics_core import Metric

from broker.metrics.families import Family, RenderedLabels, counter, gauge, labels_text, partition_labels
from replication.broker_topic_stats import TopicCounters
from replication.replica_manager import ReplicaManager

#: (TopicCounters field, Kafka meter without PerSec) of BrokerTopicMetrics.
TOPIC_METERS: tuple[tuple[str, str], ...] = (
    ("messages_in", "MessagesIn"), ("bytes_in", "BytesIn"), ("bytes_out", "BytesOut"),
    ("bytes_rejected", "BytesRejected"), ("failed_produce_requests", "FailedProduceRequests"),
    ("failed_fetch_requests", "FailedFetchRequests"), ("total_produce_requests", "TotalProduceRequests"),
    ("total_fetch_requests", "TotalFetchRequests"))


class ReplicaMetricsCollector:
    """kafka.server BrokerTopicMetrics and ReplicaManager, kafka.log Log."""

    def __init__(self, replica_manager: ReplicaManager) -> None:
        self.replica_manager = replica_manager
        self._topic_labels: RenderedLabels[str] = RenderedLabels(lambda topic: labels_text(topic=topic))
        self._partition_labels: RenderedLabels[tuple[str, int]] = RenderedLabels(partition_labels)

    def collect(self) -> Iterator[Metric]:
        self._topic_labels.next_scrape()
        self._partition_labels.next_scrape()
        yield from self._topic_metrics()
        yield from self._replica_manager_metrics()
        yield from self._log_metrics()

    def _topic_metrics(self) -> Iterator[Metric]:
        stats = self.replica_manager.topic_stats
        all_topics = stats.all_topics()
        topics = [(self._topic_labels[topic], counters) for topic, counters in sorted(stats.topics.items())]
        for field, meter in TOPIC_METERS:
            family = counter(f"kafka_server_brokertopicmetrics_{meter.lower()}",
                             f"kafka.server:type=BrokerTopicMetrics,name={meter}PerSec (Count)")
            family.add(getattr(all_topics, field))
            for labels, counters in topics:
                family.add_rendered(_value(counters, field), labels)
            yield family.metric
        yield counter("kafka_server_brokertopicmetrics_replicationbytesin",
                      "kafka.server:type=BrokerTopicMetrics,name=ReplicationBytesInPerSec (Count)"
                      ).add(stats.replication_bytes_in).metric
        yield counter("kafka_server_brokertopicmetrics_replicationbytesout",
                      "kafka.server:type=BrokerTopicMetrics,name=ReplicationBytesOutPerSec (Count)"
                      ).add(stats.replication_bytes_out).metric

    def _replica_manager_metrics(self) -> Iterator[Metric]:
        under_replicated = under_min_isr = at_min_isr = leaders = 0
        partitions = self.replica_manager.partitions
        for partition in partitions.values():
            if not partition.is_leader:
                continue
            leaders += 1
            isr = len(partition.isr)
            if isr < len(partition.replicas):
                under_replicated += 1
            min_isr = partition.log.config.min_insync_replicas
            if isr < min_isr:
                under_min_isr += 1
            elif isr == min_isr:
                at_min_isr += 1
        isr_changes = self.replica_manager.isr
        for name, value in (("UnderReplicatedPartitions", under_replicated), ("UnderMinIsrPartitionCount", under_min_isr),
                            ("AtMinIsrPartitionCount", at_min_isr), ("LeaderCount", leaders),
                            ("PartitionCount", len(partitions)),
                            # A replica goes offline with a failed log dir; this broker's logs fail the process.
                            ("OfflineReplicaCount", 0)):
            yield _replica_manager_gauge(name, value)
        yield counter("kafka_server_replicamanager_isrshrinks",
                      "kafka.server:type=ReplicaManager,name=IsrShrinksPerSec (Count)").add(isr_changes.isr_shrinks).metric
        yield counter("kafka_server_replicamanager_isrexpands",
                      "kafka.server:type=ReplicaManager,name=IsrExpandsPerSec (Count)").add(isr_changes.isr_expands).metric

    def _log_metrics(self) -> Iterator[Metric]:
        end = gauge("kafka_log_log_logendoffset", "kafka.log:type=Log,name=LogEndOffset")
        start = gauge("kafka_log_log_logstartoffset", "kafka.log:type=Log,name=LogStartOffset")
        size = gauge("kafka_log_log_size", "kafka.log:type=Log,name=Size")
        segments = gauge("kafka_log_log_numlogsegments", "kafka.log:type=Log,name=NumLogSegments")
        rendered = self._partition_labels
        logs = [(rendered[key], partition.log) for key, partition in sorted(self.replica_manager.partitions.items())]
        end.add_all_rendered([(log.log_end_offset, labels) for labels, log in logs])
        start.add_all_rendered([(log.log_start_offset, labels) for labels, log in logs])
        size.add_all_rendered([(log.size, labels) for labels, log in logs])
        segments.add_all_rendered([(len(log.segments), labels) for labels, log in logs])
        for family in (end, start, size, segments):
            yield family.metric


def _value(counters: TopicCounters, field: str) -> int:
    value: int = getattr(counters, field)
    return value


def _replica_manager_gauge(name: str, value: int) -> Metric:
    family: Family = gauge(f"kafka_server_replicamanager_{name.lower()}", f"kafka.server:type=ReplicaManager,name={name}")
    return family.add(value).metric
