"""Broker CPU per ConsumerGroupHeartbeat in a steady consumer-protocol group of 1,000 members.

    python benchmarks/suite/heartbeat_cpu.py [--members 1000] [--partitions 1000]
                                             [--scenarios lone,lone-racks,racked-brokers]
                                             [--blast-rounds 10] [--paced-s 15] [--rate 200]

A load generator on pafka's own protocol code (no client library) plays ``--members`` members of
one group subscribed to one topic of ``--partitions`` partitions: each joins (member epoch 0), then
all heartbeat, reporting what they own, until every member holds its target at the group's epoch
and no heartbeat brings a new assignment. Then, in steady state, each member's heartbeat is what a
KIP-848 client sends when nothing changed (its id and epoch, every other field null), and the
broker's CPU time is read from ``/proc`` around:

* **blast**: ``--blast-rounds`` rounds of every member's heartbeat, 16 in flight on one connection:
  the broker's cost per heartbeat with its event loop never idle;
* **paced**: ``--rate`` heartbeats a second, one at a time, for ``--paced-s`` seconds (200 a second
  is 1,000 members at Kafka's 5 s interval), less the broker's idle CPU over as long (measured just
  before): the cost as a real group spreads it; then the same for a Metadata request for no topics, a
  request the broker answers with next to no work, as the floor any request one at a time costs
  (the event loop's wake-up, reading, framing, the answer's send).

Scenarios: ``lone`` (one broker, members without racks), ``lone-racks`` (one broker, members with
racks ``a``/``b``/``c``: with one broker no partition is closer to a member than another, so racks
cost nothing per heartbeat there), ``racked-brokers`` (two brokers with ``broker.rack`` ``a`` and
``b`` under ZooKeeper, the topic's partitions spread over both, members with racks: every
heartbeat describes the subscribed topic with its partitions' racks; the load goes to the group's
coordinator). ``PAFKA_BENCH_TREE=<checkout>`` runs another tree's brokers. Prints one table and,
last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

if not __package__:  # run as a file: imports start at the repository root, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from benchmarks.suite.bench_brokers import bench_tree, proc_cpu_seconds, remove_data, start_pafka
from benchmarks.suite.scale_wire import METADATA, WireClient
from client import KafkaClient
from client.groups import find_coordinator
from protocol.api import decode_response, encode_request
from protocol.buffers import join_chunks
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    TopicPartitions,
)
from protocol.messages.metadata import MetadataRequest
from pytest_pafka.cluster import Cluster
from testing.topics import create_topic

CONSUMER_GROUP_HEARTBEAT = 68
GROUP_KEY_TYPE = 0  # FindCoordinator's key type of a consumer group
SWITCH = "group.coordinator.rebalance.protocols=classic,consumer"
SCENARIOS = ("lone", "lone-racks", "racked-brokers")
MEMBER_RACKS = ("a", "b", "c")
IN_FLIGHT = 16
#: Reconciliation rounds before giving up: each round every member heartbeats once.
MAX_RECONCILE_ROUNDS = 60
TOPIC = "heartbeats"
IDLE_S = 5.0
#: While members join, those not heard from for KEEP_ALIVE_S heartbeat (checked every KEEP_ALIVE_EVERY joins):
#: with racks, each join's assignment takes long enough for 1,000 joins to outlast a 45 s session.
KEEP_ALIVE_S = 10.0
KEEP_ALIVE_EVERY = 20


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class Figures:
    scenario: str
    members: int
    join_s: float = 0.0
    reconcile_rounds: int = 0
    blast_heartbeats: int = 0
    blast_us: float = 0.0
    blast_per_s: float = 0.0
    paced_heartbeats: int = 0
    paced_us: float = 0.0
    paced_floor_us: float = 0.0
    idle_cpu_per_s: float = 0.0


@dataclass
class SimulatedMember:
    member_id: str
    rack: str | None
    epoch: int = 0
    owned: list[TopicPartitions] | None = None
    heard_at: float = 0.0


class Generator:
    """The members' side of the protocol over one connection to the group's coordinator."""

    def __init__(self, host: str, port: int, group: str, members: int, racks: bool) -> None:
        self.client = WireClient(host, port, client_id="heartbeat-bench")
        self.client.negotiate()
        self.version = min(self.client.versions[CONSUMER_GROUP_HEARTBEAT], 1)
        #: A request that costs the broker next to nothing: the per-request floor.
        self.floor_frame = join_chunks(encode_request(METADATA, self.client.versions[METADATA], 0, "heartbeat-bench",
                                                      MetadataRequest(topics=[], allow_auto_topic_creation=False)))
        self.group = group
        self.members = [SimulatedMember(str(uuid.uuid4()), MEMBER_RACKS[i % 3] if racks else None)
                        for i in range(members)]

    def close(self) -> None:
        self.client.close()

    def _frame(self, request: ConsumerGroupHeartbeatRequest) -> bytes:
        return join_chunks(encode_request(CONSUMER_GROUP_HEARTBEAT, self.version, 0, "heartbeat-bench", request))

    def _pipelined(self, frames: Sequence[bytes]) -> list[ConsumerGroupHeartbeatResponse]:
        """Each frame sent with up to IN_FLIGHT unanswered; the answers in order."""
        answers: list[ConsumerGroupHeartbeatResponse] = []
        sent = 0
        while len(answers) < len(frames):
            while sent < len(frames) and sent - len(answers) < IN_FLIGHT:
                self.client.send_raw(frames[sent])
                sent += 1
            response = decode_response(CONSUMER_GROUP_HEARTBEAT, self.version, self.client.receive_frame())[1]
            assert isinstance(response, ConsumerGroupHeartbeatResponse)
            if response.error_code:
                raise RuntimeError(f"heartbeat error {response.error_code}: {response.error_message}")
            answers.append(response)
        return answers

    def join(self) -> None:
        """Every member's first heartbeat, one after another (each one a new group epoch); the members
        that joined earlier heartbeat meanwhile, so none outlives its session while the rest join."""
        for index, member in enumerate(self.members):
            request = ConsumerGroupHeartbeatRequest(
                group_id=self.group, member_id=member.member_id, member_epoch=0, rack_id=member.rack,
                rebalance_timeout_ms=300_000, subscribed_topic_names=[TOPIC], topic_partitions=[])
            (answer,) = self._pipelined([self._frame(request)])
            self._take(member, answer)
            if index % KEEP_ALIVE_EVERY == 0:
                self._heartbeat([m for m in self.members[:index] if time.monotonic() - m.heard_at > KEEP_ALIVE_S])

    def _heartbeat(self, members: Sequence[SimulatedMember]) -> list[bool]:
        """One heartbeat of each member reporting what it owns; for each, whether its assignment changed."""
        frames = [self._frame(ConsumerGroupHeartbeatRequest(
            group_id=self.group, member_id=m.member_id, member_epoch=m.epoch, topic_partitions=m.owned))
            for m in members]
        return [self._take(m, a) for m, a in zip(members, self._pipelined(frames), strict=True)]

    @staticmethod
    def _take(member: SimulatedMember, answer: ConsumerGroupHeartbeatResponse) -> bool:
        """The member's state after an answer; True when the answer brought an assignment that differs."""
        member.epoch, member.heard_at = answer.member_epoch, time.monotonic()
        if answer.assignment is None:
            return False
        owned = [TopicPartitions(topic_id=tp.topic_id, partitions=sorted(tp.partitions))
                 for tp in answer.assignment.topic_partitions]
        changed = owned != member.owned
        member.owned = owned
        return changed

    def reconcile(self) -> int:
        """Rounds of heartbeats reporting what each member owns until nothing changes; the rounds taken."""
        for round_ in range(1, MAX_RECONCILE_ROUNDS + 1):
            changed = self._heartbeat(self.members)
            if not any(changed) and len({m.epoch for m in self.members}) == 1:
                return round_
        raise RuntimeError(f"the group did not settle in {MAX_RECONCILE_ROUNDS} rounds")

    def steady_frames(self) -> list[bytes]:
        return [self._frame(ConsumerGroupHeartbeatRequest(group_id=self.group, member_id=m.member_id,
                                                          member_epoch=m.epoch)) for m in self.members]

    def blast(self, rounds: int) -> int:
        frames = self.steady_frames()
        for _ in range(rounds):
            for answer in self._pipelined(frames):
                if answer.assignment is not None:
                    raise RuntimeError("a steady heartbeat brought an assignment")
        return rounds * len(frames)

    def paced(self, seconds: float, rate: int, frames: Sequence[bytes] | None = None) -> int:
        """``rate`` requests a second, one at a time, for ``seconds``: the members' steady heartbeats, or
        ``frames`` (whose answers are read, not checked)."""
        steady = frames is None
        sending = self.steady_frames() if frames is None else frames
        started = time.monotonic()
        sent = 0
        while (now := time.monotonic()) - started < seconds:
            if sent < int((now - started) * rate):
                frame = sending[sent % len(sending)]
                if steady:
                    self._pipelined([frame])
                else:
                    self.client.send_raw(frame)
                    self.client.receive_frame()
                sent += 1
            else:
                time.sleep(max(0.0, started + (sent + 1) / rate - time.monotonic()))
        return sent


