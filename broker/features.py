"""The feature flags ApiVersions reports (KIP-584): what this broker supports and what is finalized.

Kafka 4 reports ``metadata.version``, ``kraft.version``, ``transaction.version``,
``group.version`` and ``share.version``, finalized in its KRaft metadata log and changed
with UpdateFeatures. pafka reports only ``group.version`` and ``share.version``: it has no metadata log,
so ``metadata.version`` and ``kraft.version`` would name semantics it does not
have, and no client needs them to use the consumer rebalance protocol (the Java
consumer and librdkafka look for the ConsumerGroupHeartbeat API itself; Kafka's
Admin.describeFeatures and ``kafka-features.sh describe`` list whatever is
reported). pafka does not serve UpdateFeatures: a level is finalized by the
broker's configuration, ``group.version`` at 1 exactly when
``group.coordinator.rebalance.protocols`` lists ``consumer`` and ``share.version`` at 1
exactly when it lists ``share``, the rules Kafka's KafkaApis applies before it serves
ConsumerGroupHeartbeat and the share group APIs.

The finalized-features epoch is the sum of the finalized levels. Kafka's epoch
is the metadata log offset the levels were read at; what clients do with it is
compare: the Java client keeps the finalized features of the broker with the
highest epoch. The sum gives the same epoch on every broker configured alike,
never changes while a broker runs (the configuration is static), and grows
when a feature is turned on, so during a rolling change a client keeps the view
of the brokers already changed, as it would keep Kafka's newer metadata.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from protocol.messages.api_versions import ApiVersionsResponse, FinalizedFeatureKey, SupportedFeatureKey

GROUP_VERSION = "group.version"
SHARE_VERSION = "share.version"

#: The levels of each feature this broker's code can run at: group.version 1 is the consumer rebalance protocol,
#: share.version 1 the share groups of KIP-932.
SUPPORTED_FEATURES: Mapping[str, tuple[int, int]] = {GROUP_VERSION: (0, 1), SHARE_VERSION: (0, 1)}

#: The first ApiVersions version that may report a supported feature whose lowest level is 0 (KAFKA-17492:
#: older clients cannot read such a range, so Kafka leaves those features out of a v0-v3 answer).
LEVEL_0_FEATURES_FROM_VERSION = 4


@dataclass(frozen=True, slots=True)
class FinalizedFeatures:
    """The cluster-wide feature levels in force, and the epoch they are reported with."""

    levels: Mapping[str, int]
    epoch: int


def finalized_features(rebalance_protocols: Sequence[str]) -> FinalizedFeatures:
    """The levels this broker's configuration finalizes (see the module's note on the epoch)."""
    levels = {GROUP_VERSION: 1 if "consumer" in rebalance_protocols else 0,
              SHARE_VERSION: 1 if "share" in rebalance_protocols else 0}
    return FinalizedFeatures(levels, sum(levels.values()))


def supported_feature_keys(api_version: int) -> list[SupportedFeatureKey]:
    return [SupportedFeatureKey(name=name, min_version=low, max_version=high)
            for name, (low, high) in sorted(SUPPORTED_FEATURES.items())
            if low > 0 or api_version >= LEVEL_0_FEATURES_FROM_VERSION]


def finalized_feature_keys(finalized: FinalizedFeatures) -> list[FinalizedFeatureKey]:
    # A feature at level 0 is as good as absent, and Kafka reports it so; a finalized level is one level,
    # sent as both the minimum and the maximum.
    return [FinalizedFeatureKey(name=name, min_version_level=level, max_version_level=level)
            for name, level in sorted(finalized.levels.items()) if level != 0]


def report_features(response: ApiVersionsResponse, api_version: int, rebalance_protocols: Sequence[str]) -> None:
    """Fill the feature fields of an ApiVersions answer at ``api_version`` (v3+ carries them, tagged)."""
    finalized = finalized_features(rebalance_protocols)
    response.supported_features = supported_feature_keys(api_version)
    response.finalized_features = finalized_feature_keys(finalized)
    response.finalized_features_epoch = finalized.epoch
