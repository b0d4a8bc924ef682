"""gRPC clients of a storage node: other storage nodes (ReplicaFetch, as a follower)
and the active controller (AlterPartition, ControlledShutdown). Its channels also
carry the KIP-890 verification of transactional writes
(:class:`strand.cluster.transaction_calls.CoordinatorTxnVerifier`).

Addresses come from the metadata cache (broker registrations, the controller's
election record). Answers from a controller older than the one this node knows are
ignored: a deposed controller cannot change anything here (docs/architecture.md §5).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from services.storage.append_traces import TracedAppend
from services.storage.fetch_params import FetchedPartition, FetchParams
from services.storage.isr import IsrAnswer, IsrProposal
from strand.client.channel import AioChannels
from strand.cluster.cache import MetadataCache
from strand.errors import ErrorCode, LeaderNotAvailableError, NotControllerError, error_for
from strand.security.tls import ClientTls
from strand.v1 import controller_pb2 as pb_ctl
from strand.v1 import controller_pb2_grpc, storage_pb2, storage_pb2_grpc

log = logging.getLogger(__name__)

CONTROLLER_TIMEOUT_S = 10.0
FETCH_TIMEOUT_MARGIN_S = 10.0


class PeerClients:
    def __init__(self, cache: MetadataCache, node_id: int, tls: ClientTls | None = None) -> None:
        self.cache = cache
        self.node_id = node_id
        self.channels = AioChannels(f"storage-{node_id}", tls)
        self.channel = self.channels.get

    async def close(self) -> None:
        await self.channels.close()

    # -- storage nodes ------------------------------------------------------------------------

    async def replica_fetch(self, leader: int,
                            params: FetchParams) -> Sequence[FetchedPartition]:
        broker = self.cache.brokers.get(leader)
        if broker is None:
            raise LeaderNotAvailableError(f"broker {leader} is not registered")
        if params.replica_id is None:
            raise ValueError("a ReplicaFetch is a follower's fetch: it needs its replica id")
        request = storage_pb2.ReplicaFetchRequest(
            replica_id=params.replica_id, max_wait_ms=params.max_wait_ms,
            min_bytes=params.min_bytes, max_bytes=params.max_bytes)
        for p in params.partitions:
            request.partitions.add(
                topic=p.topic, partition=p.partition, fetch_offset=p.fetch_offset,
                current_leader_epoch=p.current_leader_epoch,
                last_fetched_epoch=p.last_fetched_epoch,
                partition_max_bytes=p.partition_max_bytes, log_start_offset=p.log_start_offset)
        stub = storage_pb2_grpc.StorageStub(self.channel(broker.address))
        response = await stub.ReplicaFetch(
            request, timeout=params.max_wait_ms / 1000 + FETCH_TIMEOUT_MARGIN_S)
        return [FetchedPartition(
            topic=r.topic, partition=r.partition, error_code=r.error_code,
            error_message=r.error_message, high_watermark=r.high_watermark,
            log_start_offset=r.log_start_offset, log_end_offset=r.log_end_offset,
            diverging_epoch=((r.diverging_epoch.epoch, r.diverging_epoch.end_offset)
                             if r.HasField("diverging_epoch") else None),
            records=r.records, traces=[
                TracedAppend(t.first_offset, t.last_offset, tuple(sorted(t.context.items())))
                for t in r.traced_appends]) for r in response.partitions]

    # -- the controller -----------------------------------------------------------------------

    def _controller(self) -> tuple[controller_pb2_grpc.ControllerStub, int]:
        record = self.cache.controller
        if record is None:
            raise NotControllerError("no active controller right now")
        return (controller_pb2_grpc.ControllerStub(self.channel(record.address)),
                self.cache.controller_epoch)

    def _check_controller(self, known_epoch: int, answered_epoch: int, code: int,
                          message: str) -> None:
        if code != ErrorCode.NONE:
            raise error_for(code, message)
        if answered_epoch < max(known_epoch, self.cache.controller_epoch):
            raise NotControllerError(
                f"answer from a deposed controller (epoch {answered_epoch}, the active one "
                f"is {self.cache.controller_epoch}): ignored")

    async def alter_partition(self, broker_id: int,
                              proposals: Sequence[IsrProposal]) -> Sequence[IsrAnswer]:
        stub, epoch = self._controller()
        request = pb_ctl.AlterPartitionRequest(broker_id=broker_id)
        for p in proposals:
            request.partitions.add(topic=p.topic, partition=p.partition,
                                   leader_epoch=p.leader_epoch,
                                   partition_epoch=p.partition_epoch, new_isr=p.new_isr)
        response = await stub.AlterPartition(request, timeout=CONTROLLER_TIMEOUT_S)
        self._check_controller(epoch, response.controller_epoch, response.error_code,
                               response.error_message)
        return [IsrAnswer(topic=a.topic, partition=a.partition, error_code=a.error_code,
                          error_message=a.error_message, leader=a.leader,
                          leader_epoch=a.leader_epoch, partition_epoch=a.partition_epoch,
                          isr=tuple(a.isr)) for a in response.partitions]

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> int:
        """Ask to lose leaderships; returns how many this broker still leads."""
        stub, epoch = self._controller()
        response = await stub.ControlledShutdown(
            pb_ctl.ControlledShutdownRequest(broker_id=broker_id, broker_epoch=broker_epoch),
            timeout=CONTROLLER_TIMEOUT_S)
        self._check_controller(epoch, response.controller_epoch, response.error_code,
                               response.error_message)
        return int(response.remaining_leaderships)
