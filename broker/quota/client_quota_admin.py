"""DescribeClientQuotas and AlterClientQuotas behind the handlers (Kafka's ZkAdminManager part).

Alterations are validated per entry (entity, keys, values) as Kafka validates
them; an entry with a bad op gets INVALID_REQUEST and none of its ops, the
others still apply. A lone broker rewrites its ``client-quotas.json`` (synced)
before answering; a cluster member writes the entity's znode and a change
notification (``writer``), from which every broker's configs follow.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from broker.quota.client_quota_configs import ClientQuotaConfigs, ClientQuotasFile
from broker.quota.client_quota_entity import (
    ENTITY_TYPES,
    IP,
    ClientQuotaEntity,
    format_value,
    validate_entity,
    validate_value,
)
from protocol.errors import ErrorCode
from protocol.messages.alter_client_quotas import AlterClientQuotasRequestEntryData
from protocol.messages.describe_client_quotas import ComponentData

#: DescribeClientQuotas match types.
MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2

#: (entity, {key: value as stored, or None to remove}) -> the entity's whole config after the write.
EntityConfigWriter = Callable[[ClientQuotaEntity, Mapping[str, str | None]], Awaitable[dict[str, str]]]


class InvalidQuotaRequest(Exception):
    """INVALID_REQUEST, with Kafka's message."""


@dataclass(frozen=True, slots=True)
class EntryResult:
    entity: ClientQuotaEntity | None
    components: tuple[tuple[str, str | None], ...]
    error_code: int = ErrorCode.NO_ERROR
    error_message: str | None = None


class ClientQuotaAdmin:
    def __init__(self, configs: ClientQuotaConfigs, file: ClientQuotasFile | None) -> None:
        self.configs = configs
        self._file = file
        #: Set for a cluster member: changes go to ZooKeeper instead of the file.
        self.writer: EntityConfigWriter | None = None
        self._lock = asyncio.Lock()

    def load(self) -> None:
        """A lone broker's quotas from its file (blocking: called off the event loop, before serving)."""
        if self._file is not None:
            for entity, config in self._file.load().items():
                self.configs.replace(entity, config)

    # -- DescribeClientQuotas ----------------------------------------------------------------
    def describe(self, components: Sequence[ComponentData],
                 strict: bool) -> list[tuple[ClientQuotaEntity, dict[str, float]]]:
        """The entities matching the filter, with their quotas; InvalidQuotaRequest for a bad filter."""
        _check_filter(components)
        wanted = {component.entity_type for component in components}
        found = []
        for entity, values in self.configs.items():
            if strict and entity.types != wanted:
                continue
            names = entity.as_dict()
            if all(c.entity_type in names and _matches(c, names[c.entity_type]) for c in components):
                found.append((entity, values))
        return sorted(found, key=lambda item: str(item[0]))

    # -- AlterClientQuotas -------------------------------------------------------------------
    async def alter(self, entries: Sequence[AlterClientQuotasRequestEntryData],
                    validate_only: bool) -> list[EntryResult]:
        results: list[EntryResult] = []
        changes: dict[ClientQuotaEntity, dict[str, str | None]] = {}
        for entry in entries:
            components = tuple((e.entity_type, e.entity_name) for e in entry.entity)
            try:
                entity, change = _validated(components, entry)
            except InvalidQuotaRequest as exc:
                results.append(EntryResult(None, components, ErrorCode.INVALID_REQUEST, str(exc)))
                continue
            results.append(EntryResult(entity, components))
            if not validate_only:
                changes.setdefault(entity, {}).update(change)
        if changes:
            async with self._lock:  # one change at a time: each reads the state the last one left
                await self._write(changes)
        return results

    async def _write(self, changes: Mapping[ClientQuotaEntity, Mapping[str, str | None]]) -> None:
        if self.writer is not None:
            for entity, change in changes.items():
                self.configs.replace(entity, await self.writer(entity, change))
            return
        assert self._file is not None
        updated = dict(self.configs.items())
        for entity, change in changes.items():
            values = updated.setdefault(entity, {})
            for key, value in change.items():
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = float(value)
        await asyncio.to_thread(self._file.save, updated)
        for entity in changes:
            self.configs.replace(entity, {k: format_value(k, v) for k, v in updated[entity].items()})


def _check_filter(components: Sequence[ComponentData]) -> None:
    types = [component.entity_type for component in components]
    if len(types) != len(set(types)):
        raise InvalidQuotaRequest(f"Duplicate entity type in filter: {types}")
    for component in components:
        if component.entity_type not in ENTITY_TYPES:
            raise InvalidQuotaRequest(f"Custom entity type '{component.entity_type}' not supported")
        if component.match_type == MATCH_EXACT and component.match is None:
            raise InvalidQuotaRequest("Exact match requires a name to match")
        if component.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise InvalidQuotaRequest(f"Unknown match type {component.match_type}")
    if IP in types and len(types) > 1:
        raise InvalidQuotaRequest("Invalid entity filter component combination, IP filter component should "
                                  "not be used with user or clientId filter component.")


def _matches(component: ComponentData, name: str | None) -> bool:
    if component.match_type == MATCH_EXACT:
        return name == component.match
    if component.match_type == MATCH_DEFAULT:
        return name is None
    return name is not None


def _validated(components: tuple[tuple[str, str | None], ...],
               entry: AlterClientQuotasRequestEntryData) -> tuple[ClientQuotaEntity, dict[str, str | None]]:
    problem = validate_entity(components)
    if problem is not None:
        raise InvalidQuotaRequest(problem)
    entity = ClientQuotaEntity.of(dict(components))
    change: dict[str, str | None] = {}
    for op in entry.ops:
        if op.key in change:
            raise InvalidQuotaRequest(f"Duplicate quota key {op.key} not updating quota for entity {entity}")
        problem = validate_value(entity, op.key, 1.0 if op.remove else op.value)
        if problem is not None:
            raise InvalidQuotaRequest(problem)
        change[op.key] = None if op.remove else format_value(op.key, op.value)
    return entity, change
