"""The broker's share persister in process: local calls for the state this broker coordinates, retries
of retriable errors until its deadline, and other errors raised at once."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from broker.inter_broker_channel import InterBrokerChannel, InterBrokerEndpoint
from broker.metadata_view import BrokerNode
from broker.share_persister import BrokerSharePersister
from coordinator.common.scheduler import ManualScheduler
from coordinator.share.persister import PersisterError, PersisterStateBatch, ShareGroupPartitionState
from coordinator.share.share_coordinator import ShareCoordinator, ShareCoordinatorConfig
from protocol.errors import ErrorCode
from tests.coordinator.fakes import MemoryCoordinatorLog

TOPIC = uuid.uuid4()


class FlakyPlacement:
    """Names no coordinator for the first ``unavailable`` calls, then this broker (id 0)."""

    def __init__(self, unavailable: int = 0) -> None:
        self.unavailable = unavailable
        self.calls = 0

    def coordinator_node(self, topic: str, partition: int, listener_name: str) -> BrokerNode | None:
        self.calls += 1
        if self.calls <= self.unavailable:
            return None
        return BrokerNode(0, "127.0.0.1", 9092, None)


class NoOtherBroker:
    def leader_node(self, leader_id: int, listener_name: str) -> BrokerNode | None:
        return None


async def _ready() -> ErrorCode:
    return ErrorCode.NO_ERROR


def make(placement: FlakyPlacement, timeout_s: float = 5.0) -> tuple[BrokerSharePersister, ShareCoordinator]:
    coordinator = ShareCoordinator(0, MemoryCoordinatorLog(3), ManualScheduler(), ShareCoordinatorConfig())
    for partition in range(3):
        coordinator.on_election(partition)
    channel = InterBrokerChannel(0, "share-persister", InterBrokerEndpoint("PLAINTEXT"), NoOtherBroker())
    return BrokerSharePersister(0, coordinator, placement, _ready, channel, timeout_s=timeout_s), coordinator


def test_state_this_broker_coordinates_is_kept_by_its_own_coordinator() -> None:
    async def scenario() -> None:
        persister, coordinator = make(FlakyPlacement())
        state = ShareGroupPartitionState(1, 3, 2, (PersisterStateBatch(3, 5, 2, 1),))
        await persister.initialize_state("g", TOPIC, 4, 1, 0)
        await persister.write_state("g", TOPIC, 4, state)
        assert await persister.read_state("g", TOPIC, 4, 2) == state
        assert await coordinator.read_state("g", TOPIC, 4, 2) == state
        assert await persister.read_state_summary("g", TOPIC, 4, -1) == (1, 3, 2)
        await persister.delete_state("g", TOPIC, 4)
        assert await persister.read_state("g", TOPIC, 4, -1) is None
        await persister.shutdown()
    asyncio.run(scenario())


def test_no_coordinator_yet_is_retried() -> None:
    async def scenario() -> None:
        placement = FlakyPlacement(unavailable=3)
        persister, _ = make(placement)
        await persister.initialize_state("g", TOPIC, 0, 1, 0)
        assert placement.calls == 4
    asyncio.run(scenario())


def test_retriable_errors_raise_after_the_deadline_and_others_at_once() -> None:
    async def scenario() -> None:
        persister, _ = make(FlakyPlacement(unavailable=1000), timeout_s=0.2)
        with pytest.raises(PersisterError) as unavailable:
            await persister.read_state("g", TOPIC, 0, -1)
        assert unavailable.value.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        placement = FlakyPlacement()
        persister, _ = make(placement)
        await persister.initialize_state("g", TOPIC, 0, 2, 0)
        with pytest.raises(PersisterError) as fenced:
            await persister.initialize_state("g", TOPIC, 0, 1, 0)
        assert fenced.value.error_code == ErrorCode.FENCED_STATE_EPOCH
        assert placement.calls == 2
    asyncio.run(scenario())


def test_a_local_read_answers_what_a_remote_one_would() -> None:
    async def scenario() -> None:
        persister, _ = make(FlakyPlacement())
        assert await persister.read_state("g", TOPIC, 1, -1) is None  # never initialized
        await persister.initialize_state("g", TOPIC, 1, 0, -1)
        assert await persister.read_state_summary("g", TOPIC, 1, -1) is None  # no summary tells this from no state
        await persister.write_state("g", TOPIC, 1, ShareGroupPartitionState(0, 5, 5, ()))
        assert await persister.read_state("g", TOPIC, 1, 6) == ShareGroupPartitionState(0, 5, 6, ())
        # ReadShareGroupState's answer carries no leader epoch: the reader's own comes back.
        assert await persister.read_state("g", TOPIC, 1, -1) == ShareGroupPartitionState(0, 5, -1, ())
    asyncio.run(scenario())
