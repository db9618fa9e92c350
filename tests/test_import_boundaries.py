"""Which of our packages may import which, checked by walking every import.

The layers (CONTRIBUTING.md, "Architecture rules"; issue 14): protocol <- storage
<- replication <- coordinator <- controller <- broker <- tools, with pafka's own
client on protocol alone and the Spark jobs on the client and protocol. A package
imports only the layers below it, and no set of our modules imports itself
round in a loop.

Every import counts: top-level ones, those inside functions (which only hide
a dependency from the interpreter's start-up order), those under
``if TYPE_CHECKING:`` (a type named in a signature is still a dependency),
relative ones (resolved against the importing module's package) and
``importlib.import_module`` / ``__import__`` calls whose target is spelled out.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Package -> the other packages of ours it may import.
ALLOWED: dict[str, frozenset[str]] = {
    "protocol": frozenset(),
    "storage": frozenset({"protocol"}),
    "replication": frozenset({"protocol", "storage", "client"}),
    "coordinator": frozenset({"protocol", "storage", "replication", "client"}),
    "controller": frozenset({"protocol", "storage", "replication", "coordinator", "client"}),
    "broker": frozenset({"protocol", "storage", "replication", "coordinator", "controller", "client"}),
    "client": frozenset({"protocol"}),
    "spark_jobs": frozenset({"protocol", "client"}),
    # The web console is a separate process that talks to any Kafka cluster as a client, so it sits on the
    # client alone, as the Spark jobs do; tools/ registers its `pafka console` command.
    "console": frozenset({"protocol", "client"}),
    # The command-line tools sit on top: the broker's own command, the client tools, dump-log over storage.
    "tools": frozenset({"protocol", "storage", "replication", "coordinator", "controller", "broker", "client", "console"}),
    # The pytest plugin runs brokers as processes and talks to them as a client; nothing imports it.
    "pytest_pafka": frozenset({"protocol", "storage", "replication", "coordinator", "controller", "broker", "client"}),
}

#: Top-level folders of ours that are not installed packages: no package may import them.
NOT_PACKAGES = frozenset({"tests", "benchmarks", "testing", "fuzz"})


@dataclasses.dataclass(frozen=True)
class Import:
    """One import statement (or one name of it) that reaches a module of ours."""

    file: Path  # relative to the scanned root
    line: int
    statement: str
    importer: str  # dotted module name of the importing file
    target: str  # dotted name imported: the most specific module of ours it names, when one exists

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.statement}"


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def python_files(root: Path, packages: frozenset[str] | set[str]) -> Iterator[Path]:
    for package in sorted(packages):
        if (root / package).is_dir():
            yield from sorted(p for p in (root / package).rglob("*.py") if "__pycache__" not in p.parts)


def _dynamic_target(call: ast.Call) -> str | None:
    """The module an ``import_module("...")`` / ``__import__("...")`` call names, as far as it is spelled out."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name not in ("import_module", "__import__") or not call.args:
        return None
    arg = call.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    # f"protocol.messages.{name}" or "protocol.messages." + name: the constant prefix's complete part.
    head = arg.values[0] if isinstance(arg, ast.JoinedStr) and arg.values else arg.left if isinstance(arg, ast.BinOp) else None
    if isinstance(head, ast.Constant) and isinstance(head.value, str) and "." in head.value:
        return head.value.rsplit(".", 1)[0]
    return None


def _imported_names(node: ast.AST, importer: str, is_package: bool) -> Iterator[str]:
    """Dotted names an import node imports (for ``from m import a``: ``m.a``, which may be a module)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            package = importer.split(".") if is_package else importer.split(".")[:-1]
            if node.level - 1 >= len(package):
                raise ValueError(f"{importer}: relative import beyond the top-level package")
            anchor = package[: len(package) - (node.level - 1)]
            base = ".".join(anchor + ([base] if base else []))
        for alias in node.names:
            yield base if alias.name == "*" else f"{base}.{alias.name}"
    elif isinstance(node, ast.Call):
        target = _dynamic_target(node)
        if target is not None and not target.startswith("."):
            yield target


def _most_specific(name: str, modules: set[str]) -> str:
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return name


def ours(root: Path) -> set[str]:
    """Top-level names that are ours: the layered packages, the non-package folders, any other package here."""
    found = {p.name for p in root.iterdir() if (p / "__init__.py").is_file()}
    return found | set(ALLOWED) | NOT_PACKAGES


@functools.cache
def scan(root: Path) -> tuple[Import, ...]:
    """Every import of one of our modules made by the layered packages' files under ``root``."""
    top_level = ours(root)
    files = list(python_files(root, set(ALLOWED)))
    modules = {module_name(root, p) for p in python_files(root, top_level)}
    found: list[Import] = []
    for path in files:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source, filename=str(path))
        importer = module_name(root, path)
        is_package = path.name == "__init__.py"
        # Calls matter only where the text can hold a dynamic import (the
        # generated codecs hold thousands of calls and none of those).
        dynamic = "import_module" in source or "__import__" in source
        kinds = (ast.Import, ast.ImportFrom, ast.Call) if dynamic else (ast.Import, ast.ImportFrom)
        for node in ast.walk(tree):
            if not isinstance(node, kinds):
                continue
            targets = {
                _most_specific(name, modules)
                for name in _imported_names(node, importer, is_package)
                if name.split(".")[0] in top_level
            }
            if not targets:
                continue
            statement = " ".join((ast.get_source_segment(source, node) or ast.unparse(node)).split())
            found += [Import(path.relative_to(root), node.lineno, statement, importer, target) for target in sorted(targets)]
    return tuple(found)


