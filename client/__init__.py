"""pafka's own synchronous Kafka client (used by the CLI tools and benchmarks).

- :class:`BrokerConnection`: one blocking connection, ApiVersions negotiation,
  generated request/response messages, optional pipelining.
- :class:`KafkaClient`: metadata, leaders, Produce, Fetch, ListOffsets.
- :class:`AdminClient`: topics, partitions and configs (the resource types,
  sources and operations it takes are ``protocol.config_types``' enums).
"""

from client.admin import AdminClient, ConfigEntry, CreatedTopic, NewTopic
from client.client import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    FetchResult,
    KafkaClient,
    OffsetAndTimestamp,
    ProduceResult,
    ProducerRecord,
)
from client.connection import BrokerAddress, BrokerConnection, parse_bootstrap_servers
from client.fetch_decoder import CREATE_TIME, LOG_APPEND_TIME, FetchedBatch
from client.errors import (
    CorrelationIdMismatchError,
    InvalidConfigError,
    InvalidPartitionsError,
    KafkaApiError,
    KafkaClientError,
    KafkaConnectionError,
    NoCompatibleVersionError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from client.metadata import BrokerMetadata, ClusterMetadata, PartitionMetadata, TopicMetadata, TopicPartition
from client.partitioner import murmur2, partition_for_key

__all__ = [
    "AdminClient",
    "BrokerAddress",
    "BrokerConnection",
    "BrokerMetadata",
    "ClusterMetadata",
    "ConfigEntry",
    "CorrelationIdMismatchError",
    "CreatedTopic",
    "EARLIEST_TIMESTAMP",
    "FetchResult",
    "FetchedBatch",
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    "InvalidConfigError",
    "InvalidPartitionsError",
    "KafkaApiError",
    "KafkaClient",
    "KafkaClientError",
    "KafkaConnectionError",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "NewTopic",
    "NoCompatibleVersionError",
    "NotLeaderOrFollowerError",
    "OffsetAndTimestamp",
    "OffsetOutOfRangeError",
    "PartitionMetadata",
    "ProduceResult",
    "ProducerRecord",
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "TopicAlreadyExistsError",
    "TopicMetadata",
    "TopicPartition",
    "UnknownTopicOrPartitionError",
    "murmur2",
    "partition_for_key",
]
