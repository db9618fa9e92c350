"""The metrics clients push (KIP-714), as the broker's Prometheus endpoint serves them.

:class:`ClientTelemetryCollector` is a prometheus_client Collector: each push's points are kept per
client instance, labelled with what the broker knows of the client (``client_id``,
``client_software_name``, ``client_software_version``, ``client_instance_id``) and the point's own
attributes. A client's series go away once it has not pushed for its expiry (three push intervals,
at least a minute: when the broker forgets the client instance), checked at scrape time so that no
task has to run for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from uuid import UUID

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from broker.telemetry.otlp import MetricPoint

#: The labels every pushed series carries, naming the client that pushed it.
CLIENT_LABELS = ("client_id", "client_software_name", "client_software_version", "client_instance_id")

#: The prefixes of the broker's own families: a pushed metric named like one would give the scrape a
#: second family of that name, which Prometheus refuses whole, so such points are dropped.
RESERVED_PREFIXES = ("kafka_", "pafka_", "process_", "python_")

#: (metric name, the point's labels) -> its series.
SeriesKey = tuple[str, tuple[tuple[str, str], ...]]


@dataclass(slots=True)
class _Series:
    kind: str
    description: str
    value: float


@dataclass(slots=True)
class _ClientSeries:
    labels: dict[str, str]
    last_push: float
    expiry_s: float
    series: dict[SeriesKey, _Series] = field(default_factory=dict)


def _family_name(name: str, kind: str) -> str:
    """A counter's family name without the "_total" its samples carry (the name may have one already:
    ``org.apache.kafka.consumer.connection.creation.total``)."""
    return name[:-len("_total")] if kind == "counter" and name.endswith("_total") else name


class ClientTelemetryCollector(Collector):
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._clients: dict[UUID, _ClientSeries] = {}

    def record(self, client_instance_id: UUID, client_labels: dict[str, str], points: Iterable[MetricPoint],
               expiry_s: float) -> None:
        """One push's points: a counter's delta is added to what the client pushed before, anything
        else replaces it."""
        client = self._clients.get(client_instance_id)
        if client is None:
            client = self._clients[client_instance_id] = _ClientSeries(dict(client_labels), 0.0, expiry_s)
        client.labels, client.last_push, client.expiry_s = dict(client_labels), self._clock(), expiry_s
        for point in points:
            if point.name.startswith(RESERVED_PREFIXES):
                continue
            key = (point.name, point.labels)
            series = client.series.get(key)
            if series is None or series.kind != point.kind:
                client.series[key] = _Series(point.kind, point.description, point.value)
            elif point.delta:
                series.value += point.value
            else:
                series.value = point.value

    def forget(self, client_instance_id: UUID) -> None:
        self._clients.pop(client_instance_id, None)

    def expire(self) -> None:
        now = self._clock()
        for instance_id in [i for i, c in self._clients.items() if now - c.last_push > c.expiry_s]:
            del self._clients[instance_id]

    def clients(self) -> int:
        return len(self._clients)

    def collect(self) -> Iterator[Metric]:
        self.expire()
        families: dict[str, Metric] = {}
        for client in list(self._clients.values()):
            for (point_name, point_labels), series in list(client.series.items()):
                name = _family_name(point_name, series.kind)
                family = families.get(name)
                if family is None:
                    family = families[name] = Metric(name, series.description or point_name, series.kind)
                elif family.type != series.kind:
                    continue  # one name, two types: the first client's type is the family's
                labels = dict(point_labels)
                labels.update(client.labels)
                # A counter's family drops a "_total" its name has; its sample carries one.
                sample = f"{family.name}_total" if series.kind == "counter" else family.name
                family.add_sample(sample, labels, series.value)
        yield from families.values()
