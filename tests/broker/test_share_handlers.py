"""ShareFetch (78) and ShareAcknowledge (79) v1 on the wire: requests encoded and decoded with pafka's codecs,
answered by the handlers over the share-partition manager (an in-memory Persister and replica manager), and the
answers encoded and decoded again: sessions, acquired records, piggy-backed acknowledgements, errors."""

from __future__ import annotations

import asyncio
import inspect
import uuid
from types import SimpleNamespace
from typing import Any

from broker.handlers import share_acknowledge, share_fetch
from broker.metadata_view import BrokerNode
from broker.share_services import ShareServices, share_group_settings
from coordinator.common.scheduler import ManualScheduler
from coordinator.share.persister import RecordState
from coordinator.share.share_partition_manager import SharePartitionManager
from protocol.api import decode_request, decode_response, encode_request, encode_response
from protocol.buffers import FileRange, join_chunks
from protocol.errors import ErrorCode
from protocol.messages import share_acknowledge as ack_wire
from protocol.messages import share_fetch as fetch_wire
from protocol.records import iter_records
from tests.coordinator.share_partition_fakes import FakeReplicaManager, MemoryPersister, records_bytes

TOPIC_ID = uuid.UUID(int=5)
OTHER_ID = uuid.UUID(int=6)
ACCEPT, RELEASE = 1, 2


class Harness:
    """A broker as the two handlers see it: the share services, topic ids, no authorizer."""

    def __init__(self) -> None:
        self.persister = MemoryPersister()
        self.replicas = FakeReplicaManager()
        settings = share_group_settings({"share.auto.offset.reset": "earliest"})
        manager = SharePartitionManager(self.replicas, self.persister, ManualScheduler(), lambda group: settings)
        topic = SimpleNamespace(name="t", topic_id=TOPIC_ID)
        # The cluster's metadata: broker 2 leads t-0 at epoch 7 (what a moved partition points to).
        cluster_view = SimpleNamespace(
            partition_states=lambda name: [SimpleNamespace(partition_index=0, leader_id=2, leader_epoch=7)],
            leader_node=lambda leader_id, listener: BrokerNode(leader_id, "b2.example", 9093, None))
        self.broker: Any = SimpleNamespace(
            share=ShareServices(manager, lambda group: settings), authorizer=None, replica_manager=self.replicas,
            metadata=SimpleNamespace(by_id=lambda topic_id: topic if topic_id == TOPIC_ID else None),
            cluster_view=cluster_view)
        self.ctx: Any = SimpleNamespace(api_version=1, listener_name="PLAINTEXT")

    async def call(self, module: Any, body: Any, version: int = 1) -> Any:
        frame = join_chunks(encode_request(module.API_KEY, version, 7, "test", body))[4:]
        decoded = decode_request(frame).body
        self.ctx.api_version = version
        answer = module.handle(self.ctx, self.broker, decoded)
        if inspect.isawaitable(answer):
            answer = await answer
        # Records go out as a FileRange of the segment file: read here as the transport would send them.
        chunks = [records_bytes(c) if isinstance(c, FileRange) else c
                  for c in encode_response(module.API_KEY, version, 7, answer)]
        out = join_chunks(chunks)[4:]
        return decode_response(module.API_KEY, version, out)[1]


def fetch_request(epoch: int, acks: list[tuple[int, int, int]] | None = None, member: str = "m1",
                  topic_id: uuid.UUID = TOPIC_ID) -> fetch_wire.ShareFetchRequest:
    batches = [fetch_wire.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=[k])
               for f, last, k in acks or []]
    return fetch_wire.ShareFetchRequest(
        group_id="g", member_id=member, share_session_epoch=epoch, max_wait_ms=0, min_bytes=1, max_records=500,
        batch_size=500, topics=[fetch_wire.FetchTopic(topic_id=topic_id, partitions=[
            fetch_wire.FetchPartition(partition_index=0, acknowledgement_batches=batches)])])


def ack_request(epoch: int, acks: list[tuple[int, int, int]], member: str = "m1") -> ack_wire.ShareAcknowledgeRequest:
    return ack_wire.ShareAcknowledgeRequest(
        group_id="g", member_id=member, share_session_epoch=epoch,
        topics=[ack_wire.AcknowledgeTopic(topic_id=TOPIC_ID, partitions=[ack_wire.AcknowledgePartition(
            partition_index=0, acknowledgement_batches=[
                ack_wire.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=[k])
                for f, last, k in acks])])])


def only_partition(response: Any) -> Any:
    assert response.error_code == ErrorCode.NO_ERROR, response
    [topic] = response.responses
    [partition] = topic.partitions
    return partition


