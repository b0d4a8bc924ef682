"""Answering per-partition questions only a partition's leader answers (ListOffsets,
OffsetForLeaderEpoch): each query is checked against its leader replica here, then
every lookup runs in one task on the disk thread (they read indexes and segments).
A query that fails gets its error alone; the others are answered."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from services.storage.disk import DiskExecutor
from services.storage.errors import PartitionOutcome, fail_partition
from services.storage.replica import Replica
from services.storage.replica_manager import ReplicaManager

__all__ = ["on_leaders"]


class PartitionQuery(Protocol):
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...


Q = TypeVar("Q", bound=PartitionQuery)
A = TypeVar("A", bound=PartitionOutcome)


async def on_leaders(manager: ReplicaManager, disk: DiskExecutor, queries: Sequence[Q],
                     answers: Sequence[A], check: Callable[[Q, Replica], None],
                     lookup: Callable[[A, Q, Replica], None], what: str) -> None:
    """Fill ``answers`` (one per query, same order): ``check`` on the event loop (it
    raises what refuses the query), then ``lookup`` of every query that passed, on
    the disk thread. ``what`` names the call in errors."""
    found: list[tuple[A, Q, Replica]] = []
    for answer, query in zip(answers, queries, strict=True):
        try:
            replica = manager.leader_replica(query.topic, query.partition)
            check(query, replica)
        except Exception as exc:
            fail_partition(answer, exc, what)
            continue
        found.append((answer, query, replica))
    if not found:
        return

    def lookup_all() -> None:
        for answer, query, replica in found:
            try:
                lookup(answer, query, replica)
            except Exception as exc:
                fail_partition(answer, exc, what)

    try:
        await disk.run(lookup_all, [replica for _, _, replica in found])
    except Exception as exc:
        for answer, _, _ in found:
            fail_partition(answer, exc, what)
