"""Kafka's AclBinding: a resource pattern with one access control entry, and the filters over them.

A :class:`ResourcePattern` names resources: LITERAL (one name, or ``*`` for every
resource of the type) or PREFIXED (every name starting with it). An
:class:`AccessControlEntry` says who (principal, ``User:*`` for anyone), from
where (host, ``*`` for anywhere), what (operation) and whether it is allowed or
denied. DescribeAcls and DeleteAcls select bindings with an
:class:`AclBindingFilter`, whose pattern type may also be ANY (any pattern
with exactly that name) or MATCH (every pattern that applies to that resource
name), and whose other fields may be null / ANY.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.acl_types import (
    CLUSTER_NAME,
    WILDCARD_RESOURCE,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    known,
)

WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"


class InvalidAclError(ValueError):
    """A binding CreateAcls refuses (INVALID_REQUEST), with Kafka's reason."""


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def validate(self) -> None:
        """Kafka's checks of a new ACL (AclControlManager.validateNewAcl and KafkaApis' cluster-name check)."""
        pattern, entry = self.pattern, self.entry
        if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            raise InvalidAclError(f"Invalid resourceType {pattern.resource_type.name}")
        if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAclError(f"Invalid patternType {pattern.pattern_type.name}")
        if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
            raise InvalidAclError(f"Invalid operation {entry.operation.name}")
        if entry.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            raise InvalidAclError(f"Invalid permissionType {entry.permission_type.name}")
        if not pattern.name:
            raise InvalidAclError("Resource name should not be empty")
        if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
            raise InvalidAclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        principal_type, colon, principal_name = entry.principal.partition(":")
        if not colon or not principal_type or not principal_name:
            raise InvalidAclError(f"Could not parse principal from `{entry.principal}` (no colon is found "
                                  "separating principal type from principal name)")
        if not entry.host:
            raise InvalidAclError("Host should not be empty")


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            return self.pattern_type == pattern.pattern_type and (self.name is None or self.name == pattern.name)
        if self.pattern_type == PatternType.ANY or self.name is None:
            return self.name is None or self.name == pattern.name
        # MATCH: every pattern that applies to the named resource.
        if pattern.pattern_type == PatternType.LITERAL:
            return pattern.name in (self.name, WILDCARD_RESOURCE)
        return self.name.startswith(pattern.name)

    def unknown_element(self) -> str | None:
        if self.resource_type == ResourceType.UNKNOWN:
            return "resource type"
        if self.pattern_type == PatternType.UNKNOWN:
            return "pattern type"
        return None


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def matches(self, entry: AccessControlEntry) -> bool:
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and (self.operation == AclOperation.ANY or self.operation == entry.operation)
                and (self.permission_type == AclPermissionType.ANY or self.permission_type == entry.permission_type))

    def unknown_element(self) -> str | None:
        if self.operation == AclOperation.UNKNOWN:
            return "operation"
        if self.permission_type == AclPermissionType.UNKNOWN:
            return "permission type"
        return None


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    pattern: ResourcePatternFilter
    entry: AccessControlEntryFilter

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)

    def unknown_element(self) -> str | None:
        """What Kafka's DescribeAcls/DeleteAcls refuse as INVALID_REQUEST: a filter with UNKNOWN elements."""
        return self.pattern.unknown_element() or self.entry.unknown_element()


def binding_of(resource_type: int, name: str, pattern_type: int, principal: str, host: str, operation: int,
               permission_type: int) -> AclBinding:
    """A binding from CreateAcls' int8 codes (a code Kafka does not know becomes UNKNOWN, refused later)."""
    return AclBinding(ResourcePattern(known(ResourceType, resource_type), name, known(PatternType, pattern_type)),
                      AccessControlEntry(principal, host, known(AclOperation, operation),
                                         known(AclPermissionType, permission_type)))


def filter_of(resource_type: int, name: str | None, pattern_type: int, principal: str | None, host: str | None,
              operation: int, permission_type: int) -> AclBindingFilter:
    """A filter from DescribeAcls' / DeleteAcls' int8 codes."""
    return AclBindingFilter(
        ResourcePatternFilter(known(ResourceType, resource_type), name, known(PatternType, pattern_type)),
        AccessControlEntryFilter(principal, host, known(AclOperation, operation),
                                 known(AclPermissionType, permission_type)))
