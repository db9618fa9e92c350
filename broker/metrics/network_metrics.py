"""RequestMetrics per API, connections per listener and the event loop's idle share, at scrape time."""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client.metrics_core import Metric

from broker.metrics.families import Timer, counter, gauge, labels_text, quantile_values, timer_text
from broker.network.request_metrics import FETCH_CONSUMER_KEY, FETCH_FOLLOWER_KEY, FETCH_KEY, ApiRequestStats
from broker.network.socket_server import SocketServer
from protocol.api import APIS
from protocol.errors import ErrorCode

#: Kafka's request times, by their position in a timing tuple.
TIMES = ("RequestQueueTimeMs", "LocalTimeMs", "RemoteTimeMs", "ResponseSendTimeMs", "TotalTimeMs")
_PSEUDO_APIS = {FETCH_CONSUMER_KEY: "FetchConsumer", FETCH_FOLLOWER_KEY: "FetchFollower"}


def request_name(api_key: int) -> str:
    """The ``request`` label: Kafka's ApiKeys name (FetchConsumer / FetchFollower for the fetch kinds)."""
    pseudo = _PSEUDO_APIS.get(api_key)
    if pseudo is not None:
        return pseudo
    spec = APIS.get(api_key)
    return spec.name if spec is not None else str(api_key)


def error_name(code: int) -> str:
    """The ``error`` label: Kafka's Errors name (``NONE`` for no error)."""
    if code == 0:
        return "NONE"
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class LoopIdleShare:
    """The event loop's idle share since the previous reading: 1 - (its thread's CPU time / wall time).

    Read on the loop's own thread (a scrape runs there): the loop is busy exactly when its thread
    runs Python or C code, and idle while it waits in the selector.
    """

    def __init__(self) -> None:
        self._cpu = time.thread_time()
        self._wall = time.perf_counter()
        self.last = 1.0

    def read(self) -> float:
        cpu, wall = time.thread_time(), time.perf_counter()
        elapsed = wall - self._wall
        if elapsed >= 0.01:  # shorter windows (two scrapes at once) keep the last reading
            self.last = min(1.0, max(0.0, 1.0 - (cpu - self._cpu) / elapsed))
            self._cpu, self._wall = cpu, wall
        return self.last


#: The timers' families and the scale from a timing's unit to ms (the throttle time is in ms already).
TIMERS: tuple[tuple[str, int], ...] = (*((name, 1000) for name in TIMES), ("ThrottleTimeMs", 1))
REQUESTS = "kafka_network_requestmetrics_requests"
ERRORS = "kafka_network_requestmetrics_errors"


def timer_family(name: str) -> str:
    return f"kafka_network_requestmetrics_{name.lower()}"


class ApiSamples:
    """One API's samples, rendered, from its :class:`ApiRequestStats`.

    Every change to an ApiRequestStats counts one more request in ``total`` (its counts and its
    timings move together), so these are kept until ``total`` moves: a scrape recomputes only the
    APIs used since the previous one. The quantiles sort each of the six time columns of the
    window; FetchConsumer's or FetchFollower's window is Fetch's when every fetch was of that kind
    (the same count), and takes Fetch's quantiles (``same_window``).
    """

    __slots__ = ("errors", "quantiles", "requests", "timers", "total")

    def __init__(self, api_key: int, stats: ApiRequestStats, same_window: ApiSamples | None = None) -> None:
        request = request_name(api_key)
        labels = labels_text(request=request)
        self.total = total = stats.total
        self.requests = "".join([f"{REQUESTS}_total{{{labels_text(request=request, version=str(version))}}} {count}\n"
                                 for version, count in sorted(stats.requests.items())])
        self.errors = "".join([f"{ERRORS}_total{{{labels_text(request=request, error=error_name(code))}}} {count}\n"
                               for code, count in sorted(stats.errors.items())])
        self.quantiles: list[list[float]]
        if same_window is not None and same_window.total == total:
            self.quantiles = same_window.quantiles
        else:
            # One column per time: (queue, local, remote, send, total, throttle).
            columns = list(zip(*stats.timings, strict=True)) or [()] * len(TIMERS)
            self.quantiles = [quantile_values(columns[position], scale) for position, (_, scale) in enumerate(TIMERS)]
        self.timers = [timer_text(timer_family(name), quantiles, total, labels)
                       for (name, _), quantiles in zip(TIMERS, self.quantiles, strict=True)]


class NetworkMetricsCollector:
    """kafka.network RequestMetrics and SocketServer, kafka.server socket-server-metrics and the handler pool."""

    def __init__(self, socket_server: SocketServer) -> None:
        self.socket_server = socket_server
        self.idle = LoopIdleShare()
        self._apis: dict[int, ApiSamples] = {}

    def collect(self) -> Iterator[Metric]:
        apis = self._api_samples()
        requests = counter(REQUESTS, "kafka.network:type=RequestMetrics,name=RequestsPerSec")
        errors = counter(ERRORS, "kafka.network:type=RequestMetrics,name=ErrorsPerSec")
        for api in apis:
            requests.add_text(api.requests)
            errors.add_text(api.errors)
        yield requests.metric
        yield errors.metric
        for position, (name, _) in enumerate(TIMERS):
            timer = Timer(timer_family(name), f"kafka.network:type=RequestMetrics,name={name} (ms)")
            for api in apis:
                timer.add_text(api.timers[position])
            yield timer.metric
        yield from self._connections()
        idle = self.idle.read()
        # One event loop is pafka's network processors and request handlers at once.
        yield gauge("kafka_network_socketserver_networkprocessoravgidle_percent",
                    "kafka.network:type=SocketServer,name=NetworkProcessorAvgIdlePercent").add(idle).metric
        yield gauge("kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
                    "kafka.server:type=KafkaRequestHandlerPool,name=RequestHandlerAvgIdlePercent").add(idle).metric

    def _api_samples(self) -> list[ApiSamples]:
        """Every API's samples in API key order, recomputed for the APIs used since the last scrape."""
        apis = self.socket_server.request_metrics.apis
        previous, current = self._apis, dict[int, ApiSamples]()
        # Fetch first: the fetch kinds (negative keys, so first in order) may share its window.
        for api_key in sorted(apis, key=lambda key: (key != FETCH_KEY, key)):
            stats = apis[api_key]
            samples = previous.get(api_key)
            if samples is None or samples.total != stats.total:
                same_window = current.get(FETCH_KEY) if api_key in _PSEUDO_APIS else None
                samples = ApiSamples(api_key, stats, same_window)
            current[api_key] = samples
        self._apis = current
        return [current[api_key] for api_key in sorted(current)]

    def _connections(self) -> Iterator[Metric]:
        counts = dict.fromkeys(self.socket_server.bound, 0)
        for connection in list(self.socket_server.connections):
            if not connection.closed:
                counts[connection.listener_name] = counts.get(connection.listener_name, 0) + 1
        family = gauge("kafka_server_socket_server_metrics_connection_count",
                       "kafka.server:type=socket-server-metrics,listener=*,networkProcessor=*: connection-count")
        for listener, count in sorted(counts.items()):
            family.add(count, listener=listener, networkProcessor="0")
        yield family.metric
