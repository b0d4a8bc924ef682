"""find-hanging's decision (strand/client/transactions.py), as Kafka's tool: open
transactions idle past the longest timeout are candidates; one is hanging unless a
coordinator knows its producer id and lists its partition in that transaction."""

from __future__ import annotations

from strand.client.structs import TopicPartition
from strand.client.transactions import (
    OpenTransaction,
    ProducerState,
    TransactionDescription,
    hanging,
    open_transactions,
)

NOW = 1_000_000
B0, B1 = TopicPartition("b", 0), TopicPartition("b", 1)


def producer(pid: int, last_ms: int, start: int | None) -> ProducerState:
    return ProducerState(pid, 0, 4, last_ms, None, start)


def described(tid: str, *partitions: TopicPartition) -> TransactionDescription:
    return TransactionDescription(tid, "Ongoing", 60_000, NOW - 5000, 1, 0, partitions)


def test_candidates_are_open_and_idle_past_the_timeout() -> None:
    old_open, young_open, old_closed = (producer(1, NOW - 2000, 10),
                                        producer(2, NOW - 500, 11), producer(3, NOW - 9000, None))
    found = open_transactions({B1: [young_open, old_open], B0: [old_closed, old_open]},
                              NOW, 1000)
    assert found == [OpenTransaction(B0, old_open), OpenTransaction(B1, old_open)]
    assert open_transactions({B0: [old_open]}, NOW, 2000) == []  # not longer than it


def test_hanging_unless_the_coordinator_lists_the_partition() -> None:
    c = {pid: OpenTransaction(tp, producer(pid, 0, 0))
         for pid, tp in ((1, B0), (2, B0), (3, B0), (4, B1))}
    found = hanging(list(c.values()),
                    {2: "gone", 3: "other-partitions", 4: "ongoing"},
                    {"gone": None, "other-partitions": described("x", B1),
                     "ongoing": described("y", B0, B1)})
    # 1: no transactional id has it; 2: its id is unknown now; 3: its transaction
    # does not hold b-0; 4: ongoing with b-1, the coordinator will end it.
    assert found == [c[1], c[2], c[3]]
