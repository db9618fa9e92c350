"""Realistic nginx access-log lines, produced into ``nginx_access_log`` for the Spark jobs.

Run against a broker::

    python -m spark_jobs.nginx_log_generator --bootstrap-servers 127.0.0.1:9092 --records 20000

Each record's value is one line in nginx's ``combined`` format followed by ``$request_time``::

    $remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent
        "$http_referer" "$http_user_agent" $request_time

The key is the client address (so one client's requests stay in order on one partition, placed by
Java's murmur2 partitioner) and the record timestamp is the request's time. The same ``--seed``,
``--start``, ``--minutes`` and ``--records`` always give the same lines.

Event times run from ``--start`` across ``--minutes`` minutes, each line up to
``MAX_DISORDER_S`` seconds earlier than its position (several nginx servers ship to one topic, so
lines arrive slightly out of order). The last record is an end-of-stream marker (key
``END_OF_STREAM_KEY``) timed ``END_MARKER_GAP`` after the last request: it is not a request and
both jobs drop it, but it moves the streaming job's watermark past every window so Spark emits them
all (see ``spark_jobs/nginx_aggregates.py``).
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeVar

ACCESS_LOG_TOPIC = "nginx_access_log"
ACCESS_LOG_PARTITIONS = 3
END_OF_STREAM_KEY = b"__end_of_stream__"
END_MARKER_GAP = timedelta(hours=1)
MAX_DISORDER_S = 10.0
DEFAULT_START = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
DEFAULT_MINUTES = 6
DEFAULT_RECORDS = 20_000
DEFAULT_SEED = 6

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_USER_AGENTS = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_6) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
    "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148",
    "curl/8.5.0",
    "python-requests/2.32.3",
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
)
_REFERERS = ("-", "-", "-", "https://shop.example.com/", "https://www.google.com/", "https://shop.example.com/cart")
_USERS = ("-",) * 9 + ("alice",)


@dataclass(frozen=True)
class Endpoint:
    """One kind of request: how often it comes, what it returns and how long it takes."""

    method: str
    path: str  # ``{id}`` and ``{q}`` are filled per request
    weight: float
    statuses: tuple[tuple[int, float], ...]
    bytes_range: tuple[int, int]
    median_time_s: float


_OK = ((200, 0.97), (404, 0.01), (500, 0.01), (503, 0.01))
_STATIC = ((200, 0.80), (304, 0.19), (404, 0.01))
ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET", "/", 12, _OK, (8_000, 24_000), 0.020),
    Endpoint("GET", "/products/{id}", 10, ((200, 0.95), (404, 0.04), (500, 0.01)), (12_000, 40_000), 0.045),
    Endpoint("GET", "/api/v1/products?page={id}", 9, _OK, (800, 6_000), 0.060),
    Endpoint("GET", "/api/v1/products/{id}", 8, ((200, 0.93), (404, 0.06), (500, 0.01)), (300, 2_500), 0.035),
    Endpoint("GET", "/search?q={q}", 6, ((200, 0.96), (400, 0.02), (504, 0.02)), (2_000, 30_000), 0.180),
    Endpoint("POST", "/api/v1/cart", 4, ((201, 0.90), (400, 0.07), (500, 0.03)), (100, 900), 0.080),
    Endpoint("POST", "/api/v1/checkout", 1.5, ((201, 0.85), (402, 0.08), (502, 0.07)), (200, 1_200), 0.450),
    Endpoint("POST", "/login", 2, ((302, 0.80), (401, 0.20)), (0, 400), 0.120),
    Endpoint("GET", "/static/css/main.css", 7, _STATIC, (18_000, 60_000), 0.002),
    Endpoint("GET", "/static/js/app.js", 7, _STATIC, (90_000, 320_000), 0.004),
    Endpoint("GET", "/images/{id}.jpg", 9, _STATIC, (5_000, 250_000), 0.006),
    Endpoint("GET", "/favicon.ico", 3, _STATIC, (1_150, 1_150), 0.001),
    Endpoint("GET", "/robots.txt", 0.5, ((200, 1.0),), (68, 68), 0.001),
    Endpoint("GET", "/health", 2, ((200, 1.0),), (2, 2), 0.001),
    Endpoint("GET", "/wp-login.php", 0.7, ((404, 1.0),), (150, 560), 0.003),
    Endpoint("GET", "/.env", 0.3, ((403, 1.0),), (150, 560), 0.001),
)
_SEARCH_TERMS = ("shoes", "red+dress", "laptop", "usb-c+cable", "coffee", "tent", "headphones")


@dataclass(frozen=True)
class AccessLogEntry:
    """One request as nginx logs it."""

    remote_addr: str
    remote_user: str
    time: datetime  # UTC, whole seconds (nginx's $time_local resolution)
    method: str
    uri: str
    protocol: str
    status: int
    body_bytes_sent: int
    referer: str
    user_agent: str
    request_time: float  # seconds, millisecond resolution

    @property
    def path(self) -> str:
        """The URI without its query string: what the jobs count as a path."""
        return self.uri.split("?", 1)[0]

    def line(self) -> str:
        t = self.time
        time_local = f"{t.day:02d}/{_MONTHS[t.month - 1]}/{t.year}:{t.hour:02d}:{t.minute:02d}:{t.second:02d} +0000"
        return (f'{self.remote_addr} - {self.remote_user} [{time_local}] "{self.method} {self.uri} {self.protocol}" '
                f'{self.status} {self.body_bytes_sent} "{self.referer}" "{self.user_agent}" {self.request_time:.3f}')


T = TypeVar("T")


def _pick(rng: random.Random, weighted: Sequence[tuple[T, float]]) -> T:
    return rng.choices([v for v, _ in weighted], weights=[w for _, w in weighted])[0]


def _client_pool(rng: random.Random, size: int = 250) -> list[str]:
    return [f"{rng.choice((203, 198, 192, 100))}.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
            for _ in range(size)]


def _request_time(rng: random.Random, endpoint: Endpoint, status: int) -> float:
    if status in (502, 504):
        seconds = rng.uniform(5.0, 60.0)  # an upstream that timed out
    else:
        seconds = endpoint.median_time_s * rng.lognormvariate(0.0, 0.6)
    return round(seconds, 3)


def _body_bytes(rng: random.Random, endpoint: Endpoint, status: int) -> int:
    if status == 304 or (endpoint.method == "POST" and status == 302):
        return 0
    if status >= 400:
        return rng.randint(150, 560)  # nginx's or the app's short error page
    low, high = endpoint.bytes_range
    return rng.randint(low, high)


def generate(records: int = DEFAULT_RECORDS, *, seed: int = DEFAULT_SEED, start: datetime = DEFAULT_START,
             minutes: int = DEFAULT_MINUTES) -> list[AccessLogEntry]:
    """``records`` requests spread over ``minutes`` minutes from ``start``; the same arguments, the same list."""
    rng = random.Random(seed)
    clients = _client_pool(rng)
    client_weights = [1.0 / (rank + 1) for rank in range(len(clients))]  # a few busy clients, a long tail
    span_s = minutes * 60.0
    entries = []
    for i in range(records):
        nominal = span_s * i / records
        offset_s = max(0.0, nominal - rng.uniform(0.0, MAX_DISORDER_S))
        endpoint = rng.choices(ENDPOINTS, weights=[e.weight for e in ENDPOINTS])[0]
        status = _pick(rng, endpoint.statuses)
        uri = endpoint.path.replace("{id}", str(rng.randint(1, 40))).replace("{q}", rng.choice(_SEARCH_TERMS))
        entries.append(AccessLogEntry(
            remote_addr=rng.choices(clients, weights=client_weights)[0],
            remote_user=rng.choice(_USERS),
            time=start + timedelta(seconds=int(offset_s)),
            method=endpoint.method,
            uri=uri,
            protocol="HTTP/2.0" if rng.random() < 0.6 else "HTTP/1.1",
            status=status,
            body_bytes_sent=_body_bytes(rng, endpoint, status),
            referer=rng.choice(_REFERERS),
            user_agent=rng.choice(_USER_AGENTS),
            request_time=_request_time(rng, endpoint, status),
        ))
    return entries


def end_marker(entries: Sequence[AccessLogEntry]) -> AccessLogEntry:
    """The end-of-stream record: a well-formed line ``END_MARKER_GAP`` after the last request."""
    last = max(e.time for e in entries) if entries else DEFAULT_START
    return AccessLogEntry("127.0.0.1", "-", last + END_MARKER_GAP, "GET", "/__end_of_stream__", "HTTP/1.1",
                          200, 0, "-", "pafka-nginx-log-generator", 0.0)


def ensure_topic(bootstrap: str, topic: str = ACCESS_LOG_TOPIC, partitions: int = ACCESS_LOG_PARTITIONS) -> None:
    """Create ``topic`` with ``partitions`` partitions unless it exists already."""
    from client import AdminClient, KafkaClient, TopicAlreadyExistsError

    with KafkaClient(bootstrap) as client:
        try:
            AdminClient(client).create_topic(topic, partitions)
        except TopicAlreadyExistsError:
            pass


def produce(bootstrap: str, entries: Iterable[AccessLogEntry], *, topic: str = ACCESS_LOG_TOPIC,
            with_end_marker: bool = True) -> int:
    """Produce every entry (keyed by client, timestamped with its request time); returns the records acknowledged."""
    from confluent_kafka import Producer

    errors: list[str] = []

    def delivered(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is not None:
            errors.append(f"{msg.topic()} [{msg.partition()}]: {err}")

    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", "linger.ms": 20,
                         "enable.idempotence": True, "on_delivery": delivered})
    entries = list(entries)
    records = [(e.remote_addr.encode(), e) for e in entries]
    if with_end_marker:
        records.append((END_OF_STREAM_KEY, end_marker(entries)))
    for key, entry in records:
        _produce_one(producer, topic, key, entry)
    remaining = producer.flush(120)
    if remaining or errors:
        raise RuntimeError(f"{remaining} records unacknowledged; errors: {errors[:5]}")
    return len(records)


def _produce_one(producer, topic: str, key: bytes, entry: AccessLogEntry) -> None:  # type: ignore[no-untyped-def]
    timestamp_ms = int(entry.time.timestamp() * 1000)
    while True:
        try:
            producer.produce(topic, key=key, value=entry.line().encode(), timestamp=timestamp_ms)
            break
        except BufferError:
            producer.poll(0.05)  # queue full: let deliveries drain
    producer.poll(0)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--bootstrap-servers", required=True, help="HOST:PORT of a pafka (or Kafka) broker")
    parser.add_argument("--records", type=int, default=DEFAULT_RECORDS)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--start", type=datetime.fromisoformat, default=DEFAULT_START,
                        help="first request time, ISO 8601 (UTC if no offset)")
    parser.add_argument("--minutes", type=int, default=DEFAULT_MINUTES, help="minutes the requests span")
    parser.add_argument("--topic", default=ACCESS_LOG_TOPIC)
    parser.add_argument("--partitions", type=int, default=ACCESS_LOG_PARTITIONS,
                        help="partitions of the topic if it has to be created")
    parser.add_argument("--no-end-marker", action="store_true",
                        help="leave out the end-of-stream marker (more data will follow)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    start = args.start if args.start.tzinfo else args.start.replace(tzinfo=UTC)
    entries = generate(args.records, seed=args.seed, start=start, minutes=args.minutes)
    ensure_topic(args.bootstrap_servers, args.topic, args.partitions)
    produced = produce(args.bootstrap_servers, entries, topic=args.topic, with_end_marker=not args.no_end_marker)
    print(f"produced {produced} records to {args.topic} "
          f"({entries[0].time.isoformat() if entries else '-'} .. {entries[-1].time.isoformat() if entries else '-'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
