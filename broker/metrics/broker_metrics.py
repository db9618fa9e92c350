"""BrokerMetrics: the broker's prometheus_client registry.

Everything the endpoint serves is a collector in this registry. The broker's own metrics are
read at scrape time from plain counters and the state the broker keeps anyway, so nothing on a
request's path takes a lock or looks up a label; other parts of the broker (client telemetry)
add their collectors with :meth:`BrokerMetrics.register_collector`.

prometheus_client (and the collectors built on it) is imported at the first scrape, in a worker
thread, not at start-up: its imports (http.server, wsgiref...) cost ~100 ms a broker would
otherwise spend before serving.
"""

from __future__ import annotations

import asyncio
import importlib
from typing import TYPE_CHECKING, Any

from broker.metrics.sources import MetricSources

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from broker.metrics.text_format import TextWriter

#: Prometheus' text format, written by broker.metrics.text_format.
TEXT_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: What the first scrape imports off the event loop.
_COLLECTING_MODULES = ("prometheus_client", "broker.metrics.text_format", "broker.metrics.broker_collectors",
                       "broker.metrics.process_metrics")


class BrokerMetrics:
    """The registry one broker serves on ``/metrics``: its own collectors (``sources``: the broker's
    parts), the process, GC and platform collectors, and those registered here."""

    def __init__(self, sources: MetricSources | None = None) -> None:
        self._sources = sources
        #: prometheus_client Collectors (anything with ``collect()``), registered as soon as the registry exists.
        self._collectors: list[Any] = []
        self._registry: CollectorRegistry | None = None
        self._writer: TextWriter | None = None

    def register_collector(self, collector: Any) -> None:
        """Serve ``collector``'s metrics from now on (a prometheus_client Collector: collected at every
        scrape, on the event loop)."""
        self._collectors.append(collector)
        if self._registry is not None:
            self._registry.register(collector)

    def unregister_collector(self, collector: Any) -> None:
        self._collectors.remove(collector)
        if self._registry is not None:
            self._registry.unregister(collector)

    async def load(self) -> None:
        """Import what collecting needs, in a worker thread (once; the event loop goes on meanwhile)."""
        if self._registry is None:
            for module in _COLLECTING_MODULES:
                await asyncio.to_thread(importlib.import_module, module)

    @property
    def registry(self) -> CollectorRegistry:
        if self._registry is None:
            self._registry = self._build_registry()
        return self._registry

    def _build_registry(self) -> CollectorRegistry:
        from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector

        from broker.metrics.broker_collectors import broker_collectors
        from broker.metrics.process_metrics import ProcessMetricsCollector

        # No auto-describe: registering a collector must not run it.
        registry = CollectorRegistry(auto_describe=False)
        registry.register(ProcessMetricsCollector())
        GCCollector(registry=registry)
        PlatformCollector(registry=registry)
        for collector in (broker_collectors(self._sources) if self._sources is not None else []):
            registry.register(collector)
        for collector in self._collectors:
            registry.register(collector)
        return registry

    def exposition(self) -> tuple[bytes, str]:
        """The registry's samples and their content type: Prometheus' text format, whatever the scraper
        prefers (Prometheus asks for OpenMetrics first and takes this; nothing here needs OpenMetrics)."""
        if self._writer is None:
            from broker.metrics.text_format import TextWriter

            self._writer = TextWriter()
        return self._writer.write(self.registry.collect()), TEXT_CONTENT_TYPE
