"""What one admin request may ask of the controller (issue 11).

A topic of 100,000 partitions used to hold the controller's event loop for about
13 s: it lost its etcd lease and stepped down half way. The work of large requests
is now done off the loop and in chunks (see ``server`` and ``writer``), and one
request may ask for at most a configured amount, refused at once and whole, before
anything is decided or written, so the client learns the limit and the flag that
raises it. Defaults are far above ordinary use: Kafka suggests a few thousand
partitions per broker.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from strand.errors import InvalidPartitionsError, InvalidRequestError

__all__ = ["PARTITIONS_FLAG", "TOPICS_FLAG", "RequestLimits"]

PARTITIONS_FLAG = ("--max-partitions-per-request", "STRAND_MAX_PARTITIONS_PER_REQUEST")
TOPICS_FLAG = ("--max-topics-per-request", "STRAND_MAX_TOPICS_PER_REQUEST")


def _raise_with(flag: tuple[str, str]) -> str:
    return f"raise it with the controller's {flag[0]} (or {flag[1]})"


@dataclass(frozen=True, slots=True)
class RequestLimits:
    # Partitions one request may create (CreateTopics, CreatePartitions: all its
    # topics together) or reassign (AlterPartitionReassignments).
    max_partitions: int = 10_000
    # Topics one CreateTopics, DeleteTopics, CreatePartitions or AlterConfigs may name.
    max_topics: int = 1_000

    def __post_init__(self) -> None:
        if self.max_partitions < 1 or self.max_topics < 1:
            raise ValueError("request limits must be at least 1")

    def check_topics(self, count: int) -> None:
        self.check_entries("topics")(count)

    def check_entries(self, what: str) -> Callable[[int], None]:
        """The same bound for the entries of a security call (``what`` they are)."""
        def check(count: int) -> None:
            if count > self.max_topics:
                raise InvalidRequestError(
                    f"the request names {count} {what}; at most {self.max_topics} are "
                    f"allowed in one request: split it, or {_raise_with(TOPICS_FLAG)}")
        return check

    def check_new_partitions(self, new: Mapping[str, int]) -> None:
        """``new``: the partitions the request would create, per topic."""
        total = sum(new.values())
        if total > self.max_partitions:
            largest = max(new, key=lambda name: new[name])
            raise InvalidPartitionsError(
                f"the request would create {total} partitions ({new[largest]} for topic "
                f"{largest!r}); at most {self.max_partitions} may be created by one "
                f"request: create fewer at a time, or {_raise_with(PARTITIONS_FLAG)}")

    def check_reassignments(self, count: int) -> None:
        if count > self.max_partitions:
            raise InvalidRequestError(
                f"the request reassigns {count} partitions; at most {self.max_partitions} "
                f"in one request: split it, or {_raise_with(PARTITIONS_FLAG)}")
