"""Kafka's client quota entities and keys (ClientQuotaEntity, QuotaConfigs).

An entity is a set of (entity type, name) components: ``user``, ``client-id``
(alone or together) or ``ip``. A component's name None is the type's default
(``<default>`` in ZooKeeper). Configs live where Kafka's ZooKeeper mode keeps
them: ``/config/users/<user>``, ``/config/users/<user>/clients/<client-id>``,
``/config/clients/<client-id>`` and ``/config/ips/<ip>``, names sanitized.

A client's quota of one type is the value of the most specific entity that has
one, in Kafka's order (``precedence``); the usage is metered per matched
entity with the client's own names filled in, so a default applies to each
user (or client id) separately, as Kafka's DefaultQuotaCallback meters it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from controller.zk.zk_data import DEFAULT_ENTITY, desanitize, sanitize

USER: Final = "user"
CLIENT_ID: Final = "client-id"
IP: Final = "ip"
ENTITY_TYPES: Final = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE: Final = "producer_byte_rate"
CONSUMER_BYTE_RATE: Final = "consumer_byte_rate"
REQUEST_PERCENTAGE: Final = "request_percentage"
CONTROLLER_MUTATION_RATE: Final = "controller_mutation_rate"
IP_CONNECTION_RATE: Final = "connection_creation_rate"

#: Kafka's QuotaConfigs: the keys a user / client-id entity takes, and whether each is a whole number.
CLIENT_QUOTA_KEYS: Final = {PRODUCER_BYTE_RATE: True, CONSUMER_BYTE_RATE: True, REQUEST_PERCENTAGE: False,
                            CONTROLLER_MUTATION_RATE: False}
#: An ip entity's only key, an int.
IP_QUOTA_KEYS: Final = {IP_CONNECTION_RATE: True}

#: ZooKeeper's /config/<type> directory of each entity type.
_ZK_TYPE: Final = {USER: "users", CLIENT_ID: "clients", IP: "ips"}


@dataclass(frozen=True, slots=True)
class ClientQuotaEntity:
    """Components sorted by entity type; a name of None is that type's default."""

    components: tuple[tuple[str, str | None], ...]

    @classmethod
    def of(cls, components: Mapping[str, str | None]) -> ClientQuotaEntity:
        return cls(tuple(sorted(components.items(), key=lambda item: ENTITY_TYPES.index(item[0]))))

    def as_dict(self) -> dict[str, str | None]:
        return dict(self.components)

    @property
    def types(self) -> frozenset[str]:
        return frozenset(entity_type for entity_type, _ in self.components)

    def zk_entity_path(self) -> str:
        """Kafka's entity path: ``users/alice``, ``users/alice/clients/c1``, ``clients/<default>``, ``ips/1.2.3.4``."""
        parts = self.as_dict()
        if USER in parts and CLIENT_ID in parts:
            return f"users/{_zk_name(parts[USER])}/clients/{_zk_name(parts[CLIENT_ID])}"
        ((entity_type, name),) = self.components
        return f"{_ZK_TYPE[entity_type]}/{_zk_name(name)}"

    @classmethod
    def from_zk_entity_path(cls, path: str) -> ClientQuotaEntity | None:
        """The entity a config change notification (or znode) names; None for a non-quota path."""
        parts = path.split("/")
        if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
            return cls.of({USER: _from_zk_name(parts[1]), CLIENT_ID: _from_zk_name(parts[3])})
        if len(parts) == 2:
            for entity_type, directory in _ZK_TYPE.items():
                if parts[0] == directory:
                    return cls.of({entity_type: _from_zk_name(parts[1])})
        return None

    def __str__(self) -> str:
        return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in self.components)


def _zk_name(name: str | None) -> str:
    return DEFAULT_ENTITY if name is None else sanitize(name)


def _from_zk_name(name: str) -> str | None:
    return None if name == DEFAULT_ENTITY else desanitize(name)


def precedence(user: str, client_id: str) -> list[ClientQuotaEntity]:
    """Kafka's order, most specific first: <user, client-id>, <user, default client-id>, <user>,
    <default user, client-id>, <default user, default client-id>, <default user>, <client-id>,
    <default client-id>."""
    order: list[Mapping[str, str | None]] = [
        {USER: user, CLIENT_ID: client_id}, {USER: user, CLIENT_ID: None}, {USER: user},
        {USER: None, CLIENT_ID: client_id}, {USER: None, CLIENT_ID: None}, {USER: None},
        {CLIENT_ID: client_id}, {CLIENT_ID: None},
    ]
    return [ClientQuotaEntity.of(components) for components in order]


def metered_as(matched: ClientQuotaEntity, user: str, client_id: str) -> tuple[str, str]:
    """The (user, client-id) a matched entity's usage is metered under: the client's own name for
    each type the entity has, "" for the others (Kafka's quota metric tags)."""
    types = matched.types
    return (user if USER in types else "", client_id if CLIENT_ID in types else "")


def validate_entity(components: Iterable[tuple[str, str | None]]) -> str | None:
    """Why an entity cannot hold quotas (Kafka's INVALID_REQUEST messages); None if it can."""
    listed = list(components)
    types = [entity_type for entity_type, _ in listed]
    if not listed:
        return "Invalid empty client quota entity"
    if len(types) != len(set(types)):
        return "Duplicate entity type in client quota entity"
    unknown = [t for t in types if t not in ENTITY_TYPES]
    if unknown:
        return f"Unhandled client quota entity type: {unknown[0]}"
    if IP in types and len(types) > 1:
        return "Invalid quota entity combination, IP entity should not be combined with User or ClientId entities"
    return None


def validate_value(entity: ClientQuotaEntity, key: str, value: float) -> str | None:
    """Why ``key = value`` is refused for ``entity``; None if accepted."""
    keys = IP_QUOTA_KEYS if IP in entity.types else CLIENT_QUOTA_KEYS
    if key not in keys:
        return f"Invalid configuration key {key}"
    if math.isnan(value) or math.isinf(value) or value <= 0:
        return f"Invalid value {value} for configuration key {key}: must be positive"
    if keys[key] and value != math.floor(value):
        return f"Configuration {key} must be a Long value"
    return None


def format_value(key: str, value: float) -> str:
    """As Kafka writes it in ZooKeeper: whole numbers for the integral keys."""
    whole = (CLIENT_QUOTA_KEYS | IP_QUOTA_KEYS).get(key, False)
    return str(int(value)) if whole else repr(float(value))
