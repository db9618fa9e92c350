"""pafka's own Kafka client: blocking for the CLI tools, spark_jobs and benchmarks; asyncio for the broker.

- :class:`BrokerConnection`: one blocking connection, ApiVersions negotiation,
  generated request/response messages, optional pipelining.
- :class:`AsyncBrokerConnection`: the same on asyncio, for broker-to-broker
  requests and replica fetchers: pipelined requests, per-request timeouts.
- :class:`KafkaClient`: metadata, leaders, Produce, Fetch, ListOffsets.
- :class:`AdminClient`: topics, partitions and configs (the resource types,
  sources and operations it takes are ``protocol.config_types``' enums).
"""

from client.admin import AdminClient, ConfigEntry, CreatedTopic, NewTopic
from client.async_connection import AsyncBrokerConnection
from client.client import (
    FetchResult,
    KafkaClient,
    OffsetAndTimestamp,
    ProduceResult,
    ProducerRecord,
)
from client.connection import BrokerAddress, BrokerConnection, parse_bootstrap_servers
from client.errors import (
    CorrelationIdMismatchError,
    InvalidConfigError,
    InvalidPartitionsError,
    KafkaApiError,
    KafkaClientError,
    KafkaConnectionError,
    KafkaTimeoutError,
    NoCompatibleVersionError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from client.fetch_decoder import CREATE_TIME, LOG_APPEND_TIME, FetchedBatch
from client.metadata import BrokerMetadata, ClusterMetadata, PartitionMetadata, TopicMetadata, TopicPartition
from client.partitioner import murmur2, partition_for_key

__all__ = [
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    "AdminClient",
    "AsyncBrokerConnection",
    "BrokerAddress",
    "BrokerConnection",
    "BrokerMetadata",
    "ClusterMetadata",
    "ConfigEntry",
    "CorrelationIdMismatchError",
    "CreatedTopic",
    "FetchResult",
    "FetchedBatch",
    "InvalidConfigError",
    "InvalidPartitionsError",
    "KafkaApiError",
    "KafkaClient",
    "KafkaClientError",
    "KafkaConnectionError",
    "KafkaTimeoutError",
    "NewTopic",
    "NoCompatibleVersionError",
    "NotLeaderOrFollowerError",
    "OffsetAndTimestamp",
    "OffsetOutOfRangeError",
    "PartitionMetadata",
    "ProduceResult",
    "ProducerRecord",
    "TopicAlreadyExistsError",
    "TopicMetadata",
    "TopicPartition",
    "UnknownTopicOrPartitionError",
    "murmur2",
    "parse_bootstrap_servers",
    "partition_for_key",
]
