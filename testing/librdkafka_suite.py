"""librdkafka's own test suite against pafka brokers: each chosen test in a test-runner of its own,
with a wall-clock limit, and a JSON and markdown summary of every test's state.

    python -m testing.librdkafka_suite --protocol consumer --set group       # one broker
    python -m testing.librdkafka_suite --protocol classic --brokers 3 --set all
    python -m testing.librdkafka_suite --protocol consumer --tests 0029,0045  # chosen test numbers
    python -m testing.librdkafka_suite --list-group-tests                     # the set, without running

librdkafka is built from its public source (``./configure && make``, then ``make build`` in
``tests/``); ``--librdkafka`` names that checkout. The brokers run with both rebalance protocols
switched on and the broker settings librdkafka's trivup clusters give Kafka (``tests/scenarios/
default.json``: automatic topic creation, 4 partitions; a rack per broker for fetch-from-follower),
with replication factors no larger than the cluster. ``TEST_CONSUMER_GROUP_PROTOCOL`` picks the
protocol the tests' consumers use.

The consumer-group set (``--set group``): the broker tests (not local, not manual) whose source file
subscribes a consumer to a group (``rd_kafka_subscribe``, ``test_consumer_subscribe``, a C++
``subscribe`` or ``test_consume_msgs_easy``), run under the protocol chosen; a test that skips
itself under that protocol shows as SKIPPED and is not counted as run.

Every test-runner, broker and ZooKeeper this script starts is ended by its own PID.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.cluster import Cluster

DEFAULT_LIBRDKAFKA = Path("/work/librdkafka")
#: The broker version the tests are told (``TEST_KAFKA_VERSION``): the first Kafka with KIP-848 GA.
KAFKA_VERSION = "4.0.0"
#: 0113_cooperative_rebalance, the longest, takes about 11 minutes on one broker.
TEST_TIMEOUT_S = 1200.0
MAX_PARALLEL = 2
#: A source file that calls one of these subscribes a consumer to a group.
SUBSCRIBE_CALLS = re.compile(r"rd_kafka_subscribe\(|test_consumer_subscribe|->subscribe\(|\.subscribe\("
                             r"|test_consume_msgs_easy")
TEST_ENTRY = re.compile(r"_TEST\((\w+),\s*([^,)]*)")
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
SUMMARY_LINE = re.compile(r"\|\s*(\d{4}_\w+)\s*\|\s*(PASSED|FAILED|SKIPPED|RUNNING)\s*\|")


@dataclass
class SuiteTest:
    name: str
    flags: str

    @property
    def number(self) -> str:
        return self.name[:4]

    @property
    def broker_test(self) -> bool:
        return "LOCAL" not in self.flags and "MANUAL" not in self.flags


@dataclass
class TestResult:
    name: str
    state: str
    duration_s: float = 0.0
    reason: str = ""


@dataclass
class RunOutcome:
    number: str
    returncode: int | None
    wall_s: float
    log_path: str
    results: list[TestResult] = field(default_factory=list)


def suite_tests(tests_dir: Path) -> list[SuiteTest]:
    """Every test in test.c's table, with its flags."""
    source = (tests_dir / "test.c").read_text()
    start = source.index("struct test tests[]")
    table = source[start:source.index("{NULL}", start)]
    return [SuiteTest(name, flags.strip()) for name, flags in TEST_ENTRY.findall(table)]


def subscribes(tests_dir: Path, number: str) -> bool:
    files = [*tests_dir.glob(f"{number}-*.c"), *tests_dir.glob(f"{number}-*.cpp")]
    return any(SUBSCRIBE_CALLS.search(path.read_text(errors="replace")) for path in files)


def group_tests(tests_dir: Path) -> list[SuiteTest]:
    """The consumer-group set: broker tests whose source file subscribes a consumer to a group."""
    return [t for t in suite_tests(tests_dir) if t.broker_test and subscribes(tests_dir, t.number)]


