"""Shared helpers of the producer tests: leader maps (the clock is tests.support.clock's)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

TopicPartition = tuple[str, int]


def leaders(mapping: Mapping[TopicPartition, int | None]) -> Callable[[TopicPartition], int | None]:
    """A leader_of function from a dict; partitions not in it have no known leader."""
    return lambda tp: mapping.get(tp)

