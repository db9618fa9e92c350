"""The type checker and the linter pass on the whole repository.

Both run from this interpreter's environment, with the configuration in
pyproject.toml (``[tool.mypy]``, ``[tool.ruff]``): the same commands a
developer runs, ``python -m mypy`` and ``python -m ruff check .`` at the
repository root. mypy keeps its incremental cache in ``.mypy_cache/``
(git-ignored), so a re-run checks only what changed.
"""

from __future__ import annotations

import importlib.metadata
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
