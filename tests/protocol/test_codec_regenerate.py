"""The committed generated modules are exactly what the generator produces."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from protocol.codegen import generate

MESSAGES = Path(__file__).resolve().parents[2] / "protocol" / "messages"


def test_regenerating_changes_nothing(tmp_path: Path) -> None:
    generate(tmp_path)
    fresh = {p.name: p.read_text(encoding="utf-8") for p in tmp_path.glob("*.py")}
    committed = {p.name: p.read_text(encoding="utf-8") for p in MESSAGES.glob("*.py")}
    assert sorted(fresh) == sorted(committed)
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert not stale, f"run `python -m protocol.codegen`: {stale} differ"


def test_generator_runs_as_a_module_independent_of_hash_seed(tmp_path: Path) -> None:
    out = tmp_path / "messages"
    result = subprocess.run(
        [sys.executable, "-m", "protocol.codegen", "--output", str(out)],
        cwd=MESSAGES.parents[1],
        env={**os.environ, "PYTHONHASHSEED": "12345"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    for path in MESSAGES.glob("*.py"):
        assert (out / path.name).read_text(encoding="utf-8") == path.read_text(encoding="utf-8"), path.name
