"""The ``strand`` data source: ``spark.read``, ``readStream``, ``write`` and
``writeStream`` with ``format("strand")`` (register it with ``strand_spark.register``).
Options are parsed here, on the driver, so a bad one fails the query before any task
runs (strand_spark.options)."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from strand_spark.options import canonical, read_options, write_options
from strand_spark.schema import read_schema


class StrandDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "strand"

    def schema(self) -> str:
        options = canonical(self.options)
        def flag(name: str) -> bool:
            return options.get(name, "false").strip().lower() == "true"

        return read_schema(flag("includeHeaders"), flag("offsetRangesOnly"))

    def reader(self, schema: StructType) -> DataSourceReader:
        from strand_spark.readers import StrandBatchReader

        return StrandBatchReader(read_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from strand_spark.readers import StrandStreamReader

        return StrandStreamReader(read_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from strand_spark.writers import StrandBatchWriter

        return StrandBatchWriter(write_options(self.options, streaming=False), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from strand_spark.writers import StrandStreamWriter

        return StrandStreamWriter(write_options(self.options, streaming=True), schema)
