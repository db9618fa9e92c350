"""Runs the KafkaJS program in ``tests/integration/kafkajs/client.js`` one step at a time.

KafkaJS 2.2.4 comes from the npm registry, installed by the README's test command (``npm ci`` in
that folder, pinned by its package-lock.json). A step prints JSON lines, ``{"event": ...}``;
a step that fails exits non-zero with KafkaJS's error on stderr.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

CLIENT_DIR = Path(__file__).parent / "kafkajs"
RUN_TIMEOUT_S = 120

Events = dict[str, list[dict[str, Any]]]


def node_path() -> str:
    """Node.js, with KafkaJS installed beside client.js; a test without them fails (never skips)."""
    node = shutil.which("node")
    if node is None or not (CLIENT_DIR / "node_modules" / "kafkajs" / "package.json").is_file():
        pytest.fail("needs Node.js and KafkaJS installed by `npm ci` in tests/integration/kafkajs "
                    "(see the README's test command)")
    return node


def run_kafkajs(step: str, options: Mapping[str, str | int], stdin: str | None = None) -> Events:
    """Run one step of client.js with ``--name value`` options; its events by name, in order."""
    args = [node_path(), "client.js", step]
    for name, value in options.items():
        args += [f"--{name.replace('_', '-')}", str(value)]
    env = {**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1"}
    done = subprocess.run(args, cwd=CLIENT_DIR, input=stdin, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S, env=env)
    events: Events = {}
    for line in done.stdout.splitlines():
        event = json.loads(line)
        events.setdefault(event.pop("event"), []).append(event)
    assert done.returncode == 0, (list(events), done.stderr[-3000:])
    return events


def kafkajs_round_trip(options: Mapping[str, str | int], topic: str, values: list[bytes],
                       deadline_s: float) -> list[bytes]:
    """client_round_trips' round trip for KafkaJS: ``values`` (ASCII) to partition 0, read back."""
    events = run_kafkajs("roundtrip", {**options, "topic": topic, "deadline": int(deadline_s)},
                         stdin=json.dumps([v.decode("ascii") for v in values]))
    return [v.encode("ascii") for v in events["consumed"][0]["values"]]
