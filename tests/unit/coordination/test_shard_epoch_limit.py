"""The shard epoch is Kafka's int32 coordinator epoch: past it, refused, not wrapped."""

from __future__ import annotations

import pytest

from strand.coordination.ownership import (
    MAX_SHARD_EPOCH,
    ShardEpochExhaustedError,
    next_shard_epoch,
)


def test_the_next_epoch_is_one_more() -> None:
    assert next_shard_epoch(0, 3) == 1
    assert next_shard_epoch(MAX_SHARD_EPOCH - 1, 3) == MAX_SHARD_EPOCH == 2**31 - 1


def test_past_int32_the_shard_cannot_be_taken() -> None:
    with pytest.raises(ShardEpochExhaustedError, match=r"shard 3 .* 2147483647"):
        next_shard_epoch(MAX_SHARD_EPOCH, 3)
