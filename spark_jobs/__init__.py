"""PySpark data source and jobs for pafka (needs the ``spark`` extra: pyspark, pyarrow).

``register(spark)`` makes ``format("pafka")`` available on a session. Nothing
outside this package imports pyspark, so the broker runs without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["register"]


def register(spark: SparkSession) -> None:
    """Register the ``pafka`` data source (reads, and writes through ``spark_jobs.sink``) on ``spark``."""
    from spark_jobs.source import PafkaDataSource

    spark.dataSource.register(PafkaDataSource)
