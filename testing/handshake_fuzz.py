"""Fuzz a broker's SASL and TLS handshakes, then check it survived: alive, serving, no leaked socket.

    python -m testing.handshake_fuzz --cases 100000 --seed 1          # starts its own broker
    report = asyncio.run(fuzz(target, FuzzPlan(cases=2000, seed=7)))  # against a FuzzBroker's target

The broker (:func:`fuzz_broker`) serves SASL_PLAINTEXT and SASL_SSL (PLAIN from its JAAS config,
SCRAM-SHA-256/512 for a user made with AlterUserScramCredentials), SSL, and PLAINTEXT for the admin
calls. Seeded cases (``testing.handshake_fuzz_cases``) run on many connections at once, each case
bounded in time; a case's random generator depends only on the seed and its number, and worker
``w`` of ``n`` runs cases ``w, w + n, ...`` in order, so a run is repeatable for a seed and a
concurrency up to timing. On a TLS listener a case may instead fuzz the TLS handshake itself
(random bytes for a ClientHello, a truncated or corrupted one, a truncated final flight, garbage
after the handshake) or open a TLS session that later cases run inside.

Afterwards (:func:`check_broker`): the process is alive; its socket count (``socket:[...]`` links
in ``/proc/<pid>/fd``) returns to what it was before the fuzz; confluent-kafka produces and
consumes over SASL_SSL with SCRAM-SHA-512, and pafka's client authenticates with PLAIN over
SASL_PLAINTEXT; the log holds no traceback; VmRSS grew less than a bound, and so did its peak.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import ssl
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from client.connection import BrokerConnection
from client.sasl import SaslSettings
from client.scram import ScramMechanism, secure_random_bytes
from protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    ScramCredentialUpsertion,
)
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.ports import free_port
from pytest_pafka.tls import TlsCertificates
from testing.fuzz_channels import Closed, KafkaWire, PlainChannel, TlsChannel
from testing.handshake_fuzz_cases import (
    CaseContext,
    FuzzFailure,
    Limits,
    Session,
    State,
    pick_case,
)
from testing.handshake_fuzz_tokens import Credentials, mutated, random_bytes, truncated

HOST = "127.0.0.1"
SASL_LISTENERS = ("SASL_PLAINTEXT", "SASL_SSL")
TLS_LISTENERS = ("SASL_SSL", "SSL")
#: Where a new connection goes, and how often.
LISTENER_WEIGHTS = {"SASL_PLAINTEXT": 5, "SASL_SSL": 3, "SSL": 2}
#: What a new connection to a TLS listener does: fuzz the handshake, or run cases inside TLS.
TLS_KINDS = {"tls-random-bytes": 2, "tls-truncated-hello": 2, "tls-corrupt-hello": 2,
             "tls-truncated-final": 2, "tls-garbage-after": 1, "tls-session": 8}
LOG_PROBLEMS = ("Traceback", "Unhandled exception", "Task exception was never retrieved",
                "Exception in callback", "Fatal error", "Fatal write error")
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_{user}="{password}";')
#: Every case ends within this, whatever the broker does; a case that needs longer is a failure.
CASE_BOUND_S = 30.0
#: How many failures to keep (their details), and after how many to stop early.
MAX_FAILURES_KEPT = 50
ABORT_AFTER_FAILURES = 200


# -- the broker under test --------------------------------------------------------------------------
@dataclass(frozen=True)
class FuzzTarget:
    """Where the listeners are and what the cases need to know about the broker."""

    addresses: dict[str, tuple[str, int]]
    ca_file: str
    creds: Credentials = field(default_factory=Credentials)
    limits: Limits = field(default_factory=Limits)
    broker: BrokerProcess | None = None


@contextlib.contextmanager
def fuzz_broker(workdir: Path, failed_authentication_delay_ms: int = 10,
                creds: Credentials | None = None) -> Iterator[FuzzTarget]:
    """A broker process with SASL_PLAINTEXT, SASL_SSL, SSL and PLAINTEXT listeners and the SCRAM user."""
    creds = creds or Credentials()
    certs = TlsCertificates.create(workdir / "tls")
    ports = {name: free_port(HOST) for name in ("PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "SSL")}
    listeners = ",".join(f"{name}://{HOST}:{port}" for name, port in ports.items())
    jaas = PLAIN_JAAS.format(user=creds.plain_user, password=creds.plain_password)
    broker = BrokerProcess(f"listeners={listeners}", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                           f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}",
                           f"listener.name.sasl_ssl.plain.sasl.jaas.config={jaas}",
                           f"connection.failed.authentication.delay.ms={failed_authentication_delay_ms}",
                           *certs.broker_overrides(), port=ports["PLAINTEXT"], data_dir=workdir / "data",
                           log_path=workdir / "broker.log")
    with broker:
        with BrokerConnection(HOST, ports["PLAINTEXT"]) as admin:
            for mechanism in ScramMechanism:
                _upsert_scram_user(admin, mechanism, creds)
        yield FuzzTarget({name: (HOST, port) for name, port in ports.items()}, str(certs.ca), creds, broker=broker)


def _upsert_scram_user(admin: BrokerConnection, mechanism: ScramMechanism, creds: Credentials) -> None:
    salt = secure_random_bytes()
    upsertion = ScramCredentialUpsertion(name=creds.scram_user, mechanism=mechanism.type_id, iterations=4096,
                                         salt=salt,
                                         salted_password=mechanism.salted_password(creds.scram_password, salt, 4096))
    response = admin.request(AlterUserScramCredentialsRequest(deletions=[], upsertions=[upsertion]))
    assert isinstance(response, AlterUserScramCredentialsResponse) and response.results[0].error_code == 0


# -- running the cases --------------------------------------------------------------------------------
@dataclass(frozen=True)
class FuzzPlan:
    cases: int
    seed: int
    concurrency: int = 64
    #: How likely a case runs on the connection the previous one left open, rather than a new one.
    reuse: float = 0.85


@dataclass(frozen=True)
class Failure:
    case: int
    listener: str
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"case {self.case} ({self.listener}, {self.kind}): {self.detail}"


@dataclass
class FuzzStats:
    kinds: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    connections: int = 0
    failures: list[Failure] = field(default_factory=list)
    failure_count: int = 0
    cases_run: int = 0
    duration_s: float = 0.0
    #: (cases run, the broker's VmRSS in kB) at every tenth of the run.
    rss_samples: list[tuple[int, int]] = field(default_factory=list)

    def record(self, listener: str, kind: str, outcome: str) -> None:
        self.cases_run += 1
        self.kinds[f"{listener}/{kind}"] += 1
        self.outcomes[outcome] += 1

    def fail(self, failure: Failure) -> None:
        self.cases_run += 1
        self.failure_count += 1
        self.outcomes["failure"] += 1
        if len(self.failures) < MAX_FAILURES_KEPT:
            self.failures.append(failure)

    @property
    def aborted(self) -> bool:
        return self.failure_count >= ABORT_AFTER_FAILURES


def case_rng(seed: int, case: int) -> random.Random:
    # String seeds hash through SHA-512: one case's stream does not depend on any other's.
    return random.Random(f"handshake-fuzz:{seed}:{case}")


def _tls_contexts() -> list[ssl.SSLContext]:
    """Client contexts for TLS 1.2 and 1.3; the fuzzer does not verify the broker (nothing to learn there)."""
    contexts = []
    for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        context.minimum_version = context.maximum_version = version
        contexts.append(context)
    return contexts


@dataclass
class _Attempt:
    """Where a case is, for its failure report, and the session it opened (closed if it fails)."""

    session: Session | None
    listener: str = "?"
    kind: str = "connect"

    def __post_init__(self) -> None:
        if self.session is not None:
            self.listener = self.session.listener


class Fuzzer:
    def __init__(self, target: FuzzTarget, plan: FuzzPlan) -> None:
        self.target = target
        self.plan = plan
        self.stats = FuzzStats()
        self._contexts = _tls_contexts()
        self._pid = target.broker.pid if target.broker is not None else None
        self._sample_every = max(1, plan.cases // 10)

    async def run(self) -> FuzzStats:
        started = time.monotonic()
        workers = [asyncio.create_task(self._worker(w)) for w in range(min(self.plan.concurrency, self.plan.cases))]
        await asyncio.gather(*workers)
        self.stats.duration_s = time.monotonic() - started
        return self.stats

    async def _worker(self, worker: int) -> None:
        session: Session | None = None
        for case in range(worker, self.plan.cases, self.plan.concurrency):
            if self.stats.aborted:
                break
            session = await self._bounded_case(case, session)
            self._sample_memory()
        if session is not None:
            session.close()

    def _sample_memory(self) -> None:
        done = self.stats.cases_run
        last = self.stats.rss_samples[-1][0] if self.stats.rss_samples else 0
        if self._pid is not None and done - last >= self._sample_every:
            self.stats.rss_samples.append((done, memory_kb(self._pid)["VmRSS"]))

    async def _bounded_case(self, case: int, session: Session | None) -> Session | None:
        attempt = _Attempt(session)
        try:
            async with asyncio.timeout(CASE_BOUND_S):
                return await self._case(case_rng(self.plan.seed, case), attempt)
        except TimeoutError:
            detail = f"not done within {CASE_BOUND_S}s"
        except Exception as exc:  # a wrong answer, an unexpected close, a garbled frame: all findings
            detail = f"{type(exc).__name__}: {exc}"
        self.stats.fail(Failure(case, attempt.listener, attempt.kind, detail))
        for left_open in (session, attempt.session):
            if left_open is not None:
                left_open.close()
        return None

    async def _case(self, rng: random.Random, attempt: _Attempt) -> Session | None:
        session = attempt.session
        if session is not None and session.open and rng.random() >= self.plan.reuse:
            session.close()  # the client going away between requests is a case of its own
        if session is None or not session.open:
            attempt.listener = rng.choices(list(LISTENER_WEIGHTS), weights=list(LISTENER_WEIGHTS.values()))[0]
            session = attempt.session = await self._connect(rng, attempt)
            if session is None:  # the case fuzzed the TLS handshake itself
                return None
        attempt.listener = session.listener
        attempt.kind, run = pick_case(rng, session.state)
        outcome = await run(CaseContext(rng, session, self.target.creds, self.target.limits))
        self.stats.record(session.listener, attempt.kind, outcome)
        return session if session.open else None

    async def _connect(self, rng: random.Random, attempt: _Attempt) -> Session | None:
        listener = attempt.listener
        host, port = self.target.addresses[listener]
        raw = await PlainChannel.open(host, port, self.target.limits.answer_timeout_s)
        self.stats.connections += 1
        if listener not in TLS_LISTENERS:
            return Session(KafkaWire(raw), listener, State.FRESH)
        tls = TlsChannel(raw, rng.choice(self._contexts))
        attempt.kind = rng.choices(list(TLS_KINDS), weights=list(TLS_KINDS.values()))[0]
        if attempt.kind != "tls-session":
            try:
                outcome = await self._tls_case(rng, attempt.kind, tls)
            finally:
                tls.close()
            self.stats.record(listener, attempt.kind, outcome)
            return None
        try:
            await tls.handshake(self.target.limits.answer_timeout_s)
        except BaseException as exc:
            tls.close()
            if isinstance(exc, (Closed, ssl.SSLError, TimeoutError)):
                raise FuzzFailure(f"a proper TLS handshake failed: {exc!r}") from None
            raise
        state = State.FRESH if listener in SASL_LISTENERS else State.AUTHENTICATED
        return Session(KafkaWire(tls), listener, state)

    async def _tls_case(self, rng: random.Random, kind: str, tls: TlsChannel) -> str:
        """Fuzz the TLS layer; the broker may answer with an alert or close, or wait for more."""
        timeout = self.target.limits.answer_timeout_s
        try:
            if kind == "tls-random-bytes":
                record = b"\x16\x03\x01" + rng.randbytes(2) if rng.random() < 0.5 else b""
                await tls.raw.send(record + random_bytes(rng, 2048))
            elif kind == "tls-truncated-hello":
                await tls.raw.send(truncated(rng, tls.first_flight()))
            elif kind == "tls-corrupt-hello":
                await tls.raw.send(mutated(rng, tls.first_flight()))
            elif kind == "tls-truncated-final":
                last = await tls.handshake(timeout, hold_last_flight=True)
                await tls.raw.send(truncated(rng, last))
            else:  # garbage where TLS records should be, after a complete handshake
                await tls.handshake(timeout)
                await tls.raw.send(random_bytes(rng, 2048) or b"\0")
        except Closed:
            return "closed-by-broker"
        except ssl.SSLError:
            return "tls-refused"
        await KafkaWire(tls.raw).linger(rng.choice((0.0, 0.001, 0.01, 0.05)))
        return "closed-by-client"


async def fuzz(target: FuzzTarget, plan: FuzzPlan) -> FuzzStats:
    return await Fuzzer(target, plan).run()


def run_fuzz(target: FuzzTarget, plan: FuzzPlan) -> FuzzStats:
    """Run the cases on an event loop of their own (uvloop when installed: the client side is the
    fuzzer's bottleneck)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(fuzz(target, plan))
    return uvloop.run(fuzz(target, plan))


# -- the broker's health ----------------------------------------------------------------------------
def socket_count(pid: int) -> int:
    """Sockets the process holds open: its listeners and every connection."""
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if fd.readlink().name.startswith("socket:"):
                count += 1
        except OSError:  # closed while we looked
            pass
    return count


def memory_kb(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (the peak resident set) in kB."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0])
    return values


def settled_rss_kb(pid: int, samples: int = 5, interval_s: float = 0.2) -> int:
    """The lowest VmRSS over a second: buffers of closed connections wait in reference cycles for
    the broker's next collection, so one reading may catch them still held."""
    lowest = memory_kb(pid)["VmRSS"]
    for _ in range(samples - 1):
        time.sleep(interval_s)
        lowest = min(lowest, memory_kb(pid)["VmRSS"])
    return lowest


def wait_for_sockets(pid: int, baseline: int, timeout_s: float) -> int:
    """The socket count once it is back to ``baseline`` (or whatever it is when ``timeout_s`` ends)."""
    deadline = time.monotonic() + timeout_s
    while (count := socket_count(pid)) > baseline and time.monotonic() < deadline:
        time.sleep(0.1)
    return count


def log_problems(text: str) -> list[str]:
    return [line for line in text.splitlines() if any(marker in line for marker in LOG_PROBLEMS)]


def authenticated_clients_work(target: FuzzTarget, records: int = 20, timeout_s: float = 30.0) -> list[str]:
    """confluent-kafka over SASL_SSL (SCRAM-SHA-512) produces and consumes; pafka's client
    authenticates with PLAIN over SASL_PLAINTEXT. The problems found (none: it works)."""
    problems = []
    host, port = target.addresses["SASL_PLAINTEXT"]
    creds = target.creds
    try:
        with BrokerConnection(host, port, timeout=timeout_s,
                              sasl=SaslSettings("PLAIN", creds.plain_user, creds.plain_password)) as connection:
            response = connection.request(MetadataRequest(topics=[]), version=1)
            if not isinstance(response, MetadataResponse) or not response.brokers:
                problems.append("pafka's client over SASL_PLAINTEXT got no metadata")
    except Exception as exc:  # any way it fails is the finding
        problems.append(f"pafka's client over SASL_PLAINTEXT: {exc!r}")
    problems += _confluent_round_trip(target, records, timeout_s)
    return problems


def _confluent_round_trip(target: FuzzTarget, records: int, timeout_s: float) -> list[str]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    host, port = target.addresses["SASL_SSL"]
    config = {"bootstrap.servers": f"{host}:{port}", "security.protocol": "SASL_SSL",
              "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": target.creds.scram_user,
              "sasl.password": target.creds.scram_password, "ssl.ca.location": target.ca_file}
    topic = f"fuzz-check-{uuid.uuid4().hex[:8]}"
    values = [b"after-the-fuzz-%d" % i for i in range(records)]
    producer = Producer({**config, "acks": "all"})
    errors: list[str] = []
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, _msg: errors.append(str(err)) if err else None)
    if producer.flush(timeout_s) or errors:
        return [f"confluent-kafka over SASL_SSL could not produce: {errors[:3]}"]
    consumer = Consumer({**config, "group.id": topic, "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got: list[bytes] = []
        deadline = time.monotonic() + timeout_s
        while len(got) < records and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            payload = message.value() if message is not None and message.error() is None else None
            if isinstance(payload, bytes):
                got.append(payload)
    finally:
        consumer.close()
    return [] if got == values else [f"confluent-kafka over SASL_SSL consumed {len(got)} of {records} records"]


@dataclass
class HealthReport:
    alive: bool
    sockets_before: int
    sockets_after: int
    rss_before_kb: int
    rss_after_kb: int
    peak_kb: int
    log_problems: list[str]
    client_problems: list[str]
    rss_growth_limit_kb: int
    peak_growth_limit_kb: int
    #: (cases run, VmRSS) during the run, and how much it may still grow over its second half.
    rss_samples: list[tuple[int, int]] = field(default_factory=list)
    late_growth_limit_kb: int = 64 * 1024

    @property
    def late_growth_kb(self) -> int:
        """VmRSS growth from the run's middle to its end: the allocator's high-water mark settles
        early (large pre-authentication tokens on many connections at once), a leak keeps going."""
        if len(self.rss_samples) < 4:
            return 0
        return self.rss_after_kb - self.rss_samples[len(self.rss_samples) // 2][1]

    @property
    def problems(self) -> list[str]:
        found = []
        if not self.alive:
            found.append("the broker process died")
        if self.sockets_after > self.sockets_before:
            found.append(f"the broker holds {self.sockets_after} sockets, {self.sockets_before} before the fuzz")
        if self.rss_after_kb - self.rss_before_kb > self.rss_growth_limit_kb:
            found.append(f"VmRSS grew from {self.rss_before_kb} kB to {self.rss_after_kb} kB")
        if self.peak_kb - self.rss_before_kb > self.peak_growth_limit_kb:
            found.append(f"VmHWM reached {self.peak_kb} kB from {self.rss_before_kb} kB")
        if self.late_growth_kb > self.late_growth_limit_kb:
            found.append(f"VmRSS still grew {self.late_growth_kb} kB over the run's second half: {self.rss_samples}")
        found += [f"log: {line}" for line in self.log_problems[:20]]
        return found + self.client_problems


@dataclass
class Baseline:
    sockets: int
    rss_kb: int


def baseline(broker: BrokerProcess) -> Baseline:
    assert broker.pid is not None
    return Baseline(socket_count(broker.pid), memory_kb(broker.pid)["VmRSS"])


def check_broker(target: FuzzTarget, before: Baseline, stats: FuzzStats, rss_growth_limit_mb: int = 256,
                 peak_growth_limit_mb: int = 512, close_wait_s: float = 10.0) -> HealthReport:
    """The bounds are generous for a broker resident at ~60 MB: frames and tokens of up to 512 KiB
    on 64 connections at once leave the allocator holding ~150 MB, and OpenSSL's server session
    cache keeps each TLS 1.2 session for 300 s (at most 20,480 of them). Before
    sasl.server.max.receive.size was enforced, 2,000 cases took the broker past 1.3 GB."""
    broker = target.broker
    assert broker is not None and broker.pid is not None
    alive = broker.running
    sockets_after = wait_for_sockets(broker.pid, before.sockets, close_wait_s) if alive else -1
    clients = authenticated_clients_work(target) if alive else []
    rss = settled_rss_kb(broker.pid) if broker.running else 0
    peak = memory_kb(broker.pid)["VmHWM"] if broker.running else 0
    return HealthReport(alive and broker.running, before.sockets, sockets_after, before.rss_kb, rss, peak,
                        log_problems(broker.log_text()), clients, rss_growth_limit_mb * 1024,
                        peak_growth_limit_mb * 1024, stats.rss_samples)


# -- the command ------------------------------------------------------------------------------------
def warm_up(target: FuzzTarget, seed: int) -> FuzzStats:
    """A few hundred cases first, so that the baseline counts what the broker loads once (codecs,
    TLS state) rather than what the fuzz may leak. Its failures count like any others."""
    return run_fuzz(target, FuzzPlan(cases=300, seed=seed + 1_000_000, concurrency=16))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--workdir", type=Path, help="keep the broker's data, certificates and log here")
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        workdir = args.workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pafka-fuzz-")))
        target = stack.enter_context(fuzz_broker(workdir))
        assert target.broker is not None
        warm = warm_up(target, args.seed)
        before = baseline(target.broker)
        stats = run_fuzz(target, FuzzPlan(cases=args.cases, seed=args.seed, concurrency=args.concurrency))
        health = check_broker(target, before, stats)
        print("\n".join(f"WARM-UP FAILURE {failure}" for failure in warm.failures))
        print(format_report(args, stats, health))
        return 0 if not warm.failure_count and not stats.failure_count and not health.problems else 1


def format_report(args: argparse.Namespace, stats: FuzzStats, health: HealthReport) -> str:
    rate = stats.cases_run / max(stats.duration_s, 1e-9)
    lines = [(f"cases {stats.cases_run} of {args.cases}, seed {args.seed}, concurrency {args.concurrency}, "
              f"{stats.connections} connections, {stats.duration_s:.1f}s ({rate:.0f} cases/s)"),
             f"outcomes: {dict(stats.outcomes)}",
             (f"broker: alive={health.alive} sockets {health.sockets_before} -> {health.sockets_after}, "
              f"VmRSS {health.rss_before_kb} -> {health.rss_after_kb} kB, VmHWM {health.peak_kb} kB")]
    lines += [f"VmRSS during the run (cases, kB): {stats.rss_samples}", f"kinds: {dict(sorted(stats.kinds.items()))}"]
    lines += [f"FAILURE {failure}" for failure in stats.failures]
    lines += [f"PROBLEM {problem}" for problem in health.problems]
    lines.append("RESULT: " + ("ok" if not stats.failure_count and not health.problems else
                               f"{stats.failure_count} failed cases, {len(health.problems)} broker problems"))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
