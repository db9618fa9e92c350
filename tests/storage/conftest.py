"""Fixtures for the storage tests (the file check is opt-in per module)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.storage.helpers import check_log_dir_with_kafka_python


@pytest.fixture
def checked_tmp_path(tmp_path: Path):
    """A temp dir whose ``.log`` files are all checked with kafka-python at teardown.

    Every batch must parse and pass its CRC with kafka-python's parser and
    every index entry must point at a batch start. Tests that leave files
    corrupt on purpose use plain ``tmp_path`` instead.
    """
    yield tmp_path
    dirs = {p.parent for p in tmp_path.rglob("*.log")}
    for partition_dir in sorted(dirs):
        check_log_dir_with_kafka_python(partition_dir)


@pytest.fixture
def index_pwrites(monkeypatch) -> list[int]:
    """File positions of the index entries written with pwrite (not through the mapping)."""
    import os

    import storage.abstract_index as abstract_index

    written: list[int] = []
    real = os.pwrite
    monkeypatch.setattr(abstract_index.os, "pwrite", lambda fd, data, pos: written.append(pos) or real(fd, data, pos))
    return written
