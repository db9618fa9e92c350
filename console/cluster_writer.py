"""The console's write side: the changes an operator makes from the screens, as Kafka's admin tools make
them (CreateTopics, DeleteTopics, CreatePartitions, IncrementalAlterConfigs, OffsetCommit as a simple
consumer). The web layer offers these only when the console was started with writes allowed."""

from __future__ import annotations

from client.admin import AdminClient, NewTopic
from client.client import KafkaClient
from client.groups import GroupAdmin
from client.metadata import TopicPartition
from protocol.config_types import AlterConfigOp, ConfigResourceType
from protocol.request_constants import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP

#: How ``reset_offsets`` may move a group's offsets, as kafka-consumer-groups.sh's --to-* options.
RESET_STRATEGIES = ("earliest", "latest", "offset", "timestamp")


class ClusterWriter:
    def __init__(self, client: KafkaClient) -> None:
        self.client = client
        self.admin = AdminClient(client)
        self.groups = GroupAdmin(client, timeout=client.timeout)

    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]) -> None:
        self.admin.create_topics([NewTopic(name, partitions, replication_factor, dict(configs))])

    def delete_topic(self, name: str) -> None:
        self.admin.delete_topics([name])

    def add_partitions(self, name: str, total: int) -> None:
        """Grow ``name`` to ``total`` partitions (Kafka never shrinks a topic)."""
        self.admin.create_partitions({name: total})

    def alter_topic_config(self, name: str, key: str, value: str | None) -> None:
        """Set ``key`` on the topic, or remove its override (back to the broker's default) when ``value`` is None."""
        op = (key, AlterConfigOp.SET, value) if value is not None else (key, AlterConfigOp.DELETE, None)
        self.admin.incremental_alter_configs(ConfigResourceType.TOPIC, name, [op])

    def reset_offsets(self, group_id: str, topic: str, strategy: str, value: int | None = None) -> dict[int, int]:
        """Commit new offsets for every partition of ``topic`` (the group must have no members, as Kafka's tool
        requires); returns them by partition."""
        if strategy not in RESET_STRATEGIES:
            raise ValueError(f"strategy: one of {', '.join(RESET_STRATEGIES)}")
        if strategy in ("offset", "timestamp") and value is None:
            raise ValueError(f"--to-{strategy} needs a value")
        partitions = [TopicPartition(topic, p) for p in self.client.partitions_for(topic)]
        if strategy == "offset":
            assert value is not None
            wanted = dict.fromkeys(partitions, value)
        else:
            timestamp = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP}.get(strategy, value)
            assert timestamp is not None
            found = self.client.list_offsets(dict.fromkeys(partitions, timestamp))
            latest = self.client.list_offsets(dict.fromkeys(partitions, LATEST_TIMESTAMP))
            # A timestamp after every record finds no offset (-1): the log end, as Kafka's tool resets to.
            wanted = {tp: o.offset if o.offset >= 0 else latest[tp].offset for tp, o in found.items()}
        self.groups.commit_offsets(group_id, wanted)
        return {tp.partition: offset for tp, offset in sorted(wanted.items())}
