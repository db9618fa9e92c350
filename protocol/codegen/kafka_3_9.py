"""Kafka 3.9's valid request versions, for the APIs whose range Kafka 4 cut (KIP-896).

Kafka 4.0 removed old versions by raising ``validVersions`` in its JSON
schemas; it kept every field's version markers (``"versions": "0+"``,
``MaxNumOffsets`` at ``"0"``, OffsetCommit's ``CommitTimestamp`` at ``"1"``,
DescribeConfigs' ``IsDefault`` at ``"0"``...). So the 4.x schemas still
describe every version 3.9 accepted, and lowering ``validVersions`` back to
3.9's floor generates the old codecs from the same schema. Each generated
old version is checked byte for byte against kafka-python's hand-written
structs for those versions (``tests/protocol/test_kafka_3_9_versions.py``).

The numbers are Kafka 3.9's ``validVersions`` (a ZooKeeper-mode 3.9 broker's
ApiVersions answer lists the same ranges); only the low end matters here,
since every 4.x high end is at least 3.9's.
"""

from __future__ import annotations

#: API key -> (low, high) of Kafka 3.9's validVersions, for the APIs where
#: Kafka 4.x's low end is higher. Four more had lower 3.9 floors and stay at
#: 4.x's until pafka serves them (WriteTxnMarkers v0, AlterReplicaLogDirs v0,
#: the four delegation-token APIs' v0): no independent encoder of those old
#: versions is at hand to check the generated codecs against.
KAFKA_3_9_VALID_VERSIONS: dict[int, tuple[int, int]] = {
    0: (0, 11),  # Produce
    1: (0, 17),  # Fetch
    2: (0, 9),  # ListOffsets
    8: (0, 9),  # OffsetCommit
    9: (0, 9),  # OffsetFetch
    11: (0, 9),  # JoinGroup
    19: (0, 7),  # CreateTopics
    20: (0, 6),  # DeleteTopics
    23: (0, 4),  # OffsetForLeaderEpoch
    29: (0, 3),  # DescribeAcls
    30: (0, 3),  # CreateAcls
    31: (0, 3),  # DeleteAcls
    32: (0, 4),  # DescribeConfigs
    35: (0, 4),  # DescribeLogDirs
}


def union_low(api_key: int, low_4x: int) -> int:
    """The lowest version of the union of Kafka 3.9's and 4.x's ranges."""
    legacy = KAFKA_3_9_VALID_VERSIONS.get(api_key)
    return low_4x if legacy is None else min(low_4x, legacy[0])
