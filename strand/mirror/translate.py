"""Consumer-group offsets from a mirror's source cluster to its target: exact, from the
offset map the mirror writes in its transactions (strand.mirror.offset_map), with no
gap between syncs: every source offset the mirror has passed translates.

::

    from strand.mirror.translate import translate_group
    positions = translate_group("east:7070", "west:7070", "east", "billing")
    # {TopicPartition("east.orders", 0): 1234, ...}: where "billing" resumes on west
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from strand import Admin, Consumer, TopicPartition
from strand.errors import UnknownTopicOrPartitionError
from strand.mirror.offset_map import OffsetMapEntry, offset_map_topic, translate

__all__ = ["TranslationGap", "read_offset_map", "translate_group", "translate_offsets"]


class TranslationGap(LookupError):
    """A source offset the mirror has not copied past yet (or that precedes it)."""


def read_offset_map(target_bootstrap: str, source_cluster: str, timeout_s: float = 60.0
                    ) -> dict[tuple[str, int], list[OffsetMapEntry]]:
    """Every committed entry of the mirror from ``source_cluster``, by source partition
    and in source order."""
    tp = TopicPartition(offset_map_topic(source_cluster), 0)
    entries: dict[tuple[str, int], list[OffsetMapEntry]] = {}
    with Consumer(target_bootstrap, isolation_level="read_committed",
                  fetch_max_wait_ms=100, max_poll_records=5000) as consumer:
        try:
            end = consumer.end_offsets([tp])[tp]
        except UnknownTopicOrPartitionError:
            return {}
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + timeout_s
        while consumer.position(tp) < end:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {tp} from {target_bootstrap} took over "
                                   f"{timeout_s} s")
            for record in consumer.poll(timeout_ms=200).get(tp, []):
                if record.value is None:
                    continue
                entry = OffsetMapEntry.decode(record.value)
                entries.setdefault((entry.source_topic, entry.source_partition),
                                   []).append(entry)
    for found in entries.values():
        found.sort(key=lambda e: e.source_start)
    return entries


def translate_offsets(entries: Mapping[tuple[str, int], list[OffsetMapEntry]],
                      offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    """Source partition -> next offset, to target partition -> next offset. Raises
    TranslationGap naming every partition that cannot be translated yet."""
    out: dict[TopicPartition, int] = {}
    gaps: list[str] = []
    for tp, offset in sorted(offsets.items()):
        found = entries.get((tp.topic, tp.partition), [])
        target = translate(found, offset)
        if target is None:
            gaps.append(f"{tp} at {offset}" + (
                f" (mirrored: {found[0].source_start} to {found[-1].source_end})"
                if found else " (nothing of it mirrored yet)"))
            continue
        out[TopicPartition(found[0].target_topic, found[0].target_partition)] = target
    if gaps:
        raise TranslationGap("the mirror has not copied past these offsets yet: "
                             + "; ".join(gaps) + ". Retry once it has caught up.")
    return out


def translate_group(source_bootstrap: str, target_bootstrap: str, source_cluster: str,
                    group_id: str, apply: bool = False) -> dict[TopicPartition, int]:
    """The target positions of ``group_id``'s committed offsets on the source. With
    ``apply``, they become the group's committed offsets on the target (the group
    must have no active members there, as for any offset reset)."""
    with Admin(source_bootstrap) as source:
        committed = source.list_group_offsets(group_id)
    if not committed:
        raise LookupError(f"group {group_id!r} has no committed offsets on "
                          f"{source_bootstrap}")
    positions = translate_offsets(read_offset_map(target_bootstrap, source_cluster),
                                  committed)
    if apply:
        with Admin(target_bootstrap) as target:
            target.alter_group_offsets(group_id, positions)
    return positions
