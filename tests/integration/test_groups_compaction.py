"""__consumer_offsets under the log cleaner: compacted, and the groups rebuilt from it are the latest state."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from coordinator.group.group_metadata_manager import partition_for
from protocol.errors import ErrorCode
from protocol.messages.delete_groups import DeleteGroupsRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.waiting import wait_until
from testing.sockets import send_request
from testing.topics import create_topic

TOPIC = "wide"
PARTITIONS = 100
ROUNDS = 320  # ~1.3 MiB of commits: more than one 1 MiB segment of __consumer_offsets


def _commit(broker: BrokerProcess, group: str, offset: int) -> None:
    response = send_request(broker, 8, 8, OffsetCommitRequest(group_id=group, topics=[OffsetCommitRequestTopic(
        name=TOPIC, partitions=[OffsetCommitRequestPartition(partition_index=p, committed_offset=offset,
                                                             committed_metadata=f"round {offset}")
                                for p in range(PARTITIONS)])]))
    assert {p.error_code for t in response.topics for p in t.partitions} == {0}


def _fetch(broker: BrokerProcess, group: str) -> dict[int, tuple[int, str]]:
    def attempt():  # type: ignore[no-untyped-def]
        response = send_request(broker, 9, 7, OffsetFetchRequest(group_id=group, topics=[
            OffsetFetchRequestTopic(name=TOPIC, partition_indexes=list(range(PARTITIONS)))]))
        # Right after a restart the coordinator may still be loading: retry, as clients do.
        return None if response.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else response

    response = wait_until(attempt, 30, "the coordinator to load")
    assert response.error_code == 0
    return {p.partition_index: (p.committed_offset, p.metadata)
            for t in response.topics for p in t.partitions if p.committed_offset >= 0}


def _segments(broker: BrokerProcess, partition: int) -> list[Path]:
    return sorted((broker.data_dir / f"__consumer_offsets-{partition}").glob("*.log"))


@pytest.mark.slow
def test_compacted_offsets_topic_rebuilds_the_latest_state(tmp_path: Path) -> None:
    overrides = ("offsets.topic.segment.bytes=1048576", "log.cleaner.backoff.ms=100",
                 "log.flush.interval.messages=1")
    with BrokerProcess(*overrides) as broker:
        create_topic(broker.bootstrap, TOPIC, PARTITIONS)
        # Two groups on the same __consumer_offsets partition: one kept, one deleted.
        kept = "compacted-group"
        deleted = next(f"doomed-{i}" for i in range(1000)
                       if partition_for(f"doomed-{i}", 50) == partition_for(kept, 50))
        partition = partition_for(kept, 50)
        found = send_request(broker, 10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=[kept, deleted]))
        assert {c.error_code for c in found.coordinators} == {0}  # creates __consumer_offsets
        _commit(broker, deleted, 7)
        for offset in range(ROUNDS):
            _commit(broker, kept, offset)
        assert len(_segments(broker, partition)) >= 2  # at least one rolled segment (> 1 MiB written)

        def rolled_bytes() -> int:
            return sum(p.stat().st_size for p in _segments(broker, partition)[:-1])

        # The cleaner compacts rolled segments down to about one record per key (100 offsets, 2 groups).
        wait_until(lambda: rolled_bytes() < 256 * 1024, 60, "the log cleaner to compact __consumer_offsets")
        response = send_request(broker, 42, 2, DeleteGroupsRequest(groups_names=[deleted]))
        assert response.results[0].error_code == ErrorCode.NO_ERROR
        expected = dict.fromkeys(range(PARTITIONS), (ROUNDS - 1, f"round {ROUNDS - 1}"))
        assert _fetch(broker, kept) == expected
        broker.restart(signal.SIGKILL)
        assert _fetch(broker, kept) == expected
        assert _fetch(broker, deleted) == {}
        broker.restart(signal.SIGTERM)
        assert _fetch(broker, kept) == expected and _fetch(broker, deleted) == {}
