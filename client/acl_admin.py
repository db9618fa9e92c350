"""ACL administration (CreateAcls, DescribeAcls, DeleteAcls) over a :class:`KafkaClient`, as Kafka's
admin client's createAcls / describeAcls / deleteAcls. Each call raises the typed error of the first
binding or filter that failed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from client.client import KafkaClient
from client.errors import check_error
from protocol.acl_types import AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.messages import create_acls as _ca
from protocol.messages import delete_acls as _da
from protocol.messages import describe_acls as _dea

__all__ = ["Acl", "AclAdmin"]


@dataclass(frozen=True, slots=True)
class Acl:
    """A binding (every field set) or, with None names and ANY codes, a filter over bindings."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
                f"permissionType={self.permission_type.name})")


class AclAdmin:
    def __init__(self, client: KafkaClient) -> None:
        self.client = client

    def create_acls(self, bindings: Sequence[Acl]) -> None:
        creations = [_ca.AclCreation(resource_type=b.resource_type, resource_name=b.resource_name or "",
                                     resource_pattern_type=b.pattern_type, principal=b.principal or "",
                                     host=b.host or "", operation=b.operation, permission_type=b.permission_type)
                     for b in bindings]
        response = self.client.bootstrap_connection().request(_ca.CreateAclsRequest(creations=creations))
        assert isinstance(response, _ca.CreateAclsResponse)
        for result in response.results:
            check_error(result.error_code, api_name="CreateAcls", message=result.error_message)

    def describe_acls(self, acl_filter: Acl) -> list[Acl]:
        request = _dea.DescribeAclsRequest(
            resource_type_filter=acl_filter.resource_type, resource_name_filter=acl_filter.resource_name,
            pattern_type_filter=acl_filter.pattern_type, principal_filter=acl_filter.principal,
            host_filter=acl_filter.host, operation=acl_filter.operation, permission_type=acl_filter.permission_type)
        response = self.client.bootstrap_connection().request(request)
        assert isinstance(response, _dea.DescribeAclsResponse)
        check_error(response.error_code, api_name="DescribeAcls", message=response.error_message)
        return [Acl(ResourceType(r.resource_type), r.resource_name, PatternType(r.pattern_type), a.principal, a.host,
                    AclOperation(a.operation), AclPermissionType(a.permission_type))
                for r in response.resources for a in r.acls]

    def delete_acls(self, filters: Sequence[Acl]) -> list[list[Acl]]:
        """Per filter, the bindings it deleted."""
        request = _da.DeleteAclsRequest(filters=[_da.DeleteAclsFilter(
            resource_type_filter=f.resource_type, resource_name_filter=f.resource_name, pattern_type_filter=f.pattern_type,
            principal_filter=f.principal, host_filter=f.host, operation=f.operation, permission_type=f.permission_type)
            for f in filters])
        response = self.client.bootstrap_connection().request(request)
        assert isinstance(response, _da.DeleteAclsResponse)
        deleted = []
        for result in response.filter_results:
            check_error(result.error_code, api_name="DeleteAcls", message=result.error_message)
            deleted.append([Acl(ResourceType(m.resource_type), m.resource_name, PatternType(m.pattern_type),
                                m.principal, m.host, AclOperation(m.operation), AclPermissionType(m.permission_type))
                            for m in result.matching_acls])
        return deleted
