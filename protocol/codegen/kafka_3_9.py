"""Kafka 3.9's request versions, for the APIs whose range Kafka 4 cut (KIP-896).

Kafka 4.0 removed old versions by raising ``validVersions`` in its JSON
schemas; it kept every field's version markers (``"versions": "0+"``,
``MaxNumOffsets`` at ``"0"``, OffsetCommit's ``CommitTimestamp`` at ``"1"``,
DescribeConfigs' ``IsDefault`` at ``"0"``...). So the 4.x schemas still
describe every version 3.9 accepted, and lowering ``validVersions`` back to
3.9's floor generates the old codecs from the same schema. Each generated
old version is checked byte for byte against kafka-python's hand-written
structs for those versions (``tests/protocol/test_kafka_3_9_versions.py``).
"""

from __future__ import annotations

#: API key -> (low, high): the client APIs' ranges as a Kafka 3.9 broker lists
#: them in its ApiVersions answer (its schemas' validVersions). The
#: inter-broker APIs (LeaderAndIsr, StopReplica, UpdateMetadata,
#: ControlledShutdown, Envelope...) are not listed: they are not client APIs.
KAFKA_3_9_API_VERSIONS: dict[int, tuple[int, int]] = {
    0: (0, 11),  # Produce
    1: (0, 17),  # Fetch
    2: (0, 9),  # ListOffsets
    3: (0, 12),  # Metadata
    8: (0, 9),  # OffsetCommit
    9: (0, 9),  # OffsetFetch
    10: (0, 6),  # FindCoordinator
    11: (0, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 5),  # DescribeGroups
    16: (0, 5),  # ListGroups
    17: (0, 1),  # SaslHandshake
    18: (0, 4),  # ApiVersions
    19: (0, 7),  # CreateTopics
    20: (0, 6),  # DeleteTopics
    21: (0, 2),  # DeleteRecords
    22: (0, 5),  # InitProducerId
    23: (0, 4),  # OffsetForLeaderEpoch
    24: (0, 5),  # AddPartitionsToTxn
    25: (0, 4),  # AddOffsetsToTxn
    26: (0, 4),  # EndTxn
    27: (0, 1),  # WriteTxnMarkers
    28: (0, 4),  # TxnOffsetCommit
    29: (0, 3),  # DescribeAcls
    30: (0, 3),  # CreateAcls
    31: (0, 3),  # DeleteAcls
    32: (0, 4),  # DescribeConfigs
    33: (0, 2),  # AlterConfigs
    34: (0, 2),  # AlterReplicaLogDirs
    35: (0, 4),  # DescribeLogDirs
    36: (0, 2),  # SaslAuthenticate
    37: (0, 3),  # CreatePartitions
    38: (0, 3),  # CreateDelegationToken
    39: (0, 2),  # RenewDelegationToken
    40: (0, 2),  # ExpireDelegationToken
    41: (0, 3),  # DescribeDelegationToken
    42: (0, 2),  # DeleteGroups
    43: (0, 2),  # ElectLeaders
    44: (0, 1),  # IncrementalAlterConfigs
    45: (0, 0),  # AlterPartitionReassignments
    46: (0, 0),  # ListPartitionReassignments
    47: (0, 0),  # OffsetDelete
    48: (0, 1),  # DescribeClientQuotas
    49: (0, 1),  # AlterClientQuotas
    50: (0, 0),  # DescribeUserScramCredentials
    51: (0, 0),  # AlterUserScramCredentials
    57: (0, 1),  # UpdateFeatures
    60: (0, 1),  # DescribeCluster
    61: (0, 0),  # DescribeProducers
    65: (0, 0),  # DescribeTransactions
    66: (0, 1),  # ListTransactions
    68: (0, 0),  # ConsumerGroupHeartbeat
    69: (0, 0),  # ConsumerGroupDescribe
}

#: APIs whose 3.9 floor is lower than 4.x's but whose codecs stay at 4.x's floor
#: until pafka serves them: no independent encoder of those old versions is at
#: hand to check the generated codecs against.
KEPT_AT_KAFKA_4_FLOOR = frozenset({
    27,  # WriteTxnMarkers v0
    38, 39, 40, 41,  # the delegation-token APIs' v0
})


def union_low(api_key: int, low_4x: int) -> int:
    """The lowest version generated: the union of Kafka 3.9's and 4.x's ranges."""
    legacy = KAFKA_3_9_API_VERSIONS.get(api_key)
    if legacy is None or api_key in KEPT_AT_KAFKA_4_FLOOR:
        return low_4x
    return min(low_4x, legacy[0])
