"""The single-broker topic registry is durable and atomic; producer-id blocks never repeat."""

import threading
from pathlib import Path

import pytest

from broker.metadata_store import MetadataStore
from broker.producer_id_manager import ProducerIdManager


def test_topics_configs_and_cluster_id_survive_reopen(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path)
    store.save()
    topic = store.create_topic("orders", {0: [0], 1: [0]}, {"cleanup.policy": "compact"})
    store.add_partitions("orders", {2: [0]})
    store.set_topic_configs("orders", {"retention.ms": "1000"})
    store.create_topic("gone", {0: [0]}, {})
    store.delete_topic("gone")

    reopened = MetadataStore(tmp_path)
    assert reopened.cluster_id == store.cluster_id
    orders = reopened.get("orders")
    assert orders is not None and orders.topic_id == topic.topic_id
    assert orders.partitions == {0: [0], 1: [0], 2: [0]}
    assert orders.configs == {"retention.ms": "1000"}
    assert reopened.get("gone") is None and reopened.by_id(topic.topic_id) is orders
    assert not list(tmp_path.glob("*.tmp"))


def test_creating_an_existing_topic_fails(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path)
    store.create_topic("t", {0: [0]}, {})
    with pytest.raises(KeyError):
        store.create_topic("t", {0: [0]}, {})


def test_topic_ids_are_unique_and_not_reserved(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path)
    ids = {store.create_topic(f"t{i}", {0: [0]}, {}).topic_id for i in range(50)}
    assert len(ids) == 50 and all(i.bytes[:8] != bytes(8) for i in ids)


def test_producer_ids_are_never_reused_across_restarts(tmp_path: Path) -> None:
    first = ProducerIdManager(tmp_path, block_size=10)
    seen = [first.generate_producer_id() for _ in range(25)]
    # A crash loses the rest of the claimed block but never repeats an id.
    second = ProducerIdManager(tmp_path, block_size=10)
    seen += [second.generate_producer_id() for _ in range(25)]
    assert len(set(seen)) == len(seen) == 50
    assert min(seen[25:]) > max(seen[:25])


def test_producer_ids_are_unique_across_threads(tmp_path: Path) -> None:
    manager = ProducerIdManager(tmp_path, block_size=7)
    out: list[int] = []
    threads = [threading.Thread(target=lambda: out.extend(manager.generate_producer_id() for _ in range(100)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(out)) == 400
