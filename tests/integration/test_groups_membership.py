"""Consumer groups with real clients in their own processes: sharing, joining, leaving, dying.

For each client library, three members of one group share a 6-partition topic
while a producer keeps writing; a fourth joins and one leaves (each exactly
one rebalance: one more assignment callback per member), one is SIGKILLed and
evicted after its session timeout, its partitions moving to the survivors.
Members commit synchronously after each batch; in the end every record was
committed exactly once.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pytest_pafka.broker_process import BrokerProcess
from testing.topics import create_topic
from tests.integration.group_helpers import (
    BackgroundProducer,
    check_committed_exactly_once,
    committed_offsets,
    stable_assignment,
    start_member,
    wait_until,
)

PARTITIONS = 6
SESSION_TIMEOUT_MS = 3000


@pytest.mark.slow
@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python", "aiokafka"])
def test_members_share_partitions_through_join_leave_and_kill(client: str, tmp_path: Path) -> None:
    group, topic = f"group-{client}", f"topic-{client}"
    with BrokerProcess("group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000") as broker:
        create_topic(broker.bootstrap, topic, PARTITIONS)
        producer = BackgroundProducer(broker, topic, PARTITIONS).start()
        members = [start_member(broker, tmp_path, client, f"m{i}", group, topic, SESSION_TIMEOUT_MS)
                   for i in range(3)]
        everyone = list(members)
        try:
            stable_assignment(broker, group, members, PARTITIONS)

            # A fourth member joins: one rebalance.
            before = {m.name: m.count("assigned") for m in members}
            fourth = start_member(broker, tmp_path, client, "m3", group, topic, SESSION_TIMEOUT_MS)
            everyone.append(fourth)
            members.append(fourth)
            assignment = stable_assignment(broker, group, members, PARTITIONS)
            assert all(assignment[m.name] for m in members), assignment
            assert {m.name: m.count("assigned") - before[m.name] for m in members[:3]} == {
                m.name: 1 for m in members[:3]}

            # One leaves cleanly (LeaveGroup): one rebalance.
            leaving = members.pop(0)
            before = {m.name: m.count("assigned") for m in members}
            leaving.terminate()
            stable_assignment(broker, group, members, PARTITIONS)
            assert {m.name: m.count("assigned") - before[m.name] for m in members} == {m.name: 1 for m in members}

            # One dies: evicted after its session timeout, its partitions move.
            victim = members.pop(0)
            victim_partitions = victim.owned()
            victim.kill()
            killed_at = time.monotonic()
            assignment = stable_assignment(broker, group, members, PARTITIONS)
            evicted_after = time.monotonic() - killed_at
            # Not before its session timeout, and not much after (heartbeats of the rest + one rebalance).
            assert SESSION_TIMEOUT_MS / 1000 * 0.8 <= evicted_after < SESSION_TIMEOUT_MS / 1000 + 5, evicted_after
            assert victim_partitions <= set().union(*assignment.values())

            end_offsets = producer.stop()
            wait_until(lambda: committed_offsets(broker, group, topic, PARTITIONS) == end_offsets, 60,
                       "the group to commit every record")
            for m in members:
                m.terminate()
            check_committed_exactly_once(everyone, end_offsets, killed=[victim])
            for m in everyone:  # no live member was ever told it is unknown
                assert not m.unknown_member_lines(), (m.name, m.unknown_member_lines()[:3])
            assert sum(end_offsets.values()) > 1000
        finally:
            producer.stop() if producer._thread.is_alive() else None
            for m in everyone:
                m.kill()
