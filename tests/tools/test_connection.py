"""BrokerConnection against a scripted broker: version negotiation, correlation ids, pipelining."""

from __future__ import annotations

import pytest

from client import (
    BrokerConnection,
    CorrelationIdMismatchError,
    KafkaConnectionError,
    NoCompatibleVersionError,
    parse_bootstrap_servers,
)
from client.connection import BrokerAddress
from protocol.api import APIS, encode_response
from protocol.buffers import join_chunks
from protocol.errors import ErrorCode
from protocol.messages.metadata import MetadataRequest, MetadataResponse, MetadataResponseBroker
from tests.tools.fake_broker import FakeBroker, api_versions_response

API_VERSIONS, METADATA, PRODUCE, FETCH = 18, 3, 0, 1


def _metadata_reply(request):  # type: ignore[no-untyped-def]
    return MetadataResponse(brokers=[MetadataResponseBroker(node_id=7, host="127.0.0.1", port=1)], controller_id=7)


def test_negotiates_highest_common_version_per_api() -> None:
    ranges = {API_VERSIONS: (0, 4), METADATA: (0, 99), PRODUCE: (0, 5), FETCH: (20, 30), 12345: (0, 1)}

    def handler(request):  # type: ignore[no-untyped-def]
        return api_versions_response(ranges)

    with FakeBroker(handler) as fake, BrokerConnection("127.0.0.1", fake.port) as conn:
        assert fake.requests[0].api_version == APIS[API_VERSIONS].versions.stop - 1
        # Metadata: ours caps it; Produce: theirs caps it; Fetch and the unknown key: nothing in common.
        assert conn.api_versions[METADATA] == APIS[METADATA].versions.stop - 1
        assert conn.api_versions[PRODUCE] == 5
        assert FETCH not in conn.api_versions and 12345 not in conn.api_versions
        with pytest.raises(NoCompatibleVersionError):
            conn.version_for(FETCH)
        assert conn.version_for(METADATA, max_version=4) == 4


def test_falls_back_when_broker_rejects_our_api_versions_version() -> None:
    def handler(request):  # type: ignore[no-untyped-def]
        if request.api_version > 2:
            # Kafka's reply to an ApiVersions version it does not know: v0 body.
            body = api_versions_response({API_VERSIONS: (0, 2)}, ErrorCode.UNSUPPORTED_VERSION)
            return bytes(join_chunks(encode_response(API_VERSIONS, 0, request.correlation_id, body)))
        return api_versions_response({API_VERSIONS: (0, 2), METADATA: (1, 9)})

    with FakeBroker(handler) as fake, BrokerConnection("127.0.0.1", fake.port) as conn:
        assert [r.api_version for r in fake.requests] == [APIS[API_VERSIONS].versions.stop - 1, 2]
        assert conn.api_versions[METADATA] == 9


def test_request_returns_typed_response_and_pipelines_in_order() -> None:
    def handler(request):  # type: ignore[no-untyped-def]
        if request.api_key == API_VERSIONS:
            return api_versions_response({API_VERSIONS: (0, 3), METADATA: (0, 12)})
        return _metadata_reply(request)

    with FakeBroker(handler) as fake, BrokerConnection("127.0.0.1", fake.port, client_id="tester") as conn:
        response = conn.request(MetadataRequest(topics=None))
        assert isinstance(response, MetadataResponse) and response.brokers[0].node_id == 7
        ids = [conn.send(MetadataRequest(topics=None)) for _ in range(5)]
        assert conn.in_flight == 5
        assert [conn.receive()[0] for _ in range(5)] == ids
        assert fake.requests[-1].client_id == "tester"
        assert fake.requests[-1].api_version == 12


def test_correlation_id_mismatch_closes_the_connection() -> None:
    def handler(request):  # type: ignore[no-untyped-def]
        if request.api_key == API_VERSIONS:
            return api_versions_response({API_VERSIONS: (0, 3), METADATA: (0, 12)})
        body = _metadata_reply(request)
        return bytes(join_chunks(encode_response(METADATA, request.api_version, request.correlation_id + 1, body)))

    with FakeBroker(handler) as fake, BrokerConnection("127.0.0.1", fake.port) as conn:
        with pytest.raises(CorrelationIdMismatchError):
            conn.request(MetadataRequest(topics=None))
        assert not conn.connected


def test_broker_closing_mid_response_is_a_connection_error() -> None:
    def handler(request):  # type: ignore[no-untyped-def]
        if request.api_key == API_VERSIONS:
            return api_versions_response({API_VERSIONS: (0, 3), METADATA: (0, 12)})
        full = bytes(join_chunks(encode_response(METADATA, request.api_version, request.correlation_id, _metadata_reply(request))))
        return full[:-3]  # then the next read blocks: the client must time out, not hang

    with FakeBroker(handler) as fake, BrokerConnection("127.0.0.1", fake.port, timeout=0.5) as conn:
        with pytest.raises(KafkaConnectionError):
            conn.request(MetadataRequest(topics=None))
        assert not conn.connected


def test_connect_refused_is_a_connection_error() -> None:
    with FakeBroker(lambda r: None) as fake:
        port = fake.port
    with pytest.raises(KafkaConnectionError):
        BrokerConnection("127.0.0.1", port, timeout=1).connect()


def test_parse_bootstrap_servers() -> None:
    assert parse_bootstrap_servers("a:1, b:2,[::1]:3") == [
        BrokerAddress("a", 1),
        BrokerAddress("b", 2),
        BrokerAddress("::1", 3),
    ]
    for bad in ("", "host", "host:", ":9092", "h:x"):
        with pytest.raises(ValueError):
            parse_bootstrap_servers(bad)
