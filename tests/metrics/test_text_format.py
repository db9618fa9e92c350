"""The broker's text writer says what prometheus_client's would: same samples, escaping included."""

from __future__ import annotations

import math
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from broker.metrics.families import Timer, counter, gauge, labels_text
from broker.metrics.text_format import TextWriter, text_format


def samples(text: str) -> set[tuple[str, tuple[tuple[str, str], ...], float]]:
    return {(s.name, tuple(sorted(s.labels.items())), s.value) for f in text_string_to_metric_families(text)
            for s in f.samples if not math.isnan(s.value)}


class Families:
    def collect(self) -> Iterator[Metric]:
        yield gauge("g", "a gauge").add(1).add(2.5, topic="t", partition="0").add(math.inf, topic="inf").metric
        yield counter("c", "a counter\nwith two lines").add(7, group='a "quoted" \\ group\nname').metric
        family = gauge("shared", "rendered labels")
        family.add_rendered(3, labels_text(consumergroup='g"1', topic="t"))
        yield family.metric
        yield Timer("t_ms", "a timer").add([1.0, 2.0, 3.0], 3, request="Produce").add([], 0, request="Fetch").metric


def test_the_text_parses_back_to_the_samples_given() -> None:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Families())
    Counter("plain_requests", "a prometheus_client counter (written by prometheus_client)", registry=registry).inc(4)
    ours = samples(text_format(registry.collect()).decode())
    assert {("g", (), 1.0), ("g", (("partition", "0"), ("topic", "t")), 2.5), ("g", (("topic", "inf"),), math.inf),
            ("c_total", (("group", 'a "quoted" \\ group\nname'),), 7.0),
            ("shared", (("consumergroup", 'g"1'), ("topic", "t")), 3.0),
            ("t_ms", (("quantile", "0.99"), ("request", "Produce")), 3.0),
            ("t_ms", (("quantile", "0.50"), ("request", "Produce")), 2.0),
            ("t_ms_count", (("request", "Produce"),), 3.0),
            ("t_ms", (("quantile", "0.999"), ("request", "Fetch")), 0.0),
            ("t_ms_count", (("request", "Fetch"),), 0.0)} <= ours
    # A family of prometheus_client's own goes through its writer: the same samples.
    plain = {sample for sample in ours if sample[0].startswith("plain_requests")}
    assert plain == {sample for sample in samples(generate_latest(registry).decode())
                     if sample[0].startswith("plain_requests")}
    assert ("plain_requests_total", (), 4.0) in plain


def test_a_writer_renders_again_only_what_moved() -> None:
    offsets = {"a": 1, "b": 2}

    class Offsets:
        def collect(self) -> Iterator[Metric]:
            family = gauge("offset", "offsets")
            for topic, offset in sorted(offsets.items()):
                family.add_rendered(offset, labels_text(topic=topic))
            yield family.metric
            yield gauge("still", "unchanged").add(1.5).metric

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Offsets())
    writer = TextWriter()
    first = writer.write(registry.collect())
    assert writer.write(registry.collect()) == first == text_format(registry.collect())
    offsets["b"] = 3
    offsets["c"] = 0
    moved = writer.write(registry.collect()).decode()
    assert moved == text_format(registry.collect()).decode()
    assert samples(moved) == {("offset", (("topic", "a"),), 1.0), ("offset", (("topic", "b"),), 3.0),
                              ("offset", (("topic", "c"),), 0.0), ("still", (), 1.5)}
