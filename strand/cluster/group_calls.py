"""Calls the transaction coordinator makes to group coordinators: CompleteTxnOffsets.

A transaction that sent offsets (AddOffsetsToTxn) has a partition of
``__consumer_offsets`` among its partitions. Its end is not a control batch on that
partition (the group coordinator is the only writer of its shard): it is a call to
the instance owning that shard, which turns the producer's pending offsets into
committed ones or drops them. The owner is looked up in the watched metadata cache
(:mod:`strand.coordination.owners`, as the gateway routes group calls); a shard
without an owner, one loading or moving, or an owner that does not answer is asked
again as the metadata changes, until ``timeout_s`` passes (as
:mod:`strand.cluster.storage_calls` retries markers); what is still not done then
keeps its error and the caller tries again later.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

import grpc

from strand.cluster.cache import MetadataCache
from strand.cluster.storage_calls import CALL_TIMEOUT_S, MarkerError, TopicPartition, until_final
from strand.coordination.owners import shard_owner
from strand.coordination.shards import GROUP_TOPIC
from strand.errors import ErrorCode
from strand.v1 import groups_pb2, groups_pb2_grpc

__all__ = ["GroupOffsetsCompleter"]

# Answers after which the coordinator asks again (the shard is moving).
RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                       ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NETWORK_EXCEPTION,
                       ErrorCode.REQUEST_TIMED_OUT})


class GroupOffsetsCompleter:
    """Ends a transaction's offsets on the group coordinators of its
    ``__consumer_offsets`` partitions."""

    def __init__(self, cache: MetadataCache, channel: Callable[[str], grpc.aio.Channel],
                 timeout_s: float = 30.0) -> None:
        self.cache = cache
        self._channel = channel  # the caller's, kept open (see StorageMarkerWriter)
        self.timeout_s = timeout_s

    async def complete(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                       commit: bool, partitions: Iterable[TopicPartition]
                       ) -> dict[TopicPartition, MarkerError]:
        """Each partition's final answer (NONE: its offsets are ended and stored)."""

        async def send(pending: list[TopicPartition], remaining_s: float
                       ) -> dict[TopicPartition, MarkerError]:
            owners = {tp: shard_owner(self.cache, GROUP_TOPIC, tp[1]) for tp in pending}
            asked = [(tp, owner.address) for tp, owner in owners.items() if owner is not None]
            answers = {tp: MarkerError(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                       f"no group coordinator owns shard {tp[1]} of "
                                       f"{GROUP_TOPIC}")
                       for tp, owner in owners.items() if owner is None}
            for (tp, _), answer in zip(asked, await asyncio.gather(*(
                    self._call(address, tp[1], producer_id, producer_epoch,
                               coordinator_epoch, commit, remaining_s)
                    for tp, address in asked)), strict=True):
                answers[tp] = answer
            return answers

        return await until_final(self.cache, partitions, send, RETRIABLE, self.timeout_s,
                                 "the completion of transactional offsets",
                                 {"producer_id": producer_id})

    async def _call(self, address: str, shard: int, producer_id: int, producer_epoch: int,
                    coordinator_epoch: int, commit: bool, timeout_s: float) -> MarkerError:
        request = groups_pb2.CompleteTxnOffsetsRequest(
            shard=shard, producer_id=producer_id, producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch, committed=commit)
        try:
            response = await groups_pb2_grpc.GroupCoordinatorStub(
                self._channel(address)).CompleteTxnOffsets(
                    request, timeout=min(timeout_s, CALL_TIMEOUT_S))
        except grpc.aio.AioRpcError as exc:
            return MarkerError(ErrorCode.NETWORK_EXCEPTION,
                               f"group coordinator {address} did not answer "
                               f"({exc.code().name})")
        return MarkerError(ErrorCode(response.error_code), response.error_message)
