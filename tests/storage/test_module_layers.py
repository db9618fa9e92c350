"""storage/'s modules import each other in one direction (storage/__init__.py lists them bottom-up).

Every import counts, also one inside a function or under TYPE_CHECKING: those
are how a loop used to be held apart.
"""

from __future__ import annotations

import ast
from pathlib import Path

STORAGE = Path(__file__).resolve().parents[2] / "storage"


def _storage_imports(path: Path, modules: set[str]) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found.update(name for name in names if name in modules)
    return found


def _import_graph() -> dict[str, set[str]]:
    paths = {f"storage.{path.stem}": path for path in STORAGE.glob("*.py") if path.stem != "__init__"}
    modules = set(paths)
    return {name: _storage_imports(path, modules) - {name} for name, path in paths.items()}


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A loop of imports as [a, b, ..., a], or None (depth-first search)."""
    done: set[str] = set()
    stack: list[str] = []

    def visit(module: str) -> list[str] | None:
        if module in stack:
            return [*stack[stack.index(module):], module]
        if module in done:
            return None
        stack.append(module)
        for imported in sorted(graph[module]):
            cycle = visit(imported)
            if cycle is not None:
                return cycle
        stack.pop()
        done.add(module)
        return None

    for module in sorted(graph):
        cycle = visit(module)
        if cycle is not None:
            return cycle
    return None


def test_storage_modules_have_no_import_loop() -> None:
    graph = _import_graph()
    assert "storage.log" in graph and "storage.log_loader" in graph["storage.log"]  # the walk sees imports
    assert _find_cycle(graph) is None, " -> ".join(_find_cycle(graph) or [])


def test_the_cycle_finder_finds_a_loop() -> None:
    graph = {"storage.a": {"storage.b"}, "storage.b": {"storage.c"}, "storage.c": {"storage.a"}}
    assert _find_cycle(graph) == ["storage.a", "storage.b", "storage.c", "storage.a"]
