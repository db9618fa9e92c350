"""Rack-aware assignment of the consumer protocol's uniform and range assignors."""

from __future__ import annotations

import random
import uuid
from pathlib import Path

import pytest

from coordinator.group.consumer_group import Assignment
from coordinator.group.consumer_group_assignors import AssignmentSpec, range_, uniform
from coordinator.group.consumer_group_racks import RackInfo

T = uuid.UUID(int=1)
U = uuid.UUID(int=2)
# Partition p of T has its replicas in rack "a" when p is even, "b" when odd.
RACKS_T = tuple(frozenset({"a" if p % 2 == 0 else "b"}) for p in range(6))


def spec(members: dict[str, str | None], current: dict[str, Assignment] | None = None,
         partition_racks: dict[uuid.UUID, tuple[frozenset[str], ...]] | None = None) -> AssignmentSpec:
    return AssignmentSpec(subscriptions={m: frozenset({T}) for m in members}, topics={T: 6},
                          current=current or {}, member_racks=members,
                          partition_racks={T: RACKS_T} if partition_racks is None else partition_racks)


def test_racks_are_used_only_when_they_make_a_difference() -> None:
    assert RackInfo.of({"m": "a"}, {T: RACKS_T}, {T: 6}).used
    assert not RackInfo.of({"m": None}, {T: RACKS_T}, {T: 6}).used  # no member rack
    assert not RackInfo.of({"m": "c"}, {T: RACKS_T}, {T: 6}).used  # no partition in the member's rack
    same = tuple(frozenset({"a", "b"}) for _ in range(6))
    assert not RackInfo.of({"m": "a"}, {T: same}, {T: 6}).used  # every partition in the same racks


def test_uniform_gives_each_member_the_partitions_of_its_rack() -> None:
    target = uniform(spec({"x": "a", "y": "b"}))
    assert target["x"] == {T: frozenset({0, 2, 4})}
    assert target["y"] == {T: frozenset({1, 3, 5})}


def test_uniform_moves_a_partition_to_its_rack_when_it_was_elsewhere() -> None:
    # x had everything; y joins in rack b: y gets b's partitions, not just any three.
    target = uniform(spec({"x": "a", "y": "b"}, current={"x": {T: frozenset(range(6))}}))
    assert target["y"] == {T: frozenset({1, 3, 5})}


def test_uniform_stays_balanced_when_racks_are_uneven() -> None:
    members: dict[str, str | None] = {"x": "a", "y": "a", "z": "b"}
    for assignor in (uniform, range_):
        target = assignor(spec(members))
        assert sorted(len(target[m][T]) for m in members) == [2, 2, 2]
        # Rack b's three partitions cannot all go to z (two each): five of six are read in their rack.
        close = sum(1 for m, rack in members.items() for p in target[m][T] if RACKS_T[p] == {rack})
        assert close == 5


def test_uniform_without_racks_is_unchanged() -> None:
    plain = AssignmentSpec(subscriptions={"x": frozenset({T}), "y": frozenset({T})}, topics={T: 6}, current={})
    racked = spec({"x": None, "y": None})
    assert uniform(plain) == uniform(racked)


def test_range_gives_shares_from_the_members_rack() -> None:
    target = range_(spec({"x": "b", "y": "a"}))
    assert target["x"] == {T: frozenset({1, 3, 5})}
    assert target["y"] == {T: frozenset({0, 2, 4})}


def test_range_without_racks_keeps_contiguous_shares() -> None:
    target = range_(spec({"x": "b", "y": "a"}, partition_racks={}))
    assert target["x"] == {T: frozenset({0, 1, 2})}
    assert target["y"] == {T: frozenset({3, 4, 5})}


def test_a_member_keeps_a_far_partition_when_nobody_is_close() -> None:
    # Only x has a rack; y (no rack) keeps what it had, which no member in the partitions' racks wants.
    current: dict[str, Assignment] = {"y": {T: frozenset({1, 3, 5})}}
    target = uniform(spec({"x": "a", "y": None}, current=current))
    assert target["y"] == {T: frozenset({1, 3, 5})}
    assert target["x"] == {T: frozenset({0, 2, 4})}


def test_members_heartbeating_with_racks_get_their_racks_partitions() -> None:
    from coordinator.group.consumer_group import TopicInfo
    from tests.coordinator.test_consumer_group_heartbeat import Harness, Member, settle

    h = Harness()
    racks = tuple(frozenset({"a" if p % 2 == 0 else "b"}) for p in range(12))
    h.topics.topics["t"] = TopicInfo(h.topics.topics["t"].topic_id, 12, racks)
    a, b = Member(h, "a", rack_id="a"), Member(h, "b", rack_id="b")
    settle([a, b])
    assert a.partitions == set(range(0, 12, 2))
    assert b.partitions == set(range(1, 12, 2))


