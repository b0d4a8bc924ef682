"""The ``strand`` data source's writers: batch (``df.write``) and streaming
(``df.writeStream``, exactly-once).

Both write each task's rows in a transaction of its own and *prepare* it on the
executor (strand_spark.record_writer); the driver's ``commit`` then commits every
task's transaction, and its ``abort`` aborts them, so a failed job leaves nothing
visible to ``read_committed`` readers.

- Batch: one write, one commit; the transactional ids are the write's own
  (``strand-write-<write id>-<partition>``), so a retried task fences its failed
  attempt.
- Streaming: the sink's ledger (strand_spark.ledger) makes a micro-batch that Spark
  runs again after a crash of the driver or an executor add nothing twice.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from strand import Admin, PreparedTransaction
from strand_spark.ledger import LedgerEntry, LedgerError, SinkLedger
from strand_spark.options import WriteOptions
from strand_spark.record_writer import StagedWrite, check_columns, write_prepared

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

COMPLETE_TIMEOUT_MS = 120_000


def _partition_id() -> int:
    context = TaskContext.get()
    return context.partitionId() if context is not None else 0


def _prepared(messages: Sequence[WriterCommitMessage | None]) -> list[PreparedTransaction]:
    return [m.prepared for m in messages
            if isinstance(m, StagedWrite) and m.prepared is not None]


def complete_all(bootstrap: str, transactions: Sequence[PreparedTransaction],
                 commit: bool) -> None:
    """Commit (or abort) every transaction, in parallel; raise the first failure after
    trying them all."""
    if not transactions:
        return
    with Admin(bootstrap) as admin, ThreadPoolExecutor(min(16, len(transactions))) as pool:
        futures = [pool.submit(admin.complete_transaction, t, commit, COMPLETE_TIMEOUT_MS)
                   for t in transactions]
        errors = [f.exception() for f in futures]
    failed = [(t, e) for t, e in zip(transactions, errors, strict=True) if e is not None]
    if failed:
        names = ", ".join(f"{t.transactional_id} ({e})" for t, e in failed[:5])
        raise RuntimeError(f"{'commit' if commit else 'abort'} of {len(failed)} of "
                           f"{len(transactions)} prepared transactions failed: {names}")


def current_slot(bootstrap: str, sink_id: str) -> int:
    """The transactional-id slot this micro-batch's tasks use (strand_spark.ledger)."""
    last = SinkLedger(bootstrap, sink_id).last()
    return last.next_slot() if last is not None else 0


def commit_batch(bootstrap: str, sink_id: str,
                 messages: Sequence[WriterCommitMessage | None], batch_id: int) -> bool:
    """The driver's side of an exactly-once micro-batch (strand_spark.ledger says how):
    commit what the tasks prepared, unless the batch was committed before. Returns
    False for a replay (its transactions aborted). Safe to call again with the same
    messages after it failed part way (a cluster unreachable for a moment): what it
    had recorded is finished, and the batch counts as committed once."""
    ledger = SinkLedger(bootstrap, sink_id)
    staged = [m for m in messages if isinstance(m, StagedWrite)]
    mine = _prepared(staged)
    last = ledger.last()
    if last is not None and last.state == "prepared":
        log.warning("strand sink %s: finishing the commit of batch %s that was cut short",
                    sink_id, last.batch)
        complete_all(bootstrap, last.transactions, commit=True)
        last = LedgerEntry(last.batch, "committed", last.slot, last.transactions,
                           last.records)
        ledger.append(last)
    if last is not None and last.batch == batch_id and mine \
            and set(mine) == set(last.transactions):
        return True  # this very call's commit, repeated after a failure
    if last is not None and batch_id <= last.batch:
        log.warning("strand sink %s: batch %s was committed before; its replay is dropped",
                    sink_id, batch_id)
        complete_all(bootstrap, mine, commit=False)
        return False
    slots = {m.slot for m in staged if m.prepared is not None}
    expected = last.next_slot() if last is not None else 0
    if slots - {expected}:
        complete_all(bootstrap, mine, commit=False)
        raise LedgerError(
            f"strand sink {sink_id}: batch {batch_id} was written under slot(s) "
            f"{sorted(slots)}, not {expected}: another query writes with the same "
            f"sink id, or the ledger {ledger.topic} changed during the batch")
    records = sum(m.records for m in staged)
    ledger.append(LedgerEntry(batch_id, "prepared", expected, tuple(mine), records))
    complete_all(bootstrap, mine, commit=True)
    ledger.append(LedgerEntry(batch_id, "committed", expected, tuple(mine), records))
    return True


class StrandBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: WriteOptions, schema: StructType) -> None:
        check_columns(schema, options)
        self.options = options
        self.write_id = uuid.uuid4().hex[:16]  # made on the driver, pickled to tasks

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedWrite:
        transactional_id = f"strand-write-{self.write_id}-{_partition_id()}"
        return write_prepared(self.options, transactional_id, iterator)

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        complete_all(self.options.bootstrap, _prepared(messages), commit=True)

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        complete_all(self.options.bootstrap, _prepared(messages), commit=False)


class StrandStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: WriteOptions, schema: StructType) -> None:
        check_columns(schema, options)
        assert options.sink_id is not None  # write_options requires it for streams
        self.options = options
        self.sink_id = options.sink_id

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedWrite:
        slot = current_slot(self.options.bootstrap, self.sink_id)
        transactional_id = f"strand-sink-{self.sink_id}-{_partition_id()}-{slot}"
        return write_prepared(self.options, transactional_id, iterator, slot)

    def commit(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        commit_batch(self.options.bootstrap, self.sink_id, messages, batchId)

    def abort(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        complete_all(self.options.bootstrap, _prepared(messages), commit=False)