def chosen_tests(tests_dir: Path, which: str, numbers: str | None) -> list[SuiteTest]:
    if numbers:
        wanted = {n.strip()[:4] for n in numbers.split(",") if n.strip()}
        return [t for t in suite_tests(tests_dir) if t.broker_test and t.number in wanted]
    if which == "group":
        return group_tests(tests_dir)
    return [t for t in suite_tests(tests_dir) if t.broker_test]


# -- brokers ---------------------------------------------------------------------------------
#: ``--authorizer``: Kafka's ACL authorizer, open to everyone until an ACL names a resource (0081's ACL calls).
AUTHORIZER_OVERRIDES = ["authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
                        "allow.everyone.if.no.acl.found=true", "super.users=User:ANONYMOUS"]


def broker_overrides(brokers: int, scenario: str = "default", authorizer: bool = False) -> list[str]:
    """What trivup's scenario (``tests/scenarios/<scenario>.json``) gives Kafka, with replication no larger
    than the cluster."""
    replicas = min(brokers, 3)
    auto_create = "false" if scenario == "noautocreate" else "true"
    return [*(AUTHORIZER_OVERRIDES if authorizer else []),
            "group.coordinator.rebalance.protocols=classic,consumer",
            f"auto.create.topics.enable={auto_create}", "num.partitions=4",
            f"default.replication.factor={replicas}",
            f"offsets.topic.replication.factor={replicas}",
            f"transaction.state.log.replication.factor={replicas}",
            f"transaction.state.log.min.isr={min(brokers, 2)}"]


@contextmanager
def pafka_brokers(brokers: int, scenario: str, authorizer: bool, work: Path) -> Iterator[str]:
    """Start the brokers; yield their bootstrap; end them (and ZooKeeper) by PID. A lone broker's data and
    log stay in ``work`` (``broker.log``) for the failures to be read."""
    if brokers == 1:
        with BrokerProcess(*broker_overrides(1, scenario, authorizer), "broker.rack=RACK1",
                           data_dir=work / "broker", log_path=work / "broker.log") as broker:
            yield broker.bootstrap
        return
    racks = {i: [f"broker.rack=RACK{i}"] for i in range(1, brokers + 1)}
    with Cluster(brokers, *broker_overrides(brokers, scenario, authorizer), broker_overrides=racks) as cluster:
        cluster.wait_until_serving(cluster.broker_ids)
        yield cluster.bootstrap


# -- test-runner -----------------------------------------------------------------------------
def write_test_conf(path: Path, bootstrap: str) -> None:
    path.write_text(f"metadata.broker.list={bootstrap}\n"
                    "broker.address.family=v4\n"
                    "test.timeout.multiplier=2\n")


def runner_env(root: Path, conf: Path, protocol: str, kafka_version: str, scenario: str) -> dict[str, str]:
    """The test-runner's environment: the checkout's own (uninstalled) libraries, the conf, the protocol."""
    env = dict(os.environ)
    libraries = [str(root / "src"), str(root / "src-cpp"), env.get("LD_LIBRARY_PATH", "")]
    env.update({"LD_LIBRARY_PATH": ":".join(p for p in libraries if p),"RDKAFKA_TEST_CONF": str(conf),
                "TEST_KAFKA_VERSION": kafka_version, "TEST_CONSUMER_GROUP_PROTOCOL": protocol, "TEST_SCENARIO": scenario})
    return env


