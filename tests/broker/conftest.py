"""Fixtures for broker tests: one real broker per module and admin clients on it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient

from pytest_pafka.broker_process import BrokerProcess


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    """kafka-python's admin client."""
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def cadmin(broker: BrokerProcess) -> AdminClient:
    """confluent-kafka's (librdkafka's) admin client."""
    return AdminClient({"bootstrap.servers": broker.bootstrap})
