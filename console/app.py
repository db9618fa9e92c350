"""The console's web server (aiohttp): one route per screen, POST routes for the writes, the plot's JSON.

pafka's client is blocking and not thread-safe, so every cluster call runs on one worker thread
(:class:`ClusterAccess`), never on the event loop. Writes are refused (403) unless the console was
started with writes allowed; the pages ask the browser to confirm each one before it is sent.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

from aiohttp import web

from client.client import KafkaClient
from client.client_security import ClientSecurity
from client.errors import KafkaClientError, KafkaConnectionError
from console import pages
from console.cluster_reader import ClusterReader
from console.cluster_writer import ClusterWriter
from console.endpoints import MetricsEndpoints
from console.throughput import MetricsScraper
from protocol.errors import ProtocolError

T = TypeVar("T")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True, slots=True)
class ConsoleSettings:
    bootstrap_servers: str
    allow_writes: bool = False
    #: The port of every broker's Prometheus endpoint, on the broker's host (None: each broker's own
    #: ``prometheus.metrics.port``, else 9404; see :mod:`console.endpoints`).
    metrics_port: int | None = None
    #: Explicit endpoints by broker id, overriding ``metrics_port`` for those brokers.
    metrics_endpoints: dict[int, str] = field(default_factory=dict)
    scrape_interval_s: float = 2.0
    client_timeout_s: float = 30.0
    #: TLS and SASL towards the brokers (none: PLAINTEXT).
    security: ClientSecurity | None = None


class ClusterAccess:
    """The one client of the console and the one thread that uses it."""

    def __init__(self, settings: ConsoleSettings) -> None:
        self.client = KafkaClient(settings.bootstrap_servers, client_id="pafka-console", timeout=settings.client_timeout_s,
                                  security=settings.security)
        self.reader = ClusterReader(self.client)
        self.writer = ClusterWriter(self.client)
        self.metrics_endpoints = MetricsEndpoints(self.client, port=settings.metrics_port, explicit=settings.metrics_endpoints)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="console-client")

    async def call(self, fn: Callable[..., T], *args: object, **kwargs: object) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, functools.partial(self._guarded, fn, *args, **kwargs))

    def _guarded(self, fn: Callable[..., T], *args: object, **kwargs: object) -> T:
        try:
            return fn(*args, **kwargs)
        except KafkaConnectionError:
            # A connection may be left mid-exchange: start clean on the next call.
            self.client.close()
            raise

    def close(self) -> None:
        self._thread.submit(self.client.close)
        self._thread.shutdown(wait=True)


def parse_timestamp(text: str) -> int | None:
    """Milliseconds since the epoch, from digits or an ISO 8601 time (UTC when it names no zone)."""
    text = text.strip()
    if not text:
        return None
    if text.lstrip("-").isdigit():
        return int(text)
    parsed = datetime.datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.UTC)
    return int(parsed.timestamp() * 1000)


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/html")


#: What the cluster can answer that a screen shows as an error page: Kafka's errors, and an answer that breaks
#: its own schema (a broker that implements the protocol only in part).
CLUSTER_FAILURES = (KafkaClientError, ProtocolError)


class ConsoleRoutes:
    """The handlers, over one :class:`ClusterAccess` and one :class:`MetricsScraper`."""

    def __init__(self, settings: ConsoleSettings, access: ClusterAccess, scraper: MetricsScraper) -> None:
        self.settings = settings
        self.access = access
        self.scraper = scraper

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/", self._page(self.cluster)), web.get("/topics", self._page(self.topics)),
            web.get("/topics/{name}", self._page(self.topic)),
            web.get("/topics/{name}/messages", self._page(self.messages)),
            web.get("/groups", self._page(self.groups)), web.get("/groups/{group}", self._page(self.group)),
            web.get("/security", self._page(self.security)), web.get("/throughput", self.throughput),
            web.get("/api/throughput", self.throughput_json),
            web.post("/topics", self._write(self.create_topic)),
            web.post("/topics/{name}/delete", self._write(self.delete_topic)),
            web.post("/topics/{name}/partitions", self._write(self.add_partitions)),
            web.post("/topics/{name}/config", self._write(self.set_config)),
            web.post("/groups/{group}/reset", self._write(self.reset_offsets)),
        ]

    @staticmethod
    def _page(render: Callable[[web.Request], Awaitable[str]]) -> Handler:
        """A screen: its HTML, or the cluster's error on an error page (502) rather than a stack trace."""
        async def handler(request: web.Request) -> web.StreamResponse:
            try:
                return _html(await render(request))
            except CLUSTER_FAILURES as e:
                return _html(pages.error_page("The cluster answered with an error", str(e)), status=502)
            except ValueError as e:
                return _html(pages.error_page("Bad request", str(e)), status=400)
        return handler

    def _write(self, change: Callable[[web.Request], Awaitable[str]]) -> Handler:
        """A change: refused unless writes are allowed; on success, back to the page it returns."""
        async def handler(request: web.Request) -> web.StreamResponse:
            if not self.settings.allow_writes:
                return _html(pages.error_page("Read-only", "This console was started without --allow-writes."), 403)
            try:
                location = await change(request)
            except CLUSTER_FAILURES as e:
                return _html(pages.error_page("The cluster refused the change", str(e)), status=502)
            except ValueError as e:
                return _html(pages.error_page("Bad request", str(e)), status=400)
            raise web.HTTPSeeOther(location)
        return handler

    # -- screens ----------------------------------------------------------------------------------------
    async def cluster(self, _: web.Request) -> str:
        return pages.cluster_page(await self.access.call(self.access.reader.cluster))

    async def topics(self, _: web.Request) -> str:
        return pages.topics_page(await self.access.call(self.access.reader.topics), writes=self.settings.allow_writes)

    async def topic(self, request: web.Request) -> str:
        detail = await self.access.call(self.access.reader.topic, request.match_info["name"])
        return pages.topic_page(detail, writes=self.settings.allow_writes)

    async def messages(self, request: web.Request) -> str:
        name, query = request.match_info["name"], request.query
        partition, limit = int(query.get("partition", "0")), min(int(query.get("limit", "50")), 1000)
        offset, timestamp = query.get("offset", "").strip(), query.get("timestamp", "").strip()
        detail = await self.access.call(self.access.reader.topic, name)
        rows = await self.access.call(self.access.reader.messages, name, partition,
                                      offset=int(offset) if offset else None, timestamp_ms=parse_timestamp(timestamp),
                                      limit=limit)
        return pages.messages_page(name, len(detail.partitions), rows, partition=partition, offset=offset,
                                   timestamp=timestamp, limit=limit)

    async def groups(self, _: web.Request) -> str:
        return pages.groups_page(await self.access.call(self.access.reader.group_list))

    async def group(self, request: web.Request) -> str:
        detail = await self.access.call(self.access.reader.group, request.match_info["group"])
        return pages.group_page(detail, writes=self.settings.allow_writes)

    async def security(self, _: web.Request) -> str:
        return pages.security_page(await self.access.call(self.access.reader.security))

    async def throughput(self, _: web.Request) -> web.StreamResponse:
        return _html(pages.throughput_page(self.scraper.last_endpoints))

    async def throughput_json(self, _: web.Request) -> web.StreamResponse:
        return web.json_response({"available": self.scraper.available, "errors": self.scraper.errors,
                                  **self.scraper.history.as_json()})

    # -- changes ----------------------------------------------------------------------------------------
    async def create_topic(self, request: web.Request) -> str:
        form = await request.post()
        name = str(form.get("name", "")).strip()
        if not name:
            raise ValueError("a topic needs a name")
        await self.access.call(self.access.writer.create_topic, name, int(str(form.get("partitions") or -1)),
                               int(str(form.get("replication_factor") or -1)), {})
        return f"/topics/{quote(name, safe='')}"

    async def delete_topic(self, request: web.Request) -> str:
        await self.access.call(self.access.writer.delete_topic, request.match_info["name"])
        return "/topics"

    async def add_partitions(self, request: web.Request) -> str:
        name, form = request.match_info["name"], await request.post()
        await self.access.call(self.access.writer.add_partitions, name, int(str(form.get("total", ""))))
        return f"/topics/{quote(name, safe='')}"

    async def set_config(self, request: web.Request) -> str:
        name, form = request.match_info["name"], await request.post()
        value = str(form.get("value", ""))
        await self.access.call(self.access.writer.alter_topic_config, name, str(form.get("key", "")).strip(), value or None)
        return f"/topics/{quote(name, safe='')}"

    async def reset_offsets(self, request: web.Request) -> str:
        group, form = request.match_info["group"], await request.post()
        value = str(form.get("value", "")).strip()
        strategy = str(form.get("strategy", ""))
        number = parse_timestamp(value) if strategy == "timestamp" else int(value) if value else None
        await self.access.call(self.access.writer.reset_offsets, group, str(form.get("topic", "")), strategy, number)
        return f"/groups/{quote(group, safe='')}"


def static_dir() -> Path:
    return Path(str(resources.files("console") / "static"))


def create_app(settings: ConsoleSettings) -> web.Application:
    """The console; the app owns the client's thread and the scraper, started and stopped with it."""
    access = ClusterAccess(settings)

    async def endpoints() -> dict[int, str]:
        return await access.call(access.metrics_endpoints.urls)

    scraper = MetricsScraper(endpoints, interval_s=settings.scrape_interval_s)
    app = web.Application()
    app.add_routes(ConsoleRoutes(settings, access, scraper).routes())
    app.router.add_static("/static", static_dir())

    async def lifecycle(_: web.Application) -> object:
        scraper.start()
        yield
        await scraper.stop()
        await asyncio.get_running_loop().run_in_executor(None, access.close)

    app.cleanup_ctx.append(lifecycle)  # type: ignore[arg-type]
    return app
