"""Topic and config administration over a :class:`KafkaClient`.

Topic changes (CreateTopics, DeleteTopics, CreatePartitions) go to the
controller as Kafka's admin client sends them; configs go to any broker for
topics and to the broker itself for broker resources. Each call raises the
typed error of the first resource that failed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from uuid import UUID

from client.client import KafkaClient
from client.connection import BrokerConnection
from client.errors import KafkaApiError, api_error, check_error
from client.features import FeatureMetadata, feature_metadata
from client.log_dirs import LogDirDescription, log_dir_descriptions
from client.node_api_versions import api_versions_request
from client.scram import ScramMechanism, secure_random_bytes
from protocol.config_types import AlterConfigOp, ConfigResourceType, ConfigSource
from protocol.messages import alter_partition_reassignments as _apr
from protocol.messages import alter_user_scram_credentials as _aus
from protocol.messages import api_versions as _av
from protocol.messages import create_partitions as _cp
from protocol.messages import create_topics as _ct
from protocol.messages import delete_topics as _dt
from protocol.messages import describe_configs as _dc
from protocol.messages import describe_log_dirs as _dld
from protocol.messages import describe_user_scram_credentials as _dus
from protocol.messages import incremental_alter_configs as _iac
from protocol.messages import list_partition_reassignments as _lpr
from protocol.primitives import UUID_ZERO

__all__ = ["AdminClient", "ConfigEntry", "CreatedTopic", "NewTopic", "OngoingReassignment"]


@dataclass(slots=True)
class NewTopic:
    """A topic to create; -1 partitions / replication factor take the broker's defaults."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str | None] = field(default_factory=dict)
    assignments: Mapping[int, Sequence[int]] | None = None


@dataclass(frozen=True, slots=True)
class CreatedTopic:
    name: str
    topic_id: UUID
    num_partitions: int
    replication_factor: int


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    is_sensitive: bool

    @property
    def is_default(self) -> bool:
        return self.source == ConfigSource.DEFAULT_CONFIG


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    """A partition being reassigned: its replica set now, and those being added and removed."""

    replicas: list[int]
    adding: list[int]
    removing: list[int]


