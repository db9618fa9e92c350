"""Kafka's RequestMetrics as plain counters and a bounded window of timings, per API.

The connection records each request once, when its answer is handed to the socket: the request
count by version, the answer's top-level error code, and its five times (queue, local, remote,
response send, total). Counting is dict increments and one tuple appended to a bounded deque; the
quantiles are computed from the window when Prometheus scrapes (broker.metrics).
"""

from __future__ import annotations

from collections import deque
from typing import Any

#: Timings kept per API for the quantiles: Kafka's histograms keep a 1,028-sample reservoir.
WINDOW = 1028
#: Fetch is also recorded under these keys, as Kafka splits its times into FetchConsumer and FetchFollower.
FETCH_CONSUMER_KEY = -1
FETCH_FOLLOWER_KEY = -2
FETCH_KEY = 1

#: (queue, local, remote, response send, total) seconds, and the throttle time the answer carries (ms).
Timing = tuple[float, float, float, float, float, float]


class ApiRequestStats:
    """One API's counts and recent timings."""

    __slots__ = ("errors", "requests", "timings", "total")

    def __init__(self) -> None:
        #: Requests by version.
        self.requests: dict[int, int] = {}
        #: Answers by their top-level error code (0: NONE, also for answers without one).
        self.errors: dict[int, int] = {}
        self.timings: deque[Timing] = deque(maxlen=WINDOW)
        #: Every request timed (the histograms' count).
        self.total = 0


class RequestMetrics:
    """Every API's :class:`ApiRequestStats`, by API key (and the two fetch kinds)."""

    def __init__(self) -> None:
        self.apis: dict[int, ApiRequestStats] = {}

    def of(self, api_key: int) -> ApiRequestStats:
        stats = self.apis.get(api_key)
        if stats is None:
            stats = self.apis[api_key] = ApiRequestStats()
        return stats

    def record(self, api_key: int, version: int, response: Any, timing: Timing, fetch_kind: int = 0) -> None:
        stats = self.apis.get(api_key) or self.of(api_key)
        requests = stats.requests
        requests[version] = requests.get(version, 0) + 1
        code = getattr(response, "error_code", 0) or 0
        errors = stats.errors
        errors[code] = errors.get(code, 0) + 1
        stats.timings.append(timing)
        stats.total += 1
        if fetch_kind:
            kind = self.apis.get(fetch_kind) or self.of(fetch_kind)
            kind.requests[version] = kind.requests.get(version, 0) + 1
            kind.timings.append(timing)
            kind.total += 1
