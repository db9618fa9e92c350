"""LogConfig: per-topic log settings under Kafka's topic property names and defaults.

Each field answers to Kafka's dotted topic-level name (``segment.bytes``) and
to the Python name. ``LogConfig.from_broker_defaults`` derives the defaults
from the broker's ``log.*`` properties, as Kafka does for topics without
overrides.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


def _prop(default: Any, name: str) -> Any:
    return Field(default, alias=name)


class LogConfig(BaseModel):
    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="ignore")

    segment_bytes: int = _prop(1073741824, "segment.bytes")
    segment_ms: int = _prop(604800000, "segment.ms")
    segment_jitter_ms: int = _prop(0, "segment.jitter.ms")
    segment_index_bytes: int = _prop(10485760, "segment.index.bytes")
    index_interval_bytes: int = _prop(4096, "index.interval.bytes")
    # Long.MAX: never forced by the broker, the OS writes back dirty pages.
    flush_messages: int = _prop(LONG_MAX, "flush.messages")
    flush_ms: int = _prop(LONG_MAX, "flush.ms")
    retention_ms: int = _prop(604800000, "retention.ms")
    retention_bytes: int = _prop(-1, "retention.bytes")
    file_delete_delay_ms: int = _prop(60000, "file.delete.delay.ms")
    cleanup_policy: list[str] = _prop(["delete"], "cleanup.policy")
    max_message_bytes: int = _prop(1048588, "max.message.bytes")
    message_timestamp_type: str = _prop("CreateTime", "message.timestamp.type")
    message_timestamp_before_max_ms: int = _prop(LONG_MAX, "message.timestamp.before.max.ms")
    message_timestamp_after_max_ms: int = _prop(3600000, "message.timestamp.after.max.ms")
    min_cleanable_dirty_ratio: float = _prop(0.5, "min.cleanable.dirty.ratio")
    min_compaction_lag_ms: int = _prop(0, "min.compaction.lag.ms")
    max_compaction_lag_ms: int = _prop(LONG_MAX, "max.compaction.lag.ms")
    delete_retention_ms: int = _prop(86400000, "delete.retention.ms")
    preallocate: bool = _prop(False, "preallocate")
    compression_type: str = _prop("producer", "compression.type")
    min_insync_replicas: int = _prop(1, "min.insync.replicas")
    unclean_leader_election_enable: bool = _prop(False, "unclean.leader.election.enable")
    # Kafka's QuotaConfig topic configs (KIP-73): "partition:broker" entries or "*"; the replica
    # manager's quotas read them (replication.replication_quota_manager), the log never does.
    leader_replication_throttled_replicas: list[str] = _prop([], "leader.replication.throttled.replicas")
    follower_replication_throttled_replicas: list[str] = _prop([], "follower.replication.throttled.replicas")

    @field_validator("cleanup_policy", "leader_replication_throttled_replicas",
                     "follower_replication_throttled_replicas", mode="before")
    @classmethod
    def _split_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return value

    @field_validator("message_timestamp_type")
    @classmethod
    def _check_timestamp_type(cls, value: str) -> str:
        if value not in ("CreateTime", "LogAppendTime"):
            raise ValueError("message.timestamp.type must be CreateTime or LogAppendTime")
        return value

    @field_validator("segment_bytes")
    @classmethod
    def _check_segment_bytes(cls, value: int) -> int:
        # Kafka's lower bound is 1 MiB for users (14 bytes internally); tests use
        # small segments, so only the on-disk minimum (one batch header) is enforced.
        if value < 61:
            raise ValueError("segment.bytes must hold at least one batch header")
        return value

    @field_validator("segment_index_bytes")
    @classmethod
    def _check_index_bytes(cls, value: int) -> int:
        if value < 12:
            raise ValueError("segment.index.bytes must hold at least one index entry")
        return value

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    def random_segment_jitter(self) -> int:
        """``segment.jitter.ms``: spread time-based rolls of many partitions, as Kafka does."""
        return random.randrange(self.segment_jitter_ms) if self.segment_jitter_ms > 0 else 0

    def with_overrides(self, overrides: Mapping[str, Any]) -> LogConfig:
        """A copy with topic-level overrides (dotted names) applied."""
        values = self.model_dump(by_alias=True)
        values.update(overrides)
        return LogConfig.model_validate(values)

    @classmethod
    def from_broker_defaults(cls, broker: Any, overrides: Mapping[str, Any] | None = None) -> LogConfig:
        """Topic defaults from a broker config object exposing Kafka's ``log.*`` settings.

        Duck-typed so storage/ does not import broker/: any object with the
        attributes of ``broker.config.broker_config.BrokerConfig`` works.
        """
        mapping = {
            "segment.bytes": getattr(broker, "log_segment_bytes", None),
            "segment.ms": getattr(broker, "roll_ms", None),
            "segment.index.bytes": getattr(broker, "log_index_size_max_bytes", None),
            "index.interval.bytes": getattr(broker, "log_index_interval_bytes", None),
            "flush.messages": getattr(broker, "log_flush_interval_messages", None),
            "flush.ms": getattr(broker, "flush_ms", None),
            "retention.ms": getattr(broker, "retention_ms", None),
            "retention.bytes": getattr(broker, "log_retention_bytes", None),
            "file.delete.delay.ms": getattr(broker, "log_segment_delete_delay_ms", None),
            "cleanup.policy": getattr(broker, "log_cleanup_policy", None),
            "message.timestamp.type": getattr(broker, "log_message_timestamp_type", None),
            "min.cleanable.dirty.ratio": getattr(broker, "log_cleaner_min_cleanable_ratio", None),
            "min.compaction.lag.ms": getattr(broker, "log_cleaner_min_compaction_lag_ms", None),
            "delete.retention.ms": getattr(broker, "log_cleaner_delete_retention_ms", None),
        }
        values = {name: value for name, value in mapping.items() if value is not None}
        values.update(overrides or {})
        return cls.model_validate(values)
