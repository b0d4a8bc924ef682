"""The identities shard owners write under (strand.coordination.shard_fence): every
take-over of every shard its own (producer id, epoch), epochs growing within an id,
ids out of the controller's reach, and a generation switch that fences the previous
id at an epoch no owner used."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strand.cluster.model import FIRST_RESERVED_PRODUCER_ID, MAX_PRODUCER_ID
from strand.coordination.ownership import MAX_SHARD_EPOCH
from strand.coordination.shard_fence import (
    EPOCHS_PER_ID,
    KINDS,
    MAX_EPOCH,
    MAX_SHARDS,
    ShardWriterId,
    shard_writer_ids,
)

kinds = st.sampled_from(KINDS)
shards = st.integers(0, MAX_SHARDS - 1)
epochs = st.integers(1, MAX_SHARD_EPOCH)


@given(kinds, shards, epochs)
def test_ids_are_reserved_and_epochs_fit_int16(kind: str, shard: int, epoch: int) -> None:
    writer, previous = shard_writer_ids(kind, shard, epoch)
    for ident in filter(None, (writer, previous)):
        assert FIRST_RESERVED_PRODUCER_ID <= ident.producer_id <= MAX_PRODUCER_ID
        assert 0 <= ident.producer_epoch <= MAX_EPOCH
    assert writer.producer_epoch < MAX_EPOCH  # the largest epoch only fences


@given(st.tuples(kinds, shards, epochs), st.tuples(kinds, shards, epochs))
def test_two_take_overs_never_share_an_identity(a: tuple[str, int, int],
                                                b: tuple[str, int, int]) -> None:
    if a != b:
        assert shard_writer_ids(*a)[0] != shard_writer_ids(*b)[0]


@given(kinds, shards, st.integers(1, MAX_SHARD_EPOCH - 1))
def test_the_next_take_over_fences_the_previous(kind: str, shard: int, epoch: int) -> None:
    """Within an id the next owner's epoch is larger (the log refuses the older);
    across ids the new owner first writes the old id at its largest epoch."""
    old, _ = shard_writer_ids(kind, shard, epoch)
    new, previous = shard_writer_ids(kind, shard, epoch + 1)
    if new.producer_id == old.producer_id:
        assert new.producer_epoch > old.producer_epoch and previous is None
    else:
        assert previous == ShardWriterId(old.producer_id, MAX_EPOCH)
        assert new.producer_epoch == 0 and (epoch + 1) % EPOCHS_PER_ID == 0


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="not held"):
        shard_writer_ids("groups", 0, 0)
    with pytest.raises(ValueError, match="unknown coordinator kind"):
        shard_writer_ids("nope", 0, 1)
    with pytest.raises(ValueError, match="out of range"):
        shard_writer_ids("groups", MAX_SHARDS, 1)
