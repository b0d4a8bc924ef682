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

from collections.abc import Callable

import grpc

from strand.cluster.cache import MetadataCache
from strand.coordination.owners import key_shard, shard_owner
from strand.coordination.shards import TRANSACTION_TOPIC
from strand.errors import CoordinatorNotAvailableError, ErrorCode, InvalidTxnStateError, error_for
from strand.v1 import transactions_pb2 as pb_txn
from strand.v1 import transactions_pb2_grpc

__all__ = ["VERIFY_TIMEOUT_S", "CoordinatorTxnVerifier"]

VERIFY_TIMEOUT_S = 5.0


class CoordinatorTxnVerifier:
    """Asks the owning transaction coordinator. ``who`` names the caller in errors
    ("storage node 3"); ``channel`` gives a channel to an address (the caller's)."""

    def __init__(self, cache: MetadataCache, who: str,
                 channel: Callable[[str], grpc.aio.Channel]) -> None:
        self.cache = cache
        self.who = who
        self._channel = channel

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     topic: str, partition: int) -> None:
        """Return if ``topic``-``partition`` is in the producer's ongoing transaction;
        raise the coordinator's typed error otherwise (INVALID_TXN_STATE,
        PRODUCER_FENCED, ...), COORDINATOR_NOT_AVAILABLE when it cannot be asked."""
        whose = (f"{topic}-{partition} for {transactional_id!r} (producer {producer_id}, "
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
        try:
            response = await stub.AddPartitionsToTxn(pb_txn.AddPartitionsToTxnRequest(
                transactional_id=transactional_id, producer_id=producer_id,
                producer_epoch=producer_epoch, verify_only=True,
                topics=[pb_txn.TxnTopic(topic=topic, partitions=[partition])]),
                timeout=VERIFY_TIMEOUT_S)
        except grpc.aio.AioRpcError as exc:
            raise CoordinatorNotAvailableError(
                f"{self.who} cannot verify {whose}: transaction coordinator "
                f"{owner.instance_id} at {owner.address} did not answer "
                f"({exc.code().name}); retry") from exc
        if response.error_code != ErrorCode.NONE:
            raise error_for(response.error_code, response.error_message)
        codes = [r.error_code for r in response.results
                 if (r.topic, r.partition) == (topic, partition)]
        if not codes:
            raise InvalidTxnStateError(
                f"transaction coordinator {owner.instance_id} did not answer for {whose}")
        if codes[0] != ErrorCode.NONE:
            raise error_for(codes[0], (
                f"{whose} is not part of the producer's open transaction (transaction "
                f"coordinator {owner.instance_id}: {ErrorCode(codes[0]).name}); add the "
                "partition to the transaction before writing to it"))
