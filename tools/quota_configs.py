"""What ``pafka configs`` does with client quotas, as Kafka 3.9's ConfigCommand does with
``--bootstrap-server``: its checks and messages, its describe filter, its output lines.

Entities are kept the way ConfigCommand keeps them: the ``--entity-type`` values (``users``,
``clients``, ``ips``) and, paired by position, the names, where ``""`` is the default entity.
"""

from __future__ import annotations

import ipaddress
import math
import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from itertools import zip_longest

import click

from client.quota_admin import CLIENT_ID, IP, USER, QuotaAdmin, QuotaEntity, QuotaFilterComponent
from client.scram import ScramMechanism
from tools.common import fail

#: Kafka's QuotaConfigs.isClientOrUserQuotaConfig keys, and DynamicConfig.Ip's.
USER_CLIENT_QUOTA_KEYS = frozenset({"producer_byte_rate", "consumer_byte_rate", "request_percentage",
                                    "controller_mutation_rate"})
IP_QUOTA_KEYS = frozenset({"connection_creation_rate"})

_QUOTA_ENTITY_TYPE = {"users": USER, "clients": CLIENT_ID, "ips": IP}
#: How ConfigCommand names each entity type in its output, in the order it prints them.
_LABELS = {USER: "user-principal", CLIENT_ID: "client-id", IP: "ip"}
#: What Java's Double.parseDouble takes (but hexadecimal): an optional f/d suffix, NaN, Infinity.
_JAVA_DOUBLE = re.compile(r"[+-]?(?:NaN|Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)[fFdD]?")


@dataclass(frozen=True)
class Entities:
    """``types[i]`` is named ``names[i]`` (``""``: the default entity); describe may have fewer names."""

    types: list[str]
    names: list[str]

    def args_text(self) -> str:
        """The entity options, for error lines (never the configs: they may hold passwords)."""
        parts = []
        for entity_type, name in zip_longest(self.types, self.names):
            if entity_type is not None:
                parts.append(f"--entity-type {entity_type}")
            if name is not None:
                parts.append(f"--entity-name {name}" if name else "--entity-default")
        return " ".join(parts)

    def quota_entity(self) -> dict[str, str | None]:
        return {_QUOTA_ENTITY_TYPE[t]: name or None for t, name in zip(self.types, self.names, strict=True)}


def check_entities(entities: Entities, *, alter: bool) -> None:
    """ConfigCommandOptions.checkArgs' entity checks, with its messages."""
    types = entities.types
    duplicates = [t for i, t in enumerate(types) if t in types[:i]]
    if duplicates:
        fail(f"Duplicate entity type(s) specified: {','.join(duplicates)}")
    if not types:
        fail("At least one entity type must be specified")
    if len(types) > 1 and set(types) != {"users", "clients"}:
        fail("Only 'users' and 'clients' entity types may be specified together")
    if "ips" in types:
        for name in (n for n in entities.names if n):
            if not _valid_ip_entity(name):
                fail(f"The entity name for {types[0]} must be a valid IP or resolvable host, but it is: {name}")
    if alter and not entities.names:
        fail("an entity-name or default entity must be specified with --alter of users, clients, brokers or ips")


def _valid_ip_entity(name: str) -> bool:
    # Kafka's DynamicConfig.Ip.isValidIpEntity: InetAddress.getByName succeeds.
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(name, None)
        return True
    except (OSError, UnicodeError):
        return False


def _is_scram(key: str) -> bool:
    return ScramMechanism.for_name(key) is not None


def _scala_set(names: Iterable[str]) -> str:
    # ConfigCommand prints the Scala collections themselves: a Set of added keys...
    return f"Set({', '.join(names)})"


def _scala_buffer(names: Iterable[str]) -> str:
    # ... and an ArrayBuffer of deleted ones.
    return f"ArrayBuffer({', '.join(names)})"


