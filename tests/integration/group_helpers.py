"""Helpers for the consumer-group tests: member processes, a background producer, the group as the broker sees it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]


def pafka_tool(bootstrap: str, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``pafka TOOL --bootstrap-server BOOTSTRAP ARGS...`` in a child process; its exit code checked if ``check``."""
    result = subprocess.run([sys.executable, "-m", "tools", tool, "--bootstrap-server", bootstrap, *args],
                            capture_output=True, text=True, cwd=REPO, timeout=60)
    if check:
        assert result.returncode == 0, result.stderr
    return result
#: How librdkafka, kafka-python and aiokafka word UNKNOWN_MEMBER_ID in their logs (lower-cased).
UNKNOWN_MEMBER_MARKERS = ("unknown_member_id", "unknown member", "unknownmemberid", "member_id was not recognized")


def fetch_subscription_metadata(consumer: Any) -> None:
    """Before a subscribed kafka-python consumer's first poll: fetch its topics' metadata.

    kafka-python 3.0.12 can strand a group member forever. A leader whose assignment used
    metadata without the topic rejoins when the topic's partitions arrive (its metadata snapshot
    changed), and the leader's new assignment takes the new snapshot, so "rejoin needed" turns
    false mid-join. If poll()'s timeout ends right as that join's SyncGroup answer arrives, the
    next poll sees no rejoin needed and never completes the join: no assignment, heartbeats stay
    disabled, the broker evicts the member after its session timeout, and the client never
    notices. (The client's debug log shows the broker's answer received.) With the metadata
    fetched first, the first assignment covers the whole topic and no such rejoin happens.
    """
    consumer.topics()  # a blocking Metadata round trip; the coordinator's snapshot follows it


def poll_until_assigned(consumer: Any, timeout: float = 30.0) -> None:
    """Poll a subscribed kafka-python consumer, not polled yet, until its group gives it
    partitions; a hang becomes a failure."""
    fetch_subscription_metadata(consumer)
    def assigned() -> bool:
        if consumer.assignment():
            return True
        consumer.poll(timeout_ms=100)  # the poll runs the group protocol
        return False

    wait_until(assigned, timeout, "no partitions assigned", interval=0)


#: One confluent-kafka AdminClient per broker (each starts librdkafka threads), gone with the broker object.
_ADMINS: weakref.WeakKeyDictionary[BrokerProcess, Any] = weakref.WeakKeyDictionary()


def admin_client(broker: BrokerProcess) -> Any:
    from confluent_kafka.admin import AdminClient

    if broker not in _ADMINS:
        _ADMINS[broker] = AdminClient({"bootstrap.servers": broker.bootstrap})
    return _ADMINS[broker]


@dataclass
class Member:
    """One group member in its own process (tests/integration/group_worker.py)."""

    name: str
    process: subprocess.Popen
    events_path: Path

    def events(self) -> list[dict[str, Any]]:
        if not self.events_path.exists():
            return []
        out = []
        for line in self.events_path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass  # a line cut short by SIGKILL
        return out

    def count(self, event: str) -> int:
        return sum(1 for e in self.events() if e["event"] == event)

    def owned(self) -> set[int]:
        """Partitions owned after applying every assigned/revoked callback (eager and incremental alike)."""
        owned: set[int] = set()
        for e in self.events():
            if e["event"] == "assigned":
                owned |= set(e["partitions"])
            elif e["event"] == "revoked":
                owned -= set(e["partitions"])
        return owned

    def unknown_member_lines(self) -> list[str]:
        """Lines of the client's own log saying the broker answered UNKNOWN_MEMBER_ID."""
        log = self.events_path.with_suffix(".log")
        text = log.read_text(errors="replace") if log.exists() else ""
        return [line for line in text.splitlines() if any(m in line.lower() for m in UNKNOWN_MEMBER_MARKERS)]

    def crashed(self) -> str | None:
        return next((e["error"] for e in self.events() if e["event"] == "crashed"), None)

    def terminate(self, timeout: float = 30) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout)

    def kill(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)


