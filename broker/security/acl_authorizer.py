"""Kafka's AclAuthorizer: may this principal, from this host, perform this operation on this resource?

The rules (Kafka's AclAuthorizer.authorizeAction):

1. a principal in ``super.users`` may do anything;
2. a resource no ACL applies to at all (no LITERAL pattern of its name, no
   LITERAL ``*`` of its type, no PREFIXED pattern its name starts with) is open
   to everyone only if ``allow.everyone.if.no.acl.found``;
3. otherwise a matching DENY wins: principal itself or ``User:*``, host itself
   or ``*``, operation itself or ALL;
4. otherwise a matching ALLOW grants it, where ALLOW of READ, WRITE, DELETE or
   ALTER implies DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS, ALL implies
   everything.

Decisions are cached per (principal, host, operation, resource) because the
Produce and Fetch paths ask per topic on every request; any ACL change (here or
announced by another broker) empties the cache.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence

from broker.security.acl_binding import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    ResourcePattern,
)
from broker.security.acl_store import AclStore, Entries
from broker.security.kafka_principal import KafkaPrincipal
from protocol.acl_types import WILDCARD_RESOURCE, AclOperation, AclPermissionType, PatternType, ResourceType

log = logging.getLogger(__name__)

#: Past this many cached decisions the cache starts over (bounds memory under many topics/clients).
MAX_CACHED_DECISIONS = 100_000

_IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                                      AclOperation.DELETE, AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
}

#: Kafka's AclEntry.supportedOperations: what authorized_operations reports per resource type.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                         AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                           AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}

_Decision = tuple[KafkaPrincipal, str, AclOperation, ResourceType, str]


def parse_super_users(value: str | None) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (``User:admin;User:broker``)."""
    return frozenset(p.strip() for p in (value or "").split(";") if p.strip())


