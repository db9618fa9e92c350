"""BrokerMetrics: the broker's prometheus_client registry.

Everything the endpoint serves is a collector in this registry. The broker's own metrics are
read at scrape time from plain counters and the state the broker keeps anyway, so nothing on a
request's path takes a lock or looks up a label; other parts of the broker (client telemetry)
add their collectors with :meth:`BrokerMetrics.register_collector`.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.registry import Collector

from broker.metrics.text_format import text_format

#: Prometheus' text format, written by broker.metrics.text_format.
TEXT_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class BrokerMetrics:
    """The registry one broker serves on ``/metrics``, with the process, GC and platform collectors."""

    def __init__(self) -> None:
        # No auto-describe: registering a collector must not run it (the broker may not be up yet).
        self.registry = CollectorRegistry(auto_describe=False)
        ProcessCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)

    def register_collector(self, collector: Collector) -> None:
        """Serve ``collector``'s metrics from now on (collected at every scrape, on the event loop)."""
        self.registry.register(collector)

    def unregister_collector(self, collector: Collector) -> None:
        self.registry.unregister(collector)

    def exposition(self) -> tuple[bytes, str]:
        """The registry's samples and their content type: Prometheus' text format, whatever the scraper
        prefers (Prometheus asks for OpenMetrics first and takes this; nothing here needs OpenMetrics)."""
        return text_format(self.registry.collect()), TEXT_CONTENT_TYPE
