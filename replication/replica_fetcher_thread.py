"""ReplicaFetcherThread: one follower task fetching partitions from one leader broker.

Kafka's ReplicaFetcherThread/AbstractFetcherThread on asyncio: a task that
sends Fetch requests to the source broker over one
:class:`~client.async_connection.AsyncBrokerConnection` and appends what comes
back as follower. Each request:

* is at the highest Fetch version both brokers support (v13+ names topics by
  id, v15+ carries the replica id in ``replica_state``, with the broker epoch);
* asks every partition from the follower's log end offset, with the leader
  epoch the follower knows (the leader fences a stale one) and its log start
  offset, in an incremental fetch session (KIP-227, ``FetchSessionHandler``):
  after the first, full request only the partitions whose fetch offset (or
  epoch, or log start) moved are sent, and the leader answers only partitions
  with something new, so a follower of dozens of idle partitions (the internal
  topics') does not encode, read and decode each of them on every round;
* long-polls at the leader like a consumer's: ``replica.fetch.wait.max.ms``,
  ``replica.fetch.min.bytes``, ``replica.fetch.max.bytes`` per partition and
  ``replica.fetch.response.max.bytes`` per response.

The fetched batches are appended as follower (``Log.append_as_follower``: offsets
and epochs kept, only structure and CRCs checked), on the event loop when the
append cannot block and on the append thread when it can, then the follower's
high watermark becomes min(leader's high watermark, own log end offset).
A partition whose leadership changed since the request went out is skipped.

Errors: OFFSET_OUT_OF_RANGE resets the partition as Kafka does in the simple
case (the leader's log end below ours: truncate to it; ours below the leader's
log start: start over there), found with ListOffsets. Other partition errors and
connection failures back off ``replica.fetch.backoff.ms``. The owner
(``ReplicaFetcherManager``) cancels the task.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from client.async_connection import AsyncBrokerConnection
from client.errors import NoCompatibleVersionError
from client.fetch_session_handler import SESSIONS_MIN_VERSION, FetchRequestData, FetchSessionHandler, SessionPartition
from protocol.errors import ErrorCode
from protocol.messages.fetch import (
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    ForgottenTopic,
    ReplicaState,
)
from protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from protocol.request_constants import EARLIEST_TIMESTAMP, FINAL_EPOCH, INVALID_SESSION_ID, LATEST_TIMESTAMP
from replication.append_thread import AppendThread
from replication.hosted_partitions import HostedPartitions
from replication.partition import Partition
from replication.replication_config import ReplicationConfig
from replication.replication_quota_manager import ReplicationQuotas, should_follower_throttle
from replication.state_change_requests import BrokerEndpoint

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
#: One partition's fetched batches to append: (partition, records, fetch offset, leader epoch,
#: leader's high watermark, leader's log start offset).
FetchedAppend = tuple[Partition, memoryview | bytes | bytearray, int, int, int, int]
FETCH_API_KEY = 1
LIST_OFFSETS_API_KEY = 2
#: The first Fetch version that names topics by id, and the first with replica_state.
TOPIC_IDS_MIN_VERSION = 13
REPLICA_STATE_MIN_VERSION = 15
#: The newest Fetch this follower speaks: v17 adds only a tagged directory id (KIP-853).
MAX_FETCH_VERSION = 17
#: The first Fetch version whose leader checks the follower's last fetched epoch (KIP-320).
TRUNCATION_ON_FETCH_MIN_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_API_KEY = 23
ZERO_UUID = uuid.UUID(int=0)
#: Errors that only need a pause and another try (the leader moves, or a LeaderAndIsr is on its way).
_RETRIABLE = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.LEADER_NOT_AVAILABLE,
})


@dataclass(slots=True)
class PartitionFetchState:
    partition: Partition
    #: The leader epoch the fetcher was started for: a later LeaderAndIsr replaces the state.
    leader_epoch: int
    #: monotonic time before which the partition is not fetched (after an error).
    delayed_until: float = 0.0
    #: Kafka's Truncating state: a leader too old to answer a fetch's last fetched epoch (below
    #: Fetch v12) is asked OffsetForLeaderEpoch first, and the log truncated where it says.
    truncating: bool = True
    #: The leader answered that it knows none of our epochs: fetch without the epoch check.
    epoch_unknown_to_leader: bool = False
    #: How far our log end is behind the leader's high watermark after the last fetch (Kafka's
    #: PartitionFetchState.lag); None until a fetch answered. Caught up (0): never throttled.
    lag: int | None = None

    @property
    def in_sync(self) -> bool:
        """Kafka's isReplicaInSync: the last fetch left nothing to catch up on."""
        return self.lag is not None and self.lag <= 0


