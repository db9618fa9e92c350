"""ReplicationQuotaManager: Kafka's replication throttles (KIP-73), used by partition reassignment.

Three per broker, owned by the replica manager (Kafka's QuotaManagers.leader, .follower and
.alterLogDirs):

* the leader quota (``leader.replication.throttled.rate``) bounds what this broker
  serves to followers fetching partitions listed for it in a topic's
  ``leader.replication.throttled.replicas``;
* the follower quota (``follower.replication.throttled.rate``) bounds what this
  broker's fetchers take for partitions listed for it in
  ``follower.replication.throttled.replicas``;
* the alter-log-dirs quota (``replica.alter.log.dirs.io.max.bytes.per.second``) bounds
  what this broker copies into future logs, moving replicas between its log dirs
  (every partition moving counts: no throttled-replicas list).

A throttled-replicas list is Kafka's: ``"*"`` (every replica of the topic) or
``partition:broker`` entries. Each broker keeps the partitions whose entry names
*itself* (Kafka's TopicConfigHandler.parseThrottledPartitions), so throttling is
per partition: a leader listed for a partition throttles every follower fetching
it, and a follower listed throttles its own fetches of it. A replica in sync is
never held back (Kafka's "to avoid ISR thrashing"), but its bytes of throttled
partitions count all the same.

The rate is Kafka's SimpleRate over a windowed sum: ``replication.quota.window.num``
(11) samples of ``replication.quota.window.size.seconds`` (1 s) each; the rate is
the bytes in the live samples over the time since the oldest began, and never
over less than one window, so a first burst does not measure as infinite. The
quota is exceeded while that rate is above the bound. Recording never refuses:
what was read is counted, and the next check holds the partitions back until
the average comes down (Kafka records with QuotaEnforcementType.NONE).

Threads: the rate is recorded and measured on the event loop (fetches). The
bound and the throttled partitions change from the append thread (config
changes); both are replaced whole by a single assignment, so a fetch reading
them on the loop sees the old or the new value, never a half-made one.
"""

from __future__ import annotations

import enum
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

LONG_MAX: Final = 2**63 - 1
#: Kafka's QuotaConfig.QUOTA_BYTES_PER_SECOND_DEFAULT: no bound.
QUOTA_BYTES_PER_SECOND_DEFAULT: Final = LONG_MAX
#: replication.quota.window.num's default: ten whole windows and the current one.
DEFAULT_NUM_QUOTA_SAMPLES: Final = 11
#: replication.quota.window.size.seconds's default.
DEFAULT_QUOTA_WINDOW_SIZE_SECONDS: Final = 1

LEADER_REPLICATION_THROTTLED_RATE: Final = "leader.replication.throttled.rate"
FOLLOWER_REPLICATION_THROTTLED_RATE: Final = "follower.replication.throttled.rate"
LEADER_REPLICATION_THROTTLED_REPLICAS: Final = "leader.replication.throttled.replicas"
FOLLOWER_REPLICATION_THROTTLED_REPLICAS: Final = "follower.replication.throttled.replicas"
REPLICA_ALTER_LOG_DIRS_IO_MAX_BYTES_PER_SECOND: Final = "replica.alter.log.dirs.io.max.bytes.per.second"
#: Kafka's ThrottledReplicaListValidator.toString, quoted in its refusals.
THROTTLED_REPLICAS_FORMAT: Final = "[partitionId]:[brokerId],[partitionId]:[brokerId],..."


class QuotaType(enum.Enum):
    """Kafka's QuotaType names of the two replication quotas."""

    LEADER_REPLICATION = "LeaderReplication"
    FOLLOWER_REPLICATION = "FollowerReplication"
    ALTER_LOG_DIRS_REPLICATION = "AlterLogDirsReplication"


class _AllReplicas(enum.Enum):
    ALL = "*"


#: Every partition of the topic is throttled ("*"), on whichever broker.
ALL_REPLICAS: Final = _AllReplicas.ALL
ThrottledPartitions = frozenset[int] | Literal[_AllReplicas.ALL]

# ASCII digits only, as Java's [0-9] (Python's \d would take other scripts' digits too).
_REPLICA_ENTRY = re.compile(r"[0-9]+:[0-9]+")


# -- the throttled-replicas topic configs ------------------------------------------------------
def is_valid_throttled_replicas(entries: Sequence[str]) -> bool:
    """Kafka's ThrottledReplicaListValidator: every entry ``partition:broker`` (or empty), or
    the whole list the literal ``*``."""
    items = [entry.strip() for entry in entries]
    return all(not item or _REPLICA_ENTRY.fullmatch(item) for item in items) or "".join(items) == "*"


