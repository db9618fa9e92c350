"""Issue 4's client matrix: real clients, every codec, 100,000 records each.

For each of confluent-kafka, kafka-python, aiokafka and Debian's kcat
(librdkafka 2.0) and each of gzip, snappy, lz4 and zstd: create a topic with
the client's admin path, produce records with keys and headers, then consume
every partition from the beginning by explicit assignment. Every record must
come back exactly once, in production order per partition, with its key,
value, headers and timestamp.
"""

from __future__ import annotations

import os
import shutil
import time

import pytest

from testing.broker_process import BrokerProcess
from tests.integration.clients import DRIVERS
from tests.integration.records import check_consumed, make_records

RECORDS = int(os.environ.get("PAFKA_MATRIX_RECORDS", "100000"))
PARTITIONS = 3
CODECS = ("gzip", "snappy", "lz4", "zstd")


def _require(client: str) -> None:
    # kcat is a Debian package, not a Python one: missing means the set-up
    # command was not followed, which must fail rather than skip.
    if client == "kcat":
        assert shutil.which("kcat"), "kcat is not installed (apt-get install -y kcat)"


@pytest.mark.slow
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", list(DRIVERS))
def test_produce_and_consume_every_record(module_broker: BrokerProcess, client: str, codec: str) -> None:
    _require(client)
    driver = DRIVERS[client]
    topic = f"matrix-{client}-{codec}"
    driver.create_topic(module_broker.bootstrap, topic, PARTITIONS)
    before_ms = int(time.time() * 1000)
    records = make_records(RECORDS, base_timestamp_ms=before_ms - 10 * RECORDS,
                           per_record_headers=driver.per_record_headers)
    driver.produce(module_broker.bootstrap, topic, codec, records)
    after_ms = int(time.time() * 1000)
    consumed = driver.consume(module_broker.bootstrap, topic, PARTITIONS, expected=len(records))
    check_consumed(records, consumed, exact_timestamps=driver.exact_timestamps,
                   timestamp_window=(before_ms, after_ms))
    assert "Traceback" not in module_broker.log_text()
