"""DescribeClientQuotas and AlterClientQuotas on a real lone broker (KIP-546).

Quotas are set, described with every filter match type, strict and not, and
removed at every version; bad entries get INVALID_REQUEST with the others
applied; a lone broker keeps its quotas across a restart.
"""

from __future__ import annotations

import time

import pytest

from client.connection import BrokerConnection
from protocol.errors import ErrorCode
from protocol.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasRequestEntryData,
    AlterClientQuotasResponse,
    EntityData,
    OpData,
)
from protocol.messages.describe_client_quotas import (
    ComponentData,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from pytest_pafka.broker_process import BrokerProcess

Entity = dict[str, str | None]



def alter(connection: BrokerConnection, entity: Entity, ops: dict[str, float | None], version: int | None = None,
          validate_only: bool = False) -> tuple[int, str | None]:
    """Set (value) or remove (None) quota keys of one entity; its (error code, message)."""
    entry = AlterClientQuotasRequestEntryData(
        entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
        ops=[OpData(key=k, value=v or 0.0, remove=v is None) for k, v in ops.items()])
    response = connection.request(AlterClientQuotasRequest(entries=[entry], validate_only=validate_only),
                                  version=version)
    assert isinstance(response, AlterClientQuotasResponse)
    (result,) = response.entries
    return result.error_code, result.error_message


def describe(connection: BrokerConnection, components: list[tuple[str, int, str | None]], strict: bool = False,
             version: int | None = None) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    request = DescribeClientQuotasRequest(
        components=[ComponentData(entity_type=t, match_type=m, match=name) for t, m, name in components],
        strict=strict)
    response = connection.request(request, version=version)
    assert isinstance(response, DescribeClientQuotasResponse)
    assert response.error_code == 0, response.error_message
    assert response.entries is not None
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in response.entries}


@pytest.mark.parametrize("version", [0, 1])
def test_set_describe_and_remove_at_every_version(pafka_broker: BrokerProcess, version: int) -> None:
    with BrokerConnection(pafka_broker.host, pafka_broker.port) as admin:
        assert alter(admin, {"user": "alice"}, {"producer_byte_rate": 1024.0}, version) == (0, None)
        assert alter(admin, {"user": "alice", "client-id": "app"}, {"consumer_byte_rate": 2048.0,
                                                                     "request_percentage": 12.5}, version) == (0, None)
        assert alter(admin, {"user": None}, {"producer_byte_rate": 4096.0}, version) == (0, None)
        assert alter(admin, {"client-id": None}, {"controller_mutation_rate": 10.0}, version) == (0, None)
        assert alter(admin, {"ip": "127.0.0.9"}, {"connection_creation_rate": 5.0}, version) == (0, None)
        every = describe(admin, [], version=version)
        assert every == {
            (("user", "alice"),): {"producer_byte_rate": 1024.0},
            (("user", "alice"), ("client-id", "app")): {"consumer_byte_rate": 2048.0, "request_percentage": 12.5},
            (("user", None),): {"producer_byte_rate": 4096.0},
            (("client-id", None),): {"controller_mutation_rate": 10.0},
            (("ip", "127.0.0.9"),): {"connection_creation_rate": 5.0},
        }
        exact_alice = describe(admin, [("user", 0, "alice")], version=version)
        assert set(exact_alice) == {(("user", "alice"),), (("user", "alice"), ("client-id", "app"))}
        assert set(describe(admin, [("user", 0, "alice")], strict=True, version=version)) == {(("user", "alice"),)}
        assert set(describe(admin, [("user", 1, None)], version=version)) == {(("user", None),)}
        assert set(describe(admin, [("user", 2, None)], strict=True, version=version)) == {(("user", "alice"),)}
        assert set(describe(admin, [("user", 2, None), ("client-id", 0, "app")], version=version)) == {
            (("user", "alice"), ("client-id", "app"))}
        assert alter(admin, {"user": "alice", "client-id": "app"}, {"consumer_byte_rate": None,
                                                                     "request_percentage": None}, version) == (0, None)
        assert (("user", "alice"), ("client-id", "app")) not in describe(admin, [], version=version)


