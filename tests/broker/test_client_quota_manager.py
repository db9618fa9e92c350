"""Client quotas without a broker: Kafka's precedence, its Rate and throttle time, and validation."""

from __future__ import annotations

import pytest

from broker.quota.client_quota_configs import ClientQuotaConfigs
from broker.quota.client_quota_entity import (
    CLIENT_ID,
    IP,
    PRODUCER_BYTE_RATE,
    USER,
    ClientQuotaEntity,
    precedence,
    validate_entity,
    validate_value,
)
from broker.quota.client_quota_manager import ClientQuotaManager


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _entity(**components: str | None) -> ClientQuotaEntity:
    return ClientQuotaEntity.of({k.replace("_", "-"): v for k, v in components.items()})


def test_precedence_is_kafkas_order() -> None:
    order = [str(entity) for entity in precedence("alice", "app")]
    assert order == [
        "user=alice, client-id=app", "user=alice, client-id=<default>", "user=alice",
        "user=<default>, client-id=app", "user=<default>, client-id=<default>", "user=<default>",
        "client-id=app", "client-id=<default>",
    ]


@pytest.mark.parametrize("configured, for_alice, for_bob", [
    ([_entity(client_id=None)], 8.0, 8.0),
    ([_entity(client_id=None), _entity(client_id="app")], 7.0, 8.0),
    ([_entity(client_id="app"), _entity(user=None)], 6.0, 6.0),
    ([_entity(user=None), _entity(user=None, client_id=None)], 5.0, 5.0),
    ([_entity(user=None, client_id=None), _entity(user=None, client_id="app")], 4.0, 5.0),
    ([_entity(user=None, client_id="app"), _entity(user="alice")], 3.0, None),
    ([_entity(user="alice"), _entity(user="alice", client_id=None)], 2.0, None),
    ([_entity(user="alice", client_id=None), _entity(user="alice", client_id="app")], 1.0, None),
])
def test_the_most_specific_configured_entity_wins(configured: list[ClientQuotaEntity], for_alice: float,
                                                  for_bob: float | None) -> None:
    """Each entity's quota is its rank in Kafka's order; alice uses client id app, bob another."""
    configs = ClientQuotaConfigs()
    ranks = {str(entity): float(rank) for rank, entity in enumerate(precedence("alice", "app"), start=1)}
    for entity in configured:
        configs.replace(entity, {PRODUCER_BYTE_RATE: str(ranks[str(entity)])})
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE, configs)
    assert manager.quota("alice", "app") == for_alice
    assert manager.quota("bob", "other") == for_bob


def test_a_default_quota_meters_each_client_apart_and_a_user_quota_all_its_clients_together() -> None:
    clock = Clock()
    configs = ClientQuotaConfigs()
    configs.replace(_entity(client_id=None), {PRODUCER_BYTE_RATE: "1000"})
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE, configs, clock=clock)
    # One window of 1 s at 1,000 B/s: 1,000 bytes before any throttling.
    assert manager.record_and_get_throttle_time_ms("alice", "a", 1000) == 0
    assert manager.record_and_get_throttle_time_ms("alice", "b", 1000) == 0  # its own meter
    assert manager.record_and_get_throttle_time_ms("alice", "a", 1) > 0
    configs.replace(_entity(user="bob"), {PRODUCER_BYTE_RATE: "1000"})
    assert manager.record_and_get_throttle_time_ms("bob", "a", 1000) == 0
    assert manager.record_and_get_throttle_time_ms("bob", "b", 1) > 0  # bob's clients share his


def test_throttle_time_is_what_brings_the_rate_back_to_the_quota() -> None:
    clock = Clock()
    configs = ClientQuotaConfigs()
    configs.replace(_entity(client_id="app"), {PRODUCER_BYTE_RATE: "1000"})
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE, configs, clock=clock)
    assert manager.record_and_get_throttle_time_ms("", "app", 500) == 0
    clock.now += 2.0
    # 4,000 bytes over 2 s: 2,000 B/s, twice the quota: (2000 - 1000) / 1000 * 2 s.
    assert manager.record_and_get_throttle_time_ms("", "app", 3500) == 2000
    clock.now += 2.0  # waited out: 4,000 bytes over 4 s is the quota
    assert manager.record_and_get_throttle_time_ms("", "app", 0) == 0
    clock.now += 11.0  # the burst's sample has left the 11 windows: nothing is measured now
    assert manager.record_and_get_throttle_time_ms("", "app", 0) == 0
    assert manager.record_and_get_throttle_time_ms("", "other", 1e9) == 0  # no quota for it
    # A first burst is measured over one window, not less: 2,000 bytes at once is 2,000 B/s.
    assert manager.record_and_get_throttle_time_ms("", "new", 0) == 0
    configs.replace(_entity(client_id=None), {PRODUCER_BYTE_RATE: "1000"})
    assert manager.record_and_get_throttle_time_ms("", "new", 2000) == 1000


def test_held_to_its_quota_a_client_averages_the_quota() -> None:
    """A client sending 100 kB whenever it is not throttled, for 60 s against a 1 MB/s quota."""
    clock = Clock()
    configs = ClientQuotaConfigs()
    configs.replace(_entity(client_id="app"), {PRODUCER_BYTE_RATE: str(1 << 20)})
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE, configs, clock=clock)
    start, sent = clock.now, 0
    while clock.now - start < 60.0:
        throttle_ms = manager.record_and_get_throttle_time_ms("", "app", 100_000)
        sent += 100_000
        clock.now += max(throttle_ms / 1000.0, 0.01)
    assert sent / (clock.now - start) == pytest.approx(1 << 20, rel=0.1)


def test_entities_keys_and_values_are_validated_as_kafka_does() -> None:
    assert validate_entity([(USER, "a"), (CLIENT_ID, None)]) is None
    assert validate_entity([(IP, "1.2.3.4")]) is None
    assert validate_entity([]) is not None
    assert validate_entity([(USER, "a"), (USER, "b")]) is not None
    assert validate_entity([(IP, None), (USER, "a")]) is not None
    assert validate_entity([("group", "g")]) is not None
    user = _entity(user="a")
    assert validate_value(user, PRODUCER_BYTE_RATE, 1024.0) is None
    assert validate_value(user, PRODUCER_BYTE_RATE, 10.5) is not None  # a Long
    assert validate_value(user, "request_percentage", 10.5) is None
    assert validate_value(user, "connection_creation_rate", 10) is not None  # an ip key
    assert validate_value(user, PRODUCER_BYTE_RATE, -1.0) is not None
    assert validate_value(_entity(ip=None), "connection_creation_rate", 10) is None


def test_zookeeper_entity_paths_round_trip() -> None:
    for entity, path in [
        (_entity(user="alice"), "users/alice"),
        (_entity(user="CN=x y", client_id=None), "users/CN%3Dx%20y/clients/<default>"),
        (_entity(client_id="app-1"), "clients/app-1"),
        (_entity(user=None), "users/<default>"),
        (_entity(ip="10.0.0.1"), "ips/10.0.0.1"),
    ]:
        assert entity.zk_entity_path() == path
        assert ClientQuotaEntity.from_zk_entity_path(path) == entity
    assert ClientQuotaEntity.from_zk_entity_path("topics/t") is None
