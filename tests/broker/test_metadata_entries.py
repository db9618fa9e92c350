"""Metadata's per-partition entries are reused while the partition's state is unchanged."""

from __future__ import annotations

import concurrent.futures
import uuid

from broker.handlers.metadata import partition_entry
from replication.append_thread import AppendThread
from replication.replica_manager import ReplicaManager
from storage.log_manager import LogManager


def test_a_partition_entry_is_reused_until_leadership_or_isr_changes(tmp_path) -> None:
    logs = LogManager([tmp_path])
    logs.startup()
    thread = AppendThread(concurrent.futures.ThreadPoolExecutor(1))
    partition = ReplicaManager(0, logs, thread).make_leader("t", 3, uuid.uuid4(), [0, 1])
    first = partition_entry(partition)
    assert (first.partition_index, first.leader_id, first.leader_epoch) == (3, 0, 0)
    assert (first.replica_nodes, first.isr_nodes, first.offline_replicas) == ([0, 1], [0], [])
    assert partition_entry(partition) is first
    partition.leader_epoch = 1
    bumped = partition_entry(partition)
    assert bumped is not first and bumped.leader_epoch == 1
    partition.isr.append(1)  # mutated in place: the entry must not share the list
    grown = partition_entry(partition)
    assert grown.isr_nodes == [0, 1] and bumped.isr_nodes == [0]
    assert partition_entry(partition) is grown
    thread.shutdown()
    logs.shutdown()
