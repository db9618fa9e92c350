"""Option parsing, offset JSON and rate limiting of the pafka source (no Spark session needed)."""

from __future__ import annotations

import pytest

from client import TopicPartition
from protocol.request_constants import READ_COMMITTED
from spark_jobs.offsets import offsets_from_json, offsets_to_json
from spark_jobs.source import PafkaDataSource, kafka_schema
from spark_jobs.source_options import SourceOptions
from spark_jobs.stream_reader import rate_limit

T0, T1, T2 = (TopicPartition("t", p) for p in range(3))


def test_lower_cased_keys_as_spark_passes_them() -> None:
    options = SourceOptions.parse({
        "kafka.bootstrap.servers": "127.0.0.1:9092",
        "subscribe": "a, b",
        "startingoffsets": '{"a":{"0":23,"1":-2}}',
        "maxoffsetspertrigger": "100",
        "failondataloss": "false",
        "includeheaders": "true",
        "kafka.isolation.level": "read_committed",
    }, streaming=True)
    assert options.subscribe == ("a", "b")
    assert options.starting_offsets == {TopicPartition("a", 0): 23, TopicPartition("a", 1): -2}
    assert options.max_offsets_per_trigger == 100
    assert options.fail_on_data_loss is False
    assert options.include_headers is True
    assert options.isolation_level == READ_COMMITTED


def test_camel_case_keys_work_too() -> None:
    options = SourceOptions.parse({"kafka.bootstrap.servers": "h:1", "subscribePattern": "t.*",
                                   "startingOffsets": "earliest", "maxOffsetsPerTrigger": "5"}, streaming=True)
    assert options.subscribe_pattern == "t.*"
    assert options.starting_offsets == "earliest"
    assert options.max_offsets_per_trigger == 5


def test_defaults_streaming_latest_batch_earliest() -> None:
    raw = {"kafka.bootstrap.servers": "h:1", "assign": '{"t":[1,0]}'}
    assert SourceOptions.parse(raw, streaming=True).starting_offsets == "latest"
    batch = SourceOptions.parse(raw, streaming=False)
    assert batch.starting_offsets == "earliest"
    assert batch.ending_offsets == "latest"
    assert batch.assign == (T0, TopicPartition("t", 1))


@pytest.mark.parametrize("raw, message", [
    ({"subscribe": "t"}, "kafka.bootstrap.servers"),
    ({"kafka.bootstrap.servers": "h:1"}, "exactly one of"),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "t", "assign": '{"t":[0]}'}, "exactly one of"),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "t", "startingoffsets": "{bad"}, "startingOffsets"),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "t", "failondataloss": "maybe"}, "failOnDataLoss"),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "t", "endingoffsets": "earliest"}, "endingOffsets"),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "t", "maxoffsetspertrigger": "0"}, "maxOffsetsPerTrigger"),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "t", "kafka.isolation.level": "x"}, "isolation"),
])
def test_bad_options_fail_at_planning(raw: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SourceOptions.parse(raw, streaming=False)


def test_ending_offsets_rejected_for_streams() -> None:
    with pytest.raises(ValueError, match="batch queries only"):
        SourceOptions.parse({"kafka.bootstrap.servers": "h:1", "subscribe": "t", "endingOffsets": "latest"},
                            streaming=True)


def test_offsets_json_round_trip_in_sparks_layout() -> None:
    offsets = {TopicPartition("b", 0): 5, T1: 7, T0: 3}
    assert offsets_to_json(offsets) == {"b": {"0": 5}, "t": {"0": 3, "1": 7}}
    assert offsets_from_json(offsets_to_json(offsets)) == offsets


def test_schema_follows_include_headers() -> None:
    assert "headers" not in PafkaDataSource({"kafka.bootstrap.servers": "h:1"}).schema().fieldNames()
    assert PafkaDataSource({"includeheaders": "true"}).schema() == kafka_schema(True)
    assert PafkaDataSource.name() == "pafka"


def test_rate_limit_shares_by_lag_and_uses_the_whole_limit() -> None:
    start = {T0: 0, T1: 100, T2: 50}
    latest = {T0: 1000, T1: 100, T2: 250}
    end = rate_limit(start, latest, 300)
    assert sum(end[tp] - start[tp] for tp in start) == 300
    assert end[T1] == 100
    assert end[T0] - start[T0] == 250 and end[T2] - start[T2] == 50
    assert rate_limit(start, latest, 10_000) == latest
    # A limit smaller than the number of partitions still moves forward.
    small = rate_limit(start, latest, 1)
    assert sum(small[tp] - start[tp] for tp in start) == 1
