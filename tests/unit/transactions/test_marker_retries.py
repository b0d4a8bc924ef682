"""How the transaction coordinator ends a transaction on its partitions
(storage_calls.until_final, used for markers and for transactional offsets): a
retriable answer is sent again, a final one is kept, and what is still retriable
when the time is up keeps its last error."""

from __future__ import annotations

import asyncio

from strand.cluster.cache import MetadataCache
from strand.cluster.keys import KeySpace
from strand.cluster.storage_calls import MarkerError, until_final
from strand.errors import ErrorCode

TopicPartition = tuple[str, int]
RETRIABLE = {ErrorCode.NOT_COORDINATOR}


def test_retriable_answers_are_sent_again_until_final() -> None:
    rounds: list[list[TopicPartition]] = []

    async def send(pending: list[TopicPartition], remaining_s: float
                   ) -> dict[TopicPartition, MarkerError]:
        rounds.append(sorted(pending))
        moving = len(rounds) < 3
        return {tp: MarkerError(ErrorCode.NOT_COORDINATOR if moving and tp == ("o", 1)
                                else ErrorCode.NONE, "") for tp in pending}

    done = asyncio.run(until_final(MetadataCache(KeySpace("t")), [("o", 0), ("o", 1)], send,
                                   RETRIABLE, 5.0, "test", {}))
    assert rounds == [[("o", 0), ("o", 1)], [("o", 1)], [("o", 1)]]
    assert {tp: e.code for tp, e in done.items()} == {("o", 0): ErrorCode.NONE,
                                                      ("o", 1): ErrorCode.NONE}


def test_what_is_still_retriable_at_the_deadline_keeps_its_error() -> None:
    async def send(pending: list[TopicPartition], remaining_s: float
                   ) -> dict[TopicPartition, MarkerError]:
        return {tp: MarkerError(ErrorCode.NOT_COORDINATOR, "no owner") for tp in pending}

    done = asyncio.run(until_final(MetadataCache(KeySpace("t")), [("o", 0)], send,
                                   RETRIABLE, 0.3, "test", {}))
    assert done == {("o", 0): MarkerError(ErrorCode.NOT_COORDINATOR, "no owner")}
