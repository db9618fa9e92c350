"""Where ACLs live: ZooKeeper under Kafka's layout in a cluster, a file in the data dir on a lone broker.

ZooKeeper (Kafka's ZkAclStore): one znode per resource pattern holding every
entry of that pattern, ``/kafka-acl/<ResourceType>/<name>`` for LITERAL and
``/kafka-acl-extended/prefixed/<ResourceType>/<name>`` for PREFIXED, as
``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
"operation":"Read","host":"*"}]}``. Every write is conditional on the version
read (brokers may change the same resource at once) and is announced under
``/kafka-acl-changes`` (data ``Topic:foo``) or ``/kafka-acl-extended-changes``
(``{"version":1,"resourceType":"Topic","name":"foo","patternType":"PREFIXED"}``),
from which every broker re-reads that one resource.

A lone broker keeps every pattern in ``kafka-acls.json`` in its first log dir,
rewritten atomically (and synced) before a change is acknowledged.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from broker.security.acl_binding import AccessControlEntry, ResourcePattern
from controller.zk import zk_data as zd
from controller.zk.kafka_zk_client import KafkaZkClient
from protocol.acl_types import AclOperation, AclPermissionType, PatternType, ResourceType
from storage.checkpoints import write_atomically

#: The lone broker's ACLs file, in its first log dir.
ACLS_FILE = "kafka-acls.json"

Entries = frozenset[AccessControlEntry]
#: Current entries of a resource -> its new entries.
EntriesChange = Callable[[Entries], Entries]


class AclStore(Protocol):
    async def load_all(self) -> dict[ResourcePattern, Entries]: ...

    async def update(self, pattern: ResourcePattern, change: EntriesChange) -> Entries:
        """Apply ``change`` to the stored entries of ``pattern``; the entries now stored."""
        ...


# -- Kafka's JSON ----------------------------------------------------------------------------------
def encode_entries(entries: Entries) -> bytes:
    acls = [{"principal": e.principal, "permissionType": e.permission_type.kafka_name,
             "operation": e.operation.kafka_name, "host": e.host}
            for e in sorted(entries, key=_entry_order)]
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_entries(data: bytes | None) -> Entries:
    if not data:
        return frozenset()
    value = json.loads(data)
    return frozenset(_entry(acl) for acl in value.get("acls", []))


def _entry(acl: Mapping[str, Any]) -> AccessControlEntry:
    return AccessControlEntry(str(acl["principal"]), str(acl["host"]),
                              AclOperation.from_kafka_name(str(acl["operation"])),
                              AclPermissionType.from_kafka_name(str(acl["permissionType"])))


def _entry_order(entry: AccessControlEntry) -> tuple[str, str, int, int]:
    return entry.principal, entry.host, entry.operation, entry.permission_type


# -- ZooKeeper ---------------------------------------------------------------------------------------
def znode_path(pattern: ResourcePattern) -> str:
    root = zd.LITERAL_ACL_PATH if pattern.pattern_type == PatternType.LITERAL else zd.PREFIXED_ACL_PATH
    return f"{root}/{pattern.resource_type.kafka_name}/{pattern.name}"


def pattern_of_path(path: str) -> ResourcePattern:
    for root, pattern_type in ((zd.PREFIXED_ACL_PATH, PatternType.PREFIXED), (zd.LITERAL_ACL_PATH, PatternType.LITERAL)):
        if path.startswith(root + "/"):
            type_name, _, name = path[len(root) + 1:].partition("/")
            return ResourcePattern(ResourceType.from_kafka_name(type_name), name, pattern_type)
    raise ValueError(f"not an ACL znode: {path}")


def change_notification(pattern: ResourcePattern) -> tuple[str, bytes]:
    """(change root, notification data) announcing a change of ``pattern``'s znode."""
    if pattern.pattern_type == PatternType.LITERAL:
        return zd.LITERAL_ACL_CHANGES_PATH, f"{pattern.resource_type.kafka_name}:{pattern.name}".encode()
    data = {"version": 1, "resourceType": pattern.resource_type.kafka_name, "name": pattern.name,
            "patternType": pattern.pattern_type.name}
    return zd.PREFIXED_ACL_CHANGES_PATH, json.dumps(data, separators=(",", ":")).encode()


