"""Fetch from the closest replica (KIP-392): three consumers on a three-rack cluster, each reading a
one-partition RF-3 topic from its rack's replica, against all three reading from the leader.

    python -m benchmarks.suite.rack_fetch --records 200000

Each mode reads the whole topic with three confluent-kafka consumers at once (one thread each,
``client.rack=RACK<n>`` in the rack mode, no rack in the leader mode) and reports the time until all
three have every record, the records per second over the three, each broker's CPU seconds
(``/proc/<pid>/stat``) and the consumer bytes each sent (``kafka_server_brokertopicmetrics_bytesout_total``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import threading
import time
import urllib.request

from pytest_pafka.cluster import Cluster

SELECTOR = "replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector"
RACKS = {b: [f"broker.rack=RACK{b}"] for b in (1, 2, 3)}
VALUE = b"x" * 100


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _bytes_out(cluster: Cluster, broker_id: int, topic: str) -> float:
    with urllib.request.urlopen(cluster.broker(broker_id).metrics_url, timeout=5) as answer:
        text = answer.read().decode()
    match = re.search(rf'^kafka_server_brokertopicmetrics_bytesout_total\{{topic="{topic}"\}} (\S+)$', text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def _produce(cluster: Cluster, topic: str, records: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({**cluster.client_config(), "acks": "all", "linger.ms": 20, "batch.num.messages": 10_000,
                         "queue.buffering.max.messages": 1_000_000})
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value=VALUE)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(300) == 0


def _read_all(cluster: Cluster, topic: str, records: int, rack: str | None, counts: list[int], slot: int) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    config = {**cluster.client_config(), "group.id": f"bench-{slot}-{time.monotonic_ns()}",
              "enable.auto.commit": False, "fetch.max.bytes": 50 * 1024 * 1024}
    if rack is not None:
        config["client.rack"] = rack
    consumer = Consumer(config)
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    deadline = time.monotonic() + 600
    while counts[slot] < records and time.monotonic() < deadline:
        counts[slot] += sum(1 for m in consumer.consume(10_000, timeout=0.5) if m.error() is None)
    consumer.close()


def run_mode(cluster: Cluster, topic: str, records: int, racked: bool) -> dict[str, object]:
    pids = {b: cluster.broker(b).pid for b in cluster.broker_ids}
    cpu = {b: _cpu_s(pid) for b, pid in pids.items() if pid}
    sent = {b: _bytes_out(cluster, b, topic) for b in cluster.broker_ids}
    counts = [0, 0, 0]
    threads = [threading.Thread(target=_read_all, args=(cluster, topic, records, f"RACK{b}" if racked else None,
                                                        counts, i)) for i, b in enumerate(cluster.broker_ids)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    return {"mode": "rack-local replica" if racked else "leader only", "seconds": round(elapsed, 2),
            "records_per_s": round(sum(counts) / elapsed), "complete": counts == [records] * 3,
            "broker_cpu_s": {b: round(_cpu_s(pid) - cpu[b], 2) for b, pid in pids.items() if pid},
            "bytes_out_mb": {b: round((_bytes_out(cluster, b, topic) - sent[b]) / 1e6, 1) for b in cluster.broker_ids}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    args = parser.parse_args()
    from confluent_kafka.admin import AdminClient, NewTopic

    with Cluster(3, SELECTOR, broker_overrides=RACKS) as cluster:
        cluster.wait_until_serving(cluster.broker_ids)
        topic = "rack-bench"
        admin = AdminClient(cluster.client_config())
        admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
        _produce(cluster, topic, args.records)
        time.sleep(2)  # the followers' high watermarks catch up
        leader = (cluster.partition_state(topic, 0) or {}).get("leader")
        results = [run_mode(cluster, topic, args.records, racked) for racked in (False, True, False, True)]
        print(json.dumps({"records": args.records, "leader": leader, "results": results}, indent=1))


if __name__ == "__main__":
    main()
