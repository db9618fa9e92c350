"""ReplicaManager.partitions_of: one topic's partitions in index order, without walking all."""

from __future__ import annotations

import concurrent.futures
import uuid

from replication.append_thread import AppendThread
from replication.replica_manager import ReplicaManager
from storage.log_manager import LogManager


def test_partitions_of_lists_one_topic_in_index_order_through_creation_and_deletion(tmp_path) -> None:
    logs = LogManager([tmp_path])
    logs.startup()
    manager = ReplicaManager(0, logs, AppendThread(concurrent.futures.ThreadPoolExecutor(1)))
    events: list[tuple[str, int]] = []
    manager.add_leadership_listener("b", lambda p: events.append(("elected", p)),
                                    lambda p: events.append(("resigned", p)))
    a, b = uuid.uuid4(), uuid.uuid4()
    for index in (0, 1, 2):
        manager.make_leader("a", index, a, [0])
    for index in (3, 0, 1):
        manager.make_leader("b", index, b, [0])
    manager.make_leader("a", 5, a, [0])
    manager.make_leader("a", 4, a, [0])  # added out of order (CreatePartitions, reassignment)
    manager.make_leader("a", 1, a, [0])  # already hosted: the same Partition
    assert [p.partition_index for p in manager.partitions_of("a")] == [0, 1, 2, 4, 5]
    assert [p.partition_index for p in manager.partitions_of("b")] == [0, 1, 3]
    assert all(p.topic == "a" for p in manager.partitions_of("a"))
    assert manager.partitions_of("missing") == []
    assert events == [("elected", 3), ("elected", 0), ("elected", 1)]  # only b's, each once
    manager.delete_partitions("b")
    assert manager.partitions_of("b") == [] and manager.get_partition("b", 3) is None
    assert sorted(events[3:]) == [("resigned", 0), ("resigned", 1), ("resigned", 3)]
    assert [p.partition_index for p in manager.partitions_of("a")] == [0, 1, 2, 4, 5]
    manager.append_thread.shutdown()
    logs.shutdown()
