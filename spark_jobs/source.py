"""The ``pafka`` PySpark data source: its schema, and the readers and writers it hands out.

The options are parsed by ``spark_jobs.source_options`` (Spark's Kafka source
option names) and given to the batch reader (``spark_jobs.reader``) or the
streaming reader (``spark_jobs.stream_reader``).

The writing side (the sink) lives in ``spark_jobs/sink.py``; this class only
forwards ``writer()`` / ``streamWriter()`` to it, so the reading and writing
halves stay separate modules.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from spark_jobs.reader import PafkaBatchReader
from spark_jobs.source_options import SourceOptions, bool_option, lower_keys
from spark_jobs.stream_reader import PafkaStreamReader

SHORT_NAME = "pafka"

HEADERS_SPARK_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def kafka_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema (``headers`` only with includeHeaders=true)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_SPARK_TYPE))
    return StructType(fields)


class PafkaDataSource(DataSource):
    """``spark.readStream.format("pafka")`` / ``spark.read.format("pafka")`` (and the sink's ``write``)."""

    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def schema(self) -> StructType:
        include = bool_option(lower_keys(self.options).get("includeheaders"), False, "includeHeaders")
        return kafka_schema(include)

    def reader(self, schema: StructType) -> DataSourceReader:
        return PafkaBatchReader(SourceOptions.parse(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return PafkaStreamReader(SourceOptions.parse(self.options, streaming=True))

    # The sink (spark_jobs/sink.py) is imported only when a write is planned.
    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from spark_jobs.sink import make_writer

        return make_writer(schema, self.options, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from spark_jobs.sink import make_stream_writer

        return make_stream_writer(schema, self.options)
