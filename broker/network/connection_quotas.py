"""ConnectionQuotas: Kafka's broker connection limits (KIP-306, KIP-402, KIP-612).

Three kinds of limit, each with Kafka's documented behaviour:

* ``max.connections`` (broker-wide) and ``listener.name.<listener>.max.connections``:
  when either is reached, the listener's acceptor stops accepting until a connection
  closes. The inter-broker listener is protected (when the broker has more than one
  listener): it is held back only by its own listener limit, and when its
  connections take the broker past ``max.connections`` the least recently used
  connection on another listener is closed to make room.
* ``max.connections.per.ip`` and ``max.connections.per.ip.overrides``: a connection
  from an address already at its limit is closed at once (Kafka's
  TooManyConnectionsException), logged at info; other addresses are unaffected.
* ``max.connection.creation.rate`` (broker-wide) and its listener override: the
  acceptor delays accepting so that new connections per second stay within the rate,
  measured as Kafka's Rate over ``quota.window.num`` samples of
  ``quota.window.size.seconds``. The inter-broker listener is throttled only by its
  own listener rate.

A listener's own limits default to the broker-wide values (Kafka reads them with the
listener prefix overriding the plain name).

Threads: everything here runs on the event loop, except :meth:`ConnectionQuotas.update`
callers may be on another thread (dynamic config changes run on the append thread);
the limits are replaced whole by one assignment and the waiting acceptors are woken
on the loop.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import math
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from broker.config.broker_config import INT_MAX, parse_connections_per_ip_overrides
from replication.replication_quota_manager import SimpleRate

log = logging.getLogger(__name__)

MAX_CONNECTIONS: Final = "max.connections"
MAX_CONNECTIONS_PER_IP: Final = "max.connections.per.ip"
MAX_CONNECTIONS_PER_IP_OVERRIDES: Final = "max.connections.per.ip.overrides"
MAX_CONNECTION_CREATION_RATE: Final = "max.connection.creation.rate"

#: A config's effective text (dynamic, static or default), a listener override falling back to its base name.
Lookup = Callable[[str], str | None]


def listener_config(listener_name: str, name: str) -> str:
    """Kafka's listener prefix: ``listener.name.<listener in lower case>.<config>``."""
    return f"listener.name.{listener_name.lower()}.{name}"


def normalized_ip(address: str) -> str:
    """One spelling per address, so an override and a peer's address compare equal."""
    try:
        return ipaddress.ip_address(address).compressed
    except ValueError:
        return address


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def resolve_overrides(overrides: Mapping[str, int]) -> dict[str, int]:
    """Host names to addresses, as Kafka's InetAddress.getByName does when the limits are set.

    A name resolving to several addresses (localhost: 127.0.0.1 and ::1) gives each the
    count; an address named as such keeps its own. An unknown host is an error (Kafka's
    UnknownHostException)."""
    by_address: dict[str, int] = {}
    by_name: dict[str, int] = {}
    for host, count in overrides.items():
        if _is_ip(host):
            by_address[normalized_ip(host)] = count
            continue
        try:
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise ValueError(f"{MAX_CONNECTIONS_PER_IP_OVERRIDES}: unknown host {host}: {exc}") from None
        for info in infos:
            by_name.setdefault(normalized_ip(str(info[4][0])), count)
    return {**by_name, **by_address}


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Every limit at one moment; replaced whole when a dynamic config changes."""

    max_connections_per_ip: int = INT_MAX
    #: Normalized address -> its own per-ip limit.
    per_ip_overrides: Mapping[str, int] = field(default_factory=dict)
    broker_max_connections: int = INT_MAX
    listener_max_connections: Mapping[str, int] = field(default_factory=dict)
    broker_max_rate: int = INT_MAX
    listener_max_rate: Mapping[str, int] = field(default_factory=dict)
    #: The inter-broker listener, protected when there is more than one listener.
    inter_broker_listener: str = ""
    listeners: frozenset[str] = frozenset()

    @classmethod
    def from_lookup(cls, lookup: Lookup, listeners: Iterable[str], inter_broker_listener: str) -> ConnectionLimits:
        """The limits a broker's configuration gives (host names in the overrides are resolved here)."""
        names = frozenset(listeners)

        def number(name: str) -> int:
            text = lookup(name)
            return int(text) if text is not None else INT_MAX

        return cls(
            max_connections_per_ip=number(MAX_CONNECTIONS_PER_IP),
            per_ip_overrides=resolve_overrides(parse_connections_per_ip_overrides(
                lookup(MAX_CONNECTIONS_PER_IP_OVERRIDES) or "")),
            broker_max_connections=number(MAX_CONNECTIONS),
            listener_max_connections={n: number(listener_config(n, MAX_CONNECTIONS)) for n in names},
            broker_max_rate=number(MAX_CONNECTION_CREATION_RATE),
            listener_max_rate={n: number(listener_config(n, MAX_CONNECTION_CREATION_RATE)) for n in names},
            inter_broker_listener=inter_broker_listener,
            listeners=names,
        )

    def max_for_ip(self, ip: str) -> int:
        return self.per_ip_overrides.get(ip, self.max_connections_per_ip)

    def max_for_listener(self, listener: str) -> int:
        return self.listener_max_connections.get(listener, self.broker_max_connections)

    def rate_for_listener(self, listener: str) -> int:
        return self.listener_max_rate.get(listener, self.broker_max_rate)

    def protected(self, listener: str) -> bool:
        """Kafka's protectedListener: the inter-broker one, when there is another to take room from."""
        return listener == self.inter_broker_listener and len(self.listeners) > 1


