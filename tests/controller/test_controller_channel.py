"""The controller's request batch and channel manager against fake broker endpoints.

What each broker receives: LeaderAndIsr at v7 (or the highest both know), UpdateMetadata
v8 carrying every live broker with all its listeners and rack, StopReplica v4; each with
the controller's id and epoch and the receiving broker's epoch; and a request to a
broker that is not up yet is retried until it is.
"""

from __future__ import annotations

import asyncio
import uuid

from controller.controller_channel_manager import ControllerChannelManager
from controller.controller_context import ControllerContext, ReplicaAssignment
from controller.controller_request_batch import ControllerRequestBatch
from controller.zk.zk_data import BrokerInfo, EndPoint, LeaderAndIsr, LeaderIsrAndControllerEpoch
from protocol.messages.leader_and_isr import LeaderAndIsrRequest
from protocol.messages.stop_replica import StopReplicaRequest
from protocol.messages.update_metadata import UpdateMetadataRequest
from pytest_pafka.ports import free_port
from tests.controller.fake_broker import FakeBroker

TOPIC_ID = uuid.UUID("6f1e2a7b-0000-4000-8000-000000000001")


def _broker_info(fake: FakeBroker, rack: str | None, epoch: int) -> BrokerInfo:
    return BrokerInfo(
        fake.broker_id,
        [EndPoint(fake.host, fake.port, "INTERNAL", "PLAINTEXT"), EndPoint(fake.host, 19000 + fake.broker_id, "EXTERNAL", "SSL")],
        rack,
        epoch,
    )


def _context(brokers: list[BrokerInfo]) -> ControllerContext:
    ctx = ControllerContext()
    ctx.epoch, ctx.epoch_zk_version = 7, 6
    ctx.add_live_brokers(brokers)
    ctx.add_topic("t", TOPIC_ID)
    ctx.update_partition_assignment(("t", 0), ReplicaAssignment([1, 2]))
    ctx.update_partition_assignment(("t", 1), ReplicaAssignment([2, 1]))
    ctx.partition_leadership_info[("t", 0)] = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 3, [1, 2], 0, 5), 7)
    ctx.partition_leadership_info[("t", 1)] = LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 1, [2], 0, 2), 6)
    return ctx


async def _with_brokers(body, api_ranges=None):  # type: ignore[no-untyped-def]
    fakes = [FakeBroker(1), FakeBroker(2)]
    if api_ranges is not None:
        for fake in fakes:
            fake.api_ranges = api_ranges
    for fake in fakes:
        await fake.start()
    channel = ControllerChannelManager(9, "INTERNAL", request_timeout_s=5, retry_backoff_s=0.05)
    try:
        await body(fakes, channel)
    finally:
        await channel.shutdown()
        for fake in fakes:
            await fake.stop()