def throttled_partitions(entries: Sequence[str], broker_id: int) -> ThrottledPartitions:
    """Kafka's parseThrottledPartitions: the partitions whose entry names ``broker_id`` (all for
    ``*``). ValueError for a list Kafka's validator refuses."""
    if not is_valid_throttled_replicas(entries):
        raise ValueError(f"must be the literal '*' or a list of replicas in the following format: "
                         f"{THROTTLED_REPLICAS_FORMAT}")
    items = [entry.strip() for entry in entries if entry.strip()]
    if items == ["*"]:
        return ALL_REPLICAS
    named = (item.split(":") for item in items)
    return frozenset(int(partition) for partition, broker in named if int(broker) == broker_id)


# -- the rate ------------------------------------------------------------------------------------
@dataclass(slots=True)
class _Sample:
    start_ms: float
    last_event_ms: float
    value: float = 0.0

    def reset(self, now_ms: float) -> None:
        self.start_ms = self.last_event_ms = now_ms
        self.value = 0.0


@dataclass(slots=True)
class SimpleRate:
    """Kafka's SimpleRate over a WindowedSum (a SampledStat): bytes per second."""

    num_samples: int = DEFAULT_NUM_QUOTA_SAMPLES
    window_ms: float = DEFAULT_QUOTA_WINDOW_SIZE_SECONDS * 1000.0
    _samples: list[_Sample] = field(default_factory=list)
    _current: int = 0

    def record(self, value: float, now_ms: float) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.last_event_ms = now_ms

    def measure(self, now_ms: float) -> float:
        """The sum of the live samples per second of :meth:`window_size_ms`."""
        self._purge_obsolete_samples(now_ms)
        total = sum(sample.value for sample in self._samples)
        return total / (self.window_size_ms(now_ms) / 1000.0)

    def window_size_ms(self, now_ms: float) -> float:
        """The time since the oldest live sample began, never less than one window."""
        return max(now_ms - self._oldest_start_ms(now_ms), self.window_ms)

    def _oldest_start_ms(self, now_ms: float) -> float:
        return min((sample.start_ms for sample in self._samples), default=now_ms)

    def _current_sample(self, now_ms: float) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: float) -> _Sample:
        # One sample more than the window count: the oldest may still overlap the measured span.
        self._current = (self._current + 1) % (self.num_samples + 1)
        if self._current >= len(self._samples):
            self._samples.append(_Sample(now_ms, now_ms))
        else:
            self._samples[self._current].reset(now_ms)
        return self._samples[self._current]

    def _purge_obsolete_samples(self, now_ms: float) -> None:
        """A sample with no event in the last num_samples windows no longer counts."""
        expire_age = self.num_samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_age:
                sample.reset(now_ms)


