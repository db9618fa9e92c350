"""KafkaController and ControllerStats metrics: this broker's controller if it is the active one."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.metrics_core import Metric

from broker.membership import Membership
from broker.metadata_view import TopicRegistry
from broker.metrics.families import Timer, counter, gauge

#: Kafka's ControllerState values, by the controller event that runs (Idle, 0, when none does).
CONTROLLER_STATES = {
    "Startup": 1, "ControllerChange": 1, "Reelect": 1, "Expire": 1, "BrokerChange": 2, "BrokerModifications": 2,
    "TopicChange": 3, "TopicDeletion": 4, "TopicDeletionStopReplicaResponseReceived": 4,
    "ApiPartitionReassignment": 5, "PartitionReassignment": 5, "PartitionReassignmentIsrChange": 5,
    "AutoPreferredReplicaLeaderElection": 6, "ReplicaLeaderElection": 7, "ControlledShutdown": 8,
    "IsrChangeNotification": 9, "AlterPartition": 9, "LogDirEventNotification": 11,
    "ListPartitionReassignments": 15,
}


class ControllerMetricsCollector:
    """kafka.controller KafkaController and ControllerStats.

    A lone broker is its own one-broker cluster's controller: ActiveControllerCount 1, and the
    global counts from its own metadata. In a cluster only the active controller reports 1 and the
    cluster-wide figures, as Kafka's do (the others report 0).
    """

    def __init__(self, membership: Membership, metadata: TopicRegistry) -> None:
        self.membership = membership
        self.metadata = metadata

    def collect(self) -> Iterator[Metric]:
        controller = self.membership.controller
        if controller is None:
            topics = list(self.metadata)
            yield from _controller_gauges(1, 0, len(topics), sum(len(t.partitions) for t in topics), 0)
            yield from _election_metrics([], 0, 0)
            return
        active = controller.is_active
        context = controller.context
        current = controller.event_manager.current
        state = 0 if current is None else CONTROLLER_STATES.get(current.name, 0)
        yield from _controller_gauges(
            int(active), context.offline_partition_count() if active else 0, len(context.all_topics) if active else 0,
            len(context.partition_states) if active else 0, state)
        elections = controller.partition_state_machine
        yield from _election_metrics(list(elections.election_times_ms), elections.elections,
                                     elections.unclean_elections)


def _controller_gauges(active: int, offline: int, topics: int, partitions: int, state: int) -> Iterator[Metric]:
    for name, value in (("ActiveControllerCount", active), ("OfflinePartitionsCount", offline),
                        ("GlobalTopicCount", topics), ("GlobalPartitionCount", partitions),
                        ("ControllerState", state)):
        yield gauge(f"kafka_controller_kafkacontroller_{name.lower()}",
                    f"kafka.controller:type=KafkaController,name={name}").add(value).metric


def _election_metrics(times_ms: list[float], elections: int, unclean: int) -> Iterator[Metric]:
    yield Timer("kafka_controller_controllerstats_leaderelectionrateandtimems",
                "kafka.controller:type=ControllerStats,name=LeaderElectionRateAndTimeMs").add(times_ms, elections).metric
    yield counter("kafka_controller_controllerstats_uncleanleaderelections",
                  "kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec").add(unclean).metric
