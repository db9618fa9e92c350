"""Binding log dirs to one cluster and one broker id before anything is loaded from them.

Kafka's KafkaServer reads ``meta.properties`` in every log dir at start-up: a
dir written by a broker of another cluster, or under another broker id, makes
the broker refuse to start (InconsistentClusterIdException /
InconsistentBrokerIdException), so a mis-pointed ``zookeeper.connect`` or
``log.dirs`` never mixes two clusters' data. A broker started with
``broker.id=-1`` takes the id its dirs already carry before asking ZooKeeper
for a new one. Dirs without the file get it (version 0, ``broker.id``,
``cluster.id``) once the ids are known.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from storage.checkpoints import write_atomically
from storage.log_manager import META_PROPERTIES, read_properties


class InconsistentClusterIdError(Exception):
    """Kafka's InconsistentClusterIdException."""


class InconsistentBrokerIdError(Exception):
    """Kafka's InconsistentBrokerIdException."""


@dataclass(frozen=True)
class StoredMetaProperties:
    """What the log dirs agree on (None: no dir says)."""

    cluster_id: str | None
    broker_id: int | None


def read_stored(log_dirs: list[str]) -> StoredMetaProperties:
    """The cluster id and broker id recorded in the log dirs; the dirs must agree."""
    cluster_ids: dict[str, Path] = {}
    broker_ids: dict[int, Path] = {}
    for dir_ in log_dirs:
        path = Path(dir_) / META_PROPERTIES
        if not path.exists():
            continue
        props = read_properties(path)
        if props.get("cluster.id"):
            cluster_ids.setdefault(props["cluster.id"], path)
        stored = props.get("broker.id", props.get("node.id"))
        if stored is not None:
            broker_ids.setdefault(int(stored), path)
    if len(cluster_ids) > 1:
        raise InconsistentClusterIdError(
            f"Log dirs disagree on the cluster id: {', '.join(f'{c} in {p}' for c, p in cluster_ids.items())}")
    if len(broker_ids) > 1:
        raise InconsistentBrokerIdError(
            f"Failed to match broker.id across log.dirs: {', '.join(f'{b} in {p}' for b, p in broker_ids.items())}")
    return StoredMetaProperties(next(iter(cluster_ids), None), next(iter(broker_ids), None))


def check_cluster_id(stored: StoredMetaProperties, cluster_id: str) -> None:
    """Kafka's message for a broker pointed at another cluster's data."""
    if stored.cluster_id is not None and stored.cluster_id != cluster_id:
        raise InconsistentClusterIdError(
            f"The Cluster ID {cluster_id} doesn't match stored clusterId Some({stored.cluster_id}) in "
            "meta.properties. The broker is trying to join the wrong cluster. Configured zookeeper.connect "
            "may be wrong.")


def resolve_broker_id(configured: int, stored: StoredMetaProperties) -> int | None:
    """Kafka's getOrGenerateBrokerId, minus the generation: the id to use, or None to generate one."""
    if configured >= 0 and stored.broker_id is not None and stored.broker_id != configured:
        raise InconsistentBrokerIdError(
            f"Configured broker.id {configured} doesn't match stored broker.id Some({stored.broker_id}) in "
            "meta.properties. If you moved your data, make sure your configured broker.id matches. If you intend "
            "to create a new broker, you should remove all data in your data directories (log.dirs).")
    if stored.broker_id is not None:
        return stored.broker_id
    return configured if configured >= 0 else None


def write_missing(log_dirs: list[str], broker_id: int, cluster_id: str) -> None:
    """Give every dir that has none its meta.properties (the dirs are created if missing)."""
    for dir_ in log_dirs:
        path = Path(dir_) / META_PROPERTIES
        if path.exists():
            props = read_properties(path)
            if props.get("cluster.id"):
                continue
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, f"#\nversion=0\nbroker.id={broker_id}\ncluster.id={cluster_id}\n")
