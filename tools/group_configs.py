"""``pafka configs --entity-type groups``: kafka-configs.sh's describe and alter of groups' configs.

Describe prints the configs the group sets itself (``--all``: every group config,
with the broker's defaults), alter sends IncrementalAlterConfigs: SET for each
``--add-config`` key, DELETE for each ``--delete-config`` key, which must be one the
group sets (``Invalid config(s): k``), as kafka-configs.sh checks before it sends.
Without ``--entity-name`` describe covers every group the cluster lists. The
lines are kafka-configs.sh's.
"""

from __future__ import annotations

import click

from client.admin import AdminClient, ConfigEntry
from client.client import KafkaClient
from client.groups import GroupAdmin
from protocol.config_types import AlterConfigOp, ConfigResourceType, ConfigSource
from tools.common import fail

GROUPS = "groups"


def check_group_entities(types: list[str], names: list[str], alter: bool) -> None:
    """kafka-configs.sh's checks of a groups entity: alone, named, never the default."""
    if len(types) > 1:
        fail("Only 'users' and 'clients' entity types may be specified together")
    if any(name == "" for name in names):
        fail("The default entity is not allowed for entity type groups")
    if alter and not names:
        fail("an entity-name must be specified with --alter of groups")


def _group_configs(admin: AdminClient, group: str, describe_all: bool) -> list[ConfigEntry]:
    entries = admin.describe_configs(ConfigResourceType.GROUP, group)
    return sorted((e for e in entries.values() if describe_all or e.source == ConfigSource.GROUP_CONFIG),
                  key=lambda e: e.name)


def describe_group_configs(client: KafkaClient, timeout_ms: int, group: str | None, describe_all: bool) -> None:
    admin = AdminClient(client, timeout_ms=timeout_ms)
    groups = [group] if group else sorted({g.group_id for g in GroupAdmin(client, timeout=timeout_ms / 1000)
                                          .list_groups()})
    for name in groups:
        heading = "All configs" if describe_all else "Dynamic configs"
        click.echo(f"{heading} for group {name} are:")
        for entry in _group_configs(admin, name, describe_all):
            source = entry.source.name
            click.echo(f"  {entry.name}={entry.value} sensitive={str(entry.is_sensitive).lower()} "
                       f"synonyms={{{source}:{entry.name}={entry.value}}}")


def alter_group_configs(client: KafkaClient, timeout_ms: int, group: str, added: dict[str, str],
                        deleted: list[str]) -> None:
    admin = AdminClient(client, timeout_ms=timeout_ms)
    current = {e.name for e in _group_configs(admin, group, describe_all=False)}
    missing = [name for name in deleted if name not in current]
    if missing:
        fail(f"Invalid config(s): {','.join(missing)}")
    operations: list[tuple[str, AlterConfigOp, str | None]] = [
        (name, AlterConfigOp.SET, value) for name, value in added.items()]
    operations += [(name, AlterConfigOp.DELETE, None) for name in deleted]
    admin.incremental_alter_configs(ConfigResourceType.GROUP, group, operations)
    click.echo(f"Completed updating config for group {group}.")
