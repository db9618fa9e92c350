"""ReplicaManager is the only way into partition data: no handler or coordinator reaches a Log.

Walks the source of broker/handlers/ and coordinator/: none may import the
storage modules that hold a partition's data (the log, its segments, files and
manager) nor read a ``.log`` / ``.log_manager`` attribute (a Partition's log, the
server's log manager). Appends, reads, offset lookups, DeleteRecords and
DescribeProducers all go through ReplicaManager.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN_MODULES = ("storage.log", "storage.log_manager", "storage.log_segment", "storage.segment_list",
                     "storage.file_records", "storage.log_loader", "storage.log_offsets", "storage.log_retention")
FORBIDDEN_ATTRIBUTES = ("log", "log_manager", "segments")


def violations(source: str, name: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module in FORBIDDEN_MODULES:
            found.append(f"{name}:{node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Import):
            found += [f"{name}:{node.lineno}: import {a.name}" for a in node.names if a.name in FORBIDDEN_MODULES]
        elif isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_ATTRIBUTES:
            found.append(f"{name}:{node.lineno}: .{node.attr}")
    return found


def _sources() -> list[Path]:
    return sorted((ROOT / "broker" / "handlers").glob("*.py")) + sorted((ROOT / "coordinator").rglob("*.py"))


def test_handlers_and_coordinators_reach_partition_data_only_through_the_replica_manager() -> None:
    sources = _sources()
    assert len(sources) > 30  # the walk found the handlers and the coordinator
    found = [v for path in sources for v in violations(path.read_text(), str(path.relative_to(ROOT)))]
    assert not found, "partition data reached around ReplicaManager:\n" + "\n".join(found)


def test_the_check_catches_a_partition_log_and_a_storage_import() -> None:
    planted = "from storage.log import Log\n\ndef handle(p):\n    return p.log.read(0, 1)\n"
    assert violations(planted, "planted.py") == ["planted.py:1: from storage.log import ...", "planted.py:4: .log"]
