"""The streaming sink's ledger: which micro-batch it last committed, in the target
cluster itself.

Spark hands the batch id only to the driver's ``commit(messages, batch_id)``, after
every task has written. So each task writes its rows in a transaction and *prepares*
it (strand_spark.record_writer), and the driver commits them all, recording the
batch here first so that a commit cut short is finished, never repeated:

1. the ledger's last entry is read; a ``prepared`` entry (a driver died while
   committing it) is rolled forward: its transactions are committed (committing a
   committed one again succeeds), then ``committed`` is recorded for it;
2. a batch id at or below the last committed one is a replay (Spark runs a batch again
   when its own checkpoint did not record its end): its new transactions are aborted;
3. otherwise ``prepared`` is recorded with the batch's transactions, they are
   committed, and ``committed`` is recorded.

Tasks use one of two transactional ids per Spark partition (``slot`` 0 or 1), the one
the ledger's last entry does not hold: a task fences whatever an earlier, failed
attempt left open under its id (so that nothing waits for a transaction timeout), and
can never fence the transactions of a ``prepared`` entry the driver still has to
commit.

One topic per sink, ``strand-sinks.<sink id>``: a single partition, compacted,
replicated like the data; its last record is the ledger's state.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Literal

from strand import Admin, Consumer, PreparedTransaction, Producer, TopicPartition
from strand.errors import UnknownTopicOrPartitionError
from strand_spark.topics import ensure_topic

LEDGER_PREFIX = "strand-sinks."
KEY = b"ledger"
State = Literal["prepared", "committed"]


class LedgerError(RuntimeError):
    """The sink's ledger cannot be read or written, or contradicts the cluster."""


@dataclass(frozen=True)
class LedgerEntry:
    batch: int
    state: State
    slot: int
    transactions: tuple[PreparedTransaction, ...] = ()
    records: int = 0
    time_ms: int = field(default=0, compare=False)

    def encode(self) -> bytes:
        return json.dumps({"batch": self.batch, "state": self.state, "slot": self.slot,
                           "records": self.records, "time": self.time_ms,
                           "transactions": [list(t) for t in self.transactions]},
                          sort_keys=True).encode()

    @classmethod
    def decode(cls, raw: bytes, where: str) -> LedgerEntry:
        try:
            value = json.loads(raw)
            return cls(int(value["batch"]), value["state"], int(value["slot"]),
                       tuple(PreparedTransaction(str(t[0]), int(t[1]), int(t[2]))
                             for t in value["transactions"]),
                       int(value.get("records", 0)), int(value.get("time", 0)))
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise LedgerError(f"{where}: an entry that is not a sink ledger's ({exc}): "
                              f"{raw[:200]!r}") from None

    def next_slot(self) -> int:
        return 1 - self.slot


def ledger_topic(sink_id: str) -> str:
    return f"{LEDGER_PREFIX}{sink_id}"


class SinkLedger:
    def __init__(self, bootstrap: str, sink_id: str) -> None:
        self.bootstrap = bootstrap
        self.sink_id = sink_id
        self.topic = ledger_topic(sink_id)
        self._tp = TopicPartition(self.topic, 0)

    def _exists(self) -> bool:
        with Admin(self.bootstrap) as admin:
            return self.topic in admin.list_topics()

    def ensure_topic(self) -> None:
        ensure_topic(self.bootstrap, self.topic, {"cleanup.policy": "compact"})

    def last(self, timeout_s: float = 30.0) -> LedgerEntry | None:
        """The ledger's state: its last entry (None: nothing committed yet)."""
        if not self._exists():
            return None  # (asking a consumer would wait for the topic to appear)
        with Consumer(self.bootstrap, auto_offset_reset="none",
                      enable_auto_commit=False) as consumer:
            try:
                end = consumer.end_offsets([self._tp])[self._tp]
            except UnknownTopicOrPartitionError:
                return None  # no batch was ever committed
            if end == 0:
                return None
            consumer.assign([self._tp])
            consumer.seek(self._tp, end - 1)
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                for record in consumer.poll(timeout_ms=500).get(self._tp, []):
                    if record.offset == end - 1 and record.value is not None:
                        return LedgerEntry.decode(record.value, str(self._tp))
                if consumer.position(self._tp) >= end:
                    break
        raise LedgerError(f"the last entry of {self._tp} (offset {end - 1}) could not be "
                          f"read from {self.bootstrap} within {timeout_s} s")

    def append(self, entry: LedgerEntry) -> None:
        """Record ``entry`` durably (acks=all, idempotent) before returning."""
        self.ensure_topic()
        stamped = LedgerEntry(entry.batch, entry.state, entry.slot, entry.transactions,
                              entry.records, int(time.time() * 1000))
        with Producer(self.bootstrap, acks="all", enable_idempotence=True,
                      linger_ms=0) as producer:
            producer.send(self.topic, key=KEY, value=stamped.encode(),
                          partition=0).result(timeout=60)