class TooManyConnectionsError(Exception):
    """Kafka's TooManyConnectionsException: the address already has its maximum."""

    def __init__(self, ip: str, count: int) -> None:
        super().__init__(f"Rejected connection from {ip}, address already has the configured maximum of "
                         f"{count} connections.")
        self.ip = ip
        self.count = count


class ConnectionThrottledError(Exception):
    """Kafka's ConnectionThrottledException (KIP-612): the address is over its connection_creation_rate."""

    def __init__(self, ip: str, rate: float) -> None:
        super().__init__(f"Rejected connection from {ip}, address is over its connection creation rate quota "
                         f"of {rate:g}/s.")
        self.ip = ip


class ConnectionRate(SimpleRate):
    """Kafka's Rate (what its connection quota sensors measure): SimpleRate's windowed sum, but a
    young rate is measured over at least ``samples - 1`` whole windows, so a first burst of up to
    that many windows' worth of connections is let through before throttling starts."""

    __slots__ = ()

    def window_size_ms(self, now_ms: float) -> float:
        self._purge_obsolete_samples(now_ms)
        oldest = min((sample.start_ms for sample in self._samples), default=now_ms)
        elapsed = now_ms - oldest
        full_windows = int(elapsed // self.window_ms)
        minimum_windows = self.num_samples - 1
        if full_windows < minimum_windows:
            elapsed += (minimum_windows - full_windows) * self.window_ms
        return max(elapsed, 1.0)  # a rate over no time at all is undefined

    def measure(self, now_ms: float) -> float:
        window = self.window_size_ms(now_ms)
        return sum(sample.value for sample in self._samples) / (window / 1000.0)


@dataclass(eq=False, slots=True)
class ConnectionSlot:
    """One counted connection; released once, whichever of close and connection loss comes first."""

    quotas: ConnectionQuotas
    listener: str
    ip: str
    released: bool = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.quotas.dec(self.listener, self.ip)


#: Closes the least recently used connection not on the given (protected) listener; False if none is left.
CloseLeastRecentlyUsed = Callable[[str], bool]


class ConnectionQuotas:
    """Counts connections by address, listener and in all, and says when an acceptor may go on."""

    def __init__(self, limits: ConnectionLimits | None = None, num_samples: int = 11,
                 window_size_seconds: float = 1, clock: Callable[[], float] = time.monotonic) -> None:
        """``clock``: seconds, monotonic (tests pass their own to step time)."""
        self.limits = limits if limits is not None else ConnectionLimits()
        self._num_samples = num_samples
        self._window_ms = window_size_seconds * 1000.0
        self._clock = clock
        self.total_count = 0
        self.ip_counts: dict[str, int] = {}
        self.listener_counts: dict[str, int] = {}
        self._broker_rate = self._new_rate()
        self._listener_rates: dict[str, ConnectionRate] = {}
        #: Set when anything that may free a slot happens; waiting acceptors then look again.
        self._changed = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        #: The socket server's: closes a connection to make room for a protected listener's.
        self.close_least_recently_used: CloseLeastRecentlyUsed | None = None
        #: KIP-612: an address's connection_creation_rate (the client quotas' ip entities, the
        #: address's own or the default); None: no quota. Set by the server.
        self.ip_connection_rate: Callable[[str], float | None] = _no_ip_quota
        self._ip_rates: dict[str, ConnectionRate] = {}

    def _new_rate(self) -> ConnectionRate:
        return ConnectionRate(self._num_samples, self._window_ms)

    # -- limits ---------------------------------------------------------------------------------
    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop the acceptors run on: updates from other threads wake them there."""
        self._loop = loop

    def update(self, limits: ConnectionLimits) -> None:
        """New limits (a dynamic config changed), from any thread."""
        self.limits = limits
        log.info("connection limits now: max.connections=%d %s, max.connections.per.ip=%d overrides %s, "
                 "max.connection.creation.rate=%d %s", limits.broker_max_connections,
                 dict(limits.listener_max_connections), limits.max_connections_per_ip, dict(limits.per_ip_overrides),
                 limits.broker_max_rate, dict(limits.listener_max_rate))
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._limits_changed()
        else:
            loop.call_soon_threadsafe(self._limits_changed)

    def _limits_changed(self) -> None:
        # A lowered max.connections closes the excess on unprotected listeners, as Kafka's processors do.
        self._close_excess()
        self._wake()

    # -- the acceptor's side -----------------------------------------------------------------------
    async def wait_for_slot(self, listener: str) -> None:
        """Kafka's waitForConnectionSlot, for a connection just accepted on ``listener``: record it on
        the creation rates, then wait out any throttle and until the connection limits leave room."""
        end = self._clock() + self._record_and_throttle(listener)
        while True:
            remaining = end - self._clock()
            if remaining <= 0 and self.slot_available(listener):
                return
            changed = self._changed
            try:
                await asyncio.wait_for(changed.wait(), None if math.isinf(remaining) or remaining <= 0 else remaining)
            except TimeoutError:
                pass
            if math.isinf(end):  # a rate of 0 accepts nothing: look again only once the limits change
                end = self._clock() + self._throttle(listener)

    def inc(self, listener: str, ip: str) -> ConnectionSlot:
        """Count a connection the acceptor admits; TooManyConnectionsError if its address is at its limit."""
        limits = self.limits
        count = self.ip_counts.get(ip, 0)
        maximum = limits.max_for_ip(ip)
        if count >= maximum:
            raise TooManyConnectionsError(ip, maximum)
        self._record_ip_connection(ip)
        self.ip_counts[ip] = count + 1
        self.listener_counts[listener] = self.listener_counts.get(listener, 0) + 1
        self.total_count += 1
        if limits.protected(listener):
            self._close_excess()
        return ConnectionSlot(self, listener, ip)

    def dec(self, listener: str, ip: str) -> None:
        """A counted connection closed: its slot is free for the next one."""
        count = self.ip_counts.get(ip, 0) - 1
        if count > 0:
            self.ip_counts[ip] = count
        else:
            self.ip_counts.pop(ip, None)
        self.listener_counts[listener] = max(self.listener_counts.get(listener, 0) - 1, 0)
        self.total_count = max(self.total_count - 1, 0)
        self._wake()

    def slot_available(self, listener: str) -> bool:
        """Kafka's connectionSlotAvailable: below the listener's limit, and below the broker's unless protected."""
        limits = self.limits
        if self.listener_counts.get(listener, 0) >= limits.max_for_listener(listener):
            return False
        return limits.protected(listener) or self.total_count < limits.broker_max_connections

    def max_connections_exceeded(self) -> bool:
        """More connections than max.connections (a protected listener's, or a lowered limit)."""
        return self.total_count > self.limits.broker_max_connections

    # -- internals -------------------------------------------------------------------------------------
    def _record_ip_connection(self, ip: str) -> None:
        """Kafka's recordIpConnectionMaybeThrottle: count the connection on its address's rate;
        ConnectionThrottledError (the connection is closed, not counted) while over the quota."""
        quota = self.ip_connection_rate(ip)
        if quota is None:
            self._ip_rates.pop(ip, None)
            return
        rate = self._ip_rates.get(ip)
        if rate is None:
            rate = self._ip_rates[ip] = self._new_rate()
        now_ms = self._clock() * 1000.0
        rate.record(1.0, now_ms)
        if rate.measure(now_ms) > quota:
            raise ConnectionThrottledError(ip, quota)

    def _listener_rate(self, listener: str) -> ConnectionRate:
        rate = self._listener_rates.get(listener)
        if rate is None:
            rate = self._listener_rates[listener] = self._new_rate()
        return rate

    def _record_and_throttle(self, listener: str) -> float:
        now_ms = self._clock() * 1000.0
        self._listener_rate(listener).record(1.0, now_ms)
        if not self.limits.protected(listener):
            self._broker_rate.record(1.0, now_ms)
        return self._throttle(listener)

    def _throttle(self, listener: str) -> float:
        """Seconds to wait: Kafka's QuotaUtils.throttleTime of the listener's rate and, unless the
        listener is protected, the broker's; the longer one."""
        limits = self.limits
        now_ms = self._clock() * 1000.0
        throttle = _throttle_ms(self._listener_rate(listener), limits.rate_for_listener(listener), now_ms)
        if not limits.protected(listener):
            throttle = max(throttle, _throttle_ms(self._broker_rate, limits.broker_max_rate, now_ms))
        return throttle / 1000.0

    def _close_excess(self) -> None:
        """Kafka's closeExcessConnections: past max.connections, unprotected listeners give up their
        least recently used connections."""
        close = self.close_least_recently_used
        protected = self.limits.inter_broker_listener if len(self.limits.listeners) > 1 else ""
        while close is not None and self.max_connections_exceeded():
            if not close(protected):
                return

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()


def _no_ip_quota(_ip: str) -> float | None:
    return None


def _throttle_ms(rate: ConnectionRate, bound: int, now_ms: float) -> float:
    """How long until the measured rate is back within ``bound`` (0 if it is); infinite for a bound of 0."""
    if bound >= INT_MAX:
        return 0.0
    value = rate.measure(now_ms)
    if value <= bound:
        return 0.0
    if bound <= 0:
        return math.inf
    return (value - bound) / bound * rate.window_size_ms(now_ms)
