"""A fuzzed SASL/TLS handshake never crashes the broker or leaks a connection (CI-sized run).

A real broker process serves SASL_PLAINTEXT and SASL_SSL (PLAIN, SCRAM-SHA-256/512) and SSL; the
seeded cases of ``testing.handshake_fuzz`` (random and truncated frames, bad size prefixes, fuzzed
mechanisms and PLAIN/SCRAM tokens, v0 bare tokens, other APIs before authentication, TLS handshakes
cut short or corrupted, SASL fuzz inside TLS) run on many connections at once. Afterwards the broker
is alive, holds no more sockets than before, serves confluent-kafka over SASL_SSL and pafka's client
over SASL_PLAINTEXT, logged no traceback, and its memory stayed within bounds. The full
100,000-case run and its result are in docs/security.md.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testing.handshake_fuzz import (
    TLS_KINDS,
    FuzzPlan,
    FuzzTarget,
    baseline,
    check_broker,
    fuzz_broker,
    run_fuzz,
    warm_up,
)
from testing.handshake_fuzz_cases import CASES, State

CASES_IN_CI = 20_000
SEED = 19


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzTarget]:
    with fuzz_broker(tmp_path_factory.mktemp("handshake-fuzz"), failed_authentication_delay_ms=10) as running:
        yield running
        assert running.broker is not None
        print(running.broker.log_text()[-4000:])


def test_fuzzed_handshakes_leave_the_broker_serving_with_no_leaked_connection(target: FuzzTarget) -> None:
    assert target.broker is not None
    warm = warm_up(target, SEED)
    before = baseline(target.broker)
    stats = run_fuzz(target, FuzzPlan(cases=CASES_IN_CI, seed=SEED, concurrency=32))
    health = check_broker(target, before, stats)
    assert warm.failure_count == 0, "\n".join(map(str, warm.failures))
    assert stats.failure_count == 0, "\n".join(map(str, stats.failures))
    assert health.problems == []
    assert stats.cases_run == CASES_IN_CI
    # Every kind of case ran, on every listener it applies to: the fuzz cannot quietly shrink.
    ran = set(stats.kinds)
    for listener in ("SASL_PLAINTEXT", "SASL_SSL"):
        assert {f"{listener}/{kind}" for kind in [*CASES[State.FRESH], *CASES[State.AUTHENTICATED]]} <= ran
    assert {f"SSL/{kind}" for kind in CASES[State.AUTHENTICATED]} <= ran
    assert {f"{listener}/{kind}" for listener in ("SASL_SSL", "SSL") for kind in TLS_KINDS
            if kind != "tls-session"} <= ran
    assert stats.outcomes["closed-by-broker"] > CASES_IN_CI // 10 and stats.outcomes["answered"] > CASES_IN_CI // 10
