"""OffsetForLeaderEpoch's check of the client's leader epoch, as a fetch's."""

from __future__ import annotations

import pytest

from services.storage.epoch_offsets import EpochEndQuery, check_current_epoch
from strand.errors import FencedLeaderEpochError, UnknownLeaderEpochError


def _query(current: int) -> EpochEndQuery:
    return EpochEndQuery("orders", 0, current_leader_epoch=current, leader_epoch=1)


def test_unknown_or_equal_epoch_passes() -> None:
    check_current_epoch(_query(-1), 5)
    check_current_epoch(_query(5), 5)


def test_an_older_epoch_is_fenced_a_newer_unknown() -> None:
    with pytest.raises(FencedLeaderEpochError, match="older than the current one"):
        check_current_epoch(_query(4), 5)
    with pytest.raises(UnknownLeaderEpochError, match="newer than this leader knows"):
        check_current_epoch(_query(6), 5)