def test_bad_entries_are_refused_one_by_one(pafka_broker: BrokerProcess) -> None:
    with BrokerConnection(pafka_broker.host, pafka_broker.port) as admin:
        refused = [
            ({"user": "a"}, {"producer_byte_rate": 10.5}, "Configuration producer_byte_rate must be a Long value"),
            ({"user": "a"}, {"connection_creation_rate": 5.0}, "Invalid configuration key connection_creation_rate"),
            ({"ip": "1.2.3.4"}, {"producer_byte_rate": 5.0}, "Invalid configuration key producer_byte_rate"),
            ({"user": "a"}, {"bogus": 1.0}, "Invalid configuration key bogus"),
            ({"user": "a"}, {"producer_byte_rate": -1.0}, None),
            ({"group": "g"}, {"producer_byte_rate": 1.0}, "Unhandled client quota entity type: group"),
        ]
        for entity, ops, message in refused:
            code, said = alter(admin, entity, ops)
            assert code == ErrorCode.INVALID_REQUEST, (entity, ops)
            assert message is None or said == message
        assert alter(admin, {"user": "a"}, {"producer_byte_rate": 100.0}, validate_only=True) == (0, None)
        assert describe(admin, []) == {}  # nothing refused or only validated was stored
        response = admin.request(DescribeClientQuotasRequest(components=[
            ComponentData(entity_type="user", match_type=2, match=None),
            ComponentData(entity_type="user", match_type=1, match=None)]))
        assert isinstance(response, DescribeClientQuotasResponse)
        assert response.error_code == ErrorCode.INVALID_REQUEST and response.entries is None


def test_a_lone_broker_keeps_its_quotas_across_a_restart(pafka_broker: BrokerProcess) -> None:
    with BrokerConnection(pafka_broker.host, pafka_broker.port) as admin:
        assert alter(admin, {"client-id": "app"}, {"producer_byte_rate": 1048576.0}) == (0, None)
    pafka_broker.stop()
    pafka_broker.start()
    with BrokerConnection(pafka_broker.host, pafka_broker.port) as admin:
        assert describe(admin, []) == {(("client-id", "app"),): {"producer_byte_rate": 1048576.0}}


@pytest.mark.parametrize("version, delayed", [(5, True), (9, False)])
def test_an_old_client_gets_its_response_after_the_throttle_a_new_one_at_once(pafka_broker: BrokerProcess, version: int,
                                                                            delayed: bool) -> None:
    """KIP-219: from Produce v6 the client throttles itself (the response leaves at once, then the
    connection is muted); an older one is held by the broker sending its response late."""
    from protocol.messages.produce import PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData
    from protocol.records import Record, build_batch

    with BrokerConnection(pafka_broker.host, pafka_broker.port) as admin:
        assert alter(admin, {"client-id": "old"}, {"producer_byte_rate": 8000.0}) == (0, None)
    batch = bytes(build_batch([Record(0, 0, None, b"x" * 10_000)]))
    request = ProduceRequest(acks=1, timeout_ms=5000, topic_data=[TopicProduceData(
        name="quota-versions", partition_data=[PartitionProduceData(index=0, records=batch)])])
    with BrokerConnection(pafka_broker.host, pafka_broker.port, client_id="old") as producer:
        started = time.monotonic()
        response = producer.request(request, version=version)
        took_ms = (time.monotonic() - started) * 1000
    assert isinstance(response, ProduceResponse)
    # ~10,100 request bytes in the first window against 8,000 B/s: throttled about 260 ms.
    assert 200 <= response.throttle_time_ms <= 400
    if delayed:
        assert took_ms >= response.throttle_time_ms - 20
    else:
        assert took_ms < response.throttle_time_ms - 50


def test_controller_mutation_rate_refuses_strict_clients_and_throttles_old_ones(pafka_broker: BrokerProcess) -> None:
    """KIP-599: 2 partitions/s, a bucket of 2 x 11 windows = 22 partitions. Topics of 10 partitions:
    two fit, the third takes the bucket below zero, the fourth is refused (CreateTopics v6+), and
    the throttle time is how long the bucket needs to refill to zero. A v5 client is only throttled."""
    from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest, CreateTopicsResponse

    with BrokerConnection(pafka_broker.host, pafka_broker.port) as admin:
        assert alter(admin, {"client-id": "creator"}, {"controller_mutation_rate": 2.0}) == (0, None)
        assert alter(admin, {"client-id": "old-creator"}, {"controller_mutation_rate": 2.0}) == (0, None)

    def create(client_id: str, prefix: str, version: int) -> CreateTopicsResponse:
        request = CreateTopicsRequest(topics=[CreatableTopic(name=f"{prefix}-{i}", num_partitions=10,
                                                             replication_factor=1) for i in range(4)],
                                      timeout_ms=10_000)
        with BrokerConnection(pafka_broker.host, pafka_broker.port, client_id=client_id) as connection:
            response = connection.request(request, version=version)
        assert isinstance(response, CreateTopicsResponse)
        return response

    strict = create("creator", "mut", 7)
    assert [(t.name, t.error_code) for t in strict.topics] == [
        ("mut-0", 0), ("mut-1", 0), ("mut-2", 0), ("mut-3", ErrorCode.THROTTLING_QUOTA_EXCEEDED)]
    assert 3500 <= strict.throttle_time_ms <= 4100  # 8 partitions below zero at 2/s
    permissive = create("old-creator", "old", 5)
    assert [t.error_code for t in permissive.topics] == [0, 0, 0, 0]
    assert 8500 <= permissive.throttle_time_ms <= 9100  # 18 below zero
