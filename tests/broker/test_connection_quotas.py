"""ConnectionQuotas on its own: counting, per-ip overrides, listener and broker limits, the
protected inter-broker listener, and the connection creation rate (with a stepped clock)."""

from __future__ import annotations

import asyncio
import logging
import re

import pytest
from pydantic import ValidationError

from broker.config.broker_config import (
    INT_MAX,
    BrokerConfig,
    load_broker_config,
    parse_connections_per_ip_overrides,
)
from broker.config.dynamic_config_validation import BrokerConfigError, validate_dynamic_configs
from broker.network.connection_quotas import (
    ConnectionLimits,
    ConnectionQuotas,
    ConnectionRate,
    TooManyConnectionsError,
    resolve_overrides,
)

A, B = "127.0.0.2", "127.0.0.3"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- configuration ----------------------------------------------------------------------------------
def test_overrides_parse_hosts_ips_and_ipv6() -> None:
    assert parse_connections_per_ip_overrides("") == {}
    assert parse_connections_per_ip_overrides("hostName:100, 127.0.0.1:200,::1:5") == {
        "hostName": 100, "127.0.0.1": 200, "::1": 5}


@pytest.mark.parametrize(("text", "message"), [
    ("127.0.0.1=5", "entry '127.0.0.1=5' is not of the form host:count"),
    ("127.0.0.1:", "is not of the form host:count"),
    (":5", "is not of the form host:count"),
    ("127.0.0.1:many", "is not of the form host:count"),
    ("bad/host:5", "max.connections.per.ip.overrides contains invalid addresses : bad/host"),
])
def test_a_bad_override_is_a_config_error(text: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        load_broker_config(overrides=[f"max.connections.per.ip.overrides={text}"], environ={})
    with pytest.raises(BrokerConfigError, match=re.escape("max.connections.per.ip.overrides")):
        validate_dynamic_configs({"max.connections.per.ip.overrides": text}, per_broker=False)


def test_per_ip_zero_needs_overrides() -> None:
    with pytest.raises(ValidationError, match=re.escape(
            "max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides property is set.")):
        load_broker_config(overrides=["max.connections.per.ip=0"], environ={})
    config = load_broker_config(overrides=["max.connections.per.ip=0",
                                           "max.connections.per.ip.overrides=127.0.0.1:10"], environ={})
    assert (config.max_connections_per_ip, config.max_connections_per_ip_overrides) == (0, "127.0.0.1:10")


def test_defaults_and_listener_overrides(caplog: pytest.LogCaptureFixture) -> None:
    default = BrokerConfig()
    assert (default.max_connections, default.max_connections_per_ip, default.max_connection_creation_rate) == (
        INT_MAX, INT_MAX, INT_MAX)
    assert (default.quota_window_num, default.quota_window_size_seconds) == (11, 1)
    with caplog.at_level(logging.WARNING):
        load_broker_config(overrides=["listener.name.plaintext.max.connections=5",
                                      "listener.name.plaintext.max.connection.creation.rate=7"], environ={})
    assert "isn't a known config" not in caplog.text
    with pytest.raises(ValidationError, match=re.escape(
            "Invalid value x for configuration listener.name.plaintext.max.connections: Not a number of type INT")):
        load_broker_config(overrides=["listener.name.plaintext.max.connections=x"], environ={})
    with pytest.raises(ValidationError, match="Value must be at least 0"):
        load_broker_config(overrides=["max.connections=-1"], environ={})


def test_limits_from_config_fall_back_to_the_broker_wide_values() -> None:
    values = {"max.connections": "10", "listener.name.internal.max.connections": "4",
              "max.connection.creation.rate": "30", "max.connections.per.ip": "3",
              "max.connections.per.ip.overrides": "127.0.0.1:100,localhost:50"}

    def lookup(name: str) -> str | None:
        # As DynamicBrokerConfig.value_text: a listener override falls back to the name it overrides.
        return values.get(name) or values.get(name.split(".", 3)[-1]) if name.startswith("listener.name.") \
            else values.get(name)

    limits = ConnectionLimits.from_lookup(lookup, ["EXTERNAL", "INTERNAL"], "INTERNAL")
    assert limits.max_for_listener("INTERNAL") == 4
    assert limits.max_for_listener("EXTERNAL") == 10
    assert limits.rate_for_listener("EXTERNAL") == limits.rate_for_listener("INTERNAL") == 30
    assert limits.max_for_ip("127.0.0.1") == 100  # the IP's override wins over localhost's
    assert limits.max_for_ip(A) == 3
    assert limits.protected("INTERNAL") and not limits.protected("EXTERNAL")


def test_unknown_override_host_is_an_error() -> None:
    with pytest.raises(ValueError, match=re.escape("unknown host no-such-host.invalid")):
        resolve_overrides({"no-such-host.invalid": 5})


def test_per_ip_zero_is_refused_dynamically_without_overrides() -> None:
    from broker.config.dynamic_config_validation import check_reconfiguration

    def new(name: str) -> str | None:
        return {"max.connections.per.ip": "0"}.get(name)

    with pytest.raises(BrokerConfigError, match="can be set to zero only if"):
        check_reconfiguration(lambda _: None, new, set())


# -- counting ---------------------------------------------------------------------------------------
def test_an_ip_at_its_limit_is_refused_and_other_ips_are_not() -> None:
    quotas = ConnectionQuotas(ConnectionLimits(max_connections_per_ip=2, per_ip_overrides={B: 3}))
    slots = [quotas.inc("PLAINTEXT", A), quotas.inc("PLAINTEXT", A)]
    with pytest.raises(TooManyConnectionsError, match=f"Rejected connection from {A}, address already has the "
                                                      "configured maximum of 2 connections."):
        quotas.inc("PLAINTEXT", A)
    others = [quotas.inc("PLAINTEXT", B) for _ in range(3)]  # B's override
    with pytest.raises(TooManyConnectionsError):
        quotas.inc("PLAINTEXT", B)
    assert (quotas.total_count, quotas.ip_counts) == (5, {A: 2, B: 3})
    slots[0].release()
    slots[0].release()  # once only: close and connection loss both release
    assert quotas.ip_counts[A] == 1
    slots.append(quotas.inc("PLAINTEXT", A))
    for slot in slots + others:
        slot.release()
    assert (quotas.total_count, quotas.ip_counts, quotas.listener_counts) == (0, {}, {"PLAINTEXT": 0})


def test_listener_and_broker_limits_and_the_protected_listener() -> None:
    limits = ConnectionLimits(broker_max_connections=3, listener_max_connections={"INTERNAL": 2},
                              inter_broker_listener="INTERNAL", listeners=frozenset({"EXTERNAL", "INTERNAL"}))
    quotas = ConnectionQuotas(limits)
    closed: list[str] = []
    external = [quotas.inc("EXTERNAL", A) for _ in range(3)]

    def close_lru(protected: str) -> bool:
        closed.append(protected)
        external.pop(0).release()
        return True

    quotas.close_least_recently_used = close_lru
    assert not quotas.slot_available("EXTERNAL")      # the broker is full
    assert quotas.slot_available("INTERNAL")          # but the inter-broker listener is protected
    quotas.inc("INTERNAL", B)                         # ... and a client connection makes room for it
    assert closed == ["INTERNAL"] and quotas.total_count == 3
    quotas.inc("INTERNAL", B)
    assert not quotas.slot_available("INTERNAL")      # its own listener limit still holds
    # With a single listener nothing is protected.
    single = ConnectionQuotas(ConnectionLimits(broker_max_connections=1, inter_broker_listener="INTERNAL",
                                               listeners=frozenset({"INTERNAL"})))
    single.inc("INTERNAL", A)
    assert not single.slot_available("INTERNAL")


def test_an_acceptor_waits_for_a_slot_until_a_connection_closes() -> None:
    async def run() -> None:
        quotas = ConnectionQuotas(ConnectionLimits(broker_max_connections=1))
        first = quotas.inc("PLAINTEXT", A)
        waiting = asyncio.create_task(quotas.wait_for_slot("PLAINTEXT"))
        await asyncio.sleep(0.1)
        assert not waiting.done()
        first.release()
        await asyncio.wait_for(waiting, 2)

    asyncio.run(run())


def test_raising_a_limit_wakes_the_waiting_acceptor_and_lowering_it_closes_the_excess() -> None:
    async def run() -> None:
        quotas = ConnectionQuotas(ConnectionLimits(broker_max_connections=1))
        quotas.bind_loop(asyncio.get_running_loop())
        slots = [quotas.inc("PLAINTEXT", A)]
        waiting = asyncio.create_task(quotas.wait_for_slot("PLAINTEXT"))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        quotas.update(ConnectionLimits(broker_max_connections=3))
        await asyncio.wait_for(waiting, 2)
        slots += [quotas.inc("PLAINTEXT", A), quotas.inc("PLAINTEXT", A)]

        def close_lru(_: str) -> bool:
            slots.pop(0).release()
            return True

        quotas.close_least_recently_used = close_lru
        quotas.update(ConnectionLimits(broker_max_connections=1))  # Kafka closes down to the new limit
        assert quotas.total_count == 1 and len(slots) == 1

    asyncio.run(run())


# -- the connection creation rate ----------------------------------------------------------------------
def test_rate_measures_young_windows_as_kafkas_rate_does() -> None:
    rate = ConnectionRate(11, 1000.0)
    for _ in range(20):
        rate.record(1.0, 0.0)
    # Ten whole windows assumed while the rate is young: 20 connections over 10 s.
    assert rate.measure(0.0) == pytest.approx(2.0)
    assert rate.measure(5000.0) == pytest.approx(2.0)  # still counted as ten windows
    assert rate.measure(10_500.0) == pytest.approx(20 / 10.5)


def test_creation_rate_throttles_the_acceptor() -> None:
    clock = Clock()
    quotas = ConnectionQuotas(ConnectionLimits(broker_max_rate=5), num_samples=2, window_size_seconds=1,
                              clock=clock)
    # A window's worth of connections goes at once; the next one waits (6 - 5) / 5 of a window.
    assert [quotas._record_and_throttle("PLAINTEXT") for _ in range(5)] == [0.0] * 5
    assert quotas._record_and_throttle("PLAINTEXT") == pytest.approx(0.2)
    clock.now += 2.0  # past the windows: the rate is 0 again
    assert quotas._record_and_throttle("PLAINTEXT") == 0.0


def test_listener_rate_and_the_protected_listener_rate() -> None:
    clock = Clock()
    limits = ConnectionLimits(broker_max_rate=2, listener_max_rate={"INTERNAL": 4, "EXTERNAL": 2},
                              inter_broker_listener="INTERNAL", listeners=frozenset({"EXTERNAL", "INTERNAL"}))
    quotas = ConnectionQuotas(limits, num_samples=2, window_size_seconds=1, clock=clock)
    # The inter-broker listener is throttled by its own rate only, and does not count towards the broker's.
    assert [quotas._record_and_throttle("INTERNAL") for _ in range(4)] == [0.0] * 4
    assert quotas._record_and_throttle("INTERNAL") > 0
    assert [quotas._record_and_throttle("EXTERNAL") for _ in range(2)] == [0.0] * 2
    assert quotas._record_and_throttle("EXTERNAL") == pytest.approx(0.5)


def test_wait_for_slot_sleeps_out_the_throttle() -> None:
    async def run() -> float:
        quotas = ConnectionQuotas(ConnectionLimits(broker_max_rate=10), num_samples=2, window_size_seconds=1)
        loop = asyncio.get_running_loop()
        started = loop.time()
        for _ in range(13):
            await asyncio.wait_for(quotas.wait_for_slot("PLAINTEXT"), 5)
        return loop.time() - started

    # 10 at once, then each of the next three waits until the rate is back at 10/s: at least 0.3 s.
    assert 0.25 <= asyncio.run(run()) < 3.0
