"""The client's one-partition fetch when the broker's answer leaves the partition out."""

from __future__ import annotations

import pytest

from client.client import KafkaClient
from client.errors import KafkaClientError


def test_a_fetch_answer_without_the_partition_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka answers every partition a Fetch names; an answer without it (a broker that does not follow the
    topic-id versions) is the client's error, not a KeyError."""
    monkeypatch.setattr(KafkaClient, "fetch_many", lambda self, offsets, **_: {})
    client = KafkaClient("127.0.0.1:1")
    with pytest.raises(KafkaClientError, match="has no t-0"):
        client.fetch("t", 0, 0)
