"""KafkaJS 2.2.4 (the npm registry's ``kafkajs``, Node.js's most used Kafka client) against a real broker.

The client is the Node.js program beside this file (``kafkajs/client.js``), run with one step per
test; it prints JSON lines. KafkaJS is installed by the README's test command (``npm ci`` in
``tests/integration/kafkajs``). It speaks older request versions than librdkafka does (Produce v7,
Fetch v11, Metadata v6, JoinGroup v5, OffsetCommit v5, CreateTopics v3, ...), its own gzip, and its
own idempotent and transactional producer; the broker's side of each is checked here, on disk too.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pytest_pafka.broker_process import BrokerProcess
from testing.topics import create_topic
from tests.integration.kafkajs_runner import Events, run_kafkajs

RECORDS = 1000
PARTITIONS = 3
REPO = Path(__file__).resolve().parents[2]


def run(broker: BrokerProcess, step: str, **options: str | int) -> Events:
    return run_kafkajs(step, {"brokers": broker.bootstrap, **options})


def dump_log(broker: BrokerProcess, topic: str, partition: int) -> list[str]:
    """``pafka dump-log --deep-iteration`` of the partition's first segment: what is on disk."""
    segment = broker.data_dir / f"{topic}-{partition}" / "00000000000000000000.log"
    done = subprocess.run([sys.executable, "-m", "tools", "dump-log", "--deep-iteration", "--files", str(segment)],
                          capture_output=True, text=True, cwd=REPO, timeout=60, check=True)
    return done.stdout.splitlines()


def test_admin_creates_describes_alters_grows_trims_and_deletes_a_topic(broker: BrokerProcess) -> None:
    events = run(broker, "admin", topic="kafkajs-admin")
    assert events["created"] == [{"created": True}]
    assert events["created_again"] == [{"created": False}]  # TOPIC_ALREADY_EXISTS, which KafkaJS reports so
    assert "kafkajs-admin" in events["topics"][0]["topics"]
    [cluster] = events["cluster"]
    assert [b["port"] for b in cluster["brokers"]] == [broker.port]
    assert cluster["controller"] == cluster["brokers"][0]["nodeId"]
    node_id = cluster["controller"]
    assert events["metadata"][0]["partitions"] == [
        {"partition": p, "leader": node_id, "replicas": [node_id], "isr": [node_id]} for p in range(3)]
    assert events["configs"][0]["configs"] == {"retention.ms": {"value": "86400000", "isDefault": False},
                                               "cleanup.policy": {"value": "delete", "isDefault": True}}
    assert events["configs_altered"][0]["configs"]["retention.ms"] == {"value": "3600000", "isDefault": False}
    assert events["partitions"] == [{"count": 4}]
    empty = [{"partition": p, "low": "0", "high": "0"} for p in range(1, 4)]
    assert events["offsets"][0]["offsets"] == [{"partition": 0, "low": "0", "high": "10"}, *empty]
    # ListOffsets by timestamp: the first offset at or after it; where the broker answers -1 (no such
    # record: the empty partitions, and after the last record), KafkaJS puts the end offset.
    assert events["offsets_by_time"] == [{"before": [0, 0, 0, 0], "fifth": [5, 0, 0, 0], "after": [10, 0, 0, 0]}]
    assert events["offsets_after_delete_records"][0]["offsets"] == [{"partition": 0, "low": "4", "high": "10"}, *empty]
    assert "kafkajs-admin" not in events["deleted"][0]["topics"]


def test_idempotent_gzip_produce_then_a_two_member_group_reads_every_record_once(broker: BrokerProcess) -> None:
    topic, group = "kafkajs-events", "kafkajs-group"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    produced = run(broker, "produce", topic=topic, count=RECORDS, batch=100)["produced"]
    assert all(p["errorCode"] == 0 for p in produced)
    ends = {p: max(a["baseOffset"] for a in produced if a["partition"] == p) for p in range(PARTITIONS)}
    assert set(ends) == set(range(PARTITIONS))

    events = run(broker, "group", topic=topic, group=group, count=RECORDS, members=2)
    consumed = events["consumed"]
    assert sorted(int(c["n"]) for c in consumed) == list(range(RECORDS))  # each record once
    for c in consumed:
        assert (c["key"], c["value"]) == (f"k{c['n']}", f"v{c['n']}")
    # CreateTime kept as KafkaJS set it: start + n for record n.
    assert len({c["timestamp"] - int(c["n"]) for c in consumed}) == 1
    by_partition: dict[int, list[int]] = {}
    for c in consumed:
        by_partition.setdefault(c["partition"], []).append(c["offset"])
    for partition, offsets in by_partition.items():
        assert offsets == list(range(len(offsets))), partition  # in order, no gaps
        assert ends[partition] < len(offsets)
    # The group settled with the partitions shared: each member's latest assignment, together all of them.
    assert "timed_out" not in events, events["timed_out"]
    latest = {j["member"]: j["partitions"] for j in events["joined"]}
    assert sorted(latest) == [0, 1] and all(latest.values()), latest
    assert sorted(latest[0] + latest[1]) == list(range(PARTITIONS))
    assert events["described"] == [{"state": "Stable", "protocol": "RoundRobinAssigner", "members": 2}]
    assert events["committed"][0]["offsets"] == [
        {"partition": p, "offset": len(by_partition[p])} for p in range(PARTITIONS)]
    assert group in events["groups"][0]["groups"]
    # resetOffsets(earliest) commits Kafka's EARLIEST sentinel; deleteGroups removes the group.
    assert events["reset"][0]["offsets"] == [{"partition": p, "offset": -2} for p in range(PARTITIONS)]
    assert group not in events["groups_after_delete"][0]["groups"]

    # On disk: KafkaJS's gzip batches as they arrived, with its producer id and sequences.
    headers = [line for line in dump_log(broker, topic, 0) if line.startswith("baseOffset:")]
    assert headers and all("compresscodec: gzip" in h and "isTransactional: false" in h for h in headers)
    assert all("producerId: -1" not in h and "baseSequence: -1" not in h for h in headers)


def test_transactions_commit_abort_and_send_offsets(broker: BrokerProcess) -> None:
    topic, group = "kafkajs-txn", "kafkajs-txn-group"
    create_topic(broker.bootstrap, topic, 2)
    events = run(broker, "transactions", topic=topic, group=group, transactional_id="kafkajs-txn-1")
    assert [t["finish"] for t in events["transaction"]] == ["commit", "abort", "commit"]
    # read_committed (KafkaJS's default): the aborted transaction's records are skipped.
    assert events["read_committed"] == [{"values": [f"{label}-{i}" for label in ("first", "third") for i in range(5)]}]
    # sendOffsets committed the group's offset with the third transaction.
    assert events["txn_offsets"][0]["offsets"][0] == {"partition": 0, "offset": 7}
    # On disk: the aborted records are there, each transaction closed by its marker.
    markers = [line.split("endTxnMarker: ")[1].split()[0] for line in dump_log(broker, topic, 0)
               if "endTxnMarker" in line]
    assert markers == ["COMMIT", "ABORT", "COMMIT"]