class RunningRunners:
    """The test-runners running now, so that a suite told to stop (SIGTERM, Ctrl-C) ends them by their PIDs
    and starts no more before its brokers are stopped."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen[bytes]] = set()
        self.stopping = False

    def start(self, args: list[str], **kwargs: object) -> subprocess.Popen[bytes] | None:
        with self._lock:
            if self.stopping:
                return None
            proc: subprocess.Popen[bytes] = subprocess.Popen(args, **kwargs)  # type: ignore[call-overload]
            self._procs.add(proc)
            return proc

    def finished(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._procs.discard(proc)

    def stop_all(self) -> None:
        with self._lock:
            self.stopping = True
            for proc in self._procs:
                if proc.poll() is None:
                    os.kill(proc.pid, signal.SIGKILL)


RUNNERS = RunningRunners()


def run_number(number: str, tests_dir: Path, work: Path, env: dict[str, str], timeout_s: float) -> RunOutcome:
    """One test-runner for the tests numbered ``number`` (broker tests only, ``-L``)."""
    log_path = work / f"{number}.log"
    env = {**env, "TESTS": number, "TEST_REPORT": str(work / f"{number}.json")}
    started = time.monotonic()
    with open(log_path, "wb") as log:
        proc = RUNNERS.start([str(tests_dir / "test-runner"), "-L", "-p1"], cwd=tests_dir, env=env,
                             stdout=log, stderr=subprocess.STDOUT)
        if proc is None:
            return RunOutcome(number, None, 0.0, str(log_path))
        try:
            returncode: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            returncode = None
        finally:
            RUNNERS.finished(proc)
    return RunOutcome(number, returncode, round(time.monotonic() - started, 1), str(log_path))


def read_results(outcome: RunOutcome, report: Path) -> list[TestResult]:
    """The states the test-runner reported: its JSON report, else its summary table."""
    if outcome.returncode is not None and report.exists():
        try:
            tests = json.loads(report.read_text(errors="replace"))["tests"]
            return [TestResult(t["name"], t["state"], round(float(t.get("duration", 0.0)), 1))
                    for t in tests.values()]
        except (ValueError, KeyError):
            pass
    text = Path(outcome.log_path).read_text(errors="replace")
    return [TestResult(name, state) for name, state in dict(SUMMARY_LINE.findall(text)).items()]


def failure_reason(log_path: str, name: str) -> str:
    """The message of ``name``'s first failure (the line after test.c's ``### Test "<name> ..." failed at``)."""
    lines = [ANSI_ESCAPE.sub("", line).strip() for line in Path(log_path).read_text(errors="replace").splitlines()]
    for i, line in enumerate(lines[:-1]):
        if line.startswith(f'### Test "{name}') and "failed at" in line:
            return lines[i + 1][:300]
    return ""


def settle(outcome: RunOutcome, tests: list[SuiteTest], work: Path) -> RunOutcome:
    """One result per chosen test of this number: TIMEOUT if the runner was killed, MISSING if unreported."""
    reported = {r.name: r for r in read_results(outcome, work / f"{outcome.number}.json")}
    for test in tests:
        result = reported.get(test.name)
        if outcome.returncode is None:
            result = TestResult(test.name, "TIMEOUT", outcome.wall_s)
        elif result is None:
            result = TestResult(test.name, "MISSING")
        if result.state == "FAILED":
            result.reason = failure_reason(outcome.log_path, test.name)
        outcome.results.append(result)
    return outcome


# -- summaries -------------------------------------------------------------------------------
def counts(outcomes: list[RunOutcome]) -> dict[str, int]:
    tally: dict[str, int] = {}
    for outcome in outcomes:
        for result in outcome.results:
            tally[result.state] = tally.get(result.state, 0) + 1
    return tally


def markdown(outcomes: list[RunOutcome], header: str) -> str:
    lines = [header, "", "| test | result | s | reason |", "|---|---|---|---|"]
    lines.extend(f"| {r.name} | {r.state} | {r.duration_s} | {r.reason.replace('|', '/')} |"
                 for outcome in outcomes for r in outcome.results)
    tally = counts(outcomes)
    lines += ["", ", ".join(f"{state}: {n}" for state, n in sorted(tally.items()))]
    return "\n".join(lines) + "\n"


