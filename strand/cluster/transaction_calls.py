"""Calls to the transaction coordinators: KIP-890 part 1's verification
(:class:`strand.coordination.txn_verifier.TxnVerifier`), shared by the services that
take transactional writes: is this partition part of the producer's open
transaction? A storage node asks it before the first transactional batch of a
producer on a partition; the group coordinator before a TxnOffsetCommit stores
pending offsets (the group's ``__consumer_offsets`` partition must have been added
with AddOffsetsToTxn). Both refuse what is not, so a late request of an aborted
transaction cannot land in the next one.

The owner of the transactional id's shard (its ``__transaction_state`` partition,
found as the gateway finds it, from the watched metadata) is asked with
AddPartitionsToTxn ``verify_only`` (Kafka 3.6's verification).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import NamedTuple

import grpc

from strand.cluster.cache import MetadataCache
from strand.coordination.owners import key_shard, shard_owner
from strand.coordination.shards import TRANSACTION_TOPIC
from strand.errors import CoordinatorNotAvailableError, ErrorCode, InvalidTxnStateError, error_for
from strand.v1 import transactions_pb2 as pb_txn
from strand.v1 import transactions_pb2_grpc

__all__ = ["VERIFY_TIMEOUT_S", "CoordinatorTxnVerifier"]

TopicPartition = tuple[str, int]

VERIFY_TIMEOUT_S = 5.0


class CoordinatorTxnVerifier:
    """Asks the owning transaction coordinator. ``who`` names the caller in errors
    ("storage node 3"); ``channel`` gives a channel to an address (the caller's).

    The questions for one producer (transactional id, producer id, epoch) share calls:
    those asked while one is out go together in the next, so a transaction's first
    batches on every partition of a node (pipelined, and sent together) cost one call
    to the coordinator, not one per partition and batch."""

    def __init__(self, cache: MetadataCache, who: str,
                 channel: Callable[[str], grpc.aio.Channel]) -> None:
        self.cache = cache
        self.who = who
        self._channel = channel
        self._queued: dict[_Producer, dict[TopicPartition, list[asyncio.Future[None]]]] = {}
        self._asking: set[_Producer] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     topic: str, partition: int) -> None:
        """Return if ``topic``-``partition`` is in the producer's ongoing transaction;
        raise the coordinator's typed error otherwise (INVALID_TXN_STATE,
        PRODUCER_FENCED, ...), COORDINATOR_NOT_AVAILABLE when it cannot be asked."""
        key = _Producer(transactional_id, producer_id, producer_epoch)
        answer: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # A caller cancelled meanwhile leaves its answer unread: not an error to log.
        answer.add_done_callback(lambda done: done.cancelled() or done.exception())
        self._queued.setdefault(key, {}).setdefault((topic, partition), []).append(answer)
        if key not in self._asking:
            self._asking.add(key)
            task = asyncio.ensure_future(self._asking_for(key))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        await asyncio.shield(answer)

    async def _asking_for(self, key: _Producer) -> None:
        """One call at a time for ``key``, each with every partition queued meanwhile."""
        try:
            await asyncio.sleep(0)  # the questions of this turn of the loop go together
            while (queued := self._queued.pop(key, None)) is not None:
                try:
                    outcomes = await self._ask(key, sorted(queued))
                except Exception as exc:  # every waiter gets the failure
                    outcomes = {tp: exc for tp in queued}
                for tp, waiters in queued.items():
                    for waiter in waiters:
                        if not waiter.done():
                            failure = outcomes.get(tp)
                            if failure is None:
                                waiter.set_result(None)
                            else:
                                waiter.set_exception(failure)
        finally:
            self._asking.discard(key)
            for waiters in self._queued.pop(key, {}).values():  # cancelled: nobody asks
                for waiter in waiters:
                    if not waiter.done():
                        waiter.set_exception(CoordinatorNotAvailableError(
                            f"{self.who} stopped verifying transactional writes; retry"))

    async def _ask(self, key: _Producer, partitions: list[TopicPartition]
                   ) -> dict[TopicPartition, Exception | None]:
        transactional_id, producer_id, producer_epoch = key
        whose = (f"{_names(partitions)} for {transactional_id!r} (producer {producer_id}, "
                 f"epoch {producer_epoch})")
        shard = key_shard(self.cache, TRANSACTION_TOPIC, transactional_id)
        if shard is None:
            raise CoordinatorNotAvailableError(
                f"{self.who} cannot verify {whose}: {TRANSACTION_TOPIC} does not exist yet "
                "(no transaction coordinator has run); retry")
        owner = shard_owner(self.cache, TRANSACTION_TOPIC, shard)
        if owner is None:
            raise CoordinatorNotAvailableError(
                f"{self.who} cannot verify {whose}: no transaction coordinator owns shard "
                f"{shard} right now; retry")
        stub = transactions_pb2_grpc.TransactionsStub(self._channel(owner.address))
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        try:
            response = await stub.AddPartitionsToTxn(pb_txn.AddPartitionsToTxnRequest(
                transactional_id=transactional_id, producer_id=producer_id,
                producer_epoch=producer_epoch, verify_only=True,
                topics=[pb_txn.TxnTopic(topic=t, partitions=ps) for t, ps in by_topic.items()]),
                timeout=VERIFY_TIMEOUT_S)
        except grpc.aio.AioRpcError as exc:
            raise CoordinatorNotAvailableError(
                f"{self.who} cannot verify {whose}: transaction coordinator "
                f"{owner.instance_id} at {owner.address} did not answer "
                f"({exc.code().name}); retry") from exc
        if response.error_code != ErrorCode.NONE:
            raise error_for(response.error_code, response.error_message)
        codes = {(r.topic, r.partition): r.error_code for r in response.results}
        outcomes: dict[TopicPartition, Exception | None] = {}
        for topic, partition in partitions:
            code = codes.get((topic, partition))
            tp_whose = (f"{topic}-{partition} for {transactional_id!r} (producer "
                        f"{producer_id}, epoch {producer_epoch})")
            if code is None:
                outcomes[(topic, partition)] = InvalidTxnStateError(
                    f"transaction coordinator {owner.instance_id} did not answer for "
                    f"{tp_whose}")
            elif code != ErrorCode.NONE:
                outcomes[(topic, partition)] = error_for(code, (
                    f"{tp_whose} is not part of the producer's open transaction (transaction "
                    f"coordinator {owner.instance_id}: {ErrorCode(code).name}); add the "
                    "partition to the transaction before writing to it"))
            else:
                outcomes[(topic, partition)] = None
        return outcomes


class _Producer(NamedTuple):
    transactional_id: str
    producer_id: int
    producer_epoch: int


def _names(partitions: list[TopicPartition]) -> str:
    return ", ".join(f"{t}-{p}" for t, p in partitions)
