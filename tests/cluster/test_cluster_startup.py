"""A cluster with 1,000 partitions (issue 17): a broker joining it serves within 3 s of ZooKeeper
answering, and a non-controller broker answers Metadata for all 1,000 partitions in <= 20 ms
(median of several, measured on the wire: request bytes out, whole response frame in)."""

from __future__ import annotations

import socket
import statistics
import time
from collections.abc import Iterator

import pytest

from protocol.api import decode_response, encode_request
from protocol.buffers import join_chunks
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from pytest_pafka.cluster import Cluster
from testing.sockets import read_frame
from tests.cluster.helpers import broker_metadata, unique

TOPICS = 10
PARTITIONS_PER_TOPIC = 100
TOTAL_PARTITIONS = TOPICS * PARTITIONS_PER_TOPIC
JOIN_BUDGET_S = 3.0
METADATA_BUDGET_MS = 20.0
METADATA_SAMPLES = 15
METADATA_VERSION = 12


@pytest.fixture(scope="module")
def big_cluster() -> Iterator[tuple[Cluster, list[str]]]:
    """Brokers 1-3 running with 1,000 partitions over ten topics; broker 4 configured but not started."""
    from confluent_kafka.admin import AdminClient, NewTopic

    with Cluster(4, start_brokers=False) as cluster:
        for broker_id in (1, 2, 3):
            cluster.start(broker_id, wait_registered=False)
        cluster.wait_until_registered([1, 2, 3])
        cluster.wait_until_serving([1, 2, 3])  # the controller's UpdateMetadata reached each of them
        topics = [unique(f"big{i}") for i in range(TOPICS)]
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_of([1, 2, 3])})
        futures = admin.create_topics([NewTopic(t, num_partitions=PARTITIONS_PER_TOPIC, replication_factor=1)
                                       for t in topics], operation_timeout=60)
        for future in futures.values():
            future.result(timeout=120)
        for topic in topics:
            cluster.wait_for_topic(topic, PARTITIONS_PER_TOPIC, 120.0)
        yield cluster, topics
        print(cluster.log_tails())


def serving_all(cluster: Cluster, broker_id: int, topics: list[str]) -> bool:
    try:
        metadata = broker_metadata(cluster.broker(broker_id), topics)
    except Exception:
        return False
    partitions = [m for t in topics if t in metadata.topics for m in metadata.topics[t].partitions.values()]
    return (len(partitions) == TOTAL_PARTITIONS and all(m.leader in (1, 2, 3) for m in partitions)
            and set(metadata.brokers) == {1, 2, 3, 4})


def test_broker_joining_serves_within_3s(big_cluster: tuple[Cluster, list[str]]) -> None:
    cluster, topics = big_cluster
    # ZooKeeper is answering now: the clock starts at the launch.
    launched = time.monotonic()
    cluster.start(4, wait_registered=False)
    cluster.wait_for(lambda: serving_all(cluster, 4, topics), 30.0, "broker 4 serving 1,000 partitions",
                     interval=0.01)
    elapsed = time.monotonic() - launched
    assert 4 in cluster.registered_ids()
    assert elapsed <= JOIN_BUDGET_S, f"broker 4 served the cluster's metadata {elapsed:.2f}s after its launch"


def metadata_round_trip_ms(host: str, port: int, samples: int) -> tuple[list[float], MetadataResponse]:
    """Wall time of each Metadata(all topics) round trip on one connection, and the last response."""
    request = MetadataRequest(topics=None, allow_auto_topic_creation=False)
    frames = [join_chunks(encode_request(MetadataRequest.API_KEY, METADATA_VERSION, i, "pafka-tests", request))
              for i in range(samples + 1)]
    times: list[float] = []
    with socket.create_connection((host, port), timeout=10.0) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(frames[0])
        read_frame(sock)  # warm-up: the connection's first request
        frame = bytearray()
        for i in range(1, samples + 1):
            started = time.perf_counter()
            sock.sendall(frames[i])
            frame = read_frame(sock)
            times.append((time.perf_counter() - started) * 1000)
    _, response = decode_response(MetadataRequest.API_KEY, METADATA_VERSION, frame)
    assert isinstance(response, MetadataResponse)
    return times, response


def test_metadata_for_1000_partitions_on_a_non_controller(big_cluster: tuple[Cluster, list[str]]) -> None:
    cluster, topics = big_cluster
    controller = cluster.controller_id()
    broker_id = next(b for b in cluster.running_ids() if b != controller)
    broker = cluster.broker(broker_id)
    times, response = metadata_round_trip_ms(broker.host, broker.port, METADATA_SAMPLES)
    ours = [t for t in response.topics if t.name in topics]
    assert sum(len(t.partitions) for t in ours) == TOTAL_PARTITIONS
    assert all(p.leader_id >= 1 for t in ours for p in t.partitions)
    median = statistics.median(times)
    print(f"Metadata for {TOTAL_PARTITIONS} partitions on broker {broker_id}: median {median:.2f} ms, "
          f"min {min(times):.2f} ms, max {max(times):.2f} ms")
    assert median <= METADATA_BUDGET_MS, f"median {median:.2f} ms over {METADATA_SAMPLES} requests: {times}"