# -- the quota manager ------------------------------------------------------------------------------
class ReplicationQuotaManager:
    """Kafka's ReplicationQuotaManager: a byte rate with a bound, and the throttled partitions."""

    def __init__(self, quota_type: QuotaType, bound: float = QUOTA_BYTES_PER_SECOND_DEFAULT,
                 num_samples: int = DEFAULT_NUM_QUOTA_SAMPLES,
                 window_size_seconds: float = DEFAULT_QUOTA_WINDOW_SIZE_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``clock``: seconds, monotonic (tests pass their own to step time)."""
        self.quota_type = quota_type
        self.num_quota_samples = num_samples
        self.quota_window_size_seconds = window_size_seconds
        self._bound = float(bound)
        self._rate = SimpleRate(num_samples, window_size_seconds * 1000.0)
        self._clock = clock
        #: topic → its partitions throttled on this broker. Read on every follower fetch: empty
        #: (falsy) while nothing is throttled, so an unthrottled fetch pays one truth test.
        self.throttled_topics: Mapping[str, ThrottledPartitions] = {}

    def __repr__(self) -> str:
        return f"ReplicationQuotaManager({self.quota_type.value}, bound={self.upper_bound})"

    @property
    def upper_bound(self) -> int:
        return int(min(self._bound, LONG_MAX))

    def update_quota(self, bytes_per_second: float) -> None:
        """A new bound (the dynamic broker config changed); the measured history stays."""
        self._bound = float(bytes_per_second)
        log.info("%s: replication quota now %d bytes/s", self.quota_type.value, self.upper_bound)

    def is_quota_exceeded(self) -> bool:
        """The measured rate is above the bound (never without one: Long.MAX is no bound)."""
        if self._bound >= LONG_MAX:
            return False
        return self._rate.measure(self._now_ms()) > self._bound

    def record(self, value: int) -> None:
        """Count bytes replicated for throttled partitions, whatever the rate now is."""
        self._rate.record(value, self._now_ms())

    def rate(self) -> float:
        """The measured bytes/second (diagnostics and tests)."""
        return self._rate.measure(self._now_ms())

    def is_throttled(self, tp: TopicPartition) -> bool:
        partitions = self.throttled_topics.get(tp[0])
        return partitions is not None and (partitions is ALL_REPLICAS or tp[1] in partitions)

    def mark_throttled(self, topic: str, partitions: ThrottledPartitions) -> None:
        """These partitions of ``topic`` (all for ALL_REPLICAS) replace its previous ones."""
        # A new mapping, never a mutation: the fetch path reads it on the loop without a lock.
        self.throttled_topics = {**self.throttled_topics, topic: partitions}

    def remove_throttle(self, topic: str) -> None:
        if topic in self.throttled_topics:
            self.throttled_topics = {t: p for t, p in self.throttled_topics.items() if t != topic}

    def update_throttled_list(self, topic: str, entries: Sequence[str], broker_id: int) -> None:
        """Kafka's TopicConfigHandler.updateThrottledList: a topic's throttled-replicas config
        (already split on commas) for this broker; an empty one lifts the throttle."""
        if not entries:
            self.remove_throttle(topic)
            return
        try:
            partitions = throttled_partitions(entries, broker_id)
        except ValueError as exc:
            # Only a value written around the admin APIs' validation gets here: it throttles nothing.
            log.error("%s: throttled replicas of topic %s ignored: %s", self.quota_type.value, topic, exc)
            self.remove_throttle(topic)
            return
        self.mark_throttled(topic, partitions)

    def _now_ms(self) -> float:
        return self._clock() * 1000.0


def should_leader_throttle(quota: ReplicationQuotaManager, tp: TopicPartition, isr: Sequence[int],
                           replica_id: int) -> bool:
    """Kafka's ReplicaManager.shouldLeaderThrottle: a follower's fetch of ``tp`` gets no records
    while the partition is throttled here and the leader quota is exceeded, unless that follower
    is in the ISR (throttling it could push it out, and acks=all would stall with it)."""
    return replica_id not in isr and quota.is_throttled(tp) and quota.is_quota_exceeded()


def should_follower_throttle(quota: ReplicationQuotaManager, tp: TopicPartition, in_sync: bool) -> bool:
    """Kafka's ReplicaFetcherThread.shouldFollowerThrottle: a partition is left out of the fetch
    while it is throttled here and the follower quota is exceeded, unless caught up with the
    leader (then it has nothing to catch up on and must not fall behind)."""
    return not in_sync and quota.is_throttled(tp) and quota.is_quota_exceeded()


@dataclass(frozen=True, slots=True)
class ReplicationQuotas:
    """The replica manager's three quotas (Kafka's QuotaManagers.leader, .follower and .alterLogDirs)."""

    leader: ReplicationQuotaManager = field(
        default_factory=lambda: ReplicationQuotaManager(QuotaType.LEADER_REPLICATION))
    follower: ReplicationQuotaManager = field(
        default_factory=lambda: ReplicationQuotaManager(QuotaType.FOLLOWER_REPLICATION))
    alter_log_dirs: ReplicationQuotaManager = field(
        default_factory=lambda: ReplicationQuotaManager(QuotaType.ALTER_LOG_DIRS_REPLICATION))

    def update_rates(self, leader_rate: int, follower_rate: int,
                     alter_log_dirs_rate: int = QUOTA_BYTES_PER_SECOND_DEFAULT) -> None:
        """Kafka's BrokerConfigHandler: the broker's throttled rates (dynamic broker configs)."""
        for quota, rate in ((self.leader, leader_rate), (self.follower, follower_rate),
                            (self.alter_log_dirs, alter_log_dirs_rate)):
            if rate != quota.upper_bound:
                quota.update_quota(rate)

    def update_throttled_replicas(self, topic: str, leader_entries: Sequence[str],
                                  follower_entries: Sequence[str], broker_id: int) -> None:
        """A topic's two throttled-replicas configs changed (or were loaded)."""
        self.leader.update_throttled_list(topic, leader_entries, broker_id)
        self.follower.update_throttled_list(topic, follower_entries, broker_id)
