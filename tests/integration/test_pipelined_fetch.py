"""Pipelined requests: responses in request order, even when one's data goes away.

A connection sends a long-polling fetch on an empty partition and, behind it,
a fetch that completes at once with file ranges of another topic. Its
response must wait for the first one (responses leave in request order); if
that topic is deleted meanwhile, the queued response can no longer be read
from its segment. The broker must then answer it some other way or close the
connection, never leave it silent and open: a client would wait forever.
"""

from __future__ import annotations

import socket
import time

from protocol.api import decode_response, encode_request
from protocol.buffers import join_chunks
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from pytest_pafka.broker_process import BrokerProcess
from tests.integration.clients import ConfluentDriver
from tests.integration.wire import read_response

FETCH_KEY, FETCH_VERSION = 1, 12  # by topic name
LONG_POLL_MS = 1500


def _fetch(topic: str, max_wait_ms: int) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                        session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                        topics=[FetchTopic(topic=topic, partitions=[FetchPartition(
                            partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                            log_start_offset=-1, partition_max_bytes=1 << 20)])])


def test_response_queued_behind_a_long_poll_when_its_topic_is_deleted() -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    with BrokerProcess() as broker:
        driver = ConfluentDriver()
        driver.create_topic(broker.bootstrap, "idle", 1)
        driver.create_topic(broker.bootstrap, "doomed", 1)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(100):
            producer.produce("doomed", value=b"%d" % i)
        assert producer.flush(10) == 0

        with socket.create_connection((broker.host, broker.port), timeout=LONG_POLL_MS / 1000 + 5) as sock:
            for correlation_id, request in ((1, _fetch("idle", LONG_POLL_MS)), (2, _fetch("doomed", 0))):
                sock.sendall(join_chunks(encode_request(FETCH_KEY, FETCH_VERSION, correlation_id, "pipeliner",
                                                        request)))
            time.sleep(0.2)  # both requests decoded; the second one's answer waits behind the first
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            admin.delete_topics(["doomed"], operation_timeout=10)["doomed"].result(timeout=10)
            started = time.monotonic()
            answers = []
            try:
                while len(answers) < 2:
                    frame = read_response(sock)
                    if frame is None:
                        break  # closed: the client reconnects and learns the topic is gone
                    answers.append(decode_response(FETCH_KEY, FETCH_VERSION, frame))
            except TimeoutError:
                raise AssertionError(f"connection left open and silent after {answers}") from None
            assert time.monotonic() - started < LONG_POLL_MS / 1000 + 2
        assert [correlation_id for correlation_id, _ in answers] == [1, 2][: len(answers)]
        assert len(answers) >= 1, "the long poll itself was never answered"
        if len(answers) == 2:
            (topic,) = answers[1][1].responses
            assert topic.partitions[0].error_code in (0, 3)  # the records, or UNKNOWN_TOPIC_OR_PARTITION
        # Still serving others.
        producer.produce("idle", value=b"after")
        assert producer.flush(10) == 0
