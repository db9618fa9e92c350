"""The authorizer's matching rules (Kafka's AclAuthorizer), and the lone broker's ACL file."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from broker.security.acl_authorizer import AclAuthorizer, parse_super_users
from broker.security.acl_binding import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    ResourcePattern,
    ResourcePatternFilter,
)
from broker.security.acl_store import (
    FileAclStore,
    change_notification,
    decode_entries,
    decode_literal_change,
    decode_prefixed_change,
    encode_entries,
    znode_path,
)
from broker.security.kafka_principal import KafkaPrincipal
from protocol.acl_types import AclOperation as Op
from protocol.acl_types import AclPermissionType as Perm
from protocol.acl_types import PatternType, ResourceType

ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")
HOST = "127.0.0.1"
T, G, C, TX = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID


def _acl(resource_type: ResourceType, name: str, operation: Op, permission: Perm = Perm.ALLOW,
         principal: str = "User:alice", host: str = "*", pattern: PatternType = PatternType.LITERAL) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern), AccessControlEntry(principal, host, operation, permission))


def _authorizer(tmp_path: Path, *bindings: AclBinding, super_users: str = "", allow_everyone: bool = False
                ) -> AclAuthorizer:
    authorizer = AclAuthorizer(FileAclStore(str(tmp_path)), parse_super_users(super_users), allow_everyone)
    asyncio.run(authorizer.start())
    errors = asyncio.run(authorizer.create_acls(bindings))
    assert errors == [None] * len(bindings)
    return authorizer


def test_no_acl_denies_unless_allow_everyone(tmp_path: Path) -> None:
    assert not _authorizer(tmp_path).authorize(ALICE, HOST, Op.READ, T, "t")
    assert _authorizer(tmp_path / "open", allow_everyone=True).authorize(ALICE, HOST, Op.READ, T, "t")


def test_allow_everyone_does_not_open_a_resource_with_acls(tmp_path: Path) -> None:
    authorizer = _authorizer(tmp_path, _acl(T, "t", Op.READ, principal="User:bob"), allow_everyone=True)
    assert not authorizer.authorize(ALICE, HOST, Op.READ, T, "t")
    assert authorizer.authorize(ALICE, HOST, Op.READ, T, "other")


def test_literal_allow_is_for_that_name_and_operation(tmp_path: Path) -> None:
    authorizer = _authorizer(tmp_path, _acl(T, "t", Op.READ))
    assert authorizer.authorize(ALICE, HOST, Op.READ, T, "t")
    assert not authorizer.authorize(ALICE, HOST, Op.WRITE, T, "t")
    assert not authorizer.authorize(ALICE, HOST, Op.READ, T, "t2")
    assert not authorizer.authorize(BOB, HOST, Op.READ, T, "t")
    assert not authorizer.authorize(ALICE, HOST, Op.READ, G, "t")


@pytest.mark.parametrize(("granted", "implied"), [
    (Op.READ, Op.DESCRIBE), (Op.WRITE, Op.DESCRIBE), (Op.DELETE, Op.DESCRIBE), (Op.ALTER, Op.DESCRIBE),
    (Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS), (Op.ALL, Op.WRITE), (Op.ALL, Op.ALTER_CONFIGS),
])
def test_implied_operations(tmp_path: Path, granted: Op, implied: Op) -> None:
    assert _authorizer(tmp_path, _acl(T, "t", granted)).authorize(ALICE, HOST, implied, T, "t")


@pytest.mark.parametrize(("granted", "not_implied"), [
    (Op.DESCRIBE, Op.READ), (Op.WRITE, Op.READ), (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS), (Op.CREATE, Op.DESCRIBE),
])
def test_operations_not_implied(tmp_path: Path, granted: Op, not_implied: Op) -> None:
    assert not _authorizer(tmp_path, _acl(T, "t", granted)).authorize(ALICE, HOST, not_implied, T, "t")


def test_deny_wins_over_allow(tmp_path: Path) -> None:
    authorizer = _authorizer(tmp_path, _acl(T, "t", Op.ALL), _acl(T, "t", Op.WRITE, Perm.DENY))
    assert authorizer.authorize(ALICE, HOST, Op.READ, T, "t")
    assert not authorizer.authorize(ALICE, HOST, Op.WRITE, T, "t")


def test_deny_all_on_the_wildcard_principal_denies_everyone(tmp_path: Path) -> None:
    authorizer = _authorizer(tmp_path, _acl(T, "t", Op.READ), _acl(T, "*", Op.ALL, Perm.DENY, principal="User:*"))
    assert not authorizer.authorize(ALICE, HOST, Op.READ, T, "t")


def test_deny_of_read_does_not_deny_describe(tmp_path: Path) -> None:
    # Implication applies to ALLOW only: Kafka's DENY matches the operation itself or ALL.
    authorizer = _authorizer(tmp_path, _acl(T, "t", Op.DESCRIBE), _acl(T, "t", Op.READ, Perm.DENY))
    assert authorizer.authorize(ALICE, HOST, Op.DESCRIBE, T, "t")
    assert not authorizer.authorize(ALICE, HOST, Op.READ, T, "t")


def test_wildcard_resource_and_principal(tmp_path: Path) -> None:
    authorizer = _authorizer(tmp_path, _acl(T, "*", Op.READ, principal="User:*"))
    assert authorizer.authorize(BOB, HOST, Op.READ, T, "anything")
    assert not authorizer.authorize(BOB, HOST, Op.READ, G, "anything")


def test_prefixed_patterns(tmp_path: Path) -> None:
    authorizer = _authorizer(tmp_path, _acl(T, "app-", Op.WRITE, pattern=PatternType.PREFIXED),
                             _acl(T, "app-secret", Op.WRITE, Perm.DENY, pattern=PatternType.PREFIXED))
    assert authorizer.authorize(ALICE, HOST, Op.WRITE, T, "app-1")
    assert authorizer.authorize(ALICE, HOST, Op.WRITE, T, "app-")
    assert not authorizer.authorize(ALICE, HOST, Op.WRITE, T, "ap")
    assert not authorizer.authorize(ALICE, HOST, Op.WRITE, T, "app-secret-2")
    # A literal "app-" names only that topic.
    literal = _authorizer(tmp_path / "literal", _acl(T, "app-", Op.WRITE))
    assert not literal.authorize(ALICE, HOST, Op.WRITE, T, "app-1")


def test_host_matching(tmp_path: Path) -> None:
    authorizer = _authorizer(tmp_path, _acl(T, "t", Op.READ, host="10.0.0.1"),
                             _acl(T, "t", Op.WRITE, Perm.DENY, host="10.0.0.2"), _acl(T, "t", Op.WRITE))
    assert authorizer.authorize(ALICE, "10.0.0.1", Op.READ, T, "t")
    assert not authorizer.authorize(ALICE, "10.0.0.2", Op.READ, T, "t")
    assert authorizer.authorize(ALICE, "10.0.0.1", Op.WRITE, T, "t")
    assert not authorizer.authorize(ALICE, "10.0.0.2", Op.WRITE, T, "t")


def test_super_users_bypass_deny(tmp_path: Path) -> None:
    assert parse_super_users(" User:admin ;User:broker;") == {"User:admin", "User:broker"}
    authorizer = _authorizer(tmp_path, _acl(T, "*", Op.ALL, Perm.DENY, principal="User:*"),
                             super_users="User:admin;User:alice")
    assert authorizer.authorize(ALICE, HOST, Op.WRITE, T, "t")
    assert authorizer.authorize(ALICE, HOST, Op.CLUSTER_ACTION, C, "kafka-cluster")
    assert not authorizer.authorize(BOB, HOST, Op.WRITE, T, "t")


def test_cached_decisions_follow_changes(tmp_path: Path) -> None:
    authorizer = _authorizer(tmp_path, _acl(T, "t", Op.READ))
    assert authorizer.authorize(ALICE, HOST, Op.READ, T, "t")
    deny = _acl(T, "t", Op.READ, Perm.DENY)
    asyncio.run(authorizer.create_acls([deny]))
    assert not authorizer.authorize(ALICE, HOST, Op.READ, T, "t")
    asyncio.run(authorizer.delete_acls([_filter(T, "t", PatternType.LITERAL, permission=Perm.DENY)]))
    assert authorizer.authorize(ALICE, HOST, Op.READ, T, "t")


def test_authorize_by_resource_type(tmp_path: Path) -> None:
    # IdempotentWrite through "WRITE on any topic": a prefixed allow not covered by a deny.
    allowed = _authorizer(tmp_path / "a", _acl(T, "app-", Op.WRITE, pattern=PatternType.PREFIXED))
    assert allowed.authorize_by_resource_type(ALICE, HOST, Op.WRITE, T)
    assert not allowed.authorize_by_resource_type(BOB, HOST, Op.WRITE, T)
    dominated = _authorizer(tmp_path / "b", _acl(T, "app-1", Op.WRITE),
                            _acl(T, "app", Op.WRITE, Perm.DENY, pattern=PatternType.PREFIXED))
    assert not dominated.authorize_by_resource_type(ALICE, HOST, Op.WRITE, T)
    wildcard_deny = _authorizer(tmp_path / "c", _acl(T, "x", Op.WRITE), _acl(T, "*", Op.ALL, Perm.DENY))
    assert not wildcard_deny.authorize_by_resource_type(ALICE, HOST, Op.WRITE, T)


def test_authorized_operations_bitfield(tmp_path: Path) -> None:
    authorizer = _authorizer(tmp_path, _acl(T, "t", Op.READ))
    bits = authorizer.authorized_operations(ALICE, HOST, T, "t")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE)


def test_invalid_bindings_are_refused(tmp_path: Path) -> None:
    authorizer = _authorizer(tmp_path)
    errors = asyncio.run(authorizer.create_acls([
        _acl(C, "other", Op.ALTER), _acl(T, "", Op.READ), _acl(T, "t", Op.ANY), _acl(T, "t", Op.READ, Perm.ANY),
        _acl(T, "t", Op.READ, pattern=PatternType.MATCH), _acl(T, "t", Op.READ, principal="alice"),
        _acl(C, "kafka-cluster", Op.ALTER),
    ]))
    assert all(error for error in errors[:-1]) and errors[-1] is None
    assert "kafka-cluster" in str(errors[0])


def _filter(resource_type: ResourceType, name: str | None, pattern: PatternType, principal: str | None = None,
            operation: Op = Op.ANY, permission: Perm = Perm.ANY) -> AclBindingFilter:
    return AclBindingFilter(ResourcePatternFilter(resource_type, name, pattern),
                            AccessControlEntryFilter(principal, None, operation, permission))


def test_filters(tmp_path: Path) -> None:
    literal, wildcard = _acl(T, "app-1", Op.READ), _acl(T, "*", Op.READ)
    prefixed, other = _acl(T, "app-", Op.WRITE, pattern=PatternType.PREFIXED), _acl(G, "app-1", Op.READ)
    authorizer = _authorizer(tmp_path, literal, wildcard, prefixed, other)
    assert set(authorizer.acls(_filter(ResourceType.ANY, None, PatternType.ANY))) == {literal, wildcard, prefixed, other}
    assert set(authorizer.acls(_filter(T, "app-1", PatternType.MATCH))) == {literal, wildcard, prefixed}
    assert set(authorizer.acls(_filter(T, "app-", PatternType.ANY))) == {prefixed}
    assert set(authorizer.acls(_filter(T, "app-", PatternType.LITERAL))) == set()
    assert set(authorizer.acls(_filter(T, None, PatternType.PREFIXED))) == {prefixed}
    assert set(authorizer.acls(_filter(ResourceType.ANY, None, PatternType.ANY, operation=Op.WRITE))) == {prefixed}
    deleted = asyncio.run(authorizer.delete_acls([_filter(T, "app-1", PatternType.MATCH, operation=Op.READ)]))
    assert set(deleted[0]) == {literal, wildcard}
    assert set(authorizer.bindings()) == {prefixed, other}


def test_acl_file_survives_a_restart(tmp_path: Path) -> None:
    acl = _acl(T, "app-", Op.WRITE, Perm.DENY, pattern=PatternType.PREFIXED, host="10.1.2.3")
    _authorizer(tmp_path, acl)
    again = AclAuthorizer(FileAclStore(str(tmp_path)), frozenset(), False)
    asyncio.run(again.start())
    assert again.bindings() == [acl]


def test_kafka_zookeeper_encoding() -> None:
    acl = _acl(ResourceType.TRANSACTIONAL_ID, "tx", Op.DESCRIBE_CONFIGS)
    data = encode_entries(frozenset({acl.entry}))
    assert data == (b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",'
                    b'"operation":"DescribeConfigs","host":"*"}]}')
    assert decode_entries(data) == {acl.entry}
    assert znode_path(acl.pattern) == "/kafka-acl/TransactionalId/tx"
    prefixed = ResourcePattern(T, "app-", PatternType.PREFIXED)
    assert znode_path(prefixed) == "/kafka-acl-extended/prefixed/Topic/app-"
    root, notification = change_notification(acl.pattern)
    assert (root, notification) == ("/kafka-acl-changes", b"TransactionalId:tx")
    assert decode_literal_change(notification) == acl.pattern
    root, notification = change_notification(prefixed)
    assert root == "/kafka-acl-extended-changes"
    assert decode_prefixed_change(notification) == prefixed
