"""meta.properties binds each log directory to one cluster and one broker, as Kafka's does."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.meta_properties import (
    FILE_NAME,
    InconsistentBrokerIdError,
    InconsistentBrokerMetadataError,
    InconsistentClusterIdError,
    MetaProperties,
    MetaPropertiesError,
    check_meta_properties,
    format_properties,
    load_meta_properties,
    parse_properties,
    read_meta_properties,
    write_meta_properties,
)

#: What a Kafka 3.9 broker in ZooKeeper mode leaves in a log directory.
KAFKA_FILE = "#\n#Tue Nov 25 10:00:00 UTC 2026\ncluster.id=6l6rn0dUTkS8fQ-ZjQDbsQ\nversion=0\nbroker.id=2\n"


def test_reads_kafkas_file(tmp_path: Path) -> None:
    (tmp_path / FILE_NAME).write_text(KAFKA_FILE)
    assert read_meta_properties(tmp_path) == MetaProperties("6l6rn0dUTkS8fQ-ZjQDbsQ", 2, 0)
    assert read_meta_properties(tmp_path / "missing") is None


def test_writes_kafkas_format_atomically(tmp_path: Path) -> None:
    write_meta_properties(tmp_path / "new", MetaProperties("abc", 7))
    text = (tmp_path / "new" / FILE_NAME).read_text()
    lines = text.splitlines()
    assert lines[0] == "#" and lines[1].startswith("#") and lines[1].endswith(" UTC " + lines[1][-4:])
    assert lines[2:] == ["cluster.id=abc", "version=0", "broker.id=7"]
    assert not (tmp_path / "new" / (FILE_NAME + ".tmp")).exists()
    assert read_meta_properties(tmp_path / "new") == MetaProperties("abc", 7)


def test_properties_escaping_round_trips() -> None:
    props = {"a key": "x=y:z #!", "path": "C:\\data", "lead": " spaced"}
    assert parse_properties(format_properties(props)) == props
    assert parse_properties("k : v\n! comment\nother=\\u0041b\n") == {"k": "v", "other": "Ab"}


def test_kraft_file_is_read_as_version_1(tmp_path: Path) -> None:
    (tmp_path / FILE_NAME).write_text("cluster.id=c\nnode.id=3\nversion=1\ndirectory.id=d\n")
    assert read_meta_properties(tmp_path) == MetaProperties("c", 3, 1, "d")


@pytest.mark.parametrize("content", ["cluster.id=c\nbroker.id=1\n", "version=9\n", "version=0\nbroker.id=x\n"])
def test_bad_files_are_refused(tmp_path: Path, content: str) -> None:
    (tmp_path / FILE_NAME).write_text(content)
    with pytest.raises(MetaPropertiesError):
        read_meta_properties(tmp_path)


def test_new_directories_get_the_file(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    assert check_meta_properties(dirs, "cluster-1", 4) == MetaProperties("cluster-1", 4)
    assert all(read_meta_properties(d) == MetaProperties("cluster-1", 4) for d in dirs)
    # Restarting with the same ids is fine and leaves the files as they are.
    before = (dirs[0] / FILE_NAME).read_text()
    assert check_meta_properties(dirs, "cluster-1", 4) == MetaProperties("cluster-1", 4)
    assert (dirs[0] / FILE_NAME).read_text() == before


def test_another_clusters_data_is_refused(tmp_path: Path) -> None:
    write_meta_properties(tmp_path, MetaProperties("old-cluster", 1))
    with pytest.raises(InconsistentClusterIdError) as info:
        check_meta_properties([tmp_path], "new-cluster", 1)
    assert str(info.value).startswith(
        "The Cluster ID new-cluster doesn't match stored clusterId Some(old-cluster) in meta.properties. "
        "The broker is trying to join the wrong cluster.")
    assert read_meta_properties(tmp_path) == MetaProperties("old-cluster", 1)  # untouched


def test_another_brokers_data_is_refused(tmp_path: Path) -> None:
    write_meta_properties(tmp_path, MetaProperties("c", 1))
    with pytest.raises(InconsistentBrokerIdError, match=r"Configured broker.id 2 doesn't match stored broker.id Some\(1\)"):
        check_meta_properties([tmp_path], "c", 2)


def test_unconfigured_broker_id_takes_the_stored_one(tmp_path: Path) -> None:
    write_meta_properties(tmp_path / "a", MetaProperties("c", 1005))
    assert check_meta_properties([tmp_path / "a", tmp_path / "b"], "c", -1).broker_id == 1005
    assert read_meta_properties(tmp_path / "b") == MetaProperties("c", 1005)
    # Nothing stored and nothing configured: the caller generates an id; nothing is written yet.
    assert check_meta_properties([tmp_path / "fresh"], "c", -1) == MetaProperties("c", None)
    assert read_meta_properties(tmp_path / "fresh") is None


def test_directories_that_disagree_are_refused(tmp_path: Path) -> None:
    write_meta_properties(tmp_path / "a", MetaProperties("c", 1))
    write_meta_properties(tmp_path / "b", MetaProperties("c", 2))
    with pytest.raises(InconsistentBrokerMetadataError, match=r"not consistent across log\.dirs"):
        load_meta_properties([tmp_path / "a", tmp_path / "b"])
