"""``pafka dev-cluster --racks``: each broker's rack and the rack-aware replica selector."""

from __future__ import annotations

from tools.dev_cluster import rack_overrides

SELECTOR = "replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector"


def test_brokers_go_round_robin_over_the_racks() -> None:
    assert rack_overrides(1, 0) == []
    assert [rack_overrides(b, 3)[0] for b in (1, 2, 3, 4)] == [
        "broker.rack=RACK1", "broker.rack=RACK2", "broker.rack=RACK3", "broker.rack=RACK1"]
    assert rack_overrides(2, 2)[1] == SELECTOR
