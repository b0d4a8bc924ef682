"""A consumer process that crashes at a chosen point, for the delivery-guarantee
tests (tests/integration/test_delivery_guarantees.py): each QoS level's consumer
pattern, killed where its failure mode shows.

    python -m tests.support.delivery_worker MODE BOOTSTRAP GROUP IN_TOPIC COUNT OUT

MODE
  ``commit-first``   at most once: commit the polled offsets, then crash before
                     processing them (the records are never processed).
  ``process-first``  at least once: process (append each value to the file OUT,
                     flushed), then crash before committing.
  ``transactional``  exactly once: read_committed in, a transactional producer
                     (transactional id ``GROUP``) writes each value to the topic OUT
                     and sends the offsets in the transaction; crash before commit.

It stops reading after COUNT records and exits with status 3 (``os._exit``: no
clean-up, no commit on close, like a crash). Exit status 2: it got fewer.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Literal

from strand import Consumer, Producer
from strand.client.structs import TopicPartition
from strand.consumer.records import ConsumerRecord

CRASHED = 3


def _poll(consumer: Consumer, count: int) -> list[ConsumerRecord]:
    got: list[ConsumerRecord] = []
    deadline = time.monotonic() + 60
    while len(got) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200, max_records=count - len(got)).values():
            got.extend(records)
    if len(got) < count:
        os._exit(2)
    return got


def _next_offsets(records: list[ConsumerRecord]) -> dict[TopicPartition, int]:
    offsets: dict[TopicPartition, int] = {}
    for record in records:
        tp = TopicPartition(record.topic, record.partition)
        offsets[tp] = max(offsets.get(tp, 0), record.offset + 1)
    return offsets


def main(mode: str, bootstrap: str, group: str, topic: str, count: int, out: str) -> None:
    isolation: Literal["read_committed", "read_uncommitted"] = (
        "read_committed" if mode == "transactional" else "read_uncommitted")
    consumer = Consumer(bootstrap, group_id=group, enable_auto_commit=False,
                        isolation_level=isolation, fetch_max_wait_ms=100,
                        session_timeout_ms=6_000)
    consumer.subscribe([topic])
    records = _poll(consumer, count)
    if mode == "commit-first":
        consumer.commit(_next_offsets(records))
    elif mode == "process-first":
        with open(out, "ab") as processed:
            for record in records:
                processed.write((record.value or b"") + b"\n")
            processed.flush()
            os.fsync(processed.fileno())
    elif mode == "transactional":
        producer = Producer(bootstrap, transactional_id=group)
        producer.init_transactions()
        producer.begin_transaction()
        for record in records:
            producer.send(out, record.value, key=record.key)
        producer.send_offsets_to_transaction(_next_offsets(records),
                                             consumer.group_metadata())
        producer.flush()
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    os._exit(CRASHED)


if __name__ == "__main__":
    mode_, bootstrap_, group_, topic_, count_, out_ = sys.argv[1:7]
    main(mode_, bootstrap_, group_, topic_, int(count_), out_)
