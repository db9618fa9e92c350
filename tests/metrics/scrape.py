"""Reading a broker's /metrics in tests: samples by name and labels."""

from __future__ import annotations

import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class Scrape:
    """One scrape's samples: ``value(name, **labels)`` and the label sets each name was seen with."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples: dict[str, list[tuple[dict[str, str], float]]] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                self.samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))

    @classmethod
    def of(cls, url: str) -> Scrape:
        status, text = get(url)
        assert status == 200, text
        return cls(text)

    def value(self, name: str, **labels: str) -> float:
        for sample_labels, value in self.samples.get(name, []):
            if sample_labels == labels:
                return value
        raise KeyError(f"no sample {name}{labels}")

    def label_sets(self, name: str) -> set[frozenset[str]]:
        return {frozenset(labels) for labels, _ in self.samples.get(name, [])}

    def with_label(self, name: str, label: str) -> set[str]:
        return {labels[label] for labels, _ in self.samples.get(name, []) if label in labels}