def cpu_seconds(pid: int) -> float:
    """The broker's CPU time, nanosecond-precise: the sum of its threads' ``schedstat`` run times
    (``/proc/PID/stat`` counts 10 ms ticks, too coarse for a few thousand requests of tens of µs).
    Falls back to ``stat`` where schedstat is not there."""
    try:
        total = 0
        for task in Path(f"/proc/{pid}/task").iterdir():
            with open(task / "schedstat") as stat:
                total += int(stat.read().split()[0])
        return total / 1e9
    except (OSError, ValueError):
        return proc_cpu_seconds(pid)


def group_id(scenario: str) -> str:
    return f"hb-{scenario}-{uuid.uuid4().hex[:6]}"


def timed_cpu(pid: int, idle_cpu_per_s: float, run: Callable[[], int]) -> tuple[int, float, float]:
    """How many requests ``run`` sent, the broker's CPU µs per request (idle CPU subtracted), requests/s."""
    cpu0, wall0 = cpu_seconds(pid), time.monotonic()
    count = run()
    cpu, wall = cpu_seconds(pid) - cpu0, time.monotonic() - wall0
    return count, max(0.0, cpu - idle_cpu_per_s * wall) / count * 1e6, count / wall


def measure(host: str, port: int, pid: int, scenario: str, group: str, args: argparse.Namespace) -> Figures:
    figures = Figures(scenario, args.members)
    generator = Generator(host, port, group, args.members, racks=scenario != "lone")
    try:
        started = time.monotonic()
        generator.join()
        figures.join_s = time.monotonic() - started
        figures.reconcile_rounds = generator.reconcile()
        log(f"{scenario}: {args.members} members joined in {figures.join_s:.1f} s, "
            f"settled in {figures.reconcile_rounds} rounds")
        figures.blast_heartbeats, figures.blast_us, figures.blast_per_s = timed_cpu(
            pid, 0.0, lambda: generator.blast(args.blast_rounds))
        generator.paced(2.0, args.rate)  # every member heard from again before the idle phase
        cpu0 = cpu_seconds(pid)
        time.sleep(IDLE_S)
        figures.idle_cpu_per_s = (cpu_seconds(pid) - cpu0) / IDLE_S
        figures.paced_heartbeats, figures.paced_us, _ = timed_cpu(
            pid, figures.idle_cpu_per_s, lambda: generator.paced(args.paced_s, args.rate))
        # the same rate of a request with next to no work: what any request costs this broker, one at a time
        _, figures.paced_floor_us, _ = timed_cpu(
            pid, figures.idle_cpu_per_s, lambda: generator.paced(args.paced_s, args.rate, [generator.floor_frame]))
    finally:
        generator.close()
    return figures