class ReplicaFetcherThread:
    def __init__(self, fetcher_id: int, source: BrokerEndpoint, broker_id: int, config: ReplicationConfig,
                 hosted: HostedPartitions, append_thread: AppendThread, quotas: ReplicationQuotas,
                 broker_epoch: int = -1) -> None:
        self.fetcher_id = fetcher_id
        self.source = source
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.config = config
        #: The replica manager's partitions: a partition no longer hosted (or replaced) is not appended to.
        self.hosted = hosted
        self.append_thread = append_thread
        self.quotas = quotas
        self.name = f"ReplicaFetcherThread-{fetcher_id}-{source.broker_id}"
        self.partitions: dict[TopicPartition, PartitionFetchState] = {}
        self._changed = asyncio.Event()
        #: Told of each partition whose high watermark an answer moved (the fetch purgatory's consumers).
        self.on_high_watermark: Callable[[TopicPartition], None] | None = None
        self._connection: AsyncBrokerConnection | None = None
        self._session = FetchSessionHandler()
        self._task: asyncio.Task[None] | None = None
        #: Fetch requests answered (tests and diagnostics).
        self.fetches = 0

    def __repr__(self) -> str:
        return f"{self.name}(partitions={len(self.partitions)})"

    # -- partitions (event loop) ---------------------------------------------------------
    def add_partitions(self, partitions: list[Partition]) -> None:
        for partition in partitions:
            tp = (partition.topic, partition.partition_index)
            self.partitions[tp] = PartitionFetchState(partition, partition.leader_epoch)
        self._changed.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    def remove_partitions(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            self.partitions.pop(tp, None)

    @property
    def idle(self) -> bool:
        return not self.partitions

    @property
    def finished(self) -> bool:
        """The task has ended (or never started)."""
        return self._task is None or self._task.done()

    def close(self) -> None:
        """Cancel the task and close the connection (no wait; ``shutdown`` waits)."""
        if self._task is not None:
            self._task.cancel()
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    async def shutdown(self) -> None:
        task = self._task
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    # -- the loop --------------------------------------------------------------------------
    async def _run(self) -> None:
        backoff = self.config.replica_fetch_backoff_ms / 1000
        while True:
            ready = self._fetchable()
            if not ready:
                await self._wait_for_partitions()
                continue
            try:
                connection = await self._connect()
                if any(state.truncating for state in ready.values()):
                    await self._truncate_before_fetching(connection, ready)
                    ready = {tp: state for tp, state in ready.items() if not state.truncating}
                    if not ready:
                        continue
                fetching = self._unthrottled(ready)
                if not fetching:
                    # Kafka's fetcher with nothing to fetch waits replica.fetch.backoff.ms; the quota
                    # is measured again then.
                    self._delay(list(ready), backoff)
                    continue
                request, version, sent, session_data = self._build_request(connection, fetching)
                timeout = (self.config.replica_socket_timeout_ms + self.config.replica_fetch_wait_max_ms) / 1000
                try:
                    response = await connection.request(request, version=version, timeout=timeout)
                except Exception:
                    self._session.handle_error()
                    raise
                assert isinstance(response, FetchResponse)
                self.fetches += 1
                if session_data is not None:
                    self._session.handle_response(session_data, response.error_code, response.session_id)
                if response.error_code != ErrorCode.NO_ERROR:
                    log.info("[%s] fetch answered %s", self.name, _name(response.error_code))
                    self._delay(list(sent), backoff)
                    await asyncio.sleep(backoff)
                    continue
                await self._process_response(connection, response, sent, backoff)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.info("[%s] error fetching from broker %d at %s:%d: %s", self.name, self.source.broker_id,
                         self.source.host, self.source.port, exc)
                self._disconnect()
                await asyncio.sleep(backoff)

    def _unthrottled(self, ready: dict[TopicPartition, PartitionFetchState]
                     ) -> dict[TopicPartition, PartitionFetchState]:
        """The partitions this request fetches: those the follower quota holds back are left out
        (Kafka's shouldFollowerThrottle), so their leader sends nothing for them."""
        quota = self.quotas.follower
        throttled = quota.throttled_topics
        if not throttled or all(tp[0] not in throttled for tp in ready):
            return ready
        return {tp: state for tp, state in ready.items()
                if not should_follower_throttle(quota, tp, state.in_sync)}

    def _fetchable(self) -> dict[TopicPartition, PartitionFetchState]:
        now = time.monotonic()
        return {tp: state for tp, state in self.partitions.items() if state.delayed_until <= now}

    async def _wait_for_partitions(self) -> None:
        """Nothing to fetch: wait for a partition to be added or the first delay to end."""
        self._changed.clear()
        delays = [s.delayed_until for s in self.partitions.values()]
        timeout = max(min(delays) - time.monotonic(), 0.001) if delays else None
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except TimeoutError:
            pass

    def _delay(self, tps: list[TopicPartition], seconds: float) -> None:
        until = time.monotonic() + seconds
        for tp in tps:
            state = self.partitions.get(tp)
            if state is not None:
                state.delayed_until = until

    async def _connect(self) -> AsyncBrokerConnection:
        connection = self._connection
        if connection is not None and connection.connected:
            return connection
        connection = AsyncBrokerConnection(self.source.host, self.source.port, node_id=self.source.broker_id,
                                           client_id=f"broker-{self.broker_id}-fetcher-{self.fetcher_id}",
                                           request_timeout=self.config.replica_socket_timeout_ms / 1000,
                                           ssl_context=self.config.inter_broker_ssl_context,
                                           sasl=self.config.inter_broker_sasl)
        await connection.connect()
        self._connection = connection
        return connection

    def _disconnect(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    # -- requests --------------------------------------------------------------------------
    def _build_request(self, connection: AsyncBrokerConnection, ready: dict[TopicPartition, PartitionFetchState]
                       ) -> tuple[FetchRequest, int, dict[TopicPartition, tuple[PartitionFetchState, int]],
                                  FetchRequestData | None]:
        """The request, its version, every fetched partition with the offset it is fetched from
        (an incremental answer may carry any of them), and the session's share (None: sessionless)."""
        version = connection.version_for(FETCH_API_KEY, max_version=MAX_FETCH_VERSION)
        if version >= TOPIC_IDS_MIN_VERSION and any(s.partition.topic_id == ZERO_UUID for s in ready.values()):
            version = TOPIC_IDS_MIN_VERSION - 1  # a partition without a topic id is named
        config = self.config
        max_bytes = config.replica_fetch_max_bytes
        epochs_checked = version >= TRUNCATION_ON_FETCH_MIN_VERSION and not config.truncate_to_high_watermark_only
        wanted: dict[TopicPartition, SessionPartition] = {}
        sent: dict[TopicPartition, tuple[PartitionFetchState, int]] = {}
        for tp, state in ready.items():
            log_ = state.partition.log
            fetch_offset = log_.log_end_offset
            # KIP-320: the epoch of our last batch lets the leader tell us where we diverged.
            last_epoch = log_.latest_epoch if epochs_checked and not state.epoch_unknown_to_leader else None
            wanted[tp] = SessionPartition(state.partition.topic_id, fetch_offset,
                                          log_.log_start_offset if version >= 5 else -1, state.leader_epoch,
                                          -1 if last_epoch is None else last_epoch, max_bytes)
            sent[tp] = (state, fetch_offset)
        session_data: FetchRequestData | None = None
        if version >= SESSIONS_MIN_VERSION:
            session_data = self._session.build(wanted, version >= TOPIC_IDS_MIN_VERSION)
            to_send, session_id, epoch = session_data.to_send, session_data.session_id, session_data.epoch
            forgotten = _forgotten_topics(session_data)
        else:
            to_send, session_id, epoch, forgotten = wanted, INVALID_SESSION_ID, FINAL_EPOCH, []
        # Before v15 the replica id is a field of the request; from v15 it is in replica_state.
        old = version < REPLICA_STATE_MIN_VERSION
        request = FetchRequest(
            replica_id=self.broker_id if old else -1,
            replica_state=ReplicaState() if old else ReplicaState(replica_id=self.broker_id,
                                                                  replica_epoch=self.broker_epoch),
            max_wait_ms=config.replica_fetch_wait_max_ms, min_bytes=config.replica_fetch_min_bytes,
            max_bytes=config.replica_fetch_response_max_bytes if version >= 3 else 0x7FFFFFFF, isolation_level=0,
            session_id=session_id, session_epoch=epoch,
            topics=_fetch_topics(to_send), forgotten_topics_data=forgotten)
        return request, version, sent, session_data

    async def _process_response(self, connection: AsyncBrokerConnection, response: FetchResponse,
                                sent: dict[TopicPartition, tuple[PartitionFetchState, int]], backoff: float) -> None:
        names = {state.partition.topic_id: tp[0] for tp, (state, _) in sent.items()}
        appends: list[FetchedAppend] = []
        errors: list[TopicPartition] = []
        out_of_range: list[tuple[TopicPartition, PartitionFetchState]] = []
        diverged: list[tuple[TopicPartition, PartitionFetchState, int, int]] = []
        for topic in response.responses:
            name = topic.topic or names.get(topic.topic_id, "")
            for data in topic.partitions:
                tp = (name, data.partition_index)
                entry = sent.get(tp)
                if entry is None:
                    continue
                state, fetch_offset = entry
                if self.partitions.get(tp) is not state or not self._still_following(state):
                    continue  # leadership changed while the fetch was out
                if data.error_code == ErrorCode.NO_ERROR:
                    divergence = data.diverging_epoch
                    if divergence.epoch >= 0 or divergence.end_offset >= 0:
                        diverged.append((tp, state, divergence.epoch, divergence.end_offset))
                        continue
                    records = data.records
                    if isinstance(records, list | tuple):  # never from a decoder; keep the types honest
                        records = b"".join(bytes(r) for r in records)  # type: ignore[arg-type]
                    payload = records if isinstance(records, bytes | bytearray | memoryview) else b""
                    appends.append((state.partition, payload, fetch_offset, state.leader_epoch,
                                    data.high_watermark, data.log_start_offset))
                elif data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    out_of_range.append((tp, state))
                else:
                    if data.error_code not in _RETRIABLE:
                        log.warning("[%s] %s-%d: fetch answered %s", self.name, *tp, _name(data.error_code))
                    errors.append(tp)
        if appends:
            # On the event loop while no append can block (the common case: no roll, no flush, and
            # nothing queued on the append thread to overtake); the rest on the append thread.
            results = _append_fetched(appends, on_loop=True) if self.append_thread.idle else []
            if len(results) < len(appends):
                results += await self.append_thread.run(_append_fetched, appends[len(results):])
            errors += self._after_appends(appends, results)
        if errors:
            self._delay(errors, backoff)
        for tp, state, epoch, end_offset in diverged:
            try:
                await self._truncate(tp, state, epoch, end_offset)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.error("[%s] %s-%d: truncation to the leader's epoch %d failed: %s", self.name, *tp, epoch, exc)
                self._delay([tp], backoff)
        for tp, state in out_of_range:
            try:
                await self._handle_out_of_range(connection, tp, state)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.info("[%s] %s-%d: cannot reset after OFFSET_OUT_OF_RANGE: %s", self.name, *tp, exc)
                self._delay([tp], backoff)

    def _after_appends(self, appends: list[FetchedAppend], results: list[bool | Exception]) -> list[TopicPartition]:
        """Each appended partition's high watermark and lag; the partitions whose append failed.
        What throttled partitions appended counts against the follower quota, in sync or not
        (Kafka's processPartitionData)."""
        failed: list[TopicPartition] = []
        quota = self.quotas.follower
        throttled_bytes = 0
        for (partition, records, _, _, leader_hw, _), appended in zip(appends, results, strict=True):
            tp = (partition.topic, partition.partition_index)
            if appended is True:
                if partition.update_follower_high_watermark(leader_hw) and self.on_high_watermark is not None:
                    self.on_high_watermark(tp)
                state = self.partitions.get(tp)
                if state is not None:
                    state.lag = max(0, leader_hw - partition.log.log_end_offset)
                if quota.throttled_topics and quota.is_throttled(tp):
                    throttled_bytes += len(records)
            elif isinstance(appended, Exception):
                # One partition's bad data (a corrupt batch, a storage error) holds up only it.
                log.error("[%s] %s-%d: append as follower failed: %s", self.name, *tp, appended)
                failed.append(tp)
        if throttled_bytes:
            quota.record(throttled_bytes)
        return failed

    # -- truncation by leader epoch (KIP-101, KIP-279, KIP-320) -------------------------------
    async def _truncate(self, tp: TopicPartition, state: PartitionFetchState, leader_epoch: int,
                        leader_end_offset: int) -> bool:
        """Truncate to where the leader says its ``leader_epoch`` ends (Kafka's
        getOffsetTruncationState); True when the logs now agree. When we do not know that epoch,
        we cut to the end of the largest one we know below it and the next fetch (or request)
        asks again with that: each round moves down an epoch until both agree (KIP-279)."""
        partition = state.partition
        log_ = partition.log
        end = log_.log_end_offset
        complete = True
        if leader_end_offset < 0:
            # The leader knows none of our epochs: the high watermark is all that is safe, and
            # fetching carries on without the epoch check (else the same answer would come back).
            target = min(log_.high_watermark, end)
            state.epoch_unknown_to_leader = True
        else:
            ours = log_.end_offset_for_epoch(leader_epoch)
            if ours is None:
                # Our log has no epoch at or below the leader's: everything past its end goes.
                target = min(leader_end_offset, end)
            elif ours[0] != leader_epoch:
                target, complete = min(ours[1], end), False
            else:
                target = min(ours[1], leader_end_offset, end)
        if not self._still_following(state) or self.partitions.get(tp) is not state:
            return False
        truncated = await self.append_thread.run(log_.truncate_to, target)
        if truncated:
            log.info("[%s] %s-%d: truncated to offset %d (leader epoch %d ends at %d there)%s", self.name, *tp,
                     target, leader_epoch, leader_end_offset, "" if complete else "; asking again")
        return complete

    async def _truncate_before_fetching(self, connection: AsyncBrokerConnection,
                                        ready: dict[TopicPartition, PartitionFetchState]) -> None:
        """Kafka's Truncating state, for a leader that cannot check a fetch's last fetched epoch
        (below Fetch v12): ask OffsetForLeaderEpoch for our latest epoch's end and truncate there.
        A leader that answers the check in Fetch (and the test switch) needs none of this."""
        config = self.config
        version = connection.version_for(FETCH_API_KEY, max_version=MAX_FETCH_VERSION)
        truncating = {tp: state for tp, state in ready.items() if state.truncating}
        if version >= TRUNCATION_ON_FETCH_MIN_VERSION or config.truncate_to_high_watermark_only:
            for state in truncating.values():
                state.truncating = False
            return
        asked: dict[TopicPartition, tuple[PartitionFetchState, int]] = {}
        for tp, state in truncating.items():
            epoch = state.partition.log.latest_epoch
            if epoch is None:  # nothing to compare: Kafka truncates such a log to its high watermark
                await self._truncate(tp, state, -1, -1)
                state.epoch_unknown_to_leader = False
                state.truncating = False
            else:
                asked[tp] = (state, epoch)
        if not asked:
            return
        try:
            api_version = connection.version_for(OFFSET_FOR_LEADER_EPOCH_API_KEY)
        except NoCompatibleVersionError:
            api_version = -1
        if api_version < 0:  # a leader without leader epochs at all: the old way
            for tp, (state, _) in asked.items():
                await self._truncate(tp, state, -1, -1)
                state.truncating = False
            return
        request = OffsetForLeaderEpochRequest(replica_id=self.broker_id, topics=[
            OffsetForLeaderTopic(topic=name, partitions=[OffsetForLeaderPartition(
                partition=index, current_leader_epoch=state.leader_epoch, leader_epoch=epoch)])
            for (name, index), (state, epoch) in asked.items()])
        response = await connection.request(request, version=api_version)
        assert isinstance(response, OffsetForLeaderEpochResponse)
        backoff = config.replica_fetch_backoff_ms / 1000
        for topic in response.topics:
            for answer in topic.partitions:
                tp = (topic.topic, answer.partition)
                entry = asked.get(tp)
                if entry is None:
                    continue
                state = entry[0]
                if answer.error_code != ErrorCode.NO_ERROR:
                    log.info("[%s] %s-%d: OffsetForLeaderEpoch answered %s", self.name, *tp,
                             _name(answer.error_code))
                    self._delay([tp], backoff)
                elif await self._truncate(tp, state, answer.leader_epoch, answer.end_offset):
                    state.truncating = False

    def _still_following(self, state: PartitionFetchState) -> bool:
        partition = state.partition
        return (not partition.is_leader and partition.leader_epoch == state.leader_epoch
                and self.hosted.get((partition.topic, partition.partition_index)) is partition)

    async def _handle_out_of_range(self, connection: AsyncBrokerConnection, tp: TopicPartition,
                                   state: PartitionFetchState) -> None:
        """Kafka's simple case: our log ends past the leader's (truncate to its end) or before its
        start (start over at its log start offset)."""
        leader_end = await self._list_offset(connection, tp, state, LATEST_TIMESTAMP)
        partition = state.partition
        if leader_end < partition.log.log_end_offset:
            target, fully = leader_end, False
        else:
            target, fully = await self._list_offset(connection, tp, state, EARLIEST_TIMESTAMP), True
        if not self._still_following(state) or self.partitions.get(tp) is not state:
            return
        await self.append_thread.run(_reset_follower_log, partition, target, fully)
        log.info("[%s] %s-%d: out of range; %s at offset %d", self.name, *tp,
                 "restarted" if fully else "truncated", target)

    async def _list_offset(self, connection: AsyncBrokerConnection, tp: TopicPartition,
                           state: PartitionFetchState, timestamp: int) -> int:
        version = connection.version_for(LIST_OFFSETS_API_KEY)
        request = ListOffsetsRequest(replica_id=self.broker_id, topics=[ListOffsetsTopic(name=tp[0], partitions=[
            ListOffsetsPartition(partition_index=tp[1], current_leader_epoch=state.leader_epoch,
                                 timestamp=timestamp)])])
        response = await connection.request(request, version=version)
        assert isinstance(response, ListOffsetsResponse)
        answer = response.topics[0].partitions[0]
        if answer.error_code != ErrorCode.NO_ERROR:
            raise RuntimeError(f"ListOffsets answered {_name(answer.error_code)}")
        if version == 0:
            return answer.old_style_offsets[0] if answer.old_style_offsets else -1
        return answer.offset


def _append_fetched(appends: list[FetchedAppend],
                    on_loop: bool = False) -> list[bool | Exception]:
    """Append each partition's fetched batches as follower, if the partition is still a
    follower at the epoch the fetch was made for and its log still ends at the fetch offset;
    then take the leader's log start offset where it is ahead. Per partition, in order: True
    when done, False when skipped, the exception when the append failed.

    The append thread's, or ``on_loop``: on the event loop, stopping (a shorter list) at the
    first partition whose append could block (a roll, a flush, a busy lock, a log start
    offset to move): that one and the rest are for the append thread."""
    done: list[bool | Exception] = []
    for partition, records, fetch_offset, leader_epoch, _, leader_log_start in appends:
        log_ = partition.log
        if partition.is_leader or partition.leader_epoch != leader_epoch or log_.log_end_offset != fetch_offset:
            done.append(False)
            continue
        try:
            moves_start = 0 <= leader_log_start and log_.log_start_offset < leader_log_start <= log_.high_watermark
            if on_loop:
                if moves_start or (len(records) and log_.try_append_as_follower(records) is None):
                    break
            elif len(records):
                log_.append_as_follower(records)
            if moves_start:
                log_.maybe_increment_log_start_offset(leader_log_start, "leader log start offset incremented")
        except Exception as exc:
            done.append(exc)
            continue
        done.append(True)
    return done


def _fetch_topics(partitions: dict[TopicPartition, SessionPartition]) -> list[FetchTopic]:
    topics: dict[str, FetchTopic] = {}
    for (name, index), p in partitions.items():
        topic = topics.get(name)
        if topic is None:
            topic = topics[name] = FetchTopic(topic=name, topic_id=p.topic_id, partitions=[])
        topic.partitions.append(FetchPartition(
            partition=index, current_leader_epoch=p.current_leader_epoch, fetch_offset=p.fetch_offset,
            last_fetched_epoch=p.last_fetched_epoch, log_start_offset=p.log_start_offset,
            partition_max_bytes=p.max_bytes))
    return list(topics.values())


def _forgotten_topics(session_data: FetchRequestData) -> list[ForgottenTopic]:
    topics: dict[str, ForgottenTopic] = {}
    for (name, index), topic_id in session_data.to_forget.items():
        topic = topics.get(name)
        if topic is None:
            topic = topics[name] = ForgottenTopic(topic=name, topic_id=topic_id, partitions=[])
        topic.partitions.append(index)
    return list(topics.values())


def _reset_follower_log(partition: Partition, target: int, fully: bool) -> None:
    log_ = partition.log
    if fully:
        log_.truncate_fully_and_start_at(target)
    else:
        log_.truncate_to(target)


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
