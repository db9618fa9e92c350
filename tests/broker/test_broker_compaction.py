"""A running broker compacts `cleanup.policy=compact` topics in the background."""


from typing import Any

from client import AdminClient, KafkaClient, NewTopic, ProducerRecord
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.waiting import wait_until


def test_broker_keeps_the_latest_value_per_key_of_a_compacted_topic() -> None:
    with BrokerProcess("log.cleaner.backoff.ms=100") as broker:
        client = KafkaClient(broker.bootstrap)
        try:
            client.connect()
            AdminClient(client).create_topics([NewTopic(
                "compacted", 1, 1,
                {"cleanup.policy": "compact", "segment.bytes": "1048576", "min.cleanable.dirty.ratio": "0.01"},
            )])
            client.refresh_metadata(["compacted"])
            padding = b"x" * 10_000  # 20 rounds x 100 KB: a few 1 MiB segments to clean
            for round_ in range(20):
                records = [ProducerRecord(key=b"k%d" % k, value=b"round-%d " % round_ + padding) for k in range(10)]
                client.produce("compacted", 0, records, compression=0, acks=-1)
            end = client.latest_offset("compacted", 0)

            def read_all() -> list[Any]:
                records, offset = [], 0
                while offset < end:
                    result = client.fetch("compacted", 0, offset, max_wait_ms=0)
                    records += result.records
                    offset = result.next_offset
                return records

            # 200 records went in; the cleaner may only touch the rolled
            # segments (the active one is never cleaned, as in Kafka).
            records = wait_until(read_all, 20, "the cleaner never compacted the topic", interval=0.2,
                                 until=lambda records: len(records) < 150)
            latest = {r.key: r.value.split(b" ")[0] for r in records}
            assert latest == {b"k%d" % k: b"round-19" for k in range(10)}
            offsets = [r.offset for r in records]
            assert offsets == sorted(set(offsets))  # order and offsets preserved
        finally:
            client.close()