def boundary_violations(root: Path) -> list[str]:
    out = []
    for imp in scan(root):
        importer_pkg, target_pkg = imp.importer.split(".")[0], imp.target.split(".")[0]
        if target_pkg == importer_pkg or target_pkg in ALLOWED[importer_pkg]:
            continue
        allowed = ", ".join(sorted(ALLOWED[importer_pkg])) or "nothing"
        out.append(f"{imp}  ({importer_pkg}/ imports {target_pkg}/; it may import {allowed})")
    return out


def strongly_connected_components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iteratively (no recursion limit on long import chains)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph.get(succ, ())))))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def import_cycles(root: Path) -> list[str]:
    imports = [imp for imp in scan(root) if imp.target.split(".")[0] in ALLOWED and imp.target != imp.importer]
    graph: dict[str, set[str]] = {}
    for imp in imports:
        graph.setdefault(imp.importer, set()).add(imp.target)
        graph.setdefault(imp.target, set())
    out = []
    for component in sorted(strongly_connected_components(graph)):
        if len(component) < 2:
            continue
        members = set(component)
        inside = {(str(imp.file), imp.line, str(imp)) for imp in imports if imp.importer in members and imp.target in members}
        edges = [text for _, _, text in sorted(inside)]
        out.append(f"import cycle among {len(component)} modules: {', '.join(component)}\n    " + "\n    ".join(edges))
    return out


# -- the real tree ---------------------------------------------------------------


