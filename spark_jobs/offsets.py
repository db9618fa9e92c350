"""Per-partition offsets in Spark's Kafka JSON format, and turning offset specs into offsets.

Spark's Kafka source writes its offsets (in the checkpoint and in
``startingOffsets`` / ``endingOffsets``) as ``{"topic": {"0": 23, "1": 42}}``;
in a spec, -2 means the partition's earliest offset and -1 its latest. This
module parses and writes that format and resolves specs against the broker
(ListOffsets), so both the stream reader on the driver and the batch reader
plan with the same rules. Nothing here imports pyspark.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from client import KafkaClient, TopicPartition
from protocol.request_constants import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, READ_UNCOMMITTED

#: The per-partition placeholders of Spark's offset JSON.
EARLIEST = -2
LATEST = -1

PartitionOffsets = dict[TopicPartition, int]
#: ``"earliest"``, ``"latest"`` or explicit per-partition offsets (with -2/-1 placeholders).
OffsetSpec = str | PartitionOffsets
#: Offsets as Spark's checkpoints hold them: topic -> partition (as a string) -> offset.
OffsetsJson = dict[str, dict[str, int]]


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> OffsetsJson:
    """Spark's layout: topic -> partition (as a string) -> offset, sorted for stable checkpoints."""
    out: OffsetsJson = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def offsets_from_json(obj: Mapping[str, Mapping[str, int]]) -> PartitionOffsets:
    offsets: PartitionOffsets = {}
    for topic, partitions in obj.items():
        if not isinstance(partitions, Mapping):
            raise ValueError(f"offsets of topic {topic!r} must be an object of partition -> offset")
        for partition, offset in partitions.items():
            offsets[TopicPartition(topic, int(partition))] = int(offset)
    return offsets


def parse_offset_spec(text: str | None, *, default: str, option: str) -> OffsetSpec:
    """``earliest`` / ``latest`` / per-partition JSON, as Spark's startingOffsets and endingOffsets take."""
    if text is None or not text.strip():
        return default
    value = text.strip()
    if value.lower() in ("earliest", "latest"):
        return value.lower()
    try:
        return offsets_from_json(json.loads(value))
    except (ValueError, AttributeError, TypeError) as exc:
        raise ValueError(f"{option}: expected 'earliest', 'latest' or JSON like "
                         f'{{"topic":{{"0":23}}}}, got {text!r} ({exc})') from None


def parse_assign(text: str) -> list[TopicPartition]:
    """``assign``: ``{"topic": [0, 1]}``."""
    try:
        obj = json.loads(text)
        return sorted(TopicPartition(topic, int(p)) for topic, parts in obj.items() for p in parts)
    except (ValueError, AttributeError, TypeError) as exc:
        raise ValueError(f'assign: expected JSON like {{"topic":[0,1]}}, got {text!r} ({exc})') from None


def list_offsets(
    client: KafkaClient, partitions: Iterable[TopicPartition], timestamp: int, *, isolation_level: int = READ_UNCOMMITTED
) -> PartitionOffsets:
    """Each partition's offset for ``timestamp`` (EARLIEST_TIMESTAMP / LATEST_TIMESTAMP or a time).

    With read_committed, "latest" is the last stable offset, so a batch never
    ends inside an open transaction. A time later than every record gives the
    partition's latest offset (where Spark's "latest" strategy for
    startingTimestamp would start).
    """
    wanted = list(partitions)
    if not wanted:
        return {}
    found = client.list_offsets(dict.fromkeys(wanted, timestamp), isolation_level=isolation_level)
    result = {tp: found[tp].offset for tp in wanted}
    missing = [tp for tp, offset in result.items() if offset < 0]
    if missing:
        latest = client.list_offsets(dict.fromkeys(missing, LATEST_TIMESTAMP), isolation_level=isolation_level)
        result.update({tp: latest[tp].offset for tp in missing})
    return result


def resolve_spec(
    client: KafkaClient,
    spec: OffsetSpec,
    partitions: Iterable[TopicPartition],
    *,
    isolation_level: int = READ_UNCOMMITTED,
    unlisted: int = EARLIEST,
) -> PartitionOffsets:
    """Concrete offsets for ``partitions`` under ``spec``.

    Partitions a JSON spec does not name get ``unlisted`` (earliest or latest);
    -2 / -1 in the JSON are looked up.
    """
    wanted = sorted(partitions)
    if spec == "earliest":
        return list_offsets(client, wanted, EARLIEST_TIMESTAMP, isolation_level=isolation_level)
    if spec == "latest":
        return list_offsets(client, wanted, LATEST_TIMESTAMP, isolation_level=isolation_level)
    assert isinstance(spec, dict)
    chosen = {tp: spec.get(tp, unlisted) for tp in wanted}
    result = {tp: o for tp, o in chosen.items() if o >= 0}
    result.update(list_offsets(client, [tp for tp, o in chosen.items() if o == EARLIEST], EARLIEST_TIMESTAMP,
                               isolation_level=isolation_level))
    result.update(list_offsets(client, [tp for tp, o in chosen.items() if o == LATEST], LATEST_TIMESTAMP,
                               isolation_level=isolation_level))
    bad = [tp for tp, o in chosen.items() if o < EARLIEST]
    if bad:
        raise ValueError(f"offsets below -2 are not valid: {bad}")
    return result
