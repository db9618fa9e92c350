"""``replica.selector.class``: Kafka's two selectors served, any other class a start-up error."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from broker.config.broker_config import load_broker_config

RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def test_kafkas_selectors_are_accepted() -> None:
    assert load_broker_config(overrides=[], environ={}).replica_selector_class is None
    config = load_broker_config(overrides=[f"replica.selector.class={RACK_AWARE}", "broker.rack=RACK1"], environ={})
    assert (config.replica_selector_class, config.rack) == (RACK_AWARE, "RACK1")
    leader = "org.apache.kafka.common.replica.LeaderSelector"
    assert load_broker_config(overrides=[f"replica.selector.class={leader}"], environ={}).replica_selector_class == leader


def test_an_unknown_selector_stops_the_broker() -> None:
    with pytest.raises(ValidationError, match=re.escape("Class com.example.Nearest could not be found")):
        load_broker_config(overrides=["replica.selector.class=com.example.Nearest"], environ={})