class AdminClient:
    """Admin operations on the cluster ``client`` is connected to."""

    def __init__(self, client: KafkaClient, *, timeout_ms: int = 30_000) -> None:
        self.client = client
        self.timeout_ms = timeout_ms

    # ------------------------------------------------------------ topics

    def list_topics(self, *, include_internal: bool = False) -> list[str]:
        cluster = self.client.refresh_metadata(None)
        return sorted(name for name, t in cluster.topics.items() if include_internal or not t.is_internal)

    def create_topics(self, topics: Sequence[NewTopic], *, validate_only: bool = False) -> list[CreatedTopic]:
        request = _ct.CreateTopicsRequest(
            topics=[self._creatable(t) for t in topics], timeout_ms=self.timeout_ms, validate_only=validate_only
        )
        response = self.client.controller_connection().request(request)
        assert isinstance(response, _ct.CreateTopicsResponse)
        created = []
        for result in response.topics:
            check_error(result.error_code, api_name="CreateTopics", topic=result.name, message=result.error_message)
            created.append(CreatedTopic(result.name, result.topic_id, result.num_partitions, result.replication_factor))
        return created

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str | None] | None = None,
        *,
        validate_only: bool = False,
    ) -> CreatedTopic:
        return self.create_topics(
            [NewTopic(name, num_partitions, replication_factor, dict(configs or {}))], validate_only=validate_only
        )[0]

    @staticmethod
    def _creatable(topic: NewTopic) -> _ct.CreatableTopic:
        assignments = [
            _ct.CreatableReplicaAssignment(partition_index=p, broker_ids=list(brokers))
            for p, brokers in (topic.assignments or {}).items()
        ]
        return _ct.CreatableTopic(
            name=topic.name,
            # Kafka requires -1/-1 when explicit assignments are given.
            num_partitions=-1 if assignments else topic.num_partitions,
            replication_factor=-1 if assignments else topic.replication_factor,
            assignments=assignments,
            configs=[_ct.CreatableTopicConfig(name=k, value=v) for k, v in topic.configs.items()],
        )

    def delete_topics(self, names: Iterable[str]) -> None:
        names = list(names)
        conn = self.client.controller_connection()
        version = conn.version_for(_dt.API_KEY)
        if version >= 6:
            request = _dt.DeleteTopicsRequest(
                topics=[_dt.DeleteTopicState(name=n, topic_id=UUID_ZERO) for n in names], timeout_ms=self.timeout_ms
            )
        else:
            request = _dt.DeleteTopicsRequest(topic_names=names, timeout_ms=self.timeout_ms)
        response = conn.request(request, version=version)
        assert isinstance(response, _dt.DeleteTopicsResponse)
        for result in response.responses:
            check_error(result.error_code, api_name="DeleteTopics", topic=result.name, message=result.error_message)
        if self.client.cluster is not None:
            for name in names:
                self.client.cluster.topics.pop(name, None)

    def delete_topic(self, name: str) -> None:
        self.delete_topics([name])

    def create_partitions(self, counts: Mapping[str, int], *, validate_only: bool = False) -> None:
        """Grow each topic to ``counts[topic]`` partitions in total."""
        request = _cp.CreatePartitionsRequest(
            topics=[_cp.CreatePartitionsTopic(name=t, count=n, assignments=None) for t, n in counts.items()],
            timeout_ms=self.timeout_ms,
            validate_only=validate_only,
        )
        response = self.client.controller_connection().request(request)
        assert isinstance(response, _cp.CreatePartitionsResponse)
        for result in response.results:
            check_error(
                result.error_code, api_name="CreatePartitions", topic=result.name, message=result.error_message
            )

    # ------------------------------------------------------------ reassignments

    def alter_partition_reassignments(self, wanted: Mapping[tuple[str, int], Sequence[int] | None]
                                      ) -> dict[tuple[str, int], KafkaApiError | None]:
        """Move each partition to its replicas, or cancel its move (None); per partition, the
        error the controller answered (None: started)."""
        by_topic: dict[str, list[_apr.ReassignablePartition]] = {}
        for (topic, partition), replicas in wanted.items():
            by_topic.setdefault(topic, []).append(_apr.ReassignablePartition(
                partition_index=partition, replicas=None if replicas is None else list(replicas)))
        request = _apr.AlterPartitionReassignmentsRequest(
            timeout_ms=self.timeout_ms,
            topics=[_apr.ReassignableTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
        response = self.client.controller_connection().request(request, version=0)
        assert isinstance(response, _apr.AlterPartitionReassignmentsResponse)
        check_error(response.error_code, api_name="AlterPartitionReassignments", message=response.error_message)
        return {(t.name, p.partition_index): (api_error(p.error_code, api_name="AlterPartitionReassignments",
                                                        topic=t.name, partition=p.partition_index,
                                                        message=p.error_message) if p.error_code else None)
                for t in response.responses for p in t.partitions}

    def list_partition_reassignments(self, partitions: Iterable[tuple[str, int]] | None = None
                                     ) -> dict[tuple[str, int], OngoingReassignment]:
        """The reassignments in progress (of ``partitions``, or all)."""
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in partitions:
                by_topic.setdefault(topic, []).append(partition)
            topics = [_lpr.ListPartitionReassignmentsTopics(name=t, partition_indexes=ps) for t, ps in by_topic.items()]
        request = _lpr.ListPartitionReassignmentsRequest(timeout_ms=self.timeout_ms, topics=topics)
        response = self.client.controller_connection().request(request, version=0)
        assert isinstance(response, _lpr.ListPartitionReassignmentsResponse)
        check_error(response.error_code, api_name="ListPartitionReassignments", message=response.error_message)
        return {(t.name, p.partition_index): OngoingReassignment(list(p.replicas), list(p.adding_replicas),
                                                                 list(p.removing_replicas))
                for t in response.topics for p in t.partitions}

    # ------------------------------------------------------------ configs

    def describe_configs(
        self,
        resource_type: ConfigResourceType,
        resource_name: str,
        keys: Sequence[str] | None = None,
    ) -> dict[str, ConfigEntry]:
        """A resource's configs by name (all of them unless ``keys`` are given)."""
        request = _dc.DescribeConfigsRequest(
            resources=[
                _dc.DescribeConfigsResource(
                    resource_type=int(resource_type),
                    resource_name=resource_name,
                    configuration_keys=None if keys is None else list(keys),
                )
            ],
            include_synonyms=False,
            include_documentation=False,
        )
        response = self._config_connection(resource_type, resource_name).request(request)
        assert isinstance(response, _dc.DescribeConfigsResponse)
        entries: dict[str, ConfigEntry] = {}
        for result in response.results:
            check_error(
                result.error_code, api_name="DescribeConfigs", topic=result.resource_name, message=result.error_message
            )
            for c in result.configs:
                entries[c.name] = ConfigEntry(c.name, c.value, _config_source(c), c.read_only, c.is_sensitive)
        return entries

    def incremental_alter_configs(
        self,
        resource_type: ConfigResourceType,
        resource_name: str,
        operations: Sequence[tuple[str, AlterConfigOp, str | None]],
        *,
        validate_only: bool = False,
    ) -> None:
        """Apply ``(name, op, value)`` changes to one resource's configs."""
        request = _iac.IncrementalAlterConfigsRequest(
            resources=[
                _iac.AlterConfigsResource(
                    resource_type=int(resource_type),
                    resource_name=resource_name,
                    configs=[
                        _iac.AlterableConfig(name=name, config_operation=int(op), value=value)
                        for name, op, value in operations
                    ],
                )
            ],
            validate_only=validate_only,
        )
        response = self._config_connection(resource_type, resource_name).request(request)
        assert isinstance(response, _iac.IncrementalAlterConfigsResponse)
        for result in response.responses:
            check_error(
                result.error_code,
                api_name="IncrementalAlterConfigs",
                topic=result.resource_name,
                message=result.error_message,
            )

    # ------------------------------------------------------------ SCRAM credentials (KIP-554)

    def describe_user_scram_credentials(self, users: Sequence[str] | None = None
                                        ) -> dict[str, list[tuple[ScramMechanism, int]]]:
        """Each user's (mechanism, iterations); every user with a credential when ``users`` is None.
        A user without any raises ResourceNotFound's KafkaApiError, as Kafka's admin client does."""
        names = None if users is None else [_dus.UserName(name=user) for user in users]
        response = self.client.bootstrap_connection().request(_dus.DescribeUserScramCredentialsRequest(users=names))
        assert isinstance(response, _dus.DescribeUserScramCredentialsResponse)
        check_error(response.error_code, api_name="DescribeUserScramCredentials", message=response.error_message)
        described: dict[str, list[tuple[ScramMechanism, int]]] = {}
        for result in response.results:
            check_error(result.error_code, api_name="DescribeUserScramCredentials", message=result.error_message)
            described[result.user] = [(mechanism, info.iterations) for info in result.credential_infos
                                      if (mechanism := ScramMechanism.for_type(info.mechanism)) is not None]
        return described

    def alter_user_scram_credentials(self, upsertions: Sequence[tuple[str, ScramMechanism, str, int]],
                                     deletions: Sequence[tuple[str, ScramMechanism]] = ()) -> None:
        """Upsert ``(user, mechanism, password, iterations)`` and delete ``(user, mechanism)``. The password
        never leaves this process: a random salt and the salted password go, as Kafka's admin client sends."""
        request = _aus.AlterUserScramCredentialsRequest(
            deletions=[_aus.ScramCredentialDeletion(name=user, mechanism=m.type_id) for user, m in deletions],
            upsertions=[_upsertion(user, m, password, iterations) for user, m, password, iterations in upsertions])
        response = self.client.bootstrap_connection().request(request)
        assert isinstance(response, _aus.AlterUserScramCredentialsResponse)
        for result in response.results:
            check_error(result.error_code, api_name="AlterUserScramCredentials", message=result.error_message)

    # ------------------------------------------------------------ features

    def describe_features(self) -> FeatureMetadata:
        """The supported and finalized feature flags, asked of any broker as Kafka's admin client asks them."""
        response = self.client.bootstrap_connection().request(api_versions_request())
        assert isinstance(response, _av.ApiVersionsResponse)
        check_error(response.error_code, api_name="ApiVersions")
        return feature_metadata(response)

    # ------------------------------------------------------------ log dirs

    def describe_log_dirs(self, broker_ids: Iterable[int]) -> dict[int, dict[str, LogDirDescription]]:
        """Each broker's log dirs with every replica they hold, asked of each broker itself."""
        described = {}
        for broker_id in broker_ids:
            response = self.client.connection(broker_id).request(_dld.DescribeLogDirsRequest(topics=None))
            assert isinstance(response, _dld.DescribeLogDirsResponse)
            check_error(response.error_code, api_name="DescribeLogDirs")
            described[broker_id] = log_dir_descriptions(response)
        return described

    def _config_connection(self, resource_type: ConfigResourceType, resource_name: str) -> BrokerConnection:
        # A broker's own configs must be asked of that broker.
        if resource_type in (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER) and resource_name:
            return self.client.connection(int(resource_name))
        return self.client.bootstrap_connection()


def _upsertion(user: str, mechanism: ScramMechanism, password: str, iterations: int) -> _aus.ScramCredentialUpsertion:
    salt = secure_random_bytes()
    return _aus.ScramCredentialUpsertion(name=user, mechanism=mechanism.type_id, iterations=iterations, salt=salt,
                                         salted_password=mechanism.salted_password(password, salt, iterations))


def _config_source(config: _dc.DescribeConfigsResourceResult) -> ConfigSource:
    try:
        source = ConfigSource(config.config_source)
    except ValueError:
        source = ConfigSource.UNKNOWN
    # v0 had only is_default; later versions say where the value came from.
    if source == ConfigSource.UNKNOWN and config.is_default:
        return ConfigSource.DEFAULT_CONFIG
    return source
