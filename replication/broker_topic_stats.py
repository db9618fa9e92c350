"""Kafka's BrokerTopicStats as plain counters: what the broker took in and sent out, per topic.

Updated in place on the request path (an attribute increment per partition of a request, no lock,
no label lookup: everything runs on the event loop); the broker's metrics read them at scrape time
and sum the all-topics figures there. A deleted topic's counts move to ``retired``, so the
all-topics counters never go back.
"""

from __future__ import annotations


class TopicCounters:
    """One topic's counters (Kafka's BrokerTopicMetrics meters, as totals)."""

    __slots__ = ("bytes_in", "bytes_out", "bytes_rejected", "failed_fetch_requests", "failed_produce_requests",
                 "messages_in", "total_fetch_requests", "total_produce_requests")

    def __init__(self) -> None:
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.bytes_rejected = 0
        self.failed_produce_requests = 0
        self.failed_fetch_requests = 0
        self.total_produce_requests = 0
        self.total_fetch_requests = 0

    def add(self, other: TopicCounters) -> None:
        for name in TopicCounters.__slots__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


class BrokerTopicStats:
    """Every topic's counters, and the follower traffic (Kafka's ReplicationBytesIn/Out, all topics only)."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicCounters] = {}
        #: The counts of topics deleted since start-up.
        self.retired = TopicCounters()
        self.replication_bytes_in = 0
        self.replication_bytes_out = 0

    def of(self, topic: str) -> TopicCounters:
        counters = self.topics.get(topic)
        if counters is None:
            counters = self.topics[topic] = TopicCounters()
        return counters

    def remove_topic(self, topic: str) -> None:
        counters = self.topics.pop(topic, None)
        if counters is not None:
            self.retired.add(counters)

    def all_topics(self) -> TopicCounters:
        """The sums over every topic, deleted ones included (computed when asked)."""
        total = TopicCounters()
        total.add(self.retired)
        for counters in self.topics.values():
            total.add(counters)
        return total
