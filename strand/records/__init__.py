"""Kafka RecordBatch v2: build, validate, stamp and decode record batches."""

from strand.records.batch import (
    HEADER_SIZE,
    BatchHeader,
    TimestampType,
    iter_batches,
    read_header,
    stamp,
    validate_batch,
)
from strand.records.builder import BatchBuilder
from strand.records.compression import Compression
from strand.records.control import (
    ControlType,
    EndTransactionMarker,
    build_end_txn_marker,
    parse_end_txn_marker,
)
from strand.records.reader import RecordBatch, decode_records, iter_record_batches
from strand.records.record import Header, Record
from strand.records.sizes import record_size

__all__ = [
    "HEADER_SIZE",
    "BatchBuilder",
    "BatchHeader",
    "Compression",
    "ControlType",
    "EndTransactionMarker",
    "Header",
    "Record",
    "RecordBatch",
    "TimestampType",
    "build_end_txn_marker",
    "decode_records",
    "iter_batches",
    "iter_record_batches",
    "parse_end_txn_marker",
    "read_header",
    "record_size",
    "stamp",
    "validate_batch",
]
