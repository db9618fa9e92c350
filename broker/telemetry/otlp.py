"""A PushTelemetry payload decoded: OTLP ``MetricsData`` (opentelemetry-proto), after decompression.

Each gauge or sum data point becomes a :class:`MetricPoint` named as Prometheus names OTLP metrics
(every character outside ``[a-zA-Z0-9_:]`` becomes ``_``: ``org.apache.kafka.producer.record.queue.time.avg``
is ``org_apache_kafka_producer_record_queue_time_avg``), its attributes as labels. A monotonic sum is a
counter: its delta points (the broker asks clients for delta temporality) are added up by the collector,
its cumulative points replace the value. Histograms and summaries are left out: the clients' standard
metrics are gauges and sums.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from google.protobuf.message import DecodeError
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AGGREGATION_TEMPORALITY_DELTA,
    Metric,
    MetricsData,
    NumberDataPoint,
)

from protocol.compression import decompress
from protocol.errors import CorruptRecordError

_INVALID_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_:]")
_INVALID_LABEL_CHARS = re.compile(r"[^a-zA-Z0-9_]")


class InvalidTelemetryPayload(ValueError):
    """A payload that does not decompress or does not parse as OTLP: INVALID_RECORD."""


@dataclass(frozen=True, slots=True)
class MetricPoint:
    name: str
    description: str
    #: "counter" (a monotonic sum) or "gauge".
    kind: str
    value: float
    #: Added to the value kept (a delta sum's point) rather than replacing it.
    delta: bool
    labels: tuple[tuple[str, str], ...]


def prometheus_name(name: str) -> str:
    sanitized = _INVALID_NAME_CHARS.sub("_", name)
    return "_" + sanitized if sanitized[:1].isdigit() else sanitized


def label_name(name: str) -> str:
    sanitized = _INVALID_LABEL_CHARS.sub("_", name)
    return "_" + sanitized if sanitized[:1].isdigit() else sanitized


def _text(value: AnyValue) -> str:
    kind = value.WhichOneof("value")
    if kind is None:
        return ""
    if kind in ("array_value", "kvlist_value", "bytes_value"):
        return str(getattr(value, kind)).strip()
    return str(getattr(value, kind))


def _labels(attributes: Iterable[KeyValue]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((label_name(a.key), _text(a.value)) for a in attributes))


def _number(point: NumberDataPoint) -> float:
    return float(point.as_double) if point.WhichOneof("value") == "as_double" else float(point.as_int)


def _points(metric: Metric) -> Iterator[MetricPoint]:
    name = prometheus_name(metric.name)
    kind = metric.WhichOneof("data")
    if kind == "gauge":
        for point in metric.gauge.data_points:
            yield MetricPoint(name, metric.description, "gauge", _number(point), False, _labels(point.attributes))
    elif kind == "sum":
        counter = metric.sum.is_monotonic
        delta = metric.sum.aggregation_temporality == AGGREGATION_TEMPORALITY_DELTA
        for point in metric.sum.data_points:
            yield MetricPoint(name, metric.description, "counter" if counter else "gauge", _number(point), delta,
                              _labels(point.attributes))


def decode_metrics(payload: bytes, compression_type: int) -> list[MetricPoint]:
    """The payload's gauge and sum points; InvalidTelemetryPayload when it is not OTLP."""
    try:
        data = decompress(compression_type, payload)
        metrics = MetricsData.FromString(data)
    except (CorruptRecordError, DecodeError) as exc:
        raise InvalidTelemetryPayload(str(exc)) from None
    return [point for resource in metrics.resource_metrics for scope in resource.scope_metrics
            for metric in scope.metrics for point in _points(metric)]
