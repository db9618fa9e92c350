"""RequestMetrics per API, connections per listener and the event loop's idle share, at scrape time."""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client.metrics_core import Metric

from broker.metrics.families import Timer, counter, gauge
from broker.network.request_metrics import FETCH_CONSUMER_KEY, FETCH_FOLLOWER_KEY, ApiRequestStats
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


class NetworkMetricsCollector:
    """kafka.network RequestMetrics and SocketServer, kafka.server socket-server-metrics and the handler pool."""

    def __init__(self, socket_server: SocketServer) -> None:
        self.socket_server = socket_server
        self.idle = LoopIdleShare()

    def collect(self) -> Iterator[Metric]:
        apis = sorted(self.socket_server.request_metrics.apis.items())
        yield self._requests(apis)
        yield self._errors(apis)
        # Each API's window, one column per time: (queue, local, remote, send, total, throttle).
        columns = {api_key: list(zip(*stats.timings, strict=True)) or [()] * 6 for api_key, stats in apis}
        for position, name in enumerate((*TIMES, "ThrottleTimeMs")):
            timer = Timer(f"kafka_network_requestmetrics_{name.lower()}",
                          f"kafka.network:type=RequestMetrics,name={name} (ms)")
            scale = 1 if name == "ThrottleTimeMs" else 1000  # the throttle is in ms already
            for api_key, stats in apis:
                timer.add([value * scale for value in columns[api_key][position]], stats.total,
                          request=request_name(api_key))
            yield timer.metric
        yield from self._connections()
        idle = self.idle.read()
        # One event loop is pafka's network processors and request handlers at once.
        yield gauge("kafka_network_socketserver_networkprocessoravgidle_percent",
                    "kafka.network:type=SocketServer,name=NetworkProcessorAvgIdlePercent").add(idle).metric
        yield gauge("kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
                    "kafka.server:type=KafkaRequestHandlerPool,name=RequestHandlerAvgIdlePercent").add(idle).metric

    @staticmethod
    def _requests(apis: list[tuple[int, ApiRequestStats]]) -> Metric:
        family = counter("kafka_network_requestmetrics_requests", "kafka.network:type=RequestMetrics,name=RequestsPerSec")
        for api_key, stats in apis:
            for version, count in sorted(stats.requests.items()):
                family.add(count, request=request_name(api_key), version=str(version))
        return family.metric

    @staticmethod
    def _errors(apis: list[tuple[int, ApiRequestStats]]) -> Metric:
        family = counter("kafka_network_requestmetrics_errors", "kafka.network:type=RequestMetrics,name=ErrorsPerSec")
        for api_key, stats in apis:
            for code, count in sorted(stats.errors.items()):
                family.add(count, request=request_name(api_key), error=error_name(code))
        return family.metric

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
