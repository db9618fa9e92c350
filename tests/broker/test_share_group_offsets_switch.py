"""DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92) behind the share
switch: advertised (at Kafka 4.2's versions) only when group.coordinator.rebalance.protocols lists share, as it
does by default."""

from __future__ import annotations

from broker.handlers.api_versions import advertised_versions

KEYS = {90, 91, 92}


def test_the_offsets_apis_are_advertised_only_when_share_groups_are_on() -> None:
    assert KEYS <= {key for key, _, _ in advertised_versions()}
    assert not KEYS & {key for key, _, _ in advertised_versions(rebalance_protocols=("classic", "consumer"))}
    on = {key: (low, high) for key, low, high in advertised_versions(rebalance_protocols=("classic", "share"))}
    assert (on[90], on[91], on[92]) == ((0, 1), (0, 0), (0, 0))
