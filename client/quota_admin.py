"""Client quota administration (DescribeClientQuotas, AlterClientQuotas; KIP-546) over a
:class:`KafkaClient`, as Kafka's admin client's describeClientQuotas / alterClientQuotas.

An entity is its ``(entity type, name)`` pairs in the order the broker gave them; a None name is
the type's default entity (e.g. ``(("user", None),)`` is the default user).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum

from client.client import KafkaClient
from client.errors import check_error
from protocol.messages import alter_client_quotas as _acq
from protocol.messages import describe_client_quotas as _dcq

__all__ = ["CLIENT_ID", "IP", "USER", "MatchType", "QuotaAdmin", "QuotaEntity", "QuotaFilterComponent"]

#: Kafka's ClientQuotaEntity types.
USER = "user"
CLIENT_ID = "client-id"
IP = "ip"

#: ``(entity type, name or None for the default)`` pairs.
QuotaEntity = tuple[tuple[str, str | None], ...]


class MatchType(IntEnum):
    """How a filter component matches an entity's name (DescribeClientQuotas' MatchType)."""

    EXACT = 0
    DEFAULT = 1
    SPECIFIED = 2  # any name but the default


@dataclass(frozen=True, slots=True)
class QuotaFilterComponent:
    """One component of a describe filter, as Kafka's ClientQuotaFilterComponent."""

    entity_type: str
    match_type: MatchType
    match: str | None = None

    @classmethod
    def of_entity(cls, entity_type: str, name: str) -> QuotaFilterComponent:
        return cls(entity_type, MatchType.EXACT, name)

    @classmethod
    def of_default_entity(cls, entity_type: str) -> QuotaFilterComponent:
        return cls(entity_type, MatchType.DEFAULT)

    @classmethod
    def of_entity_type(cls, entity_type: str) -> QuotaFilterComponent:
        return cls(entity_type, MatchType.SPECIFIED)


class QuotaAdmin:
    def __init__(self, client: KafkaClient) -> None:
        self.client = client

    def describe_client_quotas(self, components: Sequence[QuotaFilterComponent], *, strict: bool = False
                               ) -> dict[QuotaEntity, dict[str, float]]:
        """The quotas of every entity the filter matches; ``strict`` leaves out entities with
        types the filter does not name (Kafka's ClientQuotaFilter.containsOnly)."""
        request = _dcq.DescribeClientQuotasRequest(
            components=[_dcq.ComponentData(entity_type=c.entity_type, match_type=int(c.match_type), match=c.match)
                        for c in components],
            strict=strict)
        response = self.client.bootstrap_connection().request(request)
        assert isinstance(response, _dcq.DescribeClientQuotasResponse)
        check_error(response.error_code, api_name="DescribeClientQuotas", message=response.error_message)
        return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
                for entry in response.entries or []}

    def alter_client_quotas(self, alterations: Sequence[tuple[Mapping[str, str | None], Mapping[str, float | None]]],
                            *, validate_only: bool = False) -> None:
        """Per ``(entity, ops)``: set each key to its value, or remove it (None). Raises the first
        entity's error; the broker applies the other entities regardless, as Kafka's does."""
        request = _acq.AlterClientQuotasRequest(entries=[_entry(entity, ops) for entity, ops in alterations],
                                                validate_only=validate_only)
        response = self.client.bootstrap_connection().request(request)
        assert isinstance(response, _acq.AlterClientQuotasResponse)
        for result in response.entries:
            check_error(result.error_code, api_name="AlterClientQuotas", message=result.error_message)


def _entry(entity: Mapping[str, str | None], ops: Mapping[str, float | None]) -> _acq.AlterClientQuotasRequestEntryData:
    return _acq.AlterClientQuotasRequestEntryData(
        entity=[_acq.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
        # A removal still carries a value on the wire; Kafka's client sends 0.0.
        ops=[_acq.OpData(key=k, value=0.0 if v is None else v, remove=v is None) for k, v in ops.items()])
