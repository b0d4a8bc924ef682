"""Waiting in tests: for another process to reach a state (``wait_until``, the
launcher's), and for a consumer driven by the test's own thread (``poll_until``)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from strand import Consumer, ConsumerRecord
from strand.launcher import wait_until

__all__ = ["poll_records", "poll_until", "wait_until"]


def poll_until(consumer: Consumer, done: Callable[[], bool], timeout: float, what: str, *,
               each: Callable[[ConsumerRecord], object] | None = None, poll_ms: int = 200,
               max_records: int | None = None) -> None:
    """Poll ``consumer`` until ``done()`` (asked before each poll), giving every record
    read to ``each``; TimeoutError naming ``what`` after ``timeout`` seconds."""

    def done_or_poll() -> bool:
        if done():
            return True
        for records in consumer.poll(timeout_ms=poll_ms, max_records=max_records).values():
            if each is not None:
                for record in records:
                    each(record)
        return False

    wait_until(done_or_poll, timeout, what, interval=0)


def poll_records(consumer: Consumer, count: int, timeout: float = 10,
                 max_records: int | None = None) -> list[ConsumerRecord]:
    """The records polled until there are ``count`` of them, or what came within
    ``timeout`` seconds (for tests that expect fewer)."""
    records: list[ConsumerRecord] = []
    with contextlib.suppress(TimeoutError):
        poll_until(consumer, lambda: len(records) >= count, timeout, f"{count} records",
                   each=records.append, max_records=max_records)
    return records