def test_leader_and_isr_update_metadata_and_stop_replica_reach_each_broker() -> None:
    async def body(fakes: list[FakeBroker], channel: ControllerChannelManager) -> None:
        infos = [_broker_info(fakes[0], "rack-a", 100), _broker_info(fakes[1], "rack-b", 200)]
        ctx = _context(infos)
        for info in infos:
            channel.add_broker(info)
        batch = ControllerRequestBatch(9, ctx, channel, "INTERNAL")
        batch.new_batch()
        for tp in (("t", 0), ("t", 1)):
            batch.add_leader_and_isr_request_for_brokers([1, 2], tp, ctx.partition_leadership_info[tp],
                                                         ctx.partition_replica_assignment(tp), is_new=tp[1] == 1)
        batch.add_stop_replica_request_for_brokers([2], ("t", 0), delete=True)
        batch.send_requests_to_brokers(ctx.epoch)
        assert not batch.leader_and_isr and not batch.update_metadata_brokers

        for fake, epoch in ((fakes[0], 100), (fakes[1], 200)):
            (lai,) = await fake.wait_for(LeaderAndIsrRequest)
            assert isinstance(lai, LeaderAndIsrRequest)
            assert (lai.controller_id, lai.controller_epoch, lai.broker_epoch) == (9, 7, epoch)
            (topic,) = lai.topic_states
            assert (topic.topic_name, topic.topic_id) == ("t", TOPIC_ID)
            states = {p.partition_index: p for p in topic.partition_states}
            assert (states[0].leader, states[0].leader_epoch, states[0].isr, states[0].partition_epoch,
                    states[0].replicas, states[0].controller_epoch, states[0].is_new) == (1, 3, [1, 2], 5, [1, 2], 7, False)
            assert (states[1].leader, states[1].isr, states[1].controller_epoch, states[1].is_new) == (2, [2], 6, True)
            assert sorted((lv.broker_id, lv.port) for lv in lai.live_leaders) == [(1, fakes[0].port), (2, fakes[1].port)]

            (um,) = await fake.wait_for(UpdateMetadataRequest)
            assert isinstance(um, UpdateMetadataRequest)
            assert (um.controller_id, um.controller_epoch, um.broker_epoch) == (9, 7, epoch)
            brokers = {b.id: b for b in um.live_brokers}
            assert set(brokers) == {1, 2}
            assert brokers[2].rack == "rack-b"
            assert {(e.listener, e.port, e.security_protocol) for e in brokers[2].endpoints} == {
                ("INTERNAL", fakes[1].port, 0), ("EXTERNAL", 19002, 1)}
            (um_topic,) = um.topic_states
            assert um_topic.topic_id == TOPIC_ID
            assert {p.partition_index: (p.leader, p.isr, p.zk_version) for p in um_topic.partition_states} == {
                0: (1, [1, 2], 5), 1: (2, [2], 2)}
        (stop,) = await fakes[1].wait_for(StopReplicaRequest)
        versions = {(r.api_key, r.version) for f in fakes for r in f.received}
        assert versions == {(4, 7), (6, 8), (5, 4)}
        assert isinstance(stop, StopReplicaRequest)
        assert (stop.controller_epoch, stop.broker_epoch) == (7, 200)
        (st,) = stop.topic_states
        assert [(p.partition_index, p.delete_partition, p.leader_epoch) for p in st.partition_states] == [(0, True, 3)]
        assert not fakes[0].of_type(StopReplicaRequest)

    asyncio.run(_with_brokers(body))


def test_versions_capped_by_what_the_broker_lists_and_defaulted_when_unlisted() -> None:
    async def body(fakes: list[FakeBroker], channel: ControllerChannelManager) -> None:
        fakes[0].api_ranges = {4: (0, 5), 6: (0, 6)}
        fakes[1].api_ranges = None  # lists no inter-broker API: Kafka 3.9's versions
        infos = [_broker_info(fakes[0], None, 1), _broker_info(fakes[1], None, 2)]
        ctx = _context(infos)
        for info in infos:
            channel.add_broker(info)
        batch = ControllerRequestBatch(9, ctx, channel, "INTERNAL")
        batch.add_leader_and_isr_request_for_brokers([1, 2], ("t", 0), ctx.partition_leadership_info[("t", 0)],
                                                     [1, 2], is_new=False)
        batch.send_requests_to_brokers(ctx.epoch)
        await fakes[0].wait_for(UpdateMetadataRequest)
        await fakes[1].wait_for(UpdateMetadataRequest)
        assert {(r.api_key, r.version) for r in fakes[0].received} == {(4, 5), (6, 6)}
        assert {(r.api_key, r.version) for r in fakes[1].received} == {(4, 7), (6, 8)}

    asyncio.run(_with_brokers(body))


def test_request_to_a_broker_not_yet_listening_is_retried_until_it_is() -> None:
    async def run() -> None:
        port = free_port()
        late = FakeBroker(1, port=port)
        channel = ControllerChannelManager(9, "INTERNAL", request_timeout_s=2, retry_backoff_s=0.05)
        info = BrokerInfo(1, [EndPoint("127.0.0.1", port, "INTERNAL", "PLAINTEXT")], None, 5)
        ctx = ControllerContext()
        ctx.add_live_brokers([info])
        try:
            channel.add_broker(info)
            batch = ControllerRequestBatch(9, ctx, channel, "INTERNAL")
            batch.add_update_metadata_request_for_brokers([1], None)
            batch.send_requests_to_brokers(3)
            await asyncio.sleep(0.3)  # a few refused attempts
            await late.start()
            (um,) = await late.wait_for(UpdateMetadataRequest)
            assert isinstance(um, UpdateMetadataRequest)
            assert (um.controller_epoch, um.broker_epoch) == (3, 5)
            await channel.remove_broker(1)
            channel.send_request(1, um)  # dropped: the broker is gone
            assert channel.pending(1) == 0
        finally:
            await channel.shutdown()
            await late.stop()

    asyncio.run(run())
