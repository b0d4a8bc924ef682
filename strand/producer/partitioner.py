"""Choosing a partition: Kafka's murmur2 key hashing and the sticky partitioner.

Keyed records go where Kafka's Java client would put them —
``toPositive(murmur2(key)) % numPartitions`` — so that a topic written by Strand
and by Kafka clients keeps every key on one partition. Records without a key go
to a *sticky* partition (KIP-480): one partition per topic until a batch for it
is complete, then another one chosen at random, which fills batches far better
than spreading single records round-robin.
"""

from __future__ import annotations

import random
import struct
import threading
from collections.abc import Callable, Sequence

__all__ = [
    "StickyPartitioner",
    "default_partition",
    "murmur2",
    "to_positive",
]

_SEED = 0x9747B28C
# Mixing constants of MurmurHash2 (Kafka's Utils.murmur2: m = 0x5bd1e995, r = 24).
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF

# One precompiled little-endian "n x uint32" unpacker per word count: the body of the
# hash reads every 4-byte word in one C call instead of four byte look-ups each.
_UNPACKERS: dict[int, Callable[[bytes], tuple[int, ...]]] = {}


def _murmur2_u32(data: bytes) -> int:
    """Kafka's murmur2 as an unsigned 32-bit int (the Java int's bit pattern).

    Every product is reduced mod 2^32 (Java's int overflow); ``>>`` on the reduced,
    non-negative value is Java's ``>>>``. ``h * M ^ k2`` is masked once, after the XOR:
    XOR works bit by bit, so masking before or after it gives the same low 32 bits.
    """
    length = len(data)
    h = _SEED ^ length
    words = length >> 2
    if words:
        unpack = _UNPACKERS.get(words)
        if unpack is None:
            unpack = _UNPACKERS[words] = struct.Struct(f"<{words}I").unpack_from
        m = _M
        mask = _MASK
        for k in unpack(data):
            k = k * m & mask
            h = (h * m ^ (k ^ k >> 24) * m) & mask
    tail = length & 3
    if tail:
        base = length - tail
        if tail == 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h = (h ^ data[base]) * _M & _MASK
    h ^= h >> 13
    h = h * _M & _MASK
    return h ^ h >> 15


def murmur2(data: bytes) -> int:
    """MurmurHash2 of ``data`` exactly as Kafka's ``Utils.murmur2``: signed 32-bit, like Java."""
    h = _murmur2_u32(data)
    return h - 0x100000000 if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Kafka's ``Utils.toPositive``: clears the sign bit (not ``abs``: -1 maps to 2^31-1)."""
    return number & 0x7FFFFFFF


# Keys repeat in most keyed workloads (user ids, order ids, ...), and a dict hit costs
# a tenth of the hash. Small keys only (the memo holds them); cleared when full, which
# is cheaper than LRU bookkeeping and keeps the memory bounded (~1 MB at most).
_MEMO_MAX_KEY = 64
_MEMO_MAX_ENTRIES = 8192
_memo: dict[bytes, int] = {}


def default_partition(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """The partition Kafka's default partitioner gives ``key``: to_positive(murmur2(key)) % n."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    if type(key) is bytes:
        h = _memo.get(key)
        if h is None:
            h = _murmur2_u32(key) & 0x7FFFFFFF
            if len(key) <= _MEMO_MAX_KEY:
                if len(_memo) >= _MEMO_MAX_ENTRIES:
                    _memo.clear()
                _memo[key] = h
        return h % num_partitions
    # bytearray / memoryview keys are not hashable (or not stably): hash them directly.
    return (_murmur2_u32(bytes(key)) & 0x7FFFFFFF) % num_partitions


class StickyPartitioner:
    """Partition choice for records without a key (KIP-480, Kafka's StickyPartitionCache).

    ``partition()`` returns the topic's current sticky partition, choosing one the first
    time. When the accumulator reports that the batch for that partition is complete
    (an append needed a new batch), the caller calls ``on_new_batch()`` with the
    partition it was about to use, and a different partition is chosen at random,
    preferring *available* partitions (those with a known leader). Calls naming a
    partition that is no longer the sticky one do nothing, so concurrent senders
    switch a topic only once.

    Where Kafka's cache may pick the old partition again when no partition is
    available, this one still moves to a different partition when there is more than
    one: the point of switching is to stop piling records on the one that filled up.
    Thread-safe (one lock; the work under it is a dict look-up and a random draw).
    """

    __slots__ = ("_lock", "_random", "_sticky")

    def __init__(self, rng: random.Random | None = None) -> None:
        self._lock = threading.Lock()
        self._random = rng if rng is not None else random.Random()
        self._sticky: dict[str, int] = {}

    def partition(
        self, topic: str, num_partitions: int, available: Sequence[int] | None = None
    ) -> int:
        """The sticky partition for ``topic``, choosing one if there is none yet."""
        if num_partitions <= 0:
            raise ValueError(f"num_partitions must be positive, got {num_partitions}")
        current = self._sticky.get(topic)
        if current is not None and current < num_partitions:
            return current  # the hot path: one dict read, no lock
        with self._lock:
            current = self._sticky.get(topic)
            if current is None or current >= num_partitions:
                # None, or the topic shrank below the cached partition (a metadata change).
                current = self._choose(num_partitions, available, exclude=None)
                self._sticky[topic] = current
            return current

    def on_new_batch(
        self,
        topic: str,
        prev_partition: int,
        num_partitions: int,
        available: Sequence[int] | None = None,
    ) -> int:
        """The batch for ``prev_partition`` is complete: switch the topic to another partition.

        Returns the topic's sticky partition afterwards.
        """
        if num_partitions <= 0:
            raise ValueError(f"num_partitions must be positive, got {num_partitions}")
        with self._lock:
            current = self._sticky.get(topic)
            if current is None or current == prev_partition or current >= num_partitions:
                current = self._choose(num_partitions, available, exclude=prev_partition)
                self._sticky[topic] = current
            return current

    def _choose(
        self, num_partitions: int, available: Sequence[int] | None, exclude: int | None
    ) -> int:
        candidates: Sequence[int]
        if available:
            # Deduplicated: a list naming one partition twice must not loop forever below.
            candidates = list(dict.fromkeys(p for p in available if 0 <= p < num_partitions))
            if not candidates:
                candidates = range(num_partitions)
        else:
            candidates = range(num_partitions)
        if len(candidates) == 1:
            return candidates[0]
        while True:
            choice = candidates[self._random.randrange(len(candidates))]
            if choice != exclude:
                return choice
