"""A traced produce, followed to the followers that replicate it.

Replication is pulled: the leader answers a produce with acks=all once its followers
have fetched the records, in fetches of their own that belong to no trace. So the
leader keeps the trace context (W3C ``traceparent``/``tracestate``) of each traced
append it has not seen replicated yet, hands it to the followers with the records
(``ReplicaFetchPartitionResponse.traced_appends``), and each follower records its
append of those records as a span of that trace (:func:`replica_append_spans`).
Untraced appends (no span recording: no exporter, or not sampled) leave nothing
here, and a leader keeps at most :data:`MAX_TRACED_APPENDS` per partition.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from opentelemetry import propagate, trace

__all__ = ["MAX_TRACED_APPENDS", "AppendTraces", "TracedAppend", "current_trace_context",
           "replica_append_spans"]

MAX_TRACED_APPENDS = 64
_tracer = trace.get_tracer("strand.storage")


@dataclass(frozen=True, slots=True)
class TracedAppend:
    first_offset: int
    last_offset: int
    context: tuple[tuple[str, str], ...]  # the propagation headers, sorted


def current_trace_context() -> tuple[tuple[str, str], ...]:
    """The current span's propagation headers; empty when it records nothing."""
    if not trace.get_current_span().is_recording():
        return ()
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return tuple(sorted(carrier.items()))


class AppendTraces:
    """A leader's traced appends of one partition, oldest first. Read by fetches in
    disk threads: every operation is a single deque call or works on a copy."""

    def __init__(self, limit: int = MAX_TRACED_APPENDS) -> None:
        self._entries: deque[TracedAppend] = deque(maxlen=limit)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def record(self, first_offset: int, last_offset: int,
               context: tuple[tuple[str, str], ...], high_watermark: int) -> None:
        if self._entries:  # the common case, untraced, costs no more than this
            self.prune(high_watermark)
        if context:
            self._entries.append(TracedAppend(first_offset, last_offset, context))

    def prune(self, high_watermark: int) -> None:
        """Forget the appends every in-sync replica has (below the high watermark)."""
        with contextlib.suppress(IndexError):
            while self._entries[0].last_offset < high_watermark:
                self._entries.popleft()

    def covering(self, start: int, end: int) -> list[TracedAppend]:
        """The traced appends with records in [start, end)."""
        return [entry for entry in list(self._entries)
                if entry.first_offset < end and entry.last_offset >= start]


@contextlib.contextmanager
def replica_append_spans(topic: str, partition: int, follower: int,
                         traced: Sequence[TracedAppend]) -> Iterator[None]:
    """Around a follower's append of fetched records: a span in the trace of each
    traced append among them (child of the leader's produce span)."""
    if not traced:
        yield
        return
    with contextlib.ExitStack() as spans:
        for entry in traced:
            parent = propagate.extract(dict(entry.context))
            spans.enter_context(_tracer.start_as_current_span(
                "ReplicaAppend", context=parent, kind=trace.SpanKind.CONSUMER,
                attributes={"strand.topic": topic, "strand.partition": partition,
                            "strand.replica": follower,
                            "strand.first_offset": entry.first_offset,
                            "strand.last_offset": entry.last_offset}))
        yield