def scram_configs_allowed(entities: Entities, added: Mapping[str, str], deleted: list[str]) -> bool:
    """Whether the alteration is of a user's SCRAM credentials (else of quotas), refusing what
    kafka-configs.sh refuses: unknown keys, SCRAM keys for clients or defaults, SCRAM and quota keys together."""
    if entities.types[0] == "ips":
        unknown = [k for k in [*added, *deleted] if k not in IP_QUOTA_KEYS]
        if unknown:
            fail(f"Only connection quota configs can be added for 'ips' using --bootstrap-server. "
                 f"Unexpected config names: {','.join(unknown)}")
        return False
    scram_added = [k for k in added if _is_scram(k)]
    unknown_added = [k for k in added if not _is_scram(k) and k not in USER_CLIENT_QUOTA_KEYS]
    scram_deleted = [k for k in deleted if _is_scram(k)]
    unknown_deleted = [k for k in deleted if not _is_scram(k) and k not in USER_CLIENT_QUOTA_KEYS]
    has_quota = any(k in USER_CLIENT_QUOTA_KEYS for k in [*added, *deleted])
    if entities.types[0] == "clients" or len(entities.types) == 2:
        if unknown_added or scram_added:
            fail(f"Only quota configs can be added for 'clients' using --bootstrap-server. "
                 f"Unexpected config names: {_scala_set(unknown_added + scram_added)}")
        if unknown_deleted or scram_deleted:
            fail(f"Only quota configs can be deleted for 'clients' using --bootstrap-server. "
                 f"Unexpected config names: {_scala_buffer(unknown_deleted + scram_deleted)}")
        return False
    if unknown_added:
        fail(f"Only quota and SCRAM credential configs can be added for 'users' using --bootstrap-server. "
             f"Unexpected config names: {_scala_set(unknown_added)}")
    if unknown_deleted:
        fail(f"Only quota and SCRAM credential configs can be deleted for 'users' using --bootstrap-server. "
             f"Unexpected config names: {_scala_buffer(unknown_deleted)}")
    if scram_added or scram_deleted:
        if "" in entities.names:
            fail("The use of --entity-default or --user-defaults is not allowed with User SCRAM Credentials "
                 "using --bootstrap-server.")
        if has_quota:
            fail("Cannot alter both quota and SCRAM credential configs simultaneously for 'users' using "
                 "--bootstrap-server.")
    return not has_quota


def _parse_double(key: str, value: str) -> float:
    text = value.strip()
    if not _JAVA_DOUBLE.fullmatch(text):
        fail(f"Cannot parse quota configuration value for {key}: {value}")
    return float(text.rstrip("fFdD") if not text.endswith("Infinity") else text)


def alter_quotas(quotas: QuotaAdmin, entities: Entities, added: Mapping[str, str], deleted: list[str]) -> None:
    """Set and remove one entity's quotas; a key to delete must be set (ConfigCommand.alterQuotaConfigs)."""
    components = [QuotaFilterComponent.of_entity(_QUOTA_ENTITY_TYPE[t], n) if n
                  else QuotaFilterComponent.of_default_entity(_QUOTA_ENTITY_TYPE[t])
                  for t, n in zip(entities.types, entities.names, strict=True)]
    current = next(iter(quotas.describe_client_quotas(components, strict=True).values()), {})
    missing = [k for k in deleted if k not in current]
    if missing:
        fail(f"Invalid config(s): {','.join(missing)}")
    ops: dict[str, float | None] = {key: _parse_double(key, value) for key, value in added.items()}
    ops.update((key, None) for key in deleted)
    quotas.alter_client_quotas([(entities.quota_entity(), ops)])


def describe_filter(entities: Entities) -> list[QuotaFilterComponent]:
    """The entities the options name: a name matches exactly, a default the default, a type without
    a name any named entity (asked strictly: only entities of exactly these types)."""
    if len(entities.names) > len(entities.types):
        fail("More entity names specified than entity types")
    components = []
    for entity_type, name in zip_longest(entities.types, entities.names):
        quota_type = _QUOTA_ENTITY_TYPE[entity_type]
        if name is None:
            components.append(QuotaFilterComponent.of_entity_type(quota_type))
        elif name:
            components.append(QuotaFilterComponent.of_entity(quota_type, name))
        else:
            components.append(QuotaFilterComponent.of_default_entity(quota_type))
    return components


def describe_quotas(quotas: QuotaAdmin, components: list[QuotaFilterComponent]) -> None:
    """Print the quotas of the entities ``components`` match, in kafka-configs.sh's words."""
    described = quotas.describe_client_quotas(components, strict=True)
    # Kafka prints in its hash map's order; sorted here, so that the output is stable.
    for text, values in sorted((_entity_text(entity), values) for entity, values in described.items()):
        configs = ", ".join(f"{key}={java_double_text(value)}" for key, value in values.items())
        click.echo(f"Quota configs for {text} are {configs}")


def _entity_text(entity: QuotaEntity) -> str:
    """``user-principal 'alice', the default client-id``: ConfigCommand's words for an entity."""
    names = dict(entity)
    return ", ".join((f"{label} '{names[t]}'" if names[t] is not None else f"the default {label}")
                     for t, label in _LABELS.items() if t in names)


def java_double_text(value: float) -> str:
    """``value`` as Java's Double.toString writes it (ConfigCommand prints the Double): shortest
    digits, plain between 10^-3 and 10^7 (``1048576.0``), else ``2.097152E7``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    exact = Decimal(repr(abs(value)))  # repr: the shortest digits that read back as the same double
    if 1e-3 <= abs(value) < 1e7:
        plain = format(exact, "f")
        return sign + (plain if "." in plain else plain + ".0")
    digits_tuple = exact.normalize().as_tuple()
    digits = "".join(map(str, digits_tuple.digits))
    exponent = len(digits) + int(digits_tuple.exponent) - 1
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"