def test_the_brokers_topic_image_has_the_replicas_racks() -> None:
    from broker.coordinator_wiring import RegistryTopicImage
    from broker.metadata_store import TopicMetadata

    topic = TopicMetadata("t", T, {0: [1, 2], 1: [2, 3], 2: [3]})

    class Registry:
        def get(self, name: str) -> TopicMetadata | None:
            return topic if name == "t" else None

    image = RegistryTopicImage(Registry(), lambda: {1: "a", 2: "b"})  # type: ignore[arg-type]
    info = image.describe_topic("t")
    assert info is not None
    assert info.partition_racks == (frozenset({"a", "b"}), frozenset({"b"}), frozenset())
    lone = RegistryTopicImage(Registry(), lambda: {1: "a"})  # type: ignore[arg-type]
    assert lone.describe_topic("t") == type(info)(T, 3)


@pytest.mark.parametrize("seed", range(20))
def test_rack_aware_assignments_stay_complete_and_balanced(seed: int) -> None:
    rng = random.Random(seed)
    racks = ["a", "b", "c"]
    counts = {T: rng.randint(1, 20), U: rng.randint(1, 20)}
    partition_racks = {t: tuple(frozenset(rng.sample(racks, rng.randint(0, 2))) for _ in range(n))
                       for t, n in counts.items()}
    members = {f"m{i}": rng.choice([*racks, None]) for i in range(rng.randint(1, 6))}
    current: dict[str, Assignment] = {}
    for assignor in (uniform, range_, uniform):  # twice uniform: from a previous target, sticky
        spec_ = AssignmentSpec(subscriptions={m: frozenset(counts) for m in members}, topics=counts,
                               current=current, member_racks=members, partition_racks=partition_racks)
        target = assignor(spec_)
        owned = [(t, p) for a in target.values() for t, ps in a.items() for p in ps]
        assert sorted(owned) == sorted((t, p) for t, n in counts.items() for p in range(n))
        if assignor is uniform:
            sizes = [sum(len(ps) for ps in a.values()) for a in target.values()]
            assert max(sizes) - min(sizes) <= 1
        current = target


def test_the_topic_image_keeps_partition_racks_until_the_topic_or_the_racks_change() -> None:
    from broker.coordinator_wiring import RegistryTopicImage
    from broker.metadata_store import TopicMetadata

    topics = {"t": TopicMetadata("t", T, {0: [1, 2], 1: [2]})}
    racks = {1: "a", 2: "b"}

    class Registry:
        def get(self, name: str) -> TopicMetadata | None:
            return topics.get(name)

    image = RegistryTopicImage(Registry(), lambda: racks)  # type: ignore[arg-type]
    first = image.describe_topic("t")
    assert first is not None and first.partition_racks == (frozenset({"a", "b"}), frozenset({"b"}))
    assert image.describe_topic("t") is first  # steady heartbeats reuse the description
    # replicas moved: the registry holds new metadata for the topic
    topics["t"] = TopicMetadata("t", T, {0: [1], 1: [1]})
    moved = image.describe_topic("t")
    assert moved is not None and moved.partition_racks == (frozenset({"a"}), frozenset({"a"}))
    # partitions added in place
    topics["t"].partitions[2] = [2]
    grown = image.describe_topic("t")
    assert grown is not None and grown.partition_racks == (frozenset({"a"}), frozenset({"a"}), frozenset({"b"}))
    # a broker's rack changed
    racks = {1: "c", 2: "b"}
    relabelled = image.describe_topic("t")
    assert relabelled is not None and relabelled.partition_racks[0] == frozenset({"c"})
    # deleted, then created again under the same name
    del topics["t"]
    assert image.describe_topic("t") is None
    topics["t"] = TopicMetadata("t", U, {0: [2]})
    recreated = image.describe_topic("t")
    assert recreated is not None and recreated.topic_id == U and recreated.partition_racks == (frozenset({"b"}),)
    # racks gone to fewer than two brokers: no partition racks at all
    racks = {1: "c"}
    assert image.describe_topic("t") == type(first)(U, 1)


def test_the_topic_images_version_moves_when_the_store_or_the_racks_change(tmp_path: Path) -> None:
    from broker.coordinator_wiring import RegistryTopicImage
    from broker.metadata_store import MetadataStore

    store = MetadataStore(tmp_path)
    racks = {1: "a", 2: "b"}
    image = RegistryTopicImage(store, lambda: racks)
    first = image.version
    assert image.version == first  # nothing changed
    steps = [lambda: store.create_topic("t", {0: [1]}, {}), lambda: store.add_partitions("t", {1: [2]}),
             lambda: store.set_topic_configs("t", {"retention.ms": "1"}), lambda: store.delete_topic("t")]
    versions = [first]
    for step in steps:
        step()
        versions.append(image.version)
    # a topic's configs are no part of its description; everything else is a new version
    assert versions[1] > versions[0] and versions[2] > versions[1] and versions[3] == versions[2]
    assert versions[4] > versions[3]
    racks = {1: "a", 2: "c"}
    assert image.version > versions[4]
