"""The transaction coordinator process: gRPC ↔ the shard coordinators it owns.

Start: watch the cluster metadata, make sure ``__transaction_state`` exists (the
active controller creates it, compacted, like ``__consumer_offsets``), serve gRPC,
then register under ``txn-coordinators/<id>`` and take the shards rendezvous
hashing gives this instance among the transaction coordinators
(:mod:`strand.coordination.ownership`). Each call is routed by its transactional
id's shard; one this instance does not serve is answered NOT_COORDINATOR (the
gateway looks the owner up again), one still loading COORDINATOR_LOAD_IN_PROGRESS.
InitProducerId without a transactional id needs no shard: it is answered from the
instance's block of producer ids (granted by the controller to this registration).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

import grpc

from services.transactions.coordinator import (
    DEFAULT_ABORT_INTERVAL_MS,
    DEFAULT_EXPIRATION_INTERVAL_MS,
    TxnShardCoordinator,
)
from services.transactions.leader_markers import LeaderMarkerWriter
from services.transactions.markers import MarkerWriter
from services.transactions.txn_metadata import TopicPartition
from services.transactions.txn_requests import DEFAULT_MAX_TIMEOUT_MS, ProducerIdAndEpoch
from services.transactions.txn_state import TxnState
from services.transactions.txn_store import DEFAULT_ID_EXPIRATION_MS
from strand.client.channel import AioChannels
from strand.client.sasl import SaslCredentials, gateway_sasl
from strand.cluster.cache import MetadataCache
from strand.cluster.controller_calls import allocate_producer_ids, ensure_internal_topic
from strand.cluster.etcd import MetadataWatcher, connect
from strand.cluster.gateway_calls import GatewayProducer
from strand.cluster.group_calls import GroupOffsetsCompleter
from strand.cluster.keys import KeySpace
from strand.cluster.model import CoordinatorRecord, ProducerIdsBlock
from strand.cluster.storage_calls import StorageMarkerWriter
from strand.coordination.ownership import ShardOwnership, ShardSpace
from strand.coordination.producer_ids import ProducerIdManager
from strand.coordination.serving import ServedShards, answered
from strand.coordination.shard_log import owned_shard_log
from strand.coordination.shards import GROUP_TOPIC, TRANSACTION_TOPIC
from strand.errors import (
    CoordinatorNotAvailableError,
    ErrorCode,
    InvalidTransactionTimeoutError,
    UnknownTopicOrPartitionError,
)
from strand.security.tls import ClientTls, ServiceTls
from strand.service.grpc_server import new_server, serve, set_serving
from strand.v1 import common_pb2, transactions_pb2_grpc
from strand.v1 import transactions_pb2 as pb

log = logging.getLogger(__name__)

DEFAULT_TXN_SHARDS = 50  # Kafka's transaction.state.log.num.partitions


@dataclass(frozen=True, slots=True)
class TransactionsSettings:
    etcd_endpoints: list[str]
    cluster: str
    listen: str
    advertise: str
    instance_id: str
    bootstrap: str  # a gateway: where __transaction_state is read and written
    shards: int = DEFAULT_TXN_SHARDS
    lease_ttl: int = 5
    max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS
    abort_interval_ms: int = DEFAULT_ABORT_INTERVAL_MS
    id_expiration_ms: int = DEFAULT_ID_EXPIRATION_MS
    expiration_interval_ms: int = DEFAULT_EXPIRATION_INTERVAL_MS
    metrics_port: int = 0
    tls: ServiceTls | None = None  # None: plaintext listener and calls
    etcd_tls: ClientTls | None = None  # None: plaintext to etcd
    gateway_user: SaslCredentials | None = None  # who it is at its gateway (SCRAM)


def _code(code: ErrorCode) -> Any:
    return common_pb2.ErrorCode.Value(code.name)


def _partitions(topics: object) -> list[TopicPartition]:
    return [(t.topic, p) for t in topics for p in t.partitions]  # type: ignore[attr-defined]


class TransactionsServicer(transactions_pb2_grpc.TransactionsServicer):
    def __init__(self, cache: MetadataCache, producer_ids: ProducerIdManager,
                 max_timeout_ms: int) -> None:
        self.cache = cache
        self.producer_ids = producer_ids
        self.max_timeout_ms = max_timeout_ms
        self.served: ServedShards[TxnShardCoordinator] = ServedShards(cache,
                                                                      TRANSACTION_TOPIC)

    async def InitProducerId(self, request: pb.InitProducerIdRequest,
                             context: grpc.aio.ServicerContext) -> pb.InitProducerIdResponse:
        response = pb.InitProducerIdResponse(producer_id=-1, producer_epoch=-1)

        async def work() -> None:
            if not request.transactional_id:
                # An idempotent producer: a fresh id at epoch 0, nothing stored.
                if request.transaction_timeout_ms < 0:
                    raise InvalidTransactionTimeoutError(
                        f"transaction timeout {request.transaction_timeout_ms} ms is negative")
                response.producer_id = await self.producer_ids.generate()
                response.producer_epoch = 0
                return
            expected = None
            if request.HasField("producer_id") or request.HasField("producer_epoch"):
                expected = ProducerIdAndEpoch(request.producer_id, request.producer_epoch)
                if expected.producer_id < 0 or expected.epoch < 0:
                    expected = None  # Kafka's "no producer id" (-1) sent explicitly
            coordinator = self.served.for_key(request.transactional_id)
            result = await coordinator.init_producer_id(
                request.transactional_id, request.transaction_timeout_ms, expected)
            response.producer_id = result.producer_id
            response.producer_epoch = result.epoch

        await answered(response, work)
        return response

    async def AddPartitionsToTxn(self, request: pb.AddPartitionsToTxnRequest,
                                 context: grpc.aio.ServicerContext
                                 ) -> pb.AddPartitionsToTxnResponse:
        response = pb.AddPartitionsToTxnResponse()
        partitions = _partitions(request.topics)

        async def work() -> None:
            coordinator = self.served.for_key(request.transactional_id)
            if request.verify_only:
                for (topic, partition), code in coordinator.verify_partitions(
                        request.transactional_id, request.producer_id,
                        request.producer_epoch, partitions).items():
                    response.results.add(topic=topic, partition=partition, error_code=_code(code))
                return
            unknown = [tp for tp in partitions if not self._exists(tp)]
            if unknown:
                for topic, partition in unknown:
                    response.results.add(topic=topic, partition=partition, error_code=_code(
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                raise UnknownTopicOrPartitionError(
                    "cannot add " + ", ".join(f"{t}-{p}" for t, p in unknown)
                    + f" to the transaction of {request.transactional_id!r}: no such "
                    "partition; nothing was added")
            await coordinator.add_partitions(request.transactional_id, request.producer_id,
                                             request.producer_epoch, partitions)

        await answered(response, work)
        if not request.verify_only and not response.results:
            for topic, partition in partitions:
                response.results.add(topic=topic, partition=partition,
                                     error_code=response.error_code)
        return response

    def _exists(self, tp: TopicPartition) -> bool:
        record = self.cache.topics.get(tp[0])
        return record is not None and 0 <= tp[1] < record.partitions

    async def AddOffsetsToTxn(self, request: pb.AddOffsetsToTxnRequest,
                              context: grpc.aio.ServicerContext) -> pb.AddOffsetsToTxnResponse:
        response = pb.AddOffsetsToTxnResponse()

        async def work() -> None:
            await self.served.for_key(request.transactional_id).add_offsets(
                request.transactional_id, request.producer_id, request.producer_epoch,
                request.group_id)

        await answered(response, work)
        return response

    async def EndTxn(self, request: pb.EndTxnRequest,
                     context: grpc.aio.ServicerContext) -> pb.EndTxnResponse:
        response = pb.EndTxnResponse()

        async def work() -> None:
            following = await self.served.for_key(request.transactional_id).end_txn(
                request.transactional_id, request.producer_id, request.producer_epoch,
                request.committed,
                [(t.topic, p) for t in request.next_topics for p in t.partitions],
                keep_epoch=request.keep_epoch)
            response.producer_id = following.producer_id
            response.producer_epoch = following.epoch
            response.next_opened = following.opened

        await answered(response, work)
        return response

    async def DescribeTransactions(self, request: pb.DescribeTransactionsRequest,
                                   context: grpc.aio.ServicerContext
                                   ) -> pb.DescribeTransactionsResponse:
        response = pb.DescribeTransactionsResponse(transactional_id=request.transactional_id)

        async def work() -> None:
            found = self.served.for_key(request.transactional_id).describe(
                request.transactional_id)
            response.transaction_state = found.state.kafka_name
            response.transaction_timeout_ms = found.timeout_ms
            response.transaction_start_time_ms = found.start_ms
            response.producer_id = found.producer_id
            response.producer_epoch = found.producer_epoch
            topics: dict[str, list[int]] = {}
            for topic, partition in found.partitions:
                topics.setdefault(topic, []).append(partition)
            for topic, numbers in topics.items():
                response.topics.add(topic=topic, partitions=numbers)

        await answered(response, work)
        return response

    async def ListTransactions(self, request: pb.ListTransactionsRequest,
                               context: grpc.aio.ServicerContext
                               ) -> pb.ListTransactionsResponse:
        """The transactions of the asked shards this instance serves, loaded; the others
        are named in ``unavailable_shards`` (as ListGroups)."""
        response = pb.ListTransactionsResponse()
        shards = self.served.listing(request.shards)
        duration = request.duration_filter_ms if request.HasField("duration_filter_ms") else -1
        unknown: set[str] = set()
        for shard, coordinator in shards.served:
            listing = coordinator.list_transactions(request.state_filters,
                                                    request.producer_id_filters, duration)
            unknown.update(listing.unknown_state_filters)
            response.listed_shards.append(shard)
            for t in listing.transactions:
                response.transactions.add(transactional_id=t.transactional_id,
                                          producer_id=t.producer_id,
                                          transaction_state=t.state.kafka_name)
        if not (shards.served or shards.loading or shards.elsewhere):
            # No shard served: the state filters are still checked (Kafka answers them).
            unknown.update(s for s in request.state_filters if TxnState.from_name(s) is None)
        response.unknown_state_filters.extend(sorted(unknown))
        shards.report_unavailable(response)
        return response


class TransactionsProcess:
    def __init__(self, settings: TransactionsSettings,
                 markers: MarkerWriter | None = None) -> None:
        self.settings = settings
        self.keys = KeySpace(settings.cluster)
        self.cache = MetadataCache(self.keys)
        # The process's channels (to the gateway for its shard writes, to the storage
        # nodes and group coordinators for markers), closed on shutdown.
        self.channels = AioChannels(
            f"txn-coordinator-{settings.instance_id}",
            settings.tls.client if settings.tls else None,
            gateway_sasl(settings.bootstrap, settings.gateway_user))
        self.markers = (markers if markers is not None
                        else LeaderMarkerWriter(
                            StorageMarkerWriter(self.cache, self.channels.get),
                            GroupOffsetsCompleter(self.cache, self.channels.get)))
        self.ownership: ShardOwnership | None = None
        self.producer_ids = ProducerIdManager(self._fetch_block)
        self.servicer = TransactionsServicer(self.cache, self.producer_ids,
                                             settings.max_timeout_ms)
        self._stopping = asyncio.Event()
        self._gateway = GatewayProducer(self.channels, settings.bootstrap)

    def stop(self) -> None:
        self._stopping.set()

    async def _fetch_block(self) -> ProducerIdsBlock:
        epoch = self.ownership.epoch if self.ownership is not None else 0
        if not epoch:
            raise CoordinatorNotAvailableError(
                f"transaction coordinator {self.settings.instance_id!r} is not registered "
                "in etcd yet, so it cannot be granted producer ids; retry")
        return await allocate_producer_ids(self.cache, self.settings.instance_id, epoch,
                                           tls=self.channels.tls)

    async def run(self) -> None:
        settings = self.settings
        etcd = await connect(settings.etcd_endpoints, settings.etcd_tls)
        watcher = MetadataWatcher(etcd, self.cache)
        await watcher.start()
        server, health_servicer = new_server(("transaction coordinator", settings.tls))
        transactions_pb2_grpc.add_TransactionsServicer_to_server(self.servicer, server)
        await serve(server, settings.listen, settings.tls)
        self.ownership = ShardOwnership(
            etcd, self.keys, self.cache,
            CoordinatorRecord(settings.instance_id, settings.advertise),
            ShardSpace.transactions(self.keys, self.cache), self.servicer.served.shard_count,
            settings.lease_ttl, self._acquire, self.servicer.served.release)
        owning = asyncio.create_task(self._own(self.ownership), name="shard-ownership")
        await set_serving(health_servicer)
        log.info("transaction coordinator serving", extra={"listen": settings.listen,
                                                           "instance": settings.instance_id})
        try:
            await self._stopping.wait()
        finally:
            self.ownership.stop()
            await owning
            await self.producer_ids.close()
            await server.stop(grace=2)
            await self.channels.close()
            await watcher.stop()
            await etcd.close()

    async def _own(self, ownership: ShardOwnership) -> None:
        await ensure_internal_topic(self.cache, TRANSACTION_TOPIC, self.settings.shards,
                                    self._stopping, self.channels.tls)
        if not self._stopping.is_set():
            await ownership.run()

    def _offsets_shards(self) -> int | None:
        record = self.cache.topics.get(GROUP_TOPIC)
        return record.partitions if record is not None else None

    async def _acquire(self, shard: int) -> None:
        assert self.ownership is not None
        settings = self.settings
        coordinator = TxnShardCoordinator(
            shard, owned_shard_log(self._gateway, settings.bootstrap, TRANSACTION_TOPIC,
                                   "transactions", shard, self.ownership),
            self.markers, self.producer_ids.generate, self._offsets_shards,
            coordinator_epoch=self.ownership.shard_epoch(shard),
            max_timeout_ms=settings.max_timeout_ms,
            abort_interval_ms=settings.abort_interval_ms,
            id_expiration_ms=settings.id_expiration_ms,
            expiration_interval_ms=settings.expiration_interval_ms)
        await self.servicer.served.acquire(shard, coordinator, self._stopping)
