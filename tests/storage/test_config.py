"""LogConfig: Kafka's topic property names and defaults, and broker-level defaults."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from broker.config.broker_config import BrokerConfig
from storage.log_config import LONG_MAX, LogConfig


def test_kafka_defaults() -> None:
    config = LogConfig()
    assert (config.segment_bytes, config.segment_ms, config.segment_index_bytes, config.index_interval_bytes) == (
        1073741824, 604800000, 10485760, 4096)
    assert (config.flush_messages, config.flush_ms) == (LONG_MAX, LONG_MAX)
    assert (config.retention_ms, config.retention_bytes, config.file_delete_delay_ms) == (604800000, -1, 60000)
    assert config.cleanup_policy == ["delete"] and config.delete and not config.compact
    assert (config.max_message_bytes, config.message_timestamp_type) == (1048588, "CreateTime")
    assert (config.min_cleanable_dirty_ratio, config.min_compaction_lag_ms, config.delete_retention_ms) == (0.5, 0, 86400000)


def test_dotted_names_overrides_and_validation() -> None:
    config = LogConfig.model_validate({"segment.bytes": "2048", "cleanup.policy": "compact,delete",
                                       "message.timestamp.type": "LogAppendTime"})
    assert config.segment_bytes == 2048 and config.compact and config.delete and config.log_append_time
    assert config.with_overrides({"retention.ms": 5}).retention_ms == 5
    assert LogConfig(segment_bytes=4096).segment_bytes == 4096
    with pytest.raises(ValidationError):
        LogConfig.model_validate({"message.timestamp.type": "Whenever"})


def test_topic_defaults_come_from_the_broker_log_settings() -> None:
    broker = BrokerConfig.model_validate({"log.segment.bytes": "1048576", "log.retention.hours": "1",
                                          "log.cleanup.policy": "compact", "log.flush.interval.messages": "10"})
    config = LogConfig.from_broker_defaults(broker, {"retention.bytes": 99})
    assert config.segment_bytes == 1048576 and config.retention_ms == 3_600_000
    assert config.cleanup_policy == ["compact"] and config.flush_messages == 10 and config.retention_bytes == 99