def acquired(partition: Any) -> list[tuple[int, int, int]]:
    return [(r.first_offset, r.last_offset, r.delivery_count) for r in partition.acquired_records]


def test_fetch_acquire_and_acknowledge_on_the_wire() -> None:
    async def scenario() -> None:
        h = Harness()
        h.replicas.append("t", 0, 5)
        first = await h.call(share_fetch, fetch_request(0))
        assert first.acquisition_lock_timeout_ms == 30_000
        data = only_partition(first)
        assert acquired(data) == [(0, 4, 1)] and data.current_leader.leader_epoch == 0
        values = [r.value for r in iter_records(bytes(data.records))]
        assert values == [b"v0", b"v1", b"v2", b"v3", b"v4"]
        h.replicas.append("t", 0, 5)
        # Epoch 1: accept 0-2, release 3-4 (piggy-backed); the same answer acquires 3-9.
        second = only_partition(await h.call(share_fetch, fetch_request(1, [(0, 2, ACCEPT), (3, 4, RELEASE)])))
        assert second.acknowledge_error_code == ErrorCode.NO_ERROR
        assert acquired(second) == [(3, 4, 2), (5, 9, 1)]
        assert h.persister.states[("g", TOPIC_ID, 0)].start_offset == 3
        answer = only_partition(await h.call(share_acknowledge, ack_request(2, [(3, 9, ACCEPT)])))
        assert answer.error_code == ErrorCode.NO_ERROR
        assert h.persister.states[("g", TOPIC_ID, 0)].start_offset == 10
        final = await h.call(share_fetch, fetch_request(-1))
        assert final.error_code == ErrorCode.NO_ERROR
        assert h.broker.share.sessions.get("g", "m1") is None
    asyncio.run(scenario())


def test_closing_the_session_gives_back_what_the_member_holds() -> None:
    async def scenario() -> None:
        h = Harness()
        h.replicas.append("t", 0, 3)
        await h.call(share_fetch, fetch_request(0))
        answer = await h.call(share_acknowledge, ack_request(-1, [(0, 0, ACCEPT)]))
        assert only_partition(answer).error_code == ErrorCode.NO_ERROR
        sp = h.broker.share.manager.cached("g", TOPIC_ID, 0)
        assert sp.record_state(1) == (RecordState.AVAILABLE, 1, None)
        other = only_partition(await h.call(share_fetch, fetch_request(0, member="m2")))
        assert acquired(other) == [(1, 2, 2)]
    asyncio.run(scenario())


def test_session_epoch_errors() -> None:
    async def scenario() -> None:
        h = Harness()
        h.replicas.append("t", 0, 3)
        missing = await h.call(share_fetch, fetch_request(1))
        assert missing.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
        await h.call(share_fetch, fetch_request(0))
        stale = await h.call(share_fetch, fetch_request(5))
        assert stale.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        opening = await h.call(share_acknowledge, ack_request(0, [(0, 0, ACCEPT)]))
        assert opening.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        stranger = await h.call(share_acknowledge, ack_request(1, [(0, 0, ACCEPT)], member="m9"))
        assert stranger.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
        acks_on_open = await h.call(share_fetch, fetch_request(0, [(0, 0, ACCEPT)]))
        assert acks_on_open.error_code == ErrorCode.INVALID_REQUEST
    asyncio.run(scenario())


def test_partition_errors() -> None:
    async def scenario() -> None:
        h = Harness()
        h.replicas.append("t", 0, 3)
        unknown = only_partition(await h.call(share_fetch, fetch_request(0, topic_id=OTHER_ID)))
        assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_ID
        await h.call(share_fetch, fetch_request(0))
        wrong = only_partition(await h.call(share_acknowledge, ack_request(1, [(0, 5, ACCEPT)])))
        assert wrong.error_code == ErrorCode.INVALID_RECORD_STATE
        assert h.persister.writes == 0
    asyncio.run(scenario())


def test_off_unless_share_groups_are_enabled() -> None:
    async def scenario() -> None:
        h = Harness()
        h.broker.share = None
        assert (await h.call(share_fetch, fetch_request(0))).error_code == ErrorCode.UNSUPPORTED_VERSION
        assert (await h.call(share_acknowledge, ack_request(1, []))).error_code == ErrorCode.UNSUPPORTED_VERSION
    asyncio.run(scenario())


def test_a_member_leaving_gives_back_its_records() -> None:
    async def scenario() -> None:
        h = Harness()
        h.replicas.append("t", 0, 3)
        await h.call(share_fetch, fetch_request(0))
        assert h.broker.share.member_left("g", "m1") == 3
        assert h.broker.share.sessions.get("g", "m1") is None
        assert acquired(only_partition(await h.call(share_fetch, fetch_request(0, member="m2")))) == [(0, 2, 2)]
    asyncio.run(scenario())


