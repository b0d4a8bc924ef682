"""KIP-101 divergence scenarios on real partition logs: followers truncate to where
their log agrees with the leader's (by leader epoch), then copy the leader's batches,
so no two replicas ever hold different records at one offset.

``replicate`` plays the follower's fetch loop with the leader's divergence check of
services.storage.replica_fetch and the follower's truncation rule of PartitionLog.
"""

from __future__ import annotations

from collections.abc import Callable

from services.storage.replica_fetch import diverging_epoch
from strand.log import PartitionLog
from strand.records import iter_record_batches
from strand.records.batch import split_batches
from tests.unit.log.log_helpers import make_batch


def replicate(follower: PartitionLog, leader: PartitionLog, limit: int | None = None) -> int:
    """Fetch from ``leader`` until caught up (or ``limit`` batches); returns truncations."""
    truncations = 0
    copied = 0
    for _ in range(1000):
        diverging = diverging_epoch(leader, follower.last_epoch, follower.log_end_offset)
        if diverging is not None:
            follower.truncate_to(follower.truncation_offset(*diverging))
            truncations += 1
            continue
        if limit is not None and copied >= limit:
            return truncations
        data = leader.read(follower.log_end_offset, 1 << 20, min_one_batch=True)
        if not data:
            return truncations
        # One batch at a time, so ``limit`` can stop part way.
        (_, header), *_ = split_batches(memoryview(data))
        follower.append_as_follower(data[: header.size_in_bytes])
        copied += 1
    raise AssertionError("replication did not converge")


def log_bytes(log: PartitionLog) -> bytes:
    return log.read(log.log_start_offset, 1 << 30) if log.log_end_offset else b""


def append(log: PartitionLog, epoch: int, *values: bytes) -> None:
    log.append_as_leader(make_batch(list(values)), epoch)


def test_leader_dies_after_appending_before_replicating(
        open_log: Callable[..., PartitionLog]) -> None:
    a, b = open_log(name="a-0"), open_log(name="b-0")
    a.begin_leader_epoch(0)
    for i in range(6):
        append(a, 0, b"committed-%d" % i)
    replicate(b, a)
    append(a, 0, b"lost-6", b"lost-7")  # appended by A, never replicated (not acknowledged)
    assert a.log_end_offset == 8 and b.log_end_offset == 6
    # A dies; B leads epoch 1 and takes new writes at the same offsets.
    b.begin_leader_epoch(1)
    append(b, 1, b"new-6")
    append(b, 1, b"new-7", b"new-8")
    # A returns as a follower: it must drop its unreplicated tail first.
    assert replicate(a, b) >= 1
    assert log_bytes(a) == log_bytes(b)
    assert a.leader_epochs.entries() == b.leader_epochs.entries()


def test_two_quick_leader_changes(open_log: Callable[..., PartitionLog]) -> None:
    a, b, c = (open_log(name=f"{n}-0") for n in "abc")
    a.begin_leader_epoch(0)
    append(a, 0, b"0", b"1")
    append(a, 0, b"2")
    replicate(b, a)
    replicate(c, a)
    append(a, 0, b"a-only")  # A's tail, unreplicated
    # B leads epoch 1, appends, and dies before anybody copies it.
    b.begin_leader_epoch(1)
    append(b, 1, b"b-only-1")
    append(b, 1, b"b-only-2")
    # C leads epoch 2 (B's epoch-1 records never reached it).
    c.begin_leader_epoch(2)
    append(c, 2, b"c-3", b"c-4")
    append(c, 2, b"c-5")
    replicate(a, c)
    replicate(b, c)
    assert log_bytes(a) == log_bytes(b) == log_bytes(c)
    values = [bytes(r.value or b"") for batch in iter_record_batches(log_bytes(a))
              for r in batch.records()]
    assert values == [b"0", b"1", b"2", b"c-3", b"c-4", b"c-5"]


def test_a_leader_that_never_appended_converges_as_follower(
        open_log: Callable[..., PartitionLog]) -> None:
    """Leading starts an epoch at the log end; a replica that led without appending
    must not loop on that empty epoch when it follows again."""
    a, b = open_log(name="a-0"), open_log(name="b-0")
    a.begin_leader_epoch(0)
    append(a, 0, b"x", b"y")
    replicate(b, a)
    b.begin_leader_epoch(1)  # B leads briefly, appends nothing
    a.begin_leader_epoch(2)  # A leads again
    append(a, 2, b"z")
    replicate(b, a)
    assert log_bytes(a) == log_bytes(b)


def test_a_follower_part_way_keeps_what_agrees(open_log: Callable[..., PartitionLog]) -> None:
    a, b = open_log(name="a-0"), open_log(name="b-0")
    a.begin_leader_epoch(0)
    for i in range(10):
        append(a, 0, b"%d" % i)
    replicate(b, a, limit=4)
    assert b.log_end_offset == 4
    # No divergence: B keeps its 4 records and continues.
    assert replicate(b, a) == 0
    assert log_bytes(a) == log_bytes(b)


def test_the_new_leader_keeps_records_the_old_one_truncates(
        open_log: Callable[..., PartitionLog]) -> None:
    """A follower that got ahead of the new leader in the old epoch is cut back to the
    new leader's end of that epoch, never the other way round."""
    a, b, c = (open_log(name=f"{n}-0") for n in "abc")
    a.begin_leader_epoch(0)
    for i in range(5):
        append(a, 0, b"%d" % i)
    replicate(b, a)
    replicate(c, a, limit=3)  # C lags behind B
    c.begin_leader_epoch(1)  # C (in the ISR, say) becomes leader with 3 records
    append(c, 1, b"c")
    replicate(b, c)
    assert log_bytes(b) == log_bytes(c)
    assert b.log_end_offset == 4