def test_every_installed_package_has_layer_rules() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    installed = {pattern.rstrip("*") for pattern in config["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert installed <= set(ALLOWED), f"give {sorted(installed - set(ALLOWED))} a place in ALLOWED"
    unruled = {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()} - set(ALLOWED) - NOT_PACKAGES
    assert not unruled, f"top-level packages with no layer rule: {sorted(unruled)}"


def test_the_walk_reads_every_package() -> None:
    # Every package of ours imports something of ours (at least its own modules or
    # protocol), so a package the walk missed shows up here.
    scanned = {imp.importer.split(".")[0] for imp in scan(ROOT)}
    present = {name for name in ALLOWED if (ROOT / name / "__init__.py").is_file()}
    assert present <= scanned, f"no imports found in {sorted(present - scanned)}"


def test_packages_import_only_the_layers_below_them() -> None:
    violations = boundary_violations(ROOT)
    assert not violations, f"{len(violations)} imports cross a layer boundary:\n" + "\n".join(violations)


def tools_imports(root: Path, packages: frozenset[str]) -> list[str]:
    """Imports of ``tools`` (the command-line tools) made by ``packages``."""
    return [str(imp) for imp in scan(root) if imp.importer.split(".")[0] in packages and imp.target.split(".")[0] == "tools"]


def test_nothing_below_the_tools_imports_them() -> None:
    # The broker runs without its command line: what starts it (broker.broker_command) lives in
    # broker/, and tools/ imports that, never the other way round.
    found = tools_imports(ROOT, frozenset(ALLOWED) - {"tools"})
    assert not found, "imports of tools/ from below it:\n" + "\n".join(found)


def test_no_import_cycles_among_our_modules() -> None:
    cycles = import_cycles(ROOT)
    assert not cycles, f"{len(cycles)} import cycles:\n" + "\n".join(cycles)


# -- the checker itself, on planted trees ----------------------------------------


def _plant(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


CLEAN_TREE = {
    "protocol/__init__.py": "",
    "protocol/codec.py": "import struct\n",
    "storage/__init__.py": "",
    "storage/log.py": "from protocol import codec\nfrom . import segment\n",
    "storage/segment.py": "from protocol.codec import struct\n",
    "coordinator/__init__.py": "",
    "coordinator/group/__init__.py": "",
    "coordinator/group/offsets.py": "from storage import log\nfrom ..txn import markers\n",
    "coordinator/txn/__init__.py": "",
    "coordinator/txn/markers.py": "",
    "broker/__init__.py": "",
    "broker/server.py": "from coordinator.group import offsets\nimport storage.log\n",
    "client/__init__.py": "",
    "client/admin.py": "import protocol.codec\n",
}


def test_checker_passes_a_clean_tree(tmp_path: Path) -> None:
    root = _plant(tmp_path, CLEAN_TREE)
    assert boundary_violations(root) == []
    assert import_cycles(root) == []
    assert {(imp.importer, imp.target) for imp in scan(root)} == {
        ("storage.log", "protocol.codec"),
        ("storage.log", "storage.segment"),
        ("storage.segment", "protocol.codec"),
        ("coordinator.group.offsets", "storage.log"),
        ("coordinator.group.offsets", "coordinator.txn.markers"),
        ("broker.server", "coordinator.group.offsets"),
        ("broker.server", "storage.log"),
        ("client.admin", "protocol.codec"),
    }


def test_checker_catches_planted_violations(tmp_path: Path) -> None:
    planted = {
        **CLEAN_TREE,
        # inside a function
        "protocol/framing.py": "def f():\n    from storage import log\n    return log\n",
        # under TYPE_CHECKING
        "coordinator/group/writer.py": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from broker.server import Server\n"
        ),
        # a name imported from a package that is a module of a forbidden package
        "client/groups.py": "x = 1\nfrom storage import segment\n",
        # a spelled-out dynamic import
        "storage/plugins.py": "import importlib\nmod = importlib.import_module('broker.server')\n",
        # an f-string dynamic import with a constant package prefix
        "spark_jobs/__init__.py": "",
        "spark_jobs/job.py": "import importlib\nm = importlib.import_module(f'coordinator.group.{1}')\n",
        # test support is out of bounds for every package
        "replication/__init__.py": "",
        "replication/fetcher.py": "import tests.helpers\n",
    }
    violations = boundary_violations(_plant(tmp_path, planted))
    assert len(violations) == 6, "\n".join(violations)
    expected = [
        "protocol/framing.py:2: from storage import log",
        "coordinator/group/writer.py:3: from broker.server import Server",
        "client/groups.py:2: from storage import segment",
        "storage/plugins.py:2: importlib.import_module('broker.server')",
        "spark_jobs/job.py:2: importlib.import_module(f'coordinator.group.{1}')",
        "replication/fetcher.py:1: import tests.helpers",
    ]
    for where in expected:
        assert any(v.startswith(where) for v in violations), (where, violations)


def test_checker_catches_a_planted_import_of_the_tools(tmp_path: Path) -> None:
    planted = {
        **CLEAN_TREE,
        "tools/__init__.py": "",
        "tools/cli.py": "from broker import server\n",
        "broker/start.py": "def main():\n    from tools import cli\n",
    }
    root = _plant(tmp_path, planted)
    assert tools_imports(root, frozenset(ALLOWED) - {"tools"}) == ["broker/start.py:2: from tools import cli"]
    assert [v.split("  (")[0] for v in boundary_violations(root)] == ["broker/start.py:2: from tools import cli"]


def test_checker_catches_a_planted_cycle(tmp_path: Path) -> None:
    planted = {
        **CLEAN_TREE,
        # segment -> log only inside a function, closing log -> segment -> log
        "storage/segment.py": "from protocol.codec import struct\ndef f():\n    from storage.log import g\n",
        # a three-module loop across packages, one leg under TYPE_CHECKING
        "broker/server.py": "from coordinator.group import offsets\n",
        "coordinator/group/offsets.py": "from . import state\n",
        "coordinator/group/state.py": "import typing\nif typing.TYPE_CHECKING:\n    from broker import server\n",
    }
    root = _plant(tmp_path, planted)
    cycles = import_cycles(root)
    assert len(cycles) == 2, cycles
    assert cycles[0].startswith("import cycle among 3 modules: broker.server, coordinator.group.offsets, coordinator.group.state")
    assert "coordinator/group/state.py:3: from broker import server" in cycles[0]
    assert cycles[1].startswith("import cycle among 2 modules: storage.log, storage.segment")
    assert "storage/segment.py:3: from storage.log import g" in cycles[1]
    # broker/ may import coordinator/; the leg back from coordinator/ is also a boundary violation.
    expected = "coordinator/group/state.py:3: from broker import server  (coordinator/ imports broker/; it may import {})"
    assert boundary_violations(root) == [expected.format("client, protocol, replication, storage")]
