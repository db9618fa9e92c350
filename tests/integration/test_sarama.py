"""Debian 12's sarama 1.22 (golang-github-shopify-sarama-dev) against a real broker.

sarama 1.22 is what Debian's own Go tools (Burrow 1.2.1 among them) are built
with, and under its default settings it speaks request versions Kafka 4
removed: OffsetCommit v1, ListOffsets v0, Produce v0. The client is the Go
program beside this file (``sarama/main.go``), built once per session in
GOPATH mode from Debian's packages (no module downloads) and run with a
subcommand per step; it prints JSON lines.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_pafka.broker_process import BrokerProcess
from testing.topics import create_topic

SOURCE = Path(__file__).parent / "sarama" / "main.go"
#: Debian's Go packages live here; GOPATH mode reads them with no network.
DEBIAN_GOPATH = "/usr/share/gocode"
BUILD_TIMEOUT_S = 300
RUN_TIMEOUT_S = 90
PARTITIONS = 2
COUNT = 20


@pytest.fixture(scope="session")
def sarama_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    go = shutil.which("go")
    if go is None or not Path(DEBIAN_GOPATH, "src/github.com/Shopify/sarama").is_dir():
        pytest.fail("needs Debian's golang-go and golang-github-shopify-sarama-dev (see the README's test command)")
    out = tmp_path_factory.mktemp("sarama")
    binary = out / "sarama-client"
    env = {**os.environ, "GOPATH": DEBIAN_GOPATH, "GO111MODULE": "off", "GOFLAGS": "", "GOPROXY": "off",
           "GOCACHE": str(out / "cache"), "HOME": str(out)}
    subprocess.run([go, "build", "-o", str(binary), str(SOURCE)], cwd=SOURCE.parent, env=env, check=True,
                   timeout=BUILD_TIMEOUT_S, capture_output=True)
    return binary


def run(client: Path, broker: BrokerProcess, command: str, *args: str) -> list[dict[str, Any]]:
    done = subprocess.run([str(client), command, "-brokers", broker.bootstrap, *args], capture_output=True,
                          text=True, timeout=RUN_TIMEOUT_S)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0, (lines, done.stderr[-3000:])
    return lines


def _produced_by_partition(lines: list[dict[str, Any]]) -> dict[int, list[int]]:
    by_partition: dict[int, list[int]] = {}
    for line in lines:
        assert line["event"] == "produced", line
        by_partition.setdefault(line["partition"], []).append(line["offset"])
    return by_partition


def _offsets(lines: list[dict[str, Any]]) -> dict[tuple[str, int, str], tuple[int, str | None]]:
    return {(x["version"], x["partition"], x["query"]): (x["offset"], x.get("error")) for x in lines}


def test_idempotent_lz4_produce_group_consume_commit_and_offsets(sarama_client: Path, broker: BrokerProcess) -> None:
    topic, group = "sarama-events", "sarama-group"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    before = int(time.time() * 1000)
    produced = _produced_by_partition(run(sarama_client, broker, "produce", "-topic", topic,
                                          "-count", str(COUNT), "-idempotent"))
    # Every message acknowledged at the next offset of its partition; both partitions used.
    assert sorted(produced) == list(range(PARTITIONS))
    assert all(offsets == list(range(len(offsets))) for offsets in produced.values())
    ends = {p: len(offsets) for p, offsets in produced.items()}

    # Offset manager under the default Version: FindCoordinator v0, OffsetCommit v1.
    run(sarama_client, broker, "commit", "-topic", topic, "-group", group, "-partitions", str(PARTITIONS),
        "-offset", "0")
    committed = run(sarama_client, broker, "committed", "-topic", topic, "-group", group,
                    "-partitions", str(PARTITIONS))
    assert committed[-1]["offsets"] == {str(p): 0 for p in range(PARTITIONS)}

    # Two members, default consumer settings: each gets a partition, all is read once,
    # and what they mark is committed (OffsetCommit v1 with their generation).
    lines = run(sarama_client, broker, "group", "-topic", topic, "-group", group, "-count", str(COUNT),
                "-timeout", "60s")
    final = lines[-1]
    assert final["event"] == "consumed" and not final["timed_out"], lines
    assert final["total"] == COUNT
    assert all(n > 0 for n in final["by_member"].values()), final
    assigned = [x for x in lines if x["event"] == "assigned" and x["partitions"]]
    assert {x["member"] for x in assigned} == {0, 1}
    committed = run(sarama_client, broker, "committed", "-topic", topic, "-group", group,
                    "-partitions", str(PARTITIONS))
    assert committed[-1]["offsets"] == {str(p): ends[p] for p in range(PARTITIONS)}

    # Default Version: ListOffsets v0 (one offset "before" each time). A time after
    # now is answered with the log end offset; newest and oldest are the log's ends.
    future = int(time.time() * 1000) + 3_600_000
    found = _offsets(run(sarama_client, broker, "offsets", "-topic", topic, "-partitions", str(PARTITIONS),
                         "-timestamp", str(future)))
    for p in range(PARTITIONS):
        assert found[("0.8.2.0", p, "newest")] == (ends[p], None)
        assert found[("0.8.2.0", p, "oldest")] == (0, None)
        assert found[("0.8.2.0", p, "time")] == (ends[p], None)
    # ... and a time before any segment existed has no offset (an empty list).
    old = _offsets(run(sarama_client, broker, "offsets", "-topic", topic, "-partitions", str(PARTITIONS),
                       "-timestamp", str(before - 3_600_000)))
    assert all(old[("0.8.2.0", p, "time")][1] is not None for p in range(PARTITIONS))


def test_offsets_for_times_by_record_timestamp(sarama_client: Path, broker: BrokerProcess) -> None:
    """sarama 0.10.1+ asks ListOffsets v1: the first offset whose record timestamp
    reaches the time. sarama 1.22 writes batches whose header max timestamp is -1;
    the broker must date them by their records (Kafka recomputes it on append)."""
    topic = "sarama-times"
    create_topic(broker.bootstrap, topic, 1)
    before = int(time.time() * 1000)
    run(sarama_client, broker, "produce", "-topic", topic, "-count", "5", "-idempotent")
    found = _offsets(run(sarama_client, broker, "offsets", "-topic", topic, "-timestamp", str(before - 1)))
    assert found[("0.10.1.0", 0, "time")] == (0, None)
    assert found[("0.10.1.0", 0, "newest")] == (5, None)
    later = _offsets(run(sarama_client, broker, "offsets", "-topic", topic,
                         "-timestamp", str(int(time.time() * 1000) + 3_600_000)))
    assert later[("0.10.1.0", 0, "time")] == (-1, None)


def test_default_version_producer(sarama_client: Path, broker: BrokerProcess) -> None:
    """The default Version (0.8.2) produces with Produce v0 message sets."""
    topic = "sarama-default"
    create_topic(broker.bootstrap, topic, 1)
    produced = _produced_by_partition(run(sarama_client, broker, "produce", "-topic", topic, "-count", "5"))
    assert produced == {0: [0, 1, 2, 3, 4]}
    found = _offsets(run(sarama_client, broker, "offsets", "-topic", topic, "-timestamp", "0"))
    assert found[("0.8.2.0", 0, "newest")] == (5, None)
