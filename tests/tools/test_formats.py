"""The tools' text formats and Kafka's partitioner, without a broker."""

from __future__ import annotations

import random
from uuid import UUID

import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from client import murmur2, partition_for_key
from client.metadata import PartitionMetadata, TopicMetadata
from protocol.records import Record
from tools.console_consumer import MessageFormat
from tools.line_reader import LineFormat, LineFormatError
from tools.topics_command import format_topic_description, kafka_uuid

# ------------------------------------------------------------ partitioner

# Kafka's own test vectors for Utils.murmur2 (signed Java ints).
@pytest.mark.parametrize(
    ("key", "expected"),
    [(b"21", -973932308), (b"foobar", -790332482), (b"a-little-bit-long-string", -985981536),
     (b"a-little-bit-longer-string", -1486304829), (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
     (b"abc", 479470107)],
)
def test_murmur2_matches_kafka_vectors(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_murmur2_matches_kafka_python_on_random_keys() -> None:
    rng = random.Random(4)
    for _ in range(2000):
        key = rng.randbytes(rng.randrange(0, 40))
        assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key) & 0xFFFFFFFF


def test_partition_for_key_is_positive_modulo() -> None:
    assert partition_for_key(b"21", 7) == (-973932308 & 0x7FFFFFFF) % 7
    with pytest.raises(ValueError):
        partition_for_key(b"k", 0)


# ------------------------------------------------------------ console producer lines

def test_plain_lines_are_values() -> None:
    record = LineFormat().parse(b"a\tb:c", 1)
    assert (record.key, record.value, list(record.headers)) == (None, b"a\tb:c", [])


def test_key_and_headers() -> None:
    fmt = LineFormat.from_properties({"parse.key": "true", "parse.headers": "true"})
    record = fmt.parse(b"h1:v1,h2:,h3\tkey\tval\tue", 1)
    assert record.headers == [("h1", b"v1"), ("h2", b""), ("h3", None)]
    assert (record.key, record.value) == (b"key", b"val\tue")


def test_custom_separators_and_null_marker() -> None:
    fmt = LineFormat.from_properties(
        {
            "parse.key": "true",
            "key.separator": "::",
            "parse.headers": "true",
            "headers.delimiter": "|",
            "headers.separator": ";",
            "headers.key.separator": "=",
            "null.marker": "<null>",
        }
    )
    record = fmt.parse(b"a=1;b=<null>|<null>::v", 3)
    assert record.headers == [("a", b"1"), ("b", None)]
    assert (record.key, record.value) == (None, b"v")
    assert fmt.parse(b"|k::<null>", 4).value is None
    with pytest.raises(LineFormatError, match="null marker"):
        fmt.parse(b"<null>=x|k::v", 5)


def test_missing_separators_are_errors_unless_ignored() -> None:
    strict = LineFormat.from_properties({"parse.key": "true", "parse.headers": "true"})
    with pytest.raises(LineFormatError, match="No headers delimiter found on line number 2"):
        strict.parse(b"novalue", 2)
    with pytest.raises(LineFormatError, match="No key separator found on line number 9"):
        strict.parse(b"h:1\tnokey", 9)
    lenient = LineFormat.from_properties({"parse.key": "true", "parse.headers": "true", "ignore.error": "true"})
    record = lenient.parse(b"just a value", 1)
    assert (record.key, record.value, record.headers) == (None, b"just a value", [])


def test_invalid_reader_properties() -> None:
    with pytest.raises(LineFormatError):
        LineFormat.from_properties({"headers.separator": ":", "headers.key.separator": ":"})
    with pytest.raises(LineFormatError):
        LineFormat.from_properties({"key.separator": ""})


# ------------------------------------------------------------ console consumer output

def _record(**kw) -> Record:  # type: ignore[no-untyped-def]
    base = {"offset": 42, "timestamp": 1700000000123, "key": b"k", "value": b"v", "headers": []}
    base.update(kw)
    return Record(**base)  # type: ignore[arg-type]


def test_default_format_prints_the_value_only() -> None:
    assert MessageFormat().format(_record(), 3, "CreateTime") == b"v\n"
    assert MessageFormat().format(_record(value=None), 3, "CreateTime") == b"null\n"


def test_all_fields_in_kafka_order() -> None:
    fmt = MessageFormat.from_properties(
        dict.fromkeys(("print.timestamp", "print.partition", "print.offset", "print.headers", "print.key"), "true")
    )
    record = _record(headers=[("h1", b"x"), ("h2", None)])
    assert fmt.format(record, 3, "LogAppendTime") == b"LogAppendTime:1700000000123\tPartition:3\tOffset:42\th1:x,h2:null\tk\tv\n"
    assert fmt.format(_record(key=None), 0, "CreateTime") == b"CreateTime:1700000000123\tPartition:0\tOffset:42\tNO_HEADERS\tnull\tv\n"
    assert fmt.format(_record(timestamp=-1), 0, "CreateTime").startswith(b"CreateTime:-1\t")


def test_custom_separators_and_literals() -> None:
    fmt = MessageFormat.from_properties(
        {
            "print.key": "true",
            "print.headers": "true",
            "key.separator": " | ",
            "line.separator": "\r\n",
            "headers.separator": ";",
            "null.literal": "NULL",
            "print.value": "false",
        }
    )
    assert fmt.format(_record(key=None, headers=[("a", b"1"), ("b", b"2")]), 0, "CreateTime") == b"a:1;b:2 | NULL\r\n"


# ------------------------------------------------------------ topics --describe

def test_kafka_uuid_text_form() -> None:
    assert kafka_uuid(UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert kafka_uuid(UUID(bytes=bytes(range(16)))) == "AAECAwQFBgcICQoLDA0ODw"


def test_describe_lines() -> None:
    topic = TopicMetadata("orders", UUID(bytes=bytes(range(16))), False, 0)
    topic.partitions = {
        1: PartitionMetadata("orders", 1, -1, 0, [1, 2], [2], [1]),
        0: PartitionMetadata("orders", 0, 2, 0, [2, 1], [2, 1], []),
    }
    assert format_topic_description(topic, {"cleanup.policy": "compact", "retention.ms": "1"}) == [
        ("Topic: orders\tTopicId: AAECAwQFBgcICQoLDA0ODw\tPartitionCount: 2\tReplicationFactor: 2\t"
         "Configs: cleanup.policy=compact,retention.ms=1"),
        "\tTopic: orders\tPartition: 0\tLeader: 2\tReplicas: 2,1\tIsr: 2,1",
        "\tTopic: orders\tPartition: 1\tLeader: none\tReplicas: 1,2\tIsr: 2\tOffline: 1",
    ]
