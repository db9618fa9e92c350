"""The ``pafka`` console script and ``python -m tools`` offer the same commands, every one of them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from tools.cli import COMMANDS, main

ROOT = Path(__file__).resolve().parents[2]
#: The console script pip installed beside this interpreter (not resolved: a venv's python is a symlink).
CONSOLE_SCRIPT = Path(sys.executable).parent / "pafka"


def _run(*command: str) -> str:
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"{command} exited {result.returncode}:\n{result.stdout}{result.stderr}"
    return result.stdout


def listed_commands(help_text: str) -> set[str]:
    """The command names of a click group's ``--help`` ("Commands:" then one indented line each)."""
    lines = help_text.splitlines()
    section = lines[lines.index("Commands:") + 1:]
    return {line.split()[0] for line in section if line.startswith("  ") and line.split()}


def test_module_form_and_console_script_list_the_same_commands() -> None:
    assert CONSOLE_SCRIPT.is_file(), f"no console script at {CONSOLE_SCRIPT}: install pafka (pip install -e .)"
    module_form = listed_commands(_run(sys.executable, "-m", "tools", "--help"))
    console_script = listed_commands(_run(str(CONSOLE_SCRIPT), "--help"))
    assert module_form == console_script
    assert module_form == {command.name for command in COMMANDS}
    assert {"broker", "topics", "dump-log", "dev-cluster", "reassign-partitions", "configs", "acls"} <= module_form


def test_the_last_registered_command_runs_in_the_module_form() -> None:
    out = _run(sys.executable, "-m", "tools", "acls", "--help")
    assert out.startswith("Usage: python -m tools acls")


def test_every_command_has_help() -> None:
    for command in COMMANDS:
        assert command.name is not None
        result = CliRunner().invoke(main, [command.name, "--help"])
        assert result.exit_code == 0, (command.name, result.output)
        assert f" {command.name} " in result.output.splitlines()[0]
