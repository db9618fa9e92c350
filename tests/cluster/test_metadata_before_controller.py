"""A cluster member never answers Metadata with an empty broker list (broker/handlers/metadata.py).

One real broker joins a real ZooKeeper in which the test holds ``/controller``
(broker 99, not live), as the old ZooKeeper session of a controller killed and
restarted at once holds it: no controller sends this broker an UpdateMetadata,
so it knows no live broker, not even itself. librdkafka forgets every broker it
knew on a Metadata answer without brokers and never reconnects; so the broker
waits for its first UpdateMetadata (up to its ZooKeeper session timeout) and,
still alone, names itself. When the test lets go of ``/controller``, the broker
becomes the controller, its UpdateMetadata arrives, and a waiting Metadata is
answered at once from it.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from client.connection import BrokerConnection
from protocol.errors import ErrorCode
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.zookeeper import ZooKeeperProcess

BROKER_ID = 1
SESSION_TIMEOUT_MS = 6000


@pytest.fixture()
def held(zookeeper: ZooKeeperProcess) -> Iterator[tuple[BrokerProcess, KazooClient]]:
    chroot = f"no-controller-{uuid.uuid4().hex[:8]}"
    zk = KazooClient(hosts=zookeeper.connect_string, timeout=10)
    zk.start(timeout=10)
    zk.ensure_path(f"/{chroot}")
    zk.chroot = f"/{chroot}"
    zk.create("/controller", json.dumps({"version": 1, "brokerid": 99, "timestamp": "0"}).encode(), ephemeral=True)
    zk.create("/controller_epoch", b"3")
    broker = BrokerProcess(f"zookeeper.connect={zookeeper.chroot(chroot)}", f"broker.id={BROKER_ID}",
                           f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}")
    try:
        broker.start()
        yield broker, zk
    finally:
        broker.cleanup()
        zk.stop()
        zk.close()


def metadata(broker: BrokerProcess) -> MetadataResponse:
    with BrokerConnection(broker.host, broker.port) as conn:
        response = conn.request(MetadataRequest(topics=[MetadataRequestTopic(name="chaos")],
                                                allow_auto_topic_creation=False), version=12, timeout=30)
    assert isinstance(response, MetadataResponse)
    return response


def test_a_member_without_a_controller_names_itself_after_its_session_timeout(
        held: tuple[BrokerProcess, KazooClient]) -> None:
    broker, _ = held
    started = time.monotonic()
    response = metadata(broker)
    waited = time.monotonic() - started
    assert SESSION_TIMEOUT_MS / 1000 * 0.9 <= waited < SESSION_TIMEOUT_MS / 1000 + 5, waited
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(BROKER_ID, broker.host, broker.port)]
    assert [(t.name, t.error_code) for t in response.topics] == [("chaos", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]


def test_a_waiting_metadata_is_answered_when_the_first_update_metadata_comes(
        held: tuple[BrokerProcess, KazooClient]) -> None:
    broker, zk = held
    answers: list[tuple[float, MetadataResponse]] = []
    asking = threading.Thread(target=lambda: answers.append((time.monotonic(), metadata(broker))))
    asking.start()
    time.sleep(1.0)
    assert not answers, "answered before any controller spoke"
    released = time.monotonic()
    zk.delete("/controller")  # the broker's own controller wins and sends it UpdateMetadata
    asking.join(30)
    (answered, response), = answers
    assert answered - released < SESSION_TIMEOUT_MS / 1000 * 0.8, answered - released
    assert [b.node_id for b in response.brokers] == [BROKER_ID]
    assert response.controller_id == BROKER_ID  # from the cache the UpdateMetadata filled


