"""Metric families named and shaped as the JMX exporter with Strimzi's rules renders Kafka's MBeans.

A meter (``...PerSec``) becomes a counter ``..._total``; a gauge keeps its name; a histogram or timer
becomes ``name{quantile="0.50"...}`` and ``name_count``, as Strimzi's rules emulate a summary.
One family may carry samples with and without labels (all-topics and per-topic BrokerTopicMetrics).

A broker with 1,000 partitions and 50 groups has ~8,500 samples: these families keep them as plain
``(name, labels, value)`` rows (``Metric.rows``), which broker.metrics.text_format writes directly,
rather than as prometheus_client Sample tuples; ``Metric.samples`` stays empty.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Generic, TypeVar

from prometheus_client.metrics_core import Metric

#: Kafka's histogram percentiles and the quantile labels Strimzi's rules give them ("0.$N").
QUANTILES: tuple[tuple[float, str], ...] = ((0.50, "0.50"), (0.75, "0.75"), (0.95, "0.95"), (0.98, "0.98"),
                                            (0.99, "0.99"), (0.999, "0.999"))


#: A sample as these families keep it: (sample name, labels, value); the labels may come rendered
#: already (``labels_text``), when several families share them.
Row = tuple[str, dict[str, str] | str, float]


def plain_metric(name: str, doc: str, kind: str) -> Metric:
    metric = Metric(name, doc, kind)
    metric.rows = []  # type: ignore[attr-defined]
    metric.text = []  # type: ignore[attr-defined]
    return metric


def rows_of(metric: Metric) -> list[Row] | None:
    """The rows of a family built here (None for other families)."""
    rows: list[Row] | None = getattr(metric, "rows", None)
    return rows


def text_of(metric: Metric) -> list[str]:
    """Samples of a family built here that came rendered already (written after its rows)."""
    text: list[str] = getattr(metric, "text", [])
    return text


class Family:
    """One metric family; samples added with their labels."""

    def __init__(self, name: str, doc: str, kind: str) -> None:
        self.metric = plain_metric(name, doc, kind)
        self._rows: list[Row] = self.metric.rows  # type: ignore[attr-defined]
        self._sample_name = name + "_total" if kind == "counter" else name

    def add(self, value: float, **labels: str) -> Family:
        self._rows.append((self._sample_name, labels, value))
        return self

    def add_rendered(self, value: float, labels: str) -> None:
        """A sample whose labels :func:`labels_text` rendered."""
        self._rows.append((self._sample_name, labels, value))

    def add_all_rendered(self, samples: Iterable[tuple[float, str]]) -> None:
        """Samples whose labels :func:`labels_text` rendered, as (value, labels)."""
        name = self._sample_name
        self._rows.extend([(name, labels, value) for value, labels in samples])

    def add_text(self, text: str) -> None:
        """Samples rendered already (lines of this family's sample name), written after the rows."""
        self.metric.text.append(text)  # type: ignore[attr-defined]

    @property
    def sample_name(self) -> str:
        return self._sample_name


def labels_text(**labels: str) -> str:
    """Labels as the text format writes them, for samples of several families (escaped)."""
    return ",".join([f'{k}="{escape(v)}"' for k, v in labels.items()])


K = TypeVar("K", bound=Hashable)


class RenderedLabels(Generic[K]):
    """Rendered labels by key (a partition, a group's partition), kept from one scrape to the next:
    a partition's labels never change, so a scrape renders only those of partitions new since the
    previous one. Keys not asked for during a scrape (a deleted topic's) are forgotten at the next."""

    def __init__(self, render: Callable[[K], str]) -> None:
        self._render = render
        self._previous: dict[K, str] = {}
        self._current: dict[K, str] = {}

    def next_scrape(self) -> None:
        self._previous, self._current = self._current, {}

    def __getitem__(self, key: K) -> str:
        text = self._previous.get(key)
        if text is None:
            text = self._render(key)
        self._current[key] = text
        return text


def partition_labels(key: tuple[str, int]) -> str:
    """``topic`` and ``partition``, rendered."""
    return labels_text(topic=key[0], partition=str(key[1]))


def escape(value: str) -> str:
    """A label value as the text format needs it."""
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", r"\\").replace('"', r"\"").replace("\n", r"\n")
    return value


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


def quantile_values(values: Sequence[float], scale: float) -> list[float]:
    """Kafka's percentiles of ``values`` (as :data:`QUANTILES` orders them) times ``scale``.

    Scaling after picking gives the same numbers as picking from scaled values (the order holds)
    at the cost of six multiplications instead of one a value."""
    ordered = sorted(values)
    if not ordered:
        return [0.0] * len(QUANTILES)
    size = len(ordered)
    last = size - 1
    return [ordered[min(last, int(q * size))] * scale for q, _ in QUANTILES]


def number_text(value: float) -> str:
    """A sample's value as the text format writes it."""
    if type(value) is int:
        return str(value)
    number = float(value)
    if number - number == 0.0:  # finite (inf - inf and NaN - NaN are NaN)
        return repr(number)
    if number != number:
        return "NaN"
    return "+Inf" if number > 0 else "-Inf"


class Timer:
    """A Kafka histogram/timer rendered as Strimzi renders it: quantile gauges and a ``_count``."""

    def __init__(self, name: str, doc: str) -> None:
        self.metric = plain_metric(name, doc, "summary")
        self._rows: list[Row] = self.metric.rows  # type: ignore[attr-defined]
        self.name = name

    def add(self, values: Iterable[float], count: int, **labels: str) -> Timer:
        for label, value in quantiles(list(values)):
            self._rows.append((self.name, {**labels, "quantile": label}, value))
        self._rows.append((self.name + "_count", labels, count))
        return self

    def add_text(self, text: str) -> None:
        """Samples rendered already (:func:`timer_text`), written after the rows."""
        self.metric.text.append(text)  # type: ignore[attr-defined]


def timer_text(name: str, quantiles: list[float], count: int, labels: str) -> str:
    """A timer's samples for the rendered ``labels``, as the text format writes them."""
    lines = [f'{name}{{{labels},quantile="{label}"}} {number_text(value)}\n'
             for (_, label), value in zip(QUANTILES, quantiles, strict=True)]
    lines.append(f"{name}_count{{{labels}}} {count}\n")
    return "".join(lines)
