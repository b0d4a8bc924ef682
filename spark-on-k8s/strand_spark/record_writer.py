"""Writes a task's rows to Strand in one transaction, and prepares it (executor side).

The rows come as Arrow batches with Spark's Kafka sink's columns: ``value``
(required, binary or string), ``key`` (binary or string), ``topic`` (string; or the
``topic`` option), ``partition`` (int; else the producer's partitioner), ``headers``
(``array<struct<key: string, value: binary>>``), and, beyond Kafka's sink, ``timestamp``
(timestamp or long ms; else the time of the write), which the mirror needs to keep
the source's timestamps. Other columns are ignored, as Spark's Kafka sink does.

The transaction is *prepared*, not committed (``Producer.prepare_transaction()``): the
driver decides, once every task has written (strand_spark.writers).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from strand import PreparedTransaction, Producer
from strand_spark.options import OptionError, WriteOptions

if TYPE_CHECKING:
    import pyarrow as pa

BYTES_OR_TEXT = (BinaryType, StringType)
COLUMNS: dict[str, tuple[type[DataType], ...]] = {
    "value": BYTES_OR_TEXT, "key": BYTES_OR_TEXT, "topic": (StringType,),
    "partition": (IntegerType, LongType), "headers": (ArrayType,),
    "timestamp": (TimestampType, TimestampNTZType, LongType)}


@dataclass
class StagedWrite(WriterCommitMessage):
    """What a task wrote: its prepared transaction (None when it wrote nothing), how
    many records, and the transactional-id slot it used (streaming sinks)."""

    prepared: PreparedTransaction | None
    records: int
    slot: int = 0


def check_columns(schema: StructType, options: WriteOptions) -> None:
    """Refuse, before any task runs, a DataFrame the sink cannot write."""
    fields = {f.name: f.dataType for f in schema.fields}
    if "value" not in fields:
        raise OptionError("a DataFrame written to strand needs a 'value' column (binary "
                          f"or string); it has {sorted(fields)}")
    if "topic" not in fields and options.topic is None:
        raise OptionError("say where to write: a 'topic' column or the option topic")
    for name, allowed in COLUMNS.items():
        if name in fields and not isinstance(fields[name], allowed):
            raise OptionError(f"column {name!r} is {fields[name].simpleString()}; allowed: "
                              + ", ".join(a.typeName() for a in allowed))
    headers = fields.get("headers")
    if isinstance(headers, ArrayType):
        element = headers.elementType
        if not (isinstance(element, StructType)
                and [(f.name, type(f.dataType)) for f in element.fields]
                == [("key", StringType), ("value", BinaryType)]):
            raise OptionError("column 'headers' must be array<struct<key: string, value: "
                              f"binary>>, not {headers.simpleString()}")


def _bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return bytes(value)


def _millis(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return int(value.timestamp() * 1000)
    return int(value)


def send_rows(producer: Producer, batches: Iterator[pa.RecordBatch],
              default_topic: str | None) -> int:
    """Send every row; returns how many. The first failed send is raised by the
    prepare that follows."""
    sent = 0
    for batch in batches:
        columns = {name: batch.column(name).to_pylist() for name in COLUMNS
                   if name in batch.schema.names}
        n = batch.num_rows
        values = columns["value"]
        keys = columns.get("key", [None] * n)
        topics = columns.get("topic", [default_topic] * n)
        partitions = columns.get("partition", [None] * n)
        headers = columns.get("headers", [None] * n)
        stamps = columns.get("timestamp", [None] * n)
        for i in range(n):
            topic = topics[i] or default_topic
            if not topic:
                raise ValueError(f"row {sent + i} has no topic (a null 'topic' and no "
                                 "topic option)")
            row_headers = [(h["key"], h["value"]) for h in headers[i]] if headers[i] else None
            producer.send(topic, value=_bytes(values[i]), key=_bytes(keys[i]),
                          headers=row_headers, partition=partitions[i],
                          timestamp_ms=_millis(stamps[i]))
        sent += n
    return sent


def write_prepared(options: WriteOptions, transactional_id: str,
                   batches: Iterator[pa.RecordBatch], slot: int = 0) -> StagedWrite:
    """Write the rows in one transaction under ``transactional_id`` (fencing an
    earlier attempt of the same task and aborting what it left open) and prepare it."""
    settings = {"linger_ms": 5, "batch_size": 262_144, **options.client}
    with Producer(options.bootstrap, transactional_id=transactional_id,
                  transaction_timeout_ms=options.transaction_timeout_ms,
                  **settings) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        records = send_rows(producer, batches, options.topic)
        prepared = producer.prepare_transaction()
    return StagedWrite(prepared, records, slot)