def decode_literal_change(data: bytes) -> ResourcePattern:
    type_name, _, name = data.decode().partition(":")
    return ResourcePattern(ResourceType.from_kafka_name(type_name), name, PatternType.LITERAL)


def decode_prefixed_change(data: bytes) -> ResourcePattern:
    value = json.loads(data)
    return ResourcePattern(ResourceType.from_kafka_name(str(value["resourceType"])), str(value["name"]),
                           PatternType.from_kafka_name(str(value["patternType"])))


class ZkAclStore:
    def __init__(self, zk: KafkaZkClient) -> None:
        self.zk = zk

    async def load_all(self) -> dict[ResourcePattern, Entries]:
        await self.zk.create_acl_paths()
        found: dict[ResourcePattern, Entries] = {}
        for root in (zd.LITERAL_ACL_PATH, zd.PREFIXED_ACL_PATH):
            for path, data in (await self.zk.get_acl_znodes(root)).items():
                entries = decode_entries(data)
                if entries:
                    found[pattern_of_path(path)] = entries
        return found

    async def load(self, pattern: ResourcePattern) -> Entries:
        found = await self.zk.get_data(znode_path(pattern))
        return decode_entries(found[0]) if found is not None else frozenset()

    async def update(self, pattern: ResourcePattern, change: EntriesChange) -> Entries:
        def change_data(data: bytes | None) -> bytes | None:
            current = decode_entries(data)
            new = change(current)
            if new == current:
                return data
            return encode_entries(new) if new else None

        changes_root, notification = change_notification(pattern)
        written = await self.zk.update_acl_znode(znode_path(pattern), change_data, changes_root, notification)
        return decode_entries(written)


# -- a lone broker's file ------------------------------------------------------------------------
class FileAclStore:
    """``{"version":1,"resources":[{"resourceType":"Topic","name":"t","patternType":"LITERAL","acls":[...]}]}``."""

    def __init__(self, log_dir: str) -> None:
        self.path = Path(log_dir) / ACLS_FILE
        self._acls: dict[ResourcePattern, Entries] = {}
        self._lock = asyncio.Lock()

    async def load_all(self) -> dict[ResourcePattern, Entries]:
        self._acls = await asyncio.to_thread(self._read)
        return dict(self._acls)

    def _read(self) -> dict[ResourcePattern, Entries]:
        try:
            value = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        found: dict[ResourcePattern, Entries] = {}
        for resource in value.get("resources", []):
            pattern = ResourcePattern(ResourceType.from_kafka_name(str(resource["resourceType"])),
                                      str(resource["name"]), PatternType.from_kafka_name(str(resource["patternType"])))
            found[pattern] = frozenset(_entry(acl) for acl in resource["acls"])
        return found

    async def update(self, pattern: ResourcePattern, change: EntriesChange) -> Entries:
        async with self._lock:  # one rewrite at a time: each starts from the state the last one left
            current = self._acls.get(pattern, frozenset())
            new = change(current)
            if new == current:
                return current
            updated = dict(self._acls)
            if new:
                updated[pattern] = new
            else:
                updated.pop(pattern, None)
            await asyncio.to_thread(self._write, updated)
            self._acls = updated
            return new

    def _write(self, acls: Mapping[ResourcePattern, Entries]) -> None:
        resources = [{"resourceType": p.resource_type.kafka_name, "name": p.name, "patternType": p.pattern_type.name,
                      "acls": json.loads(encode_entries(entries))["acls"]}
                     for p, entries in sorted(acls.items(), key=lambda item: (item[0].resource_type, item[0].name,
                                                                              item[0].pattern_type))]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path, json.dumps({"version": 1, "resources": resources}, indent=1), mode=0o600)
