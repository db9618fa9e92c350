"""The package installs with its console script."""

import subprocess
import sys


def test_console_script_runs() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tools", "--help"], capture_output=True, text=True, check=True
    )
    assert "pafka" in out.stdout
