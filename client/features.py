"""The cluster's feature flags as Kafka's Admin.describeFeatures reports them (KIP-584).

Kafka's admin client has no request of its own for this: it sends ApiVersions
to one broker and reads the answer's tagged feature fields, an epoch below 0
meaning the finalized levels are unknown.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.messages.api_versions import ApiVersionsResponse

__all__ = ["FeatureMetadata", "feature_metadata"]


@dataclass(frozen=True, slots=True)
class FeatureMetadata:
    """Kafka's FeatureMetadata: finalized (min, max) levels, their epoch, and supported (min, max) ranges."""

    finalized_features: dict[str, tuple[int, int]]
    #: None when the broker does not know the finalized levels (an epoch below 0 on the wire).
    finalized_features_epoch: int | None
    supported_features: dict[str, tuple[int, int]]


def feature_metadata(response: ApiVersionsResponse) -> FeatureMetadata:
    epoch = response.finalized_features_epoch
    return FeatureMetadata(
        {f.name: (f.min_version_level, f.max_version_level) for f in response.finalized_features},
        epoch if epoch >= 0 else None,
        {f.name: (f.min_version, f.max_version) for f in response.supported_features})
