"""The enumerated fields of the config APIs, with Kafka's wire values.

DescribeConfigs, AlterConfigs, IncrementalAlterConfigs and CreateTopics carry
these as int8 fields; the values are the ids of Kafka's own enums:

- ``ResourceType`` of every config request and response: Kafka's
  ``ConfigResource.Type`` (UNKNOWN 0, TOPIC 2, BROKER 4, BROKER_LOGGER 8,
  CLIENT_METRICS 16, GROUP 32).
- ``ConfigSource`` of DescribeConfigs v1+ entries and synonyms: Kafka's
  ``DescribeConfigsResponse.ConfigSource`` (0-8; Kafka's Java names
  ``UNKNOWN_CONFIG`` and ``TOPIC_CONFIG`` are the admin client's ``UNKNOWN`` and
  ``DYNAMIC_TOPIC_CONFIG``, used here).
- ``ConfigType`` of DescribeConfigs v3+ entries: Kafka's
  ``DescribeConfigsResponse.ConfigType`` (the ``ConfigDef.Type`` of the key, 0-9).
- ``ConfigOperation`` of IncrementalAlterConfigs: Kafka's
  ``AlterConfigOp.OpType`` (SET 0, DELETE 1, APPEND 2, SUBTRACT 3).

A value this module does not know (a newer Kafka's) raises ValueError when
converted; callers that read it from the wire fall back to ``UNKNOWN`` where
Kafka's own ``forId`` does.
"""

from __future__ import annotations

import enum

__all__ = ["AlterConfigOp", "ConfigResourceType", "ConfigSource", "ConfigType"]


class ConfigResourceType(enum.IntEnum):
    """Kafka's ``ConfigResource.Type``: whose configs a request names."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource(enum.IntEnum):
    """Where a described config's value comes from (Kafka's ``DescribeConfigsResponse.ConfigSource``)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ConfigType(enum.IntEnum):
    """A config key's type as DescribeConfigs v3+ reports it (Kafka's ``DescribeConfigsResponse.ConfigType``)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class AlterConfigOp(enum.IntEnum):
    """IncrementalAlterConfigs' ``ConfigOperation`` (Kafka's ``AlterConfigOp.OpType``)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3
