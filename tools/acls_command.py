"""``pafka acls``: kafka-acls.sh over CreateAcls, DescribeAcls and DeleteAcls.

    pafka acls --bootstrap-server H:P --add --allow-principal User:alice --operation Read --topic t
    pafka acls --bootstrap-server H:P --add --deny-principal User:bob --operation Write \\
        --topic app- --resource-pattern-type prefixed
    pafka acls --bootstrap-server H:P --list [--topic t]
    pafka acls --bootstrap-server H:P --remove --force --allow-principal User:alice --operation Read --topic t

Resources: ``--topic``, ``--group``, ``--transactional-id`` (each may repeat) and ``--cluster``;
``--operation`` may repeat (default All), hosts default to ``*``. ``--remove`` without principals removes
every ACL of the named resources, as kafka-acls.sh does; it asks first unless ``--force``.
``--command-config FILE`` holds the client's properties (security.protocol, sasl.*, ssl.*).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from client.acl_admin import Acl, AclAdmin
from client.client import KafkaClient
from client.errors import KafkaClientError
from protocol.acl_types import CLUSTER_NAME, AclOperation, AclPermissionType, PatternType, ResourceType
from tools.common import command_config_security, fail

#: Kafka's AclCommand: the operations each resource type takes (besides All).
_OPERATIONS = {
    ResourceType.TOPIC: {"Read", "Write", "Create", "Describe", "Delete", "Alter", "DescribeConfigs", "AlterConfigs"},
    ResourceType.GROUP: {"Read", "Describe", "Delete"},
    ResourceType.CLUSTER: {"Create", "ClusterAction", "DescribeConfigs", "AlterConfigs", "IdempotentWrite",
                           "Alter", "Describe"},
    ResourceType.TRANSACTIONAL_ID: {"Describe", "Write"},
}


def _resources(topics: tuple[str, ...], groups: tuple[str, ...], transactional_ids: tuple[str, ...],
               cluster: bool) -> list[tuple[ResourceType, str]]:
    found = [(ResourceType.TOPIC, t) for t in topics] + [(ResourceType.GROUP, g) for g in groups]
    found += [(ResourceType.TRANSACTIONAL_ID, t) for t in transactional_ids]
    return found + ([(ResourceType.CLUSTER, CLUSTER_NAME)] if cluster else [])


def _entries(allow: tuple[str, ...], deny: tuple[str, ...], allow_hosts: tuple[str, ...], deny_hosts: tuple[str, ...],
             operations: list[AclOperation]) -> list[tuple[str, str, AclOperation, AclPermissionType]]:
    entries = [(p, h, o, AclPermissionType.ALLOW) for p in allow for h in (allow_hosts or ("*",)) for o in operations]
    return entries + [(p, h, o, AclPermissionType.DENY) for p in deny for h in (deny_hosts or ("*",))
                      for o in operations]


def _check_operations(resources: list[tuple[ResourceType, str]], operations: list[AclOperation]) -> None:
    for resource_type, _ in resources:
        unsupported = [o.kafka_name for o in operations
                       if o != AclOperation.ALL and o.kafka_name not in _OPERATIONS[resource_type]]
        if unsupported:
            fail(f"ResourceType {resource_type.kafka_name} only supports operations "
                 f"{','.join(sorted(_OPERATIONS[resource_type] | {'All'}))}")


def _print_acls(admin: AclAdmin, resource_filter: Acl) -> None:
    by_resource: dict[tuple[ResourceType, str | None, PatternType], list[Acl]] = {}
    for acl in admin.describe_acls(resource_filter):
        by_resource.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(acl)
    for (resource_type, name, pattern_type), acls in sorted(by_resource.items(), key=lambda i: (i[0][0], str(i[0][1]))):
        click.echo(f"Current ACLs for resource `ResourcePattern(resourceType={resource_type.name}, name={name}, "
                   f"patternType={pattern_type.name})`: ")
        for acl in sorted(acls, key=str):
            click.echo(f" \t{acl} ")
        click.echo("")


def _run(admin: AclAdmin, action: str, resources: list[tuple[ResourceType, str]], pattern_type: PatternType,
         entries: list[tuple[str, str, AclOperation, AclPermissionType]], force: bool) -> None:
    if action == "list":
        listed: list[tuple[ResourceType, str | None]] = [*resources] or [(ResourceType.ANY, None)]
        for listed_type, listed_name in listed:
            # Listing everything spans every pattern type, as kafka-acls.sh --list does.
            _print_acls(admin, Acl(listed_type, listed_name, pattern_type if resources else PatternType.ANY, None,
                                   None, AclOperation.ANY, AclPermissionType.ANY))
        return
    if not resources:
        fail("You must specify one of: --topic, --cluster, --group, --transactional-id when trying to "
             f"{action} ACLs.")
    for resource_type, name in resources:
        if action == "add":
            if not entries:
                fail("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
            click.echo(f"Adding ACLs for resource `ResourcePattern(resourceType={resource_type.name}, name={name}, "
                       f"patternType={pattern_type.name})`: ")
            acls = [Acl(resource_type, name, pattern_type, *entry) for entry in entries]
            for acl in acls:
                click.echo(f" \t{acl} ")
            click.echo("")
            admin.create_acls(acls)
        else:
            if not force and not click.confirm(f"Are you sure you want to remove ACLs from resource "
                                               f"{resource_type.kafka_name}:{name}?"):
                continue
            removed = ([Acl(resource_type, name, pattern_type, *entry) for entry in entries] or
                       [Acl(resource_type, name, pattern_type, None, None, AclOperation.ANY, AclPermissionType.ANY)])
            admin.delete_acls(removed)
        _print_acls(admin, Acl(resource_type, name, pattern_type, None, None, AclOperation.ANY,
                               AclPermissionType.ANY))


@click.command("acls")
@click.option("--bootstrap-server", required=True, help="HOST:PORT[,HOST:PORT...] of the brokers to connect to.")
@click.option("--command-config", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Client properties: security.protocol, sasl.mechanism, sasl.jaas.config, ssl.*.")
@click.option("--add", "action", flag_value="add", help="Add ACLs.")
@click.option("--remove", "action", flag_value="remove", help="Remove ACLs.")
@click.option("--list", "action", flag_value="list", help="List ACLs (of the named resources, or all).")
@click.option("--allow-principal", "allow_principals", multiple=True, help="Type:name, e.g. User:alice; User:* anyone.")
@click.option("--deny-principal", "deny_principals", multiple=True, help="Type:name to deny.")
@click.option("--allow-host", "allow_hosts", multiple=True, help="IP address allowed (default *).")
@click.option("--deny-host", "deny_hosts", multiple=True, help="IP address denied (default *).")
@click.option("--operation", "operations", multiple=True, help="Read, Write, Create, Delete, Alter, Describe, "
              "ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, All (default All).")
@click.option("--topic", "topics", multiple=True, help="A topic (* for all).")
@click.option("--group", "groups", multiple=True, help="A consumer group (* for all).")
@click.option("--transactional-id", "transactional_ids", multiple=True, help="A transactional id (* for all).")
@click.option("--cluster", is_flag=True, help="The cluster resource.")
@click.option("--resource-pattern-type", default="literal", show_default=True,
              type=click.Choice(["literal", "prefixed", "any", "match"], case_sensitive=False),
              help="literal or prefixed (any and match for --list and --remove).")
@click.option("--force", is_flag=True, help="Remove without asking.")
@click.option("--timeout-ms", type=int, default=30_000, show_default=True, help="Request timeout.")
def acls_command(bootstrap_server: str, command_config: Path | None, action: str | None,
                 allow_principals: tuple[str, ...], deny_principals: tuple[str, ...], allow_hosts: tuple[str, ...],
                 deny_hosts: tuple[str, ...], operations: tuple[str, ...], topics: tuple[str, ...],
                 groups: tuple[str, ...], transactional_ids: tuple[str, ...], cluster: bool,
                 resource_pattern_type: str, force: bool, timeout_ms: int) -> None:
    """Add, remove and list ACLs (kafka-acls.sh)."""
    if action is None:
        fail("Command must include exactly one action: --list, --add, --remove.")
    pattern_type = PatternType.from_kafka_name(resource_pattern_type)
    if action == "add" and pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        fail(f"A '--resource-pattern-type' value of '{resource_pattern_type}' is not valid when adding acls.")
    try:
        parsed_operations = [AclOperation.from_kafka_name(o) for o in operations] or [AclOperation.ALL]
    except ValueError as exc:
        fail(str(exc))
    resources = _resources(topics, groups, transactional_ids, cluster)
    _check_operations(resources, parsed_operations)
    entries = _entries(allow_principals, deny_principals, allow_hosts, deny_hosts, parsed_operations)
    security = command_config_security(command_config)
    try:
        with KafkaClient(bootstrap_server, client_id="pafka-acls", timeout=timeout_ms / 1000 + 5,
                         security=security) as client:
            _run(AclAdmin(client), action, resources, pattern_type, entries, force)
    except KafkaClientError as exc:
        fail(f"Error while executing ACL command: {exc}")
    sys.stdout.flush()
