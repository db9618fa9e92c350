"""Fixtures for the Spark tests: one local[2] SparkSession and one real broker per session.

Starting a JVM costs seconds, so every Spark test shares one session (with the
``pafka`` source registered); each test uses its own topics and checkpoint
directories so they do not see each other's data.
"""

from __future__ import annotations

import os
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyspark  # the spark extra: pip install -e '.[test,spark]'
import pytest

from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.plugin import BrokerFactory


@pytest.fixture(scope="session")
def spark_broker(pafka_session_broker_factory: BrokerFactory) -> BrokerProcess:
    """One broker for all Spark tests (each test creates its own topics)."""
    return pafka_session_broker_factory()


@pytest.fixture(scope="session")
def spark() -> Iterator[pyspark.sql.SparkSession]:
    from pyspark.sql import SparkSession

    import spark_jobs

    # Python workers must run this interpreter (the venv with pafka installed).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # Loopback only: the driver, its block manager and the Python workers.
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    local_dir = tempfile.mkdtemp(prefix="pafka-spark-")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("pafka-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.local.dir", local_dir)
        .config("spark.driver.memory", "1g")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    spark_jobs.register(session)
    try:
        yield session
    finally:
        session.stop()
        import shutil

        shutil.rmtree(local_dir, ignore_errors=True)


@pytest.fixture
def topic_name() -> str:
    return f"spark-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def work_dir(tmp_path: Path) -> Path:
    """A per-test directory for checkpoints and sink output (pytest removes old ones)."""
    return tmp_path