def librdkafka_commit(root: Path) -> str:
    done = subprocess.run(["git", "-C", str(root), "describe", "--tags", "--always", "--long"],
                          capture_output=True, text=True, check=False)
    return done.stdout.strip()


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--librdkafka", type=Path, default=DEFAULT_LIBRDKAFKA, help="librdkafka checkout, built")
    parser.add_argument("--protocol", choices=("consumer", "classic"), default="consumer")
    parser.add_argument("--set", dest="which", choices=("group", "all"), default="group")
    parser.add_argument("--tests", help="comma-separated test numbers instead of a set (e.g. 0029,0045)")
    parser.add_argument("--brokers", type=int, default=1)
    parser.add_argument("--parallel", type=int, default=1, help=f"test-runners at once (at most {MAX_PARALLEL})")
    parser.add_argument("--timeout", type=float, default=TEST_TIMEOUT_S, help="wall-clock seconds per test number")
    parser.add_argument("--kafka-version", default=KAFKA_VERSION)
    parser.add_argument("--scenario", choices=("default", "noautocreate"), default="default",
                        help="librdkafka's test scenario; noautocreate: brokers without automatic topic creation")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="more test-runner environment (e.g. SUBTESTS=..., TEST_DEBUG=cgrp)")
    parser.add_argument("--authorizer", action="store_true", help="brokers with the ACL authorizer (open by default)")
    parser.add_argument("--out", type=Path, help="write the JSON summary here (and .md beside it)")
    parser.add_argument("--work", type=Path, help="directory for test.conf, logs and reports (default: a temp dir)")
    parser.add_argument("--list-group-tests", action="store_true", help="print the consumer-group set and exit")
    return parser.parse_args(argv)


def run_suite(args: argparse.Namespace, tests: list[SuiteTest], work: Path) -> list[RunOutcome]:
    tests_dir = args.librdkafka / "tests"
    numbers = sorted({t.number for t in tests})
    by_number = {n: [t for t in tests if t.number == n] for n in numbers}
    with pafka_brokers(args.brokers, args.scenario, args.authorizer, work) as bootstrap:
        conf = work / "test.conf"
        write_test_conf(conf, bootstrap)
        env = runner_env(args.librdkafka, conf, args.protocol, args.kafka_version, args.scenario)
        env.update(item.split("=", 1) for item in args.env)

        def one(number: str) -> RunOutcome:
            outcome = settle(run_number(number, tests_dir, work, env, args.timeout), by_number[number], work)
            states = ", ".join(f"{r.name}={r.state}" for r in outcome.results)
            print(f"{number} ({outcome.wall_s}s): {states}", flush=True)
            return outcome

        pool = ThreadPoolExecutor(max_workers=max(1, min(args.parallel, MAX_PARALLEL)))
        try:
            return list(pool.map(one, numbers))
        finally:
            # Told to stop: the runners are killed already; the tests not started are not started.
            pool.shutdown(wait=True, cancel_futures=True)


def _stop(signum: int, _frame: object) -> None:
    """SIGTERM: end the test-runners, then unwind, which stops the brokers (and ZooKeeper) by their PIDs."""
    RUNNERS.stop_all()
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    tests_dir = args.librdkafka / "tests"
    if args.list_group_tests:
        for test in group_tests(tests_dir):
            print(test.name, test.flags)
        return 0
    signal.signal(signal.SIGTERM, _stop)
    tests = chosen_tests(tests_dir, args.which, args.tests)
    work = args.work or Path(tempfile.mkdtemp(prefix="rdk-suite-"))
    work.mkdir(parents=True, exist_ok=True)
    outcomes = run_suite(args, tests, work)
    summary = {"librdkafka": librdkafka_commit(args.librdkafka), "protocol": args.protocol,
               "brokers": args.brokers, "scenario": args.scenario, "authorizer": args.authorizer,
               "kafka_version": args.kafka_version, "set": args.tests or args.which,
               "counts": counts(outcomes), "runs": [asdict(o) for o in outcomes]}
    header = (f"librdkafka {summary['librdkafka']}, TEST_CONSUMER_GROUP_PROTOCOL={args.protocol}, "
              f"{args.brokers} broker(s), scenario {args.scenario}{', authorizer' if args.authorizer else ''}")
    if args.out:
        args.out.write_text(json.dumps(summary, indent=1) + "\n")
        args.out.with_suffix(".md").write_text(markdown(outcomes, header))
    print(markdown(outcomes, header))
    print(f"logs: {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
