"""Live throughput from the brokers' Prometheus endpoints: scrape, turn counters into rates, keep a window.

The counters are the JMX exporter's names for BrokerTopicMetrics with Strimzi's rules
(``kafka_server_brokertopicmetrics_messagesin_total`` and the bytesin/bytesout ones): one series per topic
(``topic`` label) and one for all topics (no ``topic`` label). Any broker exposing them, pafka's or Kafka's
behind the exporter, can be plotted. A broker whose endpoint does not answer is reported, not fatal.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator

import aiohttp

#: Counter name -> the series name the plots use.
COUNTERS = {
    "kafka_server_brokertopicmetrics_messagesin_total": "messages_in",
    "kafka_server_brokertopicmetrics_bytesin_total": "bytes_in",
    "kafka_server_brokertopicmetrics_bytesout_total": "bytes_out",
}

Sample = tuple[str, dict[str, str], float]


def _labels(text: str) -> dict[str, str]:
    """``a="x",b="y \\" z"`` -> {a: x, b: y " z}, with the text format's escapes."""
    labels: dict[str, str] = {}
    i = 0
    while i < len(text):
        eq = text.index("=", i)
        name = text[i:eq].strip().lstrip(",").strip()
        i = eq + 2  # past ="
        value: list[str] = []
        while text[i] != '"':
            if text[i] == "\\":
                i += 1
                value.append("\n" if text[i] == "n" else text[i])
            else:
                value.append(text[i])
            i += 1
        labels[name] = "".join(value)
        i += 1
        while i < len(text) and text[i] in ", ":
            i += 1
    return labels


def parse_samples(text: str, names: frozenset[str] | set[str] | None = None) -> Iterator[Sample]:
    """The samples of a Prometheus text exposition (only those named ``names``, when given)."""
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        brace = line.find("{")
        if brace >= 0:
            name, close = line[:brace], line.rindex("}")
            labels, rest = _labels(line[brace + 1:close]), line[close + 1:]
        else:
            name, _, rest = line.partition(" ")
            labels = {}
        if names is not None and name not in names:
            continue
        try:
            yield name, labels, float(rest.split()[0])
        except (IndexError, ValueError):
            continue


#: A plotted series: ("topic", topic name, series) or ("broker", broker id, series).
SeriesKey = tuple[str, str, str]


def counters_of(node_id: int, text: str) -> dict[SeriesKey, float]:
    """One broker's counters: per topic (``topic`` label) and the broker's own (its all-topics series)."""
    own: dict[str, float] = {}
    topic_sum: dict[str, float] = {}
    counters: dict[SeriesKey, float] = {}
    for name, labels, value in parse_samples(text, set(COUNTERS)):
        series = COUNTERS[name]
        topic = labels.get("topic")
        if topic:
            counters[("topic", topic, series)] = counters.get(("topic", topic, series), 0.0) + value
            topic_sum[series] = topic_sum.get(series, 0.0) + value
        else:
            own[series] = own.get(series, 0.0) + value
    # An exporter without the all-topics series still gives the broker's total as the sum of its topics.
    for series, value in (own or topic_sum).items():
        counters[("broker", str(node_id), series)] = value
    return counters


class ThroughputHistory:
    """Rates per second between successive scrapes, the last ``window`` of them.

    Rates are taken per broker's counter and then summed (a topic's over its brokers), so a broker that
    misses a scrape leaves a gap in its share rather than a fall and a spike in the sum. A series that
    appears on a broker scraped the time before is new (a topic's first record): it counts from zero.
    """

    def __init__(self, window: int = 120) -> None:
        self._previous: tuple[float, dict[int, dict[SeriesKey, float]]] | None = None
        self.points: deque[tuple[float, dict[SeriesKey, float]]] = deque(maxlen=window)

    def record(self, at: float, scraped: dict[int, dict[SeriesKey, float]]) -> None:
        """``scraped``: each answering broker's counters (:func:`counters_of`) at time ``at``."""
        if self._previous is not None and at > self._previous[0]:
            then, before = self._previous
            rates: dict[SeriesKey, float] = {}
            for node_id, counters in scraped.items():
                if node_id not in before:
                    continue
                for key, value in counters.items():
                    previous = before[node_id].get(key, 0.0)
                    # A counter that went down was reset (its broker restarted): no rate for it this time.
                    if value >= previous:
                        rates[key] = rates.get(key, 0.0) + (value - previous) / (at - then)
            self.points.append((at, rates))
        self._previous = (at, scraped)

    def rates(self, kind: str, subject: str, series: str) -> list[float | None]:
        """One series' rates (``kind`` "topic" or "broker"), aligned with the points' times."""
        return [rates.get((kind, subject, series)) for _, rates in self.points]

    def as_json(self) -> dict[str, object]:
        """``{"times": [...], "topic": {name: {series: [...]}}, "broker": {...}}``, each list aligned with times
        (null where a series had no rate), the shape uPlot plots."""
        times = [at for at, _ in self.points]
        keys = sorted({key for _, rates in self.points for key in rates})
        out: dict[str, dict[str, dict[str, list[float | None]]]] = {"topic": {}, "broker": {}}
        for kind, subject, series in keys:
            out[kind].setdefault(subject, {})[series] = [rates.get((kind, subject, series)) for _, rates in self.points]
        return {"times": times, **out}


class MetricsScraper:
    """Scrapes every broker's endpoint each ``interval_s`` into a :class:`ThroughputHistory`.

    ``endpoints`` gives the current {node id: URL} (brokers come and go); its owner starts the scraper with
    :meth:`start` and stops it with :meth:`stop`.
    """

    def __init__(self, endpoints: Callable[[], Awaitable[dict[int, str]]], *, interval_s: float = 2.0,
                 timeout_s: float = 2.0, window: int = 120) -> None:
        self.endpoints = endpoints
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.history = ThroughputHistory(window)
        #: The endpoints that did not answer at the last scrape, with why.
        self.errors: dict[str, str] = {}
        self.last_endpoints: dict[int, str] = {}
        self._task: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def available(self) -> bool:
        """Whether any endpoint answered at the last scrape."""
        return bool(self.last_endpoints) and len(self.errors) < len(self.last_endpoints)

    def start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s))
        self._task = asyncio.create_task(self._run(), name="console-metrics-scraper")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _run(self) -> None:
        while True:
            await self.scrape_once()
            await asyncio.sleep(self.interval_s)

    async def scrape_once(self) -> None:
        try:
            endpoints = await self.endpoints()
        except Exception as e:  # the cluster is unreachable: nothing to scrape this time
            self.errors = {"cluster": str(e)}
            return
        self.last_endpoints = endpoints
        results = await asyncio.gather(*(self._get(url) for url in endpoints.values()))
        scraped = {node_id: counters_of(node_id, text) for node_id, text in zip(endpoints, results, strict=True)
                   if isinstance(text, str)}
        self.errors = {url: str(result) for url, result in zip(endpoints.values(), results, strict=True)
                       if not isinstance(result, str)}
        if scraped:
            self.history.record(time.time(), scraped)

    async def _get(self, url: str) -> str | Exception:
        assert self._session is not None
        try:
            async with self._session.get(url) as response:
                response.raise_for_status()
                return await response.text()
        except (aiohttp.ClientError, TimeoutError) as e:
            return e
