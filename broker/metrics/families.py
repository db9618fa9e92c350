"""Metric families named and shaped as the JMX exporter with Strimzi's rules renders Kafka's MBeans.

A meter (``...PerSec``) becomes a counter ``..._total``; a gauge keeps its name; a histogram or timer
becomes ``name{quantile="0.50"...}`` and ``name_count``, as Strimzi's rules emulate a summary.
One family may carry samples with and without labels (all-topics and per-topic BrokerTopicMetrics).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client.metrics_core import Metric

#: Kafka's histogram percentiles and the quantile labels Strimzi's rules give them ("0.$N").
QUANTILES: tuple[tuple[float, str], ...] = ((0.50, "0.50"), (0.75, "0.75"), (0.95, "0.95"), (0.98, "0.98"),
                                            (0.99, "0.99"), (0.999, "0.999"))


class Family:
    """One metric family; samples added with their labels."""

    def __init__(self, name: str, doc: str, kind: str) -> None:
        self.metric = Metric(name, doc, kind)
        self._sample_name = name + "_total" if kind == "counter" else name

    def add(self, value: float, **labels: str) -> Family:
        self.metric.add_sample(self._sample_name, labels, value)
        return self


def counter(name: str, doc: str) -> Family:
    """A Kafka meter: ``name`` without ``_total``."""
    return Family(name, doc, "counter")


def gauge(name: str, doc: str) -> Family:
    return Family(name, doc, "gauge")


def quantiles(values: Sequence[float]) -> list[tuple[str, float]]:
    """Kafka's percentiles of ``values`` (nearest rank; 0 for no values, as an empty histogram reads)."""
    ordered = sorted(values)
    if not ordered:
        return [(label, 0.0) for _, label in QUANTILES]
    last = len(ordered) - 1
    return [(label, ordered[min(last, int(q * len(ordered)))]) for q, label in QUANTILES]


class Timer:
    """A Kafka histogram/timer rendered as Strimzi renders it: quantile gauges and a ``_count``."""

    def __init__(self, name: str, doc: str) -> None:
        self.metric = Metric(name, doc, "summary")
        self.name = name

    def add(self, values: Iterable[float], count: int, **labels: str) -> Timer:
        for label, value in quantiles(list(values)):
            self.metric.add_sample(self.name, {**labels, "quantile": label}, value)
        self.metric.add_sample(self.name + "_count", labels, count)
        return self
