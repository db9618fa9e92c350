"""pafka's synchronous Kafka client: metadata, produce, fetch and list offsets.

``KafkaClient`` bootstraps from ``bootstrap.servers``, keeps one
:class:`BrokerConnection` per broker, routes each partition's requests to its
leader (from Metadata) and turns per-partition error codes into typed
:class:`KafkaApiError` exceptions. It does no retries of its own: callers (the
console tools, the benchmark clients, later the replica fetcher) decide what a
retriable error means for them, usually ``refresh_metadata()`` and try again.
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID

from client.client_security import ClientSecurity
from client.connection import (
    DEFAULT_CLIENT_ID,
    BrokerAddress,
    BrokerConnection,
    parse_bootstrap_servers,
)
from client.errors import KafkaApiError, KafkaClientError, KafkaConnectionError, api_error, check_error
from client.fetch_decoder import FetchedBatch, decode_fetched_records
from client.metadata import ClusterMetadata, PartitionMetadata, TopicMetadata, TopicPartition
from protocol import compression as _compression
from protocol.errors import ErrorCode
from protocol.messages import fetch as _fetch
from protocol.messages import list_offsets as _list_offsets
from protocol.messages import metadata as _metadata
from protocol.messages import produce as _produce
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse
from protocol.primitives import UUID_ZERO
from protocol.records import Header, Record, build_batch
from protocol.request_constants import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, READ_COMMITTED, READ_UNCOMMITTED

__all__ = ["FetchResult", "KafkaClient", "OffsetAndTimestamp", "ProduceResult", "ProducerRecord"]

# The first versions that name topics by id only (KIP-516).
_PRODUCE_TOPIC_ID_VERSION = 13
_FETCH_TOPIC_ID_VERSION = 13


@dataclass(slots=True)
class ProducerRecord:
    """A record to produce; ``timestamp`` None means now (CreateTime)."""

    value: bytes | None
    key: bytes | None = None
    headers: Sequence[Header] = ()
    timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class ProduceResult:
    topic: str
    partition: int
    base_offset: int
    log_append_time: int
    log_start_offset: int


@dataclass(slots=True)
class FetchResult:
    """One partition of a Fetch: records at or after the fetch offset, in order.

    ``next_offset`` is where the next fetch continues: past the last whole
    batch returned (control and aborted batches included), or the fetch
    offset itself when no whole batch came back.
    """

    topic: str
    partition: int
    batches: list[FetchedBatch]
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    next_offset: int
    error: KafkaApiError | None = None

    @property
    def records(self) -> list[Record]:
        if len(self.batches) == 1:
            return self.batches[0].records
        return [record for batch in self.batches for record in batch.records]


@dataclass(frozen=True, slots=True)
class OffsetAndTimestamp:
    offset: int
    timestamp: int
    leader_epoch: int = -1


@contextlib.contextmanager
def _abandon_on_error(sent: list[BrokerConnection]) -> Iterator[None]:
    """Close connections left with unanswered requests when a pipelined exchange fails.

    Their responses would otherwise answer the next request on that connection.
    """
    try:
        yield
    except BaseException:
        for conn in sent:
            if conn.in_flight:
                conn.close()
        raise


class KafkaClient:
    """A blocking client for one Kafka cluster (any address, not only loopback)."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[BrokerAddress],
        *,
        client_id: str | None = DEFAULT_CLIENT_ID,
        timeout: float = 30.0,
        security: ClientSecurity | None = None,
    ) -> None:
        #: TLS and SASL for every connection (security.protocol and its settings); none: PLAINTEXT.
        self.security = security or ClientSecurity()
        if isinstance(bootstrap_servers, str):
            bootstrap_servers = parse_bootstrap_servers(bootstrap_servers)
        self.bootstrap_servers = list(bootstrap_servers)
        self.client_id = client_id
        self.timeout = timeout
        self.cluster: ClusterMetadata | None = None
        self._bootstrap: BrokerConnection | None = None
        self._connections: dict[int, BrokerConnection] = {}
        self._topic_names: dict[UUID, str] = {}

    # ------------------------------------------------------------ connections

    def connect(self) -> KafkaClient:
        """Connect to the first reachable bootstrap server and load the broker list."""
        self.bootstrap_connection()
        self.refresh_metadata([])
        return self

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()
        if self._bootstrap is not None:
            self._bootstrap.close()
            self._bootstrap = None

    def __enter__(self) -> KafkaClient:
        return self.connect()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def bootstrap_connection(self) -> BrokerConnection:
        """A live connection to any broker (for requests any broker can answer)."""
        if self._bootstrap is not None and self._bootstrap.connected:
            return self._bootstrap
        for conn in self._connections.values():
            # One with requests in flight is mid-exchange: its next frame is not ours.
            if conn.connected and not conn.in_flight:
                return conn
        errors = []
        for address in self.bootstrap_servers:
            conn = BrokerConnection(address.host, address.port, client_id=self.client_id, timeout=self.timeout,
                                    ssl_context=self.security.ssl_context, sasl=self.security.sasl)
            try:
                self._bootstrap = conn.connect()
                return conn
            except KafkaConnectionError as exc:
                errors.append(str(exc))
        raise KafkaConnectionError("no bootstrap server reachable: " + "; ".join(errors))

    def connection(self, node_id: int) -> BrokerConnection:
        """The connection to broker ``node_id`` (opened on first use)."""
        conn = self._connections.get(node_id)
        if conn is not None and conn.connected:
            return conn
        cluster = self.cluster or self.refresh_metadata([])
        broker = cluster.brokers.get(node_id)
        if broker is None:
            cluster = self.refresh_metadata([])
            broker = cluster.brokers.get(node_id)
            if broker is None:
                raise KafkaConnectionError(f"broker {node_id} is not in the cluster metadata")
        conn = BrokerConnection(broker.host, broker.port, client_id=self.client_id, timeout=self.timeout, node_id=node_id,
                                ssl_context=self.security.ssl_context, sasl=self.security.sasl)
        self._connections[node_id] = conn.connect()
        return conn

    def controller_connection(self) -> BrokerConnection:
        """The controller's connection (admin requests), or any broker's if unknown."""
        cluster = self.cluster or self.refresh_metadata([])
        if cluster.controller_id in cluster.brokers:
            return self.connection(cluster.controller_id)
        return self.bootstrap_connection()

    # ------------------------------------------------------------ metadata

    def refresh_metadata(
        self, topics: Iterable[str] | None = None, *, allow_auto_topic_creation: bool = False
    ) -> ClusterMetadata:
        """Fetch metadata (``topics=None``: all topics; ``[]``: brokers only).

        Topics already cached and not asked for stay in the cache, so leaders
        of every partition in use remain known.
        """
        conn = self.bootstrap_connection()
        request = MetadataRequest(
            topics=None if topics is None else [MetadataRequestTopic(name=name) for name in topics],
            allow_auto_topic_creation=allow_auto_topic_creation,
        )
        version = conn.version_for(_metadata.API_KEY)
        if version == 0:
            # v0 has no null topic list: an empty one means "all topics".
            if request.topics is None:
                request.topics = []
            elif not request.topics:
                version = conn.version_for(_metadata.API_KEY, max_version=1)
        response = conn.request(request, version=version)
        assert isinstance(response, MetadataResponse)
        fresh = ClusterMetadata.from_response(response)
        if self.cluster is not None and topics is not None:
            merged = dict(self.cluster.topics)
            merged.update(fresh.topics)
            fresh.topics = merged
        self.cluster = fresh
        for topic in fresh.topics.values():
            if topic.has_topic_id:
                self._topic_names[topic.topic_id] = topic.name
        return fresh

    def topic_metadata(self, topic: str, *, refresh: bool = False) -> TopicMetadata:
        """A topic's metadata; raises its error (UNKNOWN_TOPIC_OR_PARTITION...)."""
        cached = None if refresh or self.cluster is None else self.cluster.topics.get(topic)
        if cached is None or cached.error_code:
            cached = self.refresh_metadata([topic]).topics.get(topic)
        if cached is None:
            raise api_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, api_name="Metadata", topic=topic)
        check_error(cached.error_code, api_name="Metadata", topic=topic)
        return cached

    def partitions_for(self, topic: str) -> list[int]:
        return sorted(self.topic_metadata(topic).partitions)

    def partition_metadata(self, topic: str, partition: int) -> PartitionMetadata:
        meta = self.topic_metadata(topic).partitions.get(partition)
        if meta is None:
            meta = self.topic_metadata(topic, refresh=True).partitions.get(partition)
            if meta is None:
                raise api_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, api_name="Metadata", topic=topic, partition=partition)
        check_error(meta.error_code, api_name="Metadata", topic=topic, partition=partition)
        return meta

    def leader_connection(self, topic: str, partition: int) -> BrokerConnection:
        leader = self.partition_metadata(topic, partition).leader
        if leader < 0:
            raise api_error(ErrorCode.LEADER_NOT_AVAILABLE, api_name="Metadata", topic=topic, partition=partition)
        return self.connection(leader)

    def _topic_id(self, topic: str) -> UUID:
        meta = self.topic_metadata(topic)
        return meta.topic_id

    def _topic_name(self, topic: str, topic_id: UUID) -> str:
        return self._topic_names.get(topic_id, topic) if topic_id != UUID_ZERO else topic

    def _group_by_leader(self, partitions: Iterable[TopicPartition]) -> dict[int, list[TopicPartition]]:
        groups: dict[int, list[TopicPartition]] = defaultdict(list)
        for tp in partitions:
            leader = self.partition_metadata(tp.topic, tp.partition).leader
            if leader < 0:
                raise api_error(ErrorCode.LEADER_NOT_AVAILABLE, api_name="Metadata", topic=tp.topic, partition=tp.partition)
            groups[leader].append(tp)
        return groups

    def _version_with_ids(self, conn: BrokerConnection, api_key: int, id_version: int, topics: Iterable[str]) -> int:
        """The API version to use, capped below the topic-id versions when a topic has no id."""
        version = conn.version_for(api_key)
        if version >= id_version and not all(self._topic_id(t) != UUID_ZERO for t in topics):
            version = conn.version_for(api_key, max_version=id_version - 1)
        return version

    # ------------------------------------------------------------ produce

    def build_batch(
        self, records: Sequence[ProducerRecord], *, compression: int = _compression.NONE
    ) -> bytearray:
        """A RecordBatch v2 of ``records`` with offsets 0..n-1 (the broker assigns real ones)."""
        now = int(time.time() * 1000)
        return build_batch(
            [
                Record(i, now if r.timestamp is None else r.timestamp, r.key, r.value, list(r.headers))
                for i, r in enumerate(records)
            ],
            compression=compression,
        )

    def produce(
        self,
        topic: str,
        partition: int,
        records: Sequence[ProducerRecord],
        *,
        compression: int = _compression.NONE,
        acks: int = -1,
        timeout_ms: int = 30_000,
    ) -> ProduceResult | None:
        """Produce one batch of ``records`` to one partition (None with acks=0)."""
        batch = self.build_batch(records, compression=compression)
        results = self.produce_batches({TopicPartition(topic, partition): batch}, acks=acks, timeout_ms=timeout_ms)
        return results.get(TopicPartition(topic, partition))  # type: ignore[return-value]

    def produce_batches(
        self,
        batches: Mapping[TopicPartition, bytes | bytearray],
        *,
        acks: int = -1,
        timeout_ms: int = 30_000,
        transactional_id: str | None = None,
        raise_errors: bool = True,
    ) -> dict[TopicPartition, ProduceResult | KafkaApiError]:
        """Send already-built batches, one Produce request per leader (pipelined).

        With ``raise_errors`` the first partition error is raised (after all
        responses are read); otherwise errors are returned in place of results.
        acks=0 returns {} since the broker does not answer.
        """
        groups = self._group_by_leader(batches)
        sent: list[BrokerConnection] = []
        results: dict[TopicPartition, ProduceResult | KafkaApiError] = {}
        with _abandon_on_error(sent):
            for leader, tps in groups.items():
                conn = self.connection(leader)
                version = self._version_with_ids(conn, _produce.API_KEY, _PRODUCE_TOPIC_ID_VERSION, {tp.topic for tp in tps})
                request = self._produce_request(tps, batches, version, acks, timeout_ms, transactional_id)
                conn.send(request, version=version, expect_response=acks != 0)
                if acks != 0:
                    sent.append(conn)
            for conn in sent:
                _, response = conn.receive(timeout=self.timeout + timeout_ms / 1000)
                assert isinstance(response, _produce.ProduceResponse)
                results.update(self._produce_results(response))
        if raise_errors:
            for result in results.values():
                if isinstance(result, KafkaApiError):
                    raise result
        return results

    def _produce_request(
        self,
        tps: list[TopicPartition],
        batches: Mapping[TopicPartition, bytes | bytearray],
        version: int,
        acks: int,
        timeout_ms: int,
        transactional_id: str | None,
    ) -> _produce.ProduceRequest:
        by_topic: dict[str, list[_produce.PartitionProduceData]] = defaultdict(list)
        for tp in tps:
            by_topic[tp.topic].append(_produce.PartitionProduceData(index=tp.partition, records=batches[tp]))
        topic_data = []
        for topic, partitions in by_topic.items():
            if version >= _PRODUCE_TOPIC_ID_VERSION:
                topic_data.append(_produce.TopicProduceData(topic_id=self._topic_id(topic), partition_data=partitions))
            else:
                topic_data.append(_produce.TopicProduceData(name=topic, partition_data=partitions))
        return _produce.ProduceRequest(
            transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms, topic_data=topic_data
        )

    def _produce_results(
        self, response: _produce.ProduceResponse
    ) -> dict[TopicPartition, ProduceResult | KafkaApiError]:
        results: dict[TopicPartition, ProduceResult | KafkaApiError] = {}
        for topic_response in response.responses:
            topic = self._topic_name(topic_response.name, topic_response.topic_id)
            for p in topic_response.partition_responses:
                tp = TopicPartition(topic, p.index)
                if p.error_code:
                    message = p.error_message
                    if not message and p.record_errors:
                        message = "; ".join(
                            f"batch record {e.batch_index}: {e.batch_index_error_message}" for e in p.record_errors
                        )
                    results[tp] = api_error(
                        p.error_code, api_name="Produce", topic=topic, partition=p.index, message=message
                    )
                else:
                    results[tp] = ProduceResult(topic, p.index, p.base_offset, p.log_append_time_ms, p.log_start_offset)
        return results

    # ------------------------------------------------------------ fetch

    def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_wait_ms: int = 500,
        min_bytes: int = 1,
        max_bytes: int = 50 * 1024 * 1024,
        partition_max_bytes: int = 1024 * 1024,
        isolation_level: int = READ_UNCOMMITTED,
    ) -> FetchResult:
        """Fetch one partition from ``offset``; raises the partition's error."""
        tp = TopicPartition(topic, partition)
        result = self.fetch_many(
            {tp: offset},
            max_wait_ms=max_wait_ms,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            partition_max_bytes=partition_max_bytes,
            isolation_level=isolation_level,
        ).get(tp)
        if result is None:
            # Kafka always answers every partition asked for; a broker that did not is wrong, not empty.
            raise KafkaClientError(f"Fetch: the broker's answer has no {topic}-{partition}")
        if result.error is not None:
            raise result.error
        return result

    def fetch_many(
        self,
        offsets: Mapping[TopicPartition, int],
        *,
        max_wait_ms: int = 500,
        min_bytes: int = 1,
        max_bytes: int = 50 * 1024 * 1024,
        partition_max_bytes: int = 1024 * 1024,
        isolation_level: int = READ_UNCOMMITTED,
    ) -> dict[TopicPartition, FetchResult]:
        """Fetch many partitions, one sessionless Fetch per leader (pipelined).

        Partition errors do not raise here: each FetchResult carries its
        ``error`` so one bad partition does not hide the others' records.
        """
        groups = self._group_by_leader(offsets)
        sent: list[BrokerConnection] = []
        results: dict[TopicPartition, FetchResult] = {}
        with _abandon_on_error(sent):
            for leader, tps in groups.items():
                conn = self.connection(leader)
                request, version = self.fetch_request(
                    conn,
                    {tp: offsets[tp] for tp in tps},
                    max_wait_ms=max_wait_ms,
                    min_bytes=min_bytes,
                    max_bytes=max_bytes,
                    partition_max_bytes=partition_max_bytes,
                    isolation_level=isolation_level,
                )
                conn.send(request, version=version)
                sent.append(conn)
            for conn in sent:
                _, response = conn.receive(timeout=self.timeout + max_wait_ms / 1000)
                assert isinstance(response, _fetch.FetchResponse)
                check_error(response.error_code, api_name="Fetch")
                results.update(self._fetch_results(response, offsets, isolation_level))
        return results

    def fetch_request(
        self,
        conn: BrokerConnection,
        offsets: Mapping[TopicPartition, int],
        *,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        partition_max_bytes: int,
        isolation_level: int,
    ) -> tuple[_fetch.FetchRequest, int]:
        """A sessionless Fetch of ``offsets`` from ``conn``'s broker, and the version to send it at.

        The version is the highest both sides support, below the topic-id
        versions when a topic has no id. For callers that read the response
        themselves (the Spark source decodes records column-wise).
        """
        version = self._version_with_ids(conn, _fetch.API_KEY, _FETCH_TOPIC_ID_VERSION, {tp.topic for tp in offsets})
        by_topic: dict[str, list[_fetch.FetchPartition]] = defaultdict(list)
        for tp in offsets:
            by_topic[tp.topic].append(
                _fetch.FetchPartition(
                    partition=tp.partition,
                    current_leader_epoch=-1,
                    fetch_offset=offsets[tp],
                    last_fetched_epoch=-1,
                    log_start_offset=-1,
                    partition_max_bytes=partition_max_bytes,
                )
            )
        topics = []
        for topic, partitions in by_topic.items():
            if version >= _FETCH_TOPIC_ID_VERSION:
                topics.append(_fetch.FetchTopic(topic_id=self._topic_id(topic), partitions=partitions))
            else:
                topics.append(_fetch.FetchTopic(topic=topic, partitions=partitions))
        # Session id 0 with epoch -1 (FINAL_EPOCH) is a full fetch that opens no
        # KIP-227 session: every request names all its partitions.
        request = _fetch.FetchRequest(
            replica_id=-1,
            max_wait_ms=max_wait_ms,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            isolation_level=isolation_level,
            session_id=0,
            session_epoch=-1,
            topics=topics,
            forgotten_topics_data=[],
            rack_id="",
        )
        return request, version

    def _fetch_results(
        self, response: _fetch.FetchResponse, offsets: Mapping[TopicPartition, int], isolation_level: int
    ) -> dict[TopicPartition, FetchResult]:
        results = {}
        for topic_response in response.responses:
            topic = self._topic_name(topic_response.topic, topic_response.topic_id)
            for p in topic_response.partitions:
                tp = TopicPartition(topic, p.partition_index)
                fetch_offset = offsets.get(tp, 0)
                result = FetchResult(
                    topic, p.partition_index, [], p.high_watermark, p.last_stable_offset, p.log_start_offset, fetch_offset
                )
                if p.error_code:
                    result.error = api_error(p.error_code, api_name="Fetch", topic=topic, partition=p.partition_index)
                elif p.records is not None:
                    aborted = p.aborted_transactions if isolation_level == READ_COMMITTED else None
                    # A decoded response's records are a memoryview of its frame; the field's type is what encoders accept.
                    result.batches, result.next_offset = decode_fetched_records(
                        p.records, fetch_offset, aborted)  # type: ignore[arg-type]
                results[tp] = result
        return results

    # ------------------------------------------------------------ list offsets

    def list_offsets(
        self, timestamps: Mapping[TopicPartition, int], *, isolation_level: int = READ_UNCOMMITTED
    ) -> dict[TopicPartition, OffsetAndTimestamp]:
        """The offset for each partition's timestamp (or EARLIEST/LATEST/MAX_TIMESTAMP).

        Per Kafka, a timestamp later than every record gives offset -1.
        Partition errors raise.
        """
        results: dict[TopicPartition, OffsetAndTimestamp] = {}
        for leader, tps in self._group_by_leader(timestamps).items():
            conn = self.connection(leader)
            by_topic: dict[str, list[_list_offsets.ListOffsetsPartition]] = defaultdict(list)
            for tp in tps:
                by_topic[tp.topic].append(
                    _list_offsets.ListOffsetsPartition(
                        partition_index=tp.partition, current_leader_epoch=-1, timestamp=timestamps[tp]
                    )
                )
            request = _list_offsets.ListOffsetsRequest(
                replica_id=-1,
                isolation_level=isolation_level,
                topics=[_list_offsets.ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
                timeout_ms=int(self.timeout * 1000),
            )
            response = conn.request(request)
            assert isinstance(response, _list_offsets.ListOffsetsResponse)
            for t in response.topics:
                for p in t.partitions:
                    check_error(p.error_code, api_name="ListOffsets", topic=t.name, partition=p.partition_index)
                    results[TopicPartition(t.name, p.partition_index)] = OffsetAndTimestamp(
                        p.offset, p.timestamp, p.leader_epoch
                    )
        return results

    def earliest_offset(self, topic: str, partition: int) -> int:
        tp = TopicPartition(topic, partition)
        return self.list_offsets({tp: EARLIEST_TIMESTAMP})[tp].offset

    def latest_offset(self, topic: str, partition: int) -> int:
        tp = TopicPartition(topic, partition)
        return self.list_offsets({tp: LATEST_TIMESTAMP})[tp].offset

    def offset_for_timestamp(self, topic: str, partition: int, timestamp: int) -> OffsetAndTimestamp:
        tp = TopicPartition(topic, partition)
        return self.list_offsets({tp: timestamp})[tp]