def start_member(broker: BrokerProcess, tmp_path: Path, client: str, name: str, group: str, topic: str,
                 session_timeout_ms: int = 6000, instance_id: str | None = None,
                 assignor: str | None = None) -> Member:
    events = tmp_path / f"{name}.events"
    args = [sys.executable, "-m", "tests.integration.group_worker", "--client", client, "--bootstrap",
            broker.bootstrap, "--group", group, "--topic", topic, "--events", str(events), "--client-id", name,
            "--session-timeout-ms", str(session_timeout_ms)]
    if instance_id:
        args += ["--instance-id", instance_id]
    if assignor:
        args += ["--assignor", assignor]
    log = open(tmp_path / f"{name}.log", "ab")
    process = subprocess.Popen(args, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    return Member(name, process, events)


def describe_group(broker: BrokerProcess, group: str) -> tuple[str, dict[str, set[int]]]:
    """(state, client id -> assigned partitions) as DescribeGroups reports it (confluent-kafka's admin)."""
    admin = admin_client(broker)
    description = admin.describe_consumer_groups([group])[group].result(10)
    members = {m.client_id: {tp.partition for tp in m.assignment.topic_partitions} for m in description.members}
    return description.state.name, members


def stable_assignment(broker: BrokerProcess, group: str, members: list[Member], partitions: int,
                      timeout: float = 60) -> dict[str, set[int]]:
    """Wait until the group is Stable with exactly ``members``, each partition owned by exactly one
    of them, and every member's own callbacks agree with the broker."""

    def check() -> dict[str, set[int]] | None:
        for m in members:
            assert m.crashed() is None, f"{m.name} crashed: {m.crashed()}"
        state, assignment = describe_group(broker, group)
        if state != "STABLE" or set(assignment) != {m.name for m in members}:
            return None
        owned = [p for ps in assignment.values() for p in ps]
        if sorted(owned) != list(range(partitions)):
            return None
        if any(m.owned() != assignment[m.name] for m in members):
            return None
        return assignment

    return wait_until(check, timeout, f"group {group} stable with {[m.name for m in members]}", interval=0.2,
                      details=lambda: group_story(broker, group, members))


def group_story(broker: BrokerProcess, group: str, members: list[Member], lines: int = 25) -> str:
    """What a group test that timed out needs to be diagnosed after its temp dir is gone: the group as
    the broker describes it and its coordinator logged about it (joins, syncs, evictions), and each
    member's callbacks and the end of its client's log."""
    out = [f"broker describes {group}: {describe_group(broker, group)}"]
    coordinator = [line for line in broker.log_text().splitlines() if "GroupCoordinator" in line and group in line]
    out += [f"    {line}" for line in coordinator[-lines:]]
    for m in members:
        events = [e for e in m.events() if e["event"] not in ("processing", "committed")]
        out.append(f"--- {m.name}: exit {m.process.poll()}, owns {sorted(m.owned())}, callbacks {events[-6:]}")
        log = m.events_path.with_suffix(".log")
        text = log.read_text(errors="replace") if log.exists() else ""
        out += [f"    {line}" for line in text.splitlines()[-lines:]]
    return "\n".join(out)


@dataclass
class BackgroundProducer:
    """Produces numbered records to every partition until stopped (bounded in count and time)."""

    broker: BrokerProcess
    topic: str
    partitions: int
    max_records: int = 20_000
    rate_per_s: int = 400
    produced: dict[int, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> BackgroundProducer:
        self._thread.start()
        return self

    def _run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.broker.bootstrap, "linger.ms": 5})

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.produced[msg.partition()] = max(self.produced.get(msg.partition(), 0), msg.offset() + 1)

        sent = 0
        started = time.monotonic()
        while not self._stop.is_set() and sent < self.max_records and time.monotonic() - started < 300:
            for _ in range(self.rate_per_s // 20):
                producer.produce(self.topic, value=str(sent).encode(), partition=sent % self.partitions,
                                 on_delivery=delivered)
                sent += 1
            producer.poll(0)
            time.sleep(0.05)
        producer.flush(30)

    def stop(self) -> dict[int, int]:
        self._stop.set()
        self._thread.join(60)
        assert not self.errors, self.errors[:3]
        return dict(self.produced)


def committed_offsets(broker: BrokerProcess, group: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    admin = admin_client(broker)
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    result = admin.list_consumer_group_offsets([request])[group].result(10)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def check_committed_exactly_once(members: list[Member], end_offsets: dict[int, int],
                                 killed: list[Member] = ()) -> None:  # type: ignore[assignment]
    """No record is consumed again once committed, each is committed by one batch, none is skipped.

    Members log ``processing`` before and ``committed`` after each successful
    synchronous commit (one clock: same host). A member killed by SIGKILL may
    have committed its last batch without logging it, so the records of its
    last unconfirmed ``processing`` batch may be missing from the committed
    set; nothing else may.
    """
    committed_at: dict[tuple[int, int], tuple[float, str]] = {}
    for m in members:
        for e in m.events():
            if e["event"] != "committed":
                continue
            for p, offsets in e["batch"].items():
                for o in offsets:
                    key = (int(p), o)
                    assert key not in committed_at, f"record {key} committed twice: by {committed_at[key][1]} and {m.name}"
                    committed_at[key] = (e["t"], m.name)
    for m in members:
        for e in m.events():
            if e["event"] != "processing":
                continue
            for p, offsets in e["batch"].items():
                for o in offsets:
                    done = committed_at.get((int(p), o))
                    assert done is None or e["t"] <= done[0], (
                        f"record {(int(p), o)} consumed by {m.name} after {done[1]} had committed it")
    unknown: set[tuple[int, int]] = set()
    for m in killed:
        pending: set[tuple[int, int]] = set()
        for e in m.events():
            if e["event"] == "processing":
                pending = {(int(p), o) for p, offsets in e["batch"].items() for o in offsets}
            elif e["event"] in ("committed", "commit_failed"):
                pending = set()
        unknown |= pending
    missing = [(p, o) for p, end in end_offsets.items() for o in range(end)
               if (p, o) not in committed_at and (p, o) not in unknown]
    assert not missing, f"{len(missing)} records never committed, first {missing[:5]}"
