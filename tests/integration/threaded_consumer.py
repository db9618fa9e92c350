"""A confluent-kafka group member polled on its own thread, recording what the client saw."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: How librdkafka names the error in its logs (err2name and err2str).
UNKNOWN_MEMBER_MARKERS = ("UNKNOWN_MEMBER_ID", "Unknown member")


class _LogCollector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@dataclass
class ThreadedConsumer:
    bootstrap: str
    group: str
    topics: list[str]
    name: str
    extra: dict[str, Any] = field(default_factory=dict)
    on_batch: Callable[[ThreadedConsumer, list[Any]], None] | None = None
    events: list[tuple[float, str, list[int]]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        from confluent_kafka import Consumer

        self.log = _LogCollector()
        logger = logging.getLogger(f"rdkafka.{self.name}")
        logger.propagate = False
        logger.setLevel(logging.DEBUG)
        logger.addHandler(self.log)
        config = {"bootstrap.servers": self.bootstrap, "group.id": self.group, "client.id": self.name,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                  "heartbeat.interval.ms": 300, "debug": "cgrp", "logger": logger,
                  "error_cb": lambda err: self.errors.append(str(err)), **self.extra}
        self.consumer = Consumer(config)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self.subscribed_at = 0.0

    def _record(self, kind: str, partitions: list[Any]) -> None:
        self.events.append((time.monotonic(), kind, sorted(p.partition for p in partitions)))

    def start(self) -> ThreadedConsumer:
        self.subscribed_at = time.monotonic()
        self.consumer.subscribe(self.topics, on_assign=lambda c, ps: self._record("assigned", ps),
                                on_revoke=lambda c, ps: self._record("revoked", ps))
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            messages = [m for m in self.consumer.consume(num_messages=100, timeout=0.1) if m.error() is None]
            if messages and self.on_batch is not None:
                self.on_batch(self, messages)

    def owned(self) -> set[int]:
        owned: set[int] = set()
        for _, kind, partitions in list(self.events):
            owned = owned | set(partitions) if kind == "assigned" else owned - set(partitions)
        return owned

    def count(self, kind: str) -> int:
        return sum(1 for _, k, _ in list(self.events) if k == kind)

    def unknown_member_lines(self) -> list[str]:
        return [line for line in self.log.lines if any(m in line for m in UNKNOWN_MEMBER_MARKERS)]

    def stop(self, close: bool = True) -> None:
        self._stop.set()
        self._thread.join(30)
        if close:
            self.consumer.close()
