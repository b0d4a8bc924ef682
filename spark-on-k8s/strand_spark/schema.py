"""The rows the ``strand`` data source reads, as Spark's Kafka source has them, and
their Arrow form: records are handed to Spark as Arrow record batches, built column by
column, never row by row."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

    from strand import ConsumerRecord

READ_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp",
                "timestampType")
READ_SCHEMA = ("key binary, value binary, topic string, partition int, offset long, "
               "timestamp timestamp, timestampType int")
HEADERS_SCHEMA = "headers array<struct<key: string, value: binary>>"
# offsetRangesOnly: a row per planned offset range instead of its records, for jobs
# that read the records themselves where they process them (the mirror's copy tasks).
RANGES_SCHEMA = "topic string, partition int, startOffset long, endOffset long"


def read_schema(include_headers: bool, ranges_only: bool = False) -> str:
    """The DDL of a read's rows (Spark's Kafka source's, ``headers`` last)."""
    if ranges_only:
        return RANGES_SCHEMA
    return f"{READ_SCHEMA}, {HEADERS_SCHEMA}" if include_headers else READ_SCHEMA


def arrow_schema(include_headers: bool) -> pa.Schema:
    import pyarrow as pa

    fields = [pa.field("key", pa.binary()), pa.field("value", pa.binary()),
              pa.field("topic", pa.string()), pa.field("partition", pa.int32()),
              pa.field("offset", pa.int64()),
              pa.field("timestamp", pa.timestamp("us", tz="UTC")),
              pa.field("timestampType", pa.int32())]
    if include_headers:
        fields.append(pa.field("headers", pa.list_(pa.struct(
            [pa.field("key", pa.string()), pa.field("value", pa.binary())]))))
    return pa.schema(fields)


class ArrowRows:
    """Collects records column by column; ``take()`` hands them out as one batch."""

    def __init__(self, include_headers: bool) -> None:
        self.include_headers = include_headers
        self.schema = arrow_schema(include_headers)
        self._clear()

    def _clear(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.types: list[int] = []
        self.headers: list[list[dict[str, object]]] = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, records: Sequence[ConsumerRecord]) -> None:
        self.keys.extend(r.key for r in records)
        self.values.extend(r.value for r in records)
        self.offsets.extend(r.offset for r in records)
        self.timestamps.extend(r.timestamp * 1000 for r in records)  # ms -> µs
        self.types.extend(int(r.timestamp_type) for r in records)
        if self.include_headers:
            self.headers.extend([{"key": k, "value": v} for k, v in r.headers]
                                for r in records)

    def take(self, topic: str, partition: int) -> pa.RecordBatch:
        import pyarrow as pa

        n = len(self)
        columns = [pa.array(self.keys, pa.binary()), pa.array(self.values, pa.binary()),
                   pa.repeat(pa.scalar(topic, pa.string()), n).cast(pa.string()),
                   pa.repeat(pa.scalar(partition, pa.int32()), n),
                   pa.array(self.offsets, pa.int64()),
                   pa.array(self.timestamps, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
                   pa.array(self.types, pa.int32())]
        if self.include_headers:
            columns.append(pa.array(self.headers, self.schema.field("headers").type))
        batch = pa.RecordBatch.from_arrays(columns, schema=self.schema)
        self._clear()
        return batch


def range_row(topic: str, partition: int, start: int, end: int) -> pa.RecordBatch:
    """offsetRangesOnly's one row for a range."""
    import pyarrow as pa

    return pa.RecordBatch.from_pydict(
        {"topic": [topic], "partition": [partition], "startOffset": [start],
         "endOffset": [end]},
        schema=pa.schema([pa.field("topic", pa.string()), pa.field("partition", pa.int32()),
                          pa.field("startOffset", pa.int64()),
                          pa.field("endOffset", pa.int64())]))