def coordinator_of(bootstrap: str, group: str) -> int:
    """The node id of ``group``'s coordinator (the first FindCoordinator creates ``__consumer_offsets``)."""
    with KafkaClient(bootstrap, timeout=60) as client:
        node_id = find_coordinator(client, group, GROUP_KEY_TYPE, 60).node_id
    assert node_id is not None
    return node_id


@contextmanager
def lone_broker(partitions: int) -> Iterator[tuple[str, int, int]]:
    broker = start_pafka(overrides=[SWITCH])
    try:
        create_topic(broker.bootstrap, TOPIC, partitions)
        coordinator_of(broker.bootstrap, "hb-warm-up")  # creates __consumer_offsets
        yield broker.host, broker.port, broker.pid
    finally:
        remove_data(broker)


@contextmanager
def racked_brokers(partitions: int, group: str) -> Iterator[tuple[str, int, int]]:
    """Two brokers in racks a and b; the address and PID of ``group``'s coordinator."""
    overrides = {1: ["broker.rack=a"], 2: ["broker.rack=b"]}
    with Cluster(2, SWITCH, "offsets.topic.replication.factor=2", broker_overrides=overrides,
                 tree=bench_tree()) as cluster:
        create_topic(cluster.bootstrap, TOPIC, partitions)
        broker = cluster.broker(coordinator_of(cluster.bootstrap, group))
        assert broker.pid is not None
        yield broker.host, broker.port, broker.pid


def print_table(results: Sequence[Figures]) -> None:
    print("| scenario | members | join s | settle rounds | blast heartbeats | blast µs CPU/hb | blast hb/s "
          "| paced heartbeats | paced µs CPU/hb (idle subtracted) | paced Metadata(no topics) µs CPU/request | idle CPU-s/s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for f in results:
        print(f"| {f.scenario} | {f.members} | {f.join_s:.1f} | {f.reconcile_rounds} | {f.blast_heartbeats} "
              f"| {f.blast_us:.1f} | {f.blast_per_s:.0f} | {f.paced_heartbeats} | {f.paced_us:.1f} "
              f"| {f.paced_floor_us:.1f} | {f.idle_cpu_per_s:.3f} |")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--blast-rounds", type=int, default=10)
    parser.add_argument("--paced-s", type=float, default=15.0)
    parser.add_argument("--rate", type=int, default=200)
    args = parser.parse_args(argv)
    scenarios = args.scenarios.split(",")
    if unknown := [s for s in scenarios if s not in SCENARIOS]:
        parser.error(f"unknown scenarios {unknown}; known: {list(SCENARIOS)}")
    results: list[Figures] = []
    lone = [s for s in scenarios if s.startswith("lone")]
    if lone:
        with lone_broker(args.partitions) as (host, port, pid):
            for scenario in lone:
                results.append(measure(host, port, pid, scenario, group_id(scenario), args))
                log(json.dumps(asdict(results[-1])))
    if "racked-brokers" in scenarios:
        group = group_id("racked-brokers")
        with racked_brokers(args.partitions, group) as (host, port, pid):
            results.append(measure(host, port, pid, "racked-brokers", group, args))
            log(json.dumps(asdict(results[-1])))
    print_table(results)
    print(json.dumps({"tree": str(bench_tree() or "."), "results": [asdict(f) for f in results]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
