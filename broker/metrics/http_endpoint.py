"""MetricsEndpoint: the broker's small HTTP listener for Prometheus and container orchestrators.

    GET /metrics   the registry in Prometheus' text format
    GET /livez     200 while the event loop answers (it serves this very answer)
    GET /readyz    200 once the broker is ready to serve clients, 503 before and while stopping

It runs on the broker's event loop (asyncio streams, no thread): a scrape reads the broker's state
where it lives, without locks, and a stuck event loop shows as a failed liveness probe, as it
should. One request per connection; Prometheus reconnects for every scrape anyway.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from broker.config.broker_config import BrokerConfig
from broker.metrics.broker_metrics import BrokerMetrics

log = logging.getLogger(__name__)

PORT_PROPERTY = "prometheus.metrics.port"
#: A request line and its headers must fit in this much, and arrive within this time.
MAX_HEAD_BYTES = 16 * 1024
HEAD_TIMEOUT_S = 10.0

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            500: "Internal Server Error", 503: "Service Unavailable"}
_TEXT = "text/plain; charset=utf-8"


class MetricsPortInUseError(OSError):
    """The metrics port cannot be bound: a start-up error naming the property, as Kafka names a taken listener."""


class MetricsEndpoint:
    """``/metrics``, ``/livez`` and ``/readyz`` on ``host:port``; started and stopped by the broker."""

    def __init__(self, host: str, port: int, metrics: BrokerMetrics, ready: Callable[[], bool]) -> None:
        self.host = host
        self.port = port
        self.metrics = metrics
        self.ready = ready
        self._server: asyncio.Server | None = None
        #: Connections being answered: cancelled when the endpoint stops.
        self._handlers: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    async def start(self) -> None:
        try:
            self._server = await asyncio.start_server(self._accepted, self.host or None, self.port,
                                                      reuse_address=True, limit=MAX_HEAD_BYTES)
        except OSError as exc:
            reason = (exc.strerror or str(exc)).lower()
            raise MetricsPortInUseError(
                exc.errno, f"{PORT_PROPERTY}={self.port}: cannot listen for Prometheus on "
                           f"{self.host or '*'}:{self.port}: {reason}") from None
        sockets = self._server.sockets
        if sockets:
            self.port = sockets[0].getsockname()[1]
        log.info("Prometheus metrics endpoint listening on %s", self.url)

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await server.wait_closed()

    def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.get_running_loop().create_task(self._serve(reader, writer), name="metrics-http")
        self._handlers.add(task)
        task.add_done_callback(self._handlers.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
            if head.startswith(b"GET /metrics"):
                await self.metrics.load()
            status, body, content_type = self._answer(head)
            writer.write(_response(status, body, content_type))
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            pass  # a probe that hung up or sent no request: nothing to answer
        finally:
            writer.close()

    def _answer(self, head: bytes) -> tuple[int, bytes, str]:
        request_line = head.decode("latin-1").partition("\r\n")[0]
        parts = request_line.split()
        if len(parts) != 3:
            return 400, b"bad request\n", _TEXT
        method, target, _ = parts
        if method != "GET":
            return 405, b"method not allowed\n", _TEXT
        path = target.split("?", 1)[0]
        if path == "/metrics":
            try:
                body, content_type = self.metrics.exposition()
            except Exception:
                log.exception("collecting the metrics failed")
                return 500, b"collecting the metrics failed\n", _TEXT
            return 200, body, content_type
        if path == "/livez":
            return 200, b"ok\n", _TEXT
        if path == "/readyz":
            return (200, b"ready\n", _TEXT) if self.ready() else (503, b"not ready\n", _TEXT)
        return 404, b"not found: try /metrics, /livez or /readyz\n", _TEXT


def _response(status: int, body: bytes, content_type: str) -> bytes:
    head = (f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
    return head.encode("latin-1") + body


def endpoint_for(config: BrokerConfig, metrics: BrokerMetrics, ready: Callable[[], bool]) -> MetricsEndpoint | None:
    """The endpoint ``prometheus.metrics.*`` asks for, on the host of the first listener (None: disabled)."""
    if not config.prometheus_metrics_enable:
        return None
    return MetricsEndpoint(config.listeners[0].host, config.prometheus_metrics_port, metrics, ready)
