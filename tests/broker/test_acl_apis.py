"""CreateAcls, DescribeAcls and DeleteAcls on a lone broker with the ACL authorizer: every version on the
wire, Kafka's errors, confluent-kafka's admin calls, and ACLs kept across a restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.acl_types import AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.create_acls import AclCreation, CreateAclsRequest, CreateAclsResponse
from protocol.messages.delete_acls import DeleteAclsFilter, DeleteAclsRequest, DeleteAclsResponse
from protocol.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.plugin import BrokerFactory
from tests.broker.acl_helpers import AclBroker, acl_broker_process

TOPIC, LITERAL, PREFIXED = ResourceType.TOPIC, PatternType.LITERAL, PatternType.PREFIXED


@pytest.fixture(scope="module")
def acls(pafka_module_broker_factory: BrokerFactory) -> AclBroker:
    broker, sasl = acl_broker_process(pafka_module_broker_factory)
    return AclBroker(broker, sasl).wait_ready()


def _creation(name: str, pattern: PatternType = LITERAL, principal: str = "User:alice",
              operation: AclOperation = AclOperation.READ, resource_type: ResourceType = TOPIC) -> AclCreation:
    return AclCreation(resource_type=resource_type, resource_name=name, resource_pattern_type=pattern,
                       principal=principal, host="*", operation=operation, permission_type=AclPermissionType.ALLOW)


def _describe(name: str | None, pattern: PatternType = PatternType.ANY, resource_type: ResourceType = TOPIC
              ) -> DescribeAclsRequest:
    return DescribeAclsRequest(resource_type_filter=resource_type, resource_name_filter=name,
                               pattern_type_filter=pattern, principal_filter=None, host_filter=None,
                               operation=AclOperation.ANY, permission_type=AclPermissionType.ANY)


def _delete_filter(name: str | None, pattern: PatternType = PatternType.ANY) -> DeleteAclsFilter:
    return DeleteAclsFilter(resource_type_filter=TOPIC, resource_name_filter=name, pattern_type_filter=pattern,
                            principal_filter=None, host_filter=None, operation=AclOperation.ANY,
                            permission_type=AclPermissionType.ANY)


@pytest.mark.parametrize("version", range(4))
def test_create_describe_delete_at_every_version(acls: AclBroker, version: int) -> None:
    name = f"versions-{version}"
    # v0 knows only literal patterns (no pattern type field): its filters are LITERAL too.
    pattern = LITERAL if version == 0 else PREFIXED
    with acls.connect("admin") as admin:
        created = admin.request(CreateAclsRequest(creations=[_creation(name, pattern)]), version=version)
        assert isinstance(created, CreateAclsResponse)
        assert [r.error_code for r in created.results] == [ErrorCode.NO_ERROR]
        described = admin.request(_describe(name, pattern), version=version)
        assert isinstance(described, DescribeAclsResponse) and described.error_code == ErrorCode.NO_ERROR
        assert [(r.resource_name, r.pattern_type, [(a.principal, a.operation) for a in r.acls])
                for r in described.resources] == [(name, pattern, [("User:alice", AclOperation.READ)])]
        deleted = admin.request(DeleteAclsRequest(filters=[_delete_filter(name, pattern)]), version=version)
        assert isinstance(deleted, DeleteAclsResponse)
        [result] = deleted.filter_results
        assert result.error_code == 0 and [(m.resource_name, m.principal) for m in result.matching_acls] == [
            (name, "User:alice")]
        again = admin.request(_describe(name, pattern), version=version)
        assert isinstance(again, DescribeAclsResponse) and again.resources == []


def test_acl_apis_need_the_cluster_permissions(acls: AclBroker) -> None:
    for user in ("alice", None):
        with acls.connect(user) as client:
            created = client.request(CreateAclsRequest(creations=[_creation("t"), _creation("u")]))
            assert isinstance(created, CreateAclsResponse)
            assert [r.error_code for r in created.results] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED] * 2
            described = client.request(_describe(None))
            assert isinstance(described, DescribeAclsResponse)
            assert described.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            deleted = client.request(DeleteAclsRequest(filters=[_delete_filter(None)]))
            assert isinstance(deleted, DeleteAclsResponse)
            assert [r.error_code for r in deleted.filter_results] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
    # DESCRIBE on the cluster lets alice describe (ALTER implies it), not create.
    acls.allow("User:alice", AclOperation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster")
    with acls.connect("alice") as alice:
        described = alice.request(_describe(None, resource_type=ResourceType.CLUSTER))
        assert isinstance(described, DescribeAclsResponse) and described.error_code == ErrorCode.NO_ERROR
        assert [r.resource_name for r in described.resources] == ["kafka-cluster"]
        created = alice.request(CreateAclsRequest(creations=[_creation("t")]))
        assert isinstance(created, CreateAclsResponse)
        assert [r.error_code for r in created.results] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]


def test_invalid_creations_and_filters(acls: AclBroker) -> None:
    with acls.connect("admin") as admin:
        created = admin.request(CreateAclsRequest(creations=[
            _creation("not-the-cluster", resource_type=ResourceType.CLUSTER, operation=AclOperation.ALTER),
            _creation("bad-principal", principal="alice"), _creation("", PREFIXED),
            _creation("ok-invalid-neighbour")]))
        assert isinstance(created, CreateAclsResponse)
        assert [r.error_code for r in created.results] == [ErrorCode.INVALID_REQUEST] * 3 + [ErrorCode.NO_ERROR]
        assert "kafka-cluster" in str(created.results[0].error_message)
        described = admin.request(_describe(None, pattern=PatternType.UNKNOWN))
        assert isinstance(described, DescribeAclsResponse) and described.error_code == ErrorCode.INVALID_REQUEST
        deleted = admin.request(DeleteAclsRequest(filters=[_delete_filter("x", PatternType.UNKNOWN),
                                                           _delete_filter("ok-invalid-neighbour")]))
        assert isinstance(deleted, DeleteAclsResponse)
        assert [r.error_code for r in deleted.filter_results] == [ErrorCode.INVALID_REQUEST, ErrorCode.NO_ERROR]
        assert len(deleted.filter_results[1].matching_acls) == 1


def test_confluent_admin_create_describe_delete(acls: AclBroker) -> None:
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AdminClient,
        ResourcePatternType,
    )
    from confluent_kafka.admin import (
        AclOperation as CkOperation,
    )
    from confluent_kafka.admin import (
        AclPermissionType as CkPermission,
    )
    from confluent_kafka.admin import (
        ResourceType as CkResourceType,
    )

    admin = AdminClient(acls.confluent_config("admin"))
    bindings = [AclBinding(CkResourceType.TOPIC, "ck-", ResourcePatternType.PREFIXED, "User:bob", "*",
                           CkOperation.WRITE, CkPermission.ALLOW),
                AclBinding(CkResourceType.GROUP, "ck-group", ResourcePatternType.LITERAL, "User:bob", "*",
                           CkOperation.READ, CkPermission.DENY)]
    for future in admin.create_acls(bindings, request_timeout=10).values():
        assert future.result(timeout=15) is None
    any_bob = AclBindingFilter(CkResourceType.ANY, None, ResourcePatternType.ANY, "User:bob", None,
                               CkOperation.ANY, CkPermission.ANY)
    described = admin.describe_acls(any_bob, request_timeout=10).result(timeout=15)
    assert sorted(described, key=str) == sorted(bindings, key=str)
    [deleted] = admin.delete_acls([any_bob], request_timeout=10).values()
    assert sorted(deleted.result(timeout=15), key=str) == sorted(bindings, key=str)
    assert admin.describe_acls(any_bob, request_timeout=10).result(timeout=15) == []


def test_acls_survive_a_restart(acls: AclBroker) -> None:
    with acls.connect("admin") as admin:
        admin.request(CreateAclsRequest(creations=[_creation("kept-", PREFIXED, operation=AclOperation.WRITE)]))
    acls.broker.restart()
    acls.wait_ready()
    with acls.connect("admin") as admin:
        described = admin.request(_describe("kept-", PREFIXED))
        assert isinstance(described, DescribeAclsResponse)
        assert [(r.resource_name, [a.operation for a in r.acls]) for r in described.resources] == [
            ("kept-", [AclOperation.WRITE])]


def test_security_disabled_without_an_authorizer() -> None:
    with BrokerProcess() as broker:
        from client.connection import BrokerConnection

        with BrokerConnection(broker.host, broker.port) as client:
            created = client.request(CreateAclsRequest(creations=[_creation("t")]))
            assert isinstance(created, CreateAclsResponse)
            assert [r.error_code for r in created.results] == [ErrorCode.SECURITY_DISABLED]
            described = client.request(_describe(None))
            assert isinstance(described, DescribeAclsResponse) and described.error_code == ErrorCode.SECURITY_DISABLED
            deleted = client.request(DeleteAclsRequest(filters=[_delete_filter(None)]))
            assert isinstance(deleted, DeleteAclsResponse)
            assert [r.error_code for r in deleted.filter_results] == [ErrorCode.SECURITY_DISABLED]


def _acls_cli(*args: str) -> tuple[int, str, str]:
    from click.testing import CliRunner

    from tools.cli import main

    result = CliRunner().invoke(main, ["acls", *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def test_pafka_acls_add_list_remove(acls: AclBroker, tmp_path: Path) -> None:
    config = tmp_path / "admin.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
                      "org.apache.kafka.common.security.plain.PlainLoginModule required "
                      'username="admin" password="admin-secret";\n')
    common = ["--bootstrap-server", acls.sasl_bootstrap, "--command-config", str(config)]
    code, out, err = _acls_cli(*common, "--add", "--allow-principal", "User:carol", "--operation", "Read",
                               "--operation", "Describe", "--topic", "cli-", "--resource-pattern-type", "prefixed")
    assert code == 0, err
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=cli-, patternType=PREFIXED)`" in out
    code, out, _ = _acls_cli(*common, "--list", "--topic", "cli-", "--resource-pattern-type", "prefixed")
    assert out.splitlines()[1:3] == [" \t(principal=User:carol, host=*, operation=DESCRIBE, permissionType=ALLOW) ",
                                     " \t(principal=User:carol, host=*, operation=READ, permissionType=ALLOW) "]
    code, out, _ = _acls_cli(*common, "--list")
    assert "name=cli-, patternType=PREFIXED" in out
    code, _, err = _acls_cli(*common, "--add", "--allow-principal", "User:carol", "--operation", "Read", "--cluster")
    assert code != 0 and "ResourceType Cluster only supports operations" in err
    code, _, _ = _acls_cli(*common, "--remove", "--force", "--allow-principal", "User:carol", "--operation", "Read",
                           "--topic", "cli-", "--resource-pattern-type", "prefixed")
    code, out, _ = _acls_cli(*common, "--list", "--topic", "cli-", "--resource-pattern-type", "prefixed")
    assert "operation=READ" not in out and "operation=DESCRIBE" in out
    code, out, _ = _acls_cli(*common, "--remove", "--force", "--topic", "cli-", "--resource-pattern-type", "prefixed")
    assert code == 0 and "User:carol" not in out
    # Without the admin's credentials the broker says no.
    code, _, err = _acls_cli("--bootstrap-server", acls.broker.bootstrap, "--list")
    assert code != 0 and "authoriz" in err.lower()
