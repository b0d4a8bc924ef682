"""Which leading segments retention may delete: a pure decision, no I/O.

A segment goes when it lies wholly before the log start offset, or (for
``cleanup.policy`` with ``delete``) when its newest record is older than
``retention.ms``, or when the log would still hold at least ``retention.bytes``
without it. Deletion stops at the first segment that must stay, and never passes
the high watermark: unreplicated data is not retention's to drop. The active
segment counts too (the log rolls before deleting it), unless it is empty.
"""

from __future__ import annotations

from collections.abc import Sequence

from strand.log.config import LogConfig
from strand.log.segment import LogSegment


def deletable_prefix(
    segments: Sequence[LogSegment],
    config: LogConfig,
    *,
    now_ms: int,
    high_watermark: int,
    log_end_offset: int,
    log_start_offset: int,
) -> int:
    count = len(segments)
    by_time = config.delete and config.retention_ms >= 0
    excess = None
    if config.delete and config.retention_bytes >= 0:
        excess = sum(segment.size for segment in segments) - config.retention_bytes
    deletable = 0
    for i, segment in enumerate(segments):
        end = segments[i + 1].base_offset if i + 1 < count else log_end_offset
        if high_watermark < end or (i == count - 1 and segment.size == 0):
            break
        below_start = end <= log_start_offset
        expired = by_time and now_ms - segment.max_timestamp > config.retention_ms
        oversized = excess is not None and excess - segment.size >= 0
        if not (below_start or expired or oversized):
            break
        if excess is not None:
            excess -= segment.size
        deletable += 1
    return deletable
