"""meta.properties binds a cluster member's log dirs to one cluster and one broker id (Kafka's checks)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from broker.cluster.meta_properties_check import (
    InconsistentBrokerIdError,
    InconsistentClusterIdError,
    StoredMetaProperties,
    check_cluster_id,
    read_stored,
    resolve_broker_id,
    write_missing,
)


def _write(dir_: Path, text: str) -> None:
    dir_.mkdir(parents=True, exist_ok=True)
    (dir_ / "meta.properties").write_text(text)


def test_fresh_dirs_say_nothing_and_get_the_ids(tmp_path: Path) -> None:
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    assert read_stored(dirs) == StoredMetaProperties(None, None)
    write_missing(dirs, 1001, "abcCluster")
    assert read_stored(dirs) == StoredMetaProperties("abcCluster", 1001)
    lines = (tmp_path / "b" / "meta.properties").read_text().splitlines()
    assert lines[1:] == ["version=0", "broker.id=1001", "cluster.id=abcCluster"]


def test_another_clusters_data_is_refused_with_kafkas_message(tmp_path: Path) -> None:
    _write(tmp_path / "a", "version=0\nbroker.id=1\ncluster.id=oldCluster\n")
    stored = read_stored([str(tmp_path / "a")])
    check_cluster_id(stored, "oldCluster")  # the same cluster: fine
    with pytest.raises(InconsistentClusterIdError, match=re.escape(
            "The Cluster ID newCluster doesn't match stored clusterId Some(oldCluster) in meta.properties. "
            "The broker is trying to join the wrong cluster")):
        check_cluster_id(stored, "newCluster")


def test_dirs_that_disagree_are_refused(tmp_path: Path) -> None:
    _write(tmp_path / "a", "version=0\nbroker.id=1\ncluster.id=one\n")
    _write(tmp_path / "b", "version=0\nbroker.id=1\ncluster.id=two\n")
    with pytest.raises(InconsistentClusterIdError):
        read_stored([str(tmp_path / "a"), str(tmp_path / "b")])
    _write(tmp_path / "b", "version=0\nbroker.id=2\ncluster.id=one\n")
    with pytest.raises(InconsistentBrokerIdError):
        read_stored([str(tmp_path / "a"), str(tmp_path / "b")])


def test_broker_id_resolution_follows_get_or_generate_broker_id() -> None:
    nothing = StoredMetaProperties(None, None)
    assert resolve_broker_id(3, nothing) == 3
    assert resolve_broker_id(-1, nothing) is None  # generate one from /brokers/seqid
    assert resolve_broker_id(-1, StoredMetaProperties("c", 1002)) == 1002  # a restart keeps its generated id
    assert resolve_broker_id(1002, StoredMetaProperties("c", 1002)) == 1002
    with pytest.raises(InconsistentBrokerIdError, match=re.escape(
            "Configured broker.id 4 doesn't match stored broker.id Some(3) in meta.properties")):
        resolve_broker_id(4, StoredMetaProperties("c", 3))


def test_a_single_broker_file_without_cluster_id_gets_one(tmp_path: Path) -> None:
    _write(tmp_path / "a", "#\nversion=0\nbroker.id=0\n")
    write_missing([str(tmp_path / "a")], 0, "joined")
    assert read_stored([str(tmp_path / "a")]) == StoredMetaProperties("joined", 0)
