"""The type checker and the linter pass on the whole repository, and functions stay short.

Both run from this interpreter's environment, with the configuration in
pyproject.toml (``[tool.mypy]``, ``[tool.ruff]``): the same commands a
developer runs, ``python -m mypy`` and ``python -m ruff check .`` at the
repository root. mypy keeps its incremental cache in ``.mypy_cache/``
(git-ignored), so a re-run checks only what changed.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_mypy_reports_nothing() -> None:
    result = _run("mypy")
    assert result.returncode == 0, f"mypy found problems:\n{result.stdout}{result.stderr}"


def test_ruff_reports_nothing() -> None:
    result = _run("ruff", "check", "--output-format", "concise", ".")
    assert result.returncode == 0, f"ruff found problems:\n{result.stdout}{result.stderr}"


def test_mypy_checks_every_installed_package() -> None:
    config = _pyproject()
    installed = {pattern.rstrip("*") for pattern in config["tool"]["setuptools"]["packages"]["find"]["include"]}
    checked = set(config["tool"]["mypy"]["files"])
    assert installed <= checked, f"add {sorted(installed - checked)} to [tool.mypy] files"


def test_the_checkers_are_the_pinned_versions() -> None:
    # A different release brings different checks: results would differ from CI's.
    pins = {}
    for requirement in _pyproject()["project"]["optional-dependencies"]["test"]:
        match = re.fullmatch(r"(mypy|ruff)==(\S+)", requirement)
        if match:
            pins[match[1]] = match[2]
    assert set(pins) == {"mypy", "ruff"}, "pin mypy and ruff exactly in the test extra"
    installed = {name: importlib.metadata.version(name) for name in pins}
    assert installed == pins, "reinstall the test extra: .venv/bin/pip install -e '.[test,spark]'"


#: A hand-written function's longest allowed length, in lines from its ``def`` to its last line.
MAX_FUNCTION_LINES = 80
#: protocol/'s unrolled hot-path decoders, where splitting costs measured time per record.
MAX_PROTOCOL_FUNCTION_LINES = 150
#: Functions allowed over the limit until they are split (the test says when one fits): none today.
LONG_FUNCTION_EXCEPTIONS: set[str] = set()


def _hand_written_sources() -> list[Path]:
    roots = [*_pyproject()["tool"]["mypy"]["files"], "tests", "testing", "benchmarks"]
    return sorted(path for root in roots for path in (ROOT / root).rglob("*.py")
                  if not path.relative_to(ROOT).as_posix().startswith("protocol/messages/")
                  and "node_modules" not in path.parts)


def test_no_hand_written_function_is_too_long() -> None:
    too_long, fitting = [], set()
    for path in _hand_written_sources():
        module = path.relative_to(ROOT).as_posix()
        limit = MAX_PROTOCOL_FUNCTION_LINES if module.startswith("protocol/") else MAX_FUNCTION_LINES
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), module)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                name, lines = f"{module}::{node.name}", (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > limit and name not in LONG_FUNCTION_EXCEPTIONS:
                    too_long.append(f"{name}:{node.lineno} has {lines} lines (at most {limit})")
                elif lines > limit:
                    fitting.add(name)
    assert not too_long, "split these functions:\n" + "\n".join(too_long)
    fit_now = sorted(LONG_FUNCTION_EXCEPTIONS - fitting)
    assert not fit_now, f"these fit now, delete them from LONG_FUNCTION_EXCEPTIONS: {fit_now}"


def test_every_complexity_and_argument_exception_is_still_needed() -> None:
    # The per-file exceptions to C901 and PLR0913 in pyproject.toml only shrink: one that no longer
    # silences anything goes, so the file it named is checked again.
    shape_rules = {"C901", "PLR0913"}
    listed = {(module, rule) for module, rules in _pyproject()["tool"]["ruff"]["lint"]["per-file-ignores"].items()
              for rule in rules if rule in shape_rules}
    result = _run("ruff", "check", "--output-format", "json", "--exit-zero", "--select", ",".join(sorted(shape_rules)),
                  "--config", "lint.per-file-ignores = {}", ".")
    found = {(Path(d["filename"]).relative_to(ROOT).as_posix(), d["code"]) for d in json.loads(result.stdout)}
    assert found <= listed, f"not listed: {sorted(found - listed)}"
    assert listed == found, f"no longer needed, delete from [tool.ruff.lint.per-file-ignores]: {sorted(listed - found)}"
