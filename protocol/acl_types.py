"""The enumerated fields of the ACL APIs, with Kafka's wire values and names.

CreateAcls, DescribeAcls and DeleteAcls carry these as int8 fields; the values
are the codes of Kafka's own enums (``org.apache.kafka.common.acl`` and
``org.apache.kafka.common.resource``):

- ``ResourceType``: UNKNOWN 0, ANY 1, TOPIC 2, GROUP 3, CLUSTER 4,
  TRANSACTIONAL_ID 5, DELEGATION_TOKEN 6, USER 7.
- ``PatternType``: UNKNOWN 0, ANY 1, MATCH 2, LITERAL 3, PREFIXED 4.
- ``AclOperation``: UNKNOWN 0, ANY 1, ALL 2, READ 3 ... DESCRIBE_TOKENS 14.
- ``AclPermissionType``: UNKNOWN 0, ANY 1, DENY 2, ALLOW 3.

``kafka_name`` is the spelling ZooKeeper's ACL znodes and ``kafka-acls.sh``
use (``Topic``, ``TransactionalId``, ``DescribeConfigs``, ``Allow``): Kafka's
SecurityUtils turns UPPER_SNAKE names into UpperCamel ones.
"""

from __future__ import annotations

import enum
from typing import Self, TypeVar

__all__ = ["CLUSTER_NAME", "WILDCARD_RESOURCE", "AclOperation", "AclPermissionType", "PatternType", "ResourceType", "known"]

#: The one name a CLUSTER resource has (Kafka's ``Resource.CLUSTER_NAME``).
CLUSTER_NAME = "kafka-cluster"
#: A LITERAL resource named ``*`` matches every resource of its type.
WILDCARD_RESOURCE = "*"


class _KafkaNamed(enum.IntEnum):
    @property
    def kafka_name(self) -> str:
        """``TRANSACTIONAL_ID`` -> ``TransactionalId`` (Kafka's SecurityUtils.toPascalCase)."""
        return "".join(part.capitalize() for part in self.name.split("_"))

    @classmethod
    def from_kafka_name(cls, name: str) -> Self:
        """A name in any case, with or without underscores (``Read``, ``READ``, ``describe_configs``)."""
        wanted = name.replace("_", "").replace("-", "").lower()
        for member in cls:
            if member.name.replace("_", "").lower() == wanted:
                return member
        raise ValueError(f"unknown {cls.__name__} {name!r}")


class ResourceType(_KafkaNamed):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_KafkaNamed):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_KafkaNamed):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_KafkaNamed):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_E = TypeVar("_E", bound=_KafkaNamed)


def known(enum_type: type[_E], code: int) -> _E:
    """The member for a wire code; a code this module does not know is UNKNOWN (Kafka's ``fromCode``)."""
    try:
        return enum_type(code)
    except ValueError:
        return enum_type(0)