class AclAuthorizer:
    def __init__(self, store: AclStore, super_users: frozenset[str], allow_everyone_if_no_acl_found: bool) -> None:
        self.store = store
        self.super_users = super_users
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._literal: dict[tuple[ResourceType, str], Entries] = {}
        self._prefixed: dict[ResourceType, dict[str, Entries]] = {}
        self._decisions: dict[_Decision, bool] = {}
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        """Every stored ACL, before the listeners open."""
        for pattern, entries in (await self.store.load_all()).items():
            self.update_resource(pattern, entries)
        log.info("ACL authorizer started with %d resource patterns; super users: %s",
                 len(self._literal) + sum(len(p) for p in self._prefixed.values()), sorted(self.super_users))

    # -- the cache of ACLs --------------------------------------------------------------------
    def update_resource(self, pattern: ResourcePattern, entries: Entries) -> None:
        """``pattern``'s entries are now ``entries`` (none: forgotten); every cached decision goes."""
        if pattern.pattern_type == PatternType.LITERAL:
            key = (pattern.resource_type, pattern.name)
            if entries:
                self._literal[key] = entries
            else:
                self._literal.pop(key, None)
        else:
            by_prefix = self._prefixed.setdefault(pattern.resource_type, {})
            if entries:
                by_prefix[pattern.name] = entries
            else:
                by_prefix.pop(pattern.name, None)
        self._decisions = {}

    def bindings(self) -> list[AclBinding]:
        found = [AclBinding(ResourcePattern(t, n, PatternType.LITERAL), e)
                 for (t, n), entries in self._literal.items() for e in entries]
        found += [AclBinding(ResourcePattern(t, n, PatternType.PREFIXED), e)
                  for t, by_prefix in self._prefixed.items() for n, entries in by_prefix.items() for e in entries]
        return found

    def acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        return [b for b in self.bindings() if binding_filter.matches(b)]

    # -- decisions ------------------------------------------------------------------------------
    def authorize(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        key = (principal, host, operation, resource_type, name)
        decision = self._decisions.get(key)
        if decision is None:
            decision = self._decide(str(principal), host, operation, resource_type, name)
            if len(self._decisions) >= MAX_CACHED_DECISIONS:
                self._decisions = {}
            self._decisions[key] = decision
        return decision

    def _decide(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                name: str) -> bool:
        if principal in self.super_users:
            return True
        entries = self._matching_entries(resource_type, name)
        if not entries:
            return self.allow_everyone_if_no_acl_found
        principals = (principal, WILDCARD_PRINCIPAL)
        hosts = (host, WILDCARD_HOST)
        mine = [e for e in entries if e.principal in principals and e.host in hosts]
        if any(e.permission_type == AclPermissionType.DENY and e.operation in (operation, AclOperation.ALL)
               for e in mine):
            return False
        allowing = _IMPLIED_BY.get(operation, frozenset({operation}))
        return any(e.permission_type == AclPermissionType.ALLOW
                   and (e.operation == AclOperation.ALL or e.operation in allowing) for e in mine)

    def _matching_entries(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        entries = [*self._literal.get((resource_type, name), ()), *self._literal.get((resource_type, WILDCARD_RESOURCE), ())]
        for prefix, prefixed in self._prefixed.get(resource_type, {}).items():
            if name.startswith(prefix):
                entries += prefixed
        return entries

    def authorize_by_resource_type(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """Kafka's Authorizer.authorizeByResourceType: may the principal perform ``operation`` on at least
        one resource of the type (an ALLOW some LITERAL or PREFIXED pattern grants that no DENY covers)?"""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):  # super users, open resources
            return True
        principals = (str(principal), WILDCARD_PRINCIPAL)
        deny_literal: set[str] = set()
        deny_prefixes: set[str] = set()
        allowed: list[ResourcePattern] = []
        for binding in self.bindings():
            pattern, entry = binding.pattern, binding.entry
            if (pattern.resource_type != resource_type or entry.principal not in principals
                    or entry.host not in (host, WILDCARD_HOST) or entry.operation not in (operation, AclOperation.ALL)):
                continue
            if entry.permission_type == AclPermissionType.DENY:
                if pattern.pattern_type == PatternType.LITERAL and pattern.name == WILDCARD_RESOURCE:
                    return False
                (deny_literal if pattern.pattern_type == PatternType.LITERAL else deny_prefixes).add(pattern.name)
            else:
                allowed.append(pattern)
        if any(p.pattern_type == PatternType.LITERAL and p.name == WILDCARD_RESOURCE for p in allowed):
            return True
        for pattern in allowed:
            if pattern.pattern_type == PatternType.LITERAL and pattern.name in deny_literal:
                continue
            if not any(pattern.name[:i] in deny_prefixes for i in range(1, len(pattern.name) + 1)):
                return True
        return False

    def authorized_operations(self, principal: KafkaPrincipal, host: str, resource_type: ResourceType,
                              name: str) -> int:
        """The bitfield of AclOperation codes the principal may perform on the resource (Kafka's
        authorizedOperations in Metadata, DescribeGroups and DescribeCluster)."""
        bits = 0
        for operation in SUPPORTED_OPERATIONS[resource_type]:
            if self.authorize(principal, host, operation, resource_type, name):
                bits |= 1 << operation
        return bits

    # -- changes (CreateAcls, DeleteAcls) --------------------------------------------------------
    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[str | None]:
        """Per binding, None or why it was refused (INVALID_REQUEST); valid ones are stored by resource."""
        errors: list[str | None] = []
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for binding in bindings:
            try:
                binding.validate()
            except ValueError as exc:
                errors.append(str(exc))
                continue
            errors.append(None)
            by_pattern.setdefault(binding.pattern, set()).add(binding.entry)
        async with self._lock:
            for pattern, new in by_pattern.items():
                stored = await self.store.update(pattern, lambda current, n=frozenset(new): current | n)  # type: ignore[misc]
                self.update_resource(pattern, stored)
        return errors

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """Per filter, the bindings it deleted (Kafka's AclAuthorizer.deleteAcls)."""
        async with self._lock:
            patterns = {b.pattern for b in self.bindings() if any(f.pattern.matches(b.pattern) for f in filters)}
            deleted: list[AclBinding] = []
            for pattern in patterns:
                removed: set[AccessControlEntry] = set()
                stored = await self.store.update(pattern, lambda current, p=pattern, r=removed:  # type: ignore[misc]
                                                 _without_matching(current, p, filters, r))
                self.update_resource(pattern, stored)
                deleted += [AclBinding(pattern, entry) for entry in removed]
        return [[b for b in deleted if f.matches(b)] for f in filters]


def _without_matching(current: Entries, pattern: ResourcePattern, filters: Iterable[AclBindingFilter],
                      removed: set[AccessControlEntry]) -> Entries:
    """``current`` without the entries any filter matches; those go to ``removed`` (a retried
    ZooKeeper update calls this again, so it starts afresh)."""
    removed.clear()
    removed.update(e for e in current if any(f.matches(AclBinding(pattern, e)) for f in filters))
    return current - removed
