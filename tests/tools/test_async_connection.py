"""AsyncBrokerConnection against a real ``pafka broker`` process, on asyncio's loop and on uvloop (the broker's)."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import uvloop

from client import AsyncBrokerConnection, KafkaConnectionError, KafkaTimeoutError
from client.fetch_decoder import decode_fetched_records
from protocol.api import API_VERSIONS_KEY, APIS
from protocol.messages import fetch as _fetch
from protocol.messages import produce as _produce
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.records import Record, build_batch
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.ports import free_port
from testing.sockets import send_request
from testing.topics import create_topic

Run = Callable[[Callable[[], Awaitable[Any]]], Any]


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request: pytest.FixtureRequest) -> Run:
    """Runs a test coroutine to completion on a fresh event loop of the parametrized kind."""
    runner = asyncio.run if request.param == "asyncio" else uvloop.run

    def run(make: Callable[[], Awaitable[Any]]) -> Any:
        async def bounded() -> Any:
            return await asyncio.wait_for(make(), 60)  # no test may hang the suite

        return runner(bounded())

    return run


@pytest.fixture(scope="module")
def topic(broker: BrokerProcess) -> str:
    """A one-partition topic the tests produce to and fetch from."""
    create_topic(broker.bootstrap, "async-conn", 1)
    return "async-conn"


@pytest.fixture(scope="module")
def idle_topic(broker: BrokerProcess) -> str:
    """A topic nothing is produced to: a fetch at offset 0 is parked for its whole max_wait_ms."""
    create_topic(broker.bootstrap, "async-idle", 1)
    return "async-idle"


def _connection(broker: BrokerProcess, **kwargs: Any) -> AsyncBrokerConnection:
    return AsyncBrokerConnection(broker.host, broker.port, client_id="async-tests", **kwargs)


def _produce_request(topic: str, values: list[bytes]) -> _produce.ProduceRequest:
    batch = build_batch([Record(i, int(time.time() * 1000), None, v) for i, v in enumerate(values)])
    return _produce.ProduceRequest(
        transactional_id=None, acks=-1, timeout_ms=10_000,
        topic_data=[_produce.TopicProduceData(
            name=topic, partition_data=[_produce.PartitionProduceData(index=0, records=batch)])],
    )


def _fetch_request(topic: str, offset: int, max_wait_ms: int) -> _fetch.FetchRequest:
    partition = _fetch.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                                      log_start_offset=-1, partition_max_bytes=1 << 20)
    return _fetch.FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
                               isolation_level=0, session_id=0, session_epoch=-1,
                               topics=[_fetch.FetchTopic(topic=topic, partitions=[partition])],
                               forgotten_topics_data=[], rack_id="")


# Produce and Fetch v12 are the last that name topics (v13 names them by id only).
BY_NAME = 12


def _produced(response: object) -> _produce.PartitionProduceResponse:
    assert isinstance(response, _produce.ProduceResponse)
    ((partition,),) = [t.partition_responses for t in response.responses]
    assert partition.error_code == 0, partition
    return partition


def _fetched(response: object) -> _fetch.PartitionData:
    assert isinstance(response, _fetch.FetchResponse)
    ((partition,),) = [t.partitions for t in response.responses]
    assert partition.error_code == 0, partition
    return partition


def test_negotiates_the_highest_version_both_sides_support(broker: BrokerProcess, run: Run) -> None:
    raw = send_request(broker, API_VERSIONS_KEY, 3, ApiVersionsRequest(
        client_software_name="raw", client_software_version="1"))
    assert isinstance(raw, ApiVersionsResponse)
    advertised = {k.api_key: (k.min_version, k.max_version) for k in raw.api_keys}

    async def go() -> AsyncBrokerConnection:
        async with _connection(broker) as conn:
            return conn

    conn = run(go)
    assert conn.versions.broker_versions == advertised
    assert conn.versions.api_versions and set(conn.versions.api_versions) <= set(advertised)
    for api_key, chosen in conn.versions.api_versions.items():
        assert chosen == min(advertised[api_key][1], APIS[api_key].versions.stop - 1)
    assert not conn.connected


def test_metadata_names_the_broker(broker: BrokerProcess, run: Run) -> None:
    async def go() -> MetadataResponse:
        async with _connection(broker) as conn:
            response = await conn.request(MetadataRequest(topics=None, allow_auto_topic_creation=False))
            assert isinstance(response, MetadataResponse)
            return response

    response = run(go)
    assert [(b.host, b.port) for b in response.brokers] == [("127.0.0.1", broker.port)]


def test_produce_then_fetch(broker: BrokerProcess, topic: str, run: Run) -> None:
    values = [f"value-{i}".encode() for i in range(5)]

    async def go() -> tuple[int, list[bytes | None]]:
        async with _connection(broker) as conn:
            produce_version = conn.version_for(_produce.API_KEY, max_version=BY_NAME)
            produced = _produced(await conn.request(_produce_request(topic, values), version=produce_version))
            version = conn.version_for(_fetch.API_KEY, max_version=BY_NAME)
            fetched = _fetched(await conn.request(_fetch_request(topic, produced.base_offset, 500), version=version))
            batches, _ = decode_fetched_records(fetched.records, produced.base_offset)
            return produced.base_offset, [r.value for b in batches for r in b.records]

    base_offset, got = run(go)
    assert got[: len(values)] == values and base_offset >= 0


def test_fifty_pipelined_requests_each_get_their_own_response(
    broker: BrokerProcess, topic: str, run: Run
) -> None:
    async def go() -> tuple[int, list[int], list[int]]:
        async with _connection(broker) as conn:
            completed: list[int] = []
            futures = []
            version = conn.version_for(_produce.API_KEY, max_version=BY_NAME)
            for i in range(50):
                future = conn.send(_produce_request(topic, [f"pipelined-{i}".encode()]), version=version)
                future.add_done_callback(functools.partial(lambda i, _: completed.append(i), i))
                futures.append(future)
            in_flight = conn.in_flight  # all written before any response was read
            offsets = [_produced(r).base_offset for r in await asyncio.gather(*futures)]
            return in_flight, offsets, completed

    in_flight, offsets, completed = run(go)
    assert in_flight == 50
    # One socket, answered in order: request i's response is the append right after request i-1's.
    assert offsets == list(range(offsets[0], offsets[0] + 50))
    assert completed == list(range(50))


def test_a_request_that_outlives_its_timeout_fails_and_closes_the_connection(
    broker: BrokerProcess, idle_topic: str, run: Run
) -> None:
    async def go() -> tuple[object, object, float, bool]:
        async with _connection(broker) as conn:
            version = conn.version_for(_fetch.API_KEY, max_version=BY_NAME)
            # At the log end of an idle topic: the broker parks both fetches for their full 5 s.
            parked = _fetch_request(idle_topic, 0, 5000)
            started = time.monotonic()
            late = conn.send(parked, version=version, timeout=0.3)
            behind = conn.send(parked, version=version, timeout=30)
            results = await asyncio.gather(late, behind, return_exceptions=True)
            return results[0], results[1], time.monotonic() - started, conn.connected

    late, behind, elapsed, connected = run(go)
    assert isinstance(late, KafkaTimeoutError)
    assert isinstance(behind, KafkaConnectionError) and not isinstance(behind, KafkaTimeoutError)
    # Not early: libuv keeps time in whole milliseconds, so uvloop's timer may fire up to 1 ms before
    # time.monotonic() says 0.3 s have passed (a CI run measured 0.29984 s).
    assert 0.3 - 0.002 <= elapsed < 3 and not connected


def test_cancelling_a_wait_leaves_the_connection_usable(
    broker: BrokerProcess, idle_topic: str, run: Run
) -> None:
    async def go() -> object:
        async with _connection(broker) as conn:
            version = conn.version_for(_fetch.API_KEY, max_version=BY_NAME)
            waiting = asyncio.ensure_future(conn.request(_fetch_request(idle_topic, 0, 300), version=version))
            await asyncio.sleep(0.05)
            waiting.cancel()
            # Its response still arrives first, and is dropped; this one gets its own.
            return await conn.request(MetadataRequest(topics=None, allow_auto_topic_creation=False))

    assert isinstance(run(go), MetadataResponse)


def test_close_fails_every_pending_request(broker: BrokerProcess, idle_topic: str, run: Run) -> None:
    async def go() -> tuple[list[object], BaseException | None]:
        async with _connection(broker) as conn:
            version = conn.version_for(_fetch.API_KEY, max_version=BY_NAME)
            futures = [conn.send(_fetch_request(idle_topic, 0, 5000), version=version) for _ in range(3)]
            await asyncio.sleep(0.05)
            conn.close()
            results: list[object] = list(await asyncio.gather(*futures, return_exceptions=True))
            try:
                conn.send(MetadataRequest(topics=None))
            except KafkaConnectionError as exc:
                return results, exc
            return results, None

    results, after_close = run(go)
    assert len(results) == 3
    assert all(isinstance(r, KafkaConnectionError) and not isinstance(r, KafkaTimeoutError) for r in results)
    assert isinstance(after_close, KafkaConnectionError)


def test_a_broker_killed_mid_request_fails_every_waiter(run: Run) -> None:
    with BrokerProcess() as broker:
        create_topic(broker.bootstrap, "doomed", 1)

        async def go() -> tuple[list[object], float]:
            async with _connection(broker, request_timeout=30) as conn:
                version = conn.version_for(_fetch.API_KEY, max_version=BY_NAME)
                futures = [conn.send(_fetch_request("doomed", 0, 20_000), version=version) for _ in range(3)]
                await asyncio.sleep(0.1)
                started = time.monotonic()
                await asyncio.to_thread(broker.kill)
                results: list[object] = list(await asyncio.gather(*futures, return_exceptions=True))
                return results, time.monotonic() - started

        results, elapsed = run(go)
    assert len(results) == 3
    assert all(isinstance(r, KafkaConnectionError) and not isinstance(r, KafkaTimeoutError) for r in results)
    assert elapsed < 10  # the loss was noticed, not waited out (the timeout is 30 s, the fetches 20 s)


def test_connect_to_a_closed_port_is_a_connection_error(run: Run) -> None:
    port = free_port()

    async def go() -> None:
        await AsyncBrokerConnection("127.0.0.1", port).connect(timeout=2)

    with pytest.raises(KafkaConnectionError):
        run(go)