def test_a_moved_partition_names_its_leader_and_endpoint() -> None:
    async def scenario() -> None:
        h = Harness()
        h.replicas.append("t", 0, 3)
        await h.call(share_fetch, fetch_request(0))
        h.replicas.partitions[("t", 0)].is_leader = False
        moved = await h.call(share_fetch, fetch_request(1, [(0, 2, ACCEPT)]))
        data = only_partition(moved)
        assert data.error_code == data.acknowledge_error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (data.current_leader.leader_id, data.current_leader.leader_epoch) == (2, 7)
        assert [(n.node_id, n.host, n.port) for n in moved.node_endpoints] == [(2, "b2.example", 9093)]
        answer = await h.call(share_acknowledge, ack_request(2, [(0, 2, ACCEPT)]))
        assert only_partition(answer).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert [n.node_id for n in answer.node_endpoints] == [2]
    asyncio.run(scenario())


RENEW = 4


def test_v2_renew_keeps_the_records_and_a_renew_fetch_fetches_nothing() -> None:
    async def scenario() -> None:
        h = Harness()
        h.replicas.append("t", 0, 3)
        assert acquired(only_partition(await h.call(share_fetch, fetch_request(0), 2))) == [(0, 2, 1)]
        renewed = await h.call(share_acknowledge, ack_request(1, [(0, 1, RENEW)]), 2)
        assert only_partition(renewed).error_code == ErrorCode.NO_ERROR
        assert renewed.acquisition_lock_timeout_ms == 30_000
        sp = h.broker.share.manager.cached("g", TOPIC_ID, 0)
        assert sp.record_state(0) == (RecordState.ACQUIRED, 1, "m1")
        assert h.persister.writes == 0  # a renewal changes nothing durable
        h.replicas.append("t", 0, 3)
        request = fetch_request(2, [(2, 2, RENEW)])
        request.is_renew_ack = True
        request.max_wait_ms = request.min_bytes = request.max_bytes = request.max_records = 0
        answer = only_partition(await h.call(share_fetch, request, 2))
        assert answer.acknowledge_error_code == ErrorCode.NO_ERROR and acquired(answer) == []
        assert sp.record_state(3) is None  # nothing was fetched
    asyncio.run(scenario())


def test_v2_refusals() -> None:
    async def scenario() -> None:
        h = Harness()
        h.replicas.append("t", 0, 3)
        await h.call(share_fetch, fetch_request(0), 2)
        renew_with_limits = fetch_request(1, [(0, 0, RENEW)])
        renew_with_limits.is_renew_ack = True
        assert (await h.call(share_fetch, renew_with_limits, 2)).error_code == ErrorCode.INVALID_REQUEST
        odd_mode = fetch_request(1)
        odd_mode.share_acquire_mode = 7
        assert (await h.call(share_fetch, odd_mode, 2)).error_code == ErrorCode.INVALID_REQUEST
        # RENEW is no acknowledge type of version 1.
        v1 = await h.call(share_acknowledge, ack_request(1, [(0, 0, RENEW)]))
        assert only_partition(v1).error_code == ErrorCode.INVALID_REQUEST
    asyncio.run(scenario())


def test_v2_record_limit_mode_acquires_no_more_than_max_records() -> None:
    async def scenario() -> None:
        h = Harness()
        h.replicas.append("t", 0, 5)
        request = fetch_request(0)
        request.max_records, request.share_acquire_mode = 2, 1
        assert acquired(only_partition(await h.call(share_fetch, request, 2))) == [(0, 1, 1)]
        batch_optimized = fetch_request(0, member="m2")
        batch_optimized.max_records = 1
        assert acquired(only_partition(await h.call(share_fetch, batch_optimized, 2))) == [(2, 4, 1)]
    asyncio.run(scenario())


def test_forgetting_a_partition_applies_its_acknowledgements_then_gives_back_the_rest() -> None:
    async def scenario() -> None:
        h = Harness()
        h.replicas.append("t", 0, 4)
        await h.call(share_fetch, fetch_request(0))
        request = fetch_request(1, [(0, 1, ACCEPT)])
        request.forgotten_topics_data = [fetch_wire.ForgottenTopic(topic_id=TOPIC_ID, partitions=[0])]
        answer = only_partition(await h.call(share_fetch, request))
        assert answer.acknowledge_error_code == ErrorCode.NO_ERROR and acquired(answer) == []
        sp = h.broker.share.manager.cached("g", TOPIC_ID, 0)
        assert sp.start_offset == 2 and sp.record_state(2) == (RecordState.AVAILABLE, 1, None)
        session = h.broker.share.sessions.get("g", "m1")
        assert session is not None and not session.partitions
    asyncio.run(scenario())
