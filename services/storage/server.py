"""The storage node process: gRPC ↔ the storage domain, membership, health, shutdown.

Start: watch the cluster metadata, open the logs of the partitions this node hosts,
serve gRPC, register ``brokers/<node-id>`` under a lease, then report SERVING.
SIGTERM: controlled shutdown first (the controller moves this node's leaderships to
other in-sync replicas while it still serves, so producers retry on the new leaders
without a failure), then NOT_SERVING, answer waiting fetches, stop the server
(in-flight calls finish), close every log cleanly (so the next start skips
recovery), revoke the lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc

from services.storage.broker_metrics import BrokerMetrics
from services.storage.disk import DiskExecutor
from services.storage.epoch_offsets import EpochEndAnswer, EpochEndLookup, EpochEndQuery
from services.storage.fetch import Fetcher
from services.storage.fetch_params import FetchedPartition, FetchParams, PartitionFetch
from services.storage.isr import IsrManager
from services.storage.maintenance import LogMaintenance
from services.storage.offsets import OffsetAnswer, OffsetLookup, OffsetQuery
from services.storage.peers import PeerClients
from services.storage.produce import Appender, AppendResult, PartitionAppend
from services.storage.producers import ProducerLookup
from services.storage.registration import BrokerRegistrar
from services.storage.repair import DEFAULT_PROBE_BYTES, DEFAULT_PROBE_INTERVAL_S, ReplicaRepairs
from services.storage.replica_fetcher import DEFAULT_THROTTLE_BYTES_PER_S, ReplicaFetchers
from services.storage.replica_manager import DEFAULT_REPLICA_LAG_TIME_MAX_MS, ReplicaManager
from services.storage.scrub import DEFAULT_SCRUB_BYTES_PER_S, DEFAULT_SCRUB_INTERVAL_S, LogScrubber
from services.storage.txn_markers import MarkerWriter, TxnMarker
from strand.cluster.cache import MetadataCache
from strand.cluster.etcd import MetadataWatcher, connect
from strand.cluster.keys import KeySpace
from strand.cluster.model import BrokerRegistration
from strand.cluster.transaction_calls import CoordinatorTxnVerifier
from strand.coordination.txn_verifier import TxnVerifier
from strand.security.tls import ClientTls, ServiceTls
from strand.service.grpc_server import new_server, serve, set_serving
from strand.service.telemetry import meter
from strand.v1 import common_pb2 as pb
from strand.v1 import storage_pb2, storage_pb2_grpc

log = logging.getLogger(__name__)

SERVICE_NAME = "strand.v1.Storage"
T = TypeVar("T")
Response = TypeVar("Response", pb.ProduceResponse, pb.FetchResponse, pb.ListOffsetsResponse,
                    pb.OffsetForLeaderEpochResponse)


@dataclass(frozen=True, slots=True)
class StorageSettings:
    etcd_endpoints: list[str]
    cluster: str
    listen: str
    advertise: str
    node_id: int
    data_dir: Path
    rack: str | None = None
    lease_ttl: int = 5
    maintenance_interval_s: float = 5.0
    io_threads: int = 8
    shutdown_grace_s: float = 5.0
    metrics_port: int = 0
    tls: ServiceTls | None = None  # None: plaintext listener and calls
    etcd_tls: ClientTls | None = None  # None: plaintext to etcd
    replica_lag_time_max_ms: float = DEFAULT_REPLICA_LAG_TIME_MAX_MS
    controlled_shutdown_timeout_s: float = 30.0
    reassignment_throttle_bytes_per_s: float = DEFAULT_THROTTLE_BYTES_PER_S
    scrub_bytes_per_s: float = DEFAULT_SCRUB_BYTES_PER_S  # 0: no background scrub
    scrub_interval_s: float = DEFAULT_SCRUB_INTERVAL_S
    disk_probe_interval_s: float = DEFAULT_PROBE_INTERVAL_S
    disk_probe_bytes: int = DEFAULT_PROBE_BYTES
    transaction_partition_verification: bool = True


def split_host_port(address: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` → (host, port); ValueError if malformed."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"expected host:port, got {address!r}")
    return host.strip("[]"), int(port)


class StorageServicer(storage_pb2_grpc.StorageServicer):
    """Translates protobuf requests into domain calls and domain results back."""

    def __init__(self, appender: Appender, fetcher: Fetcher, offsets: OffsetLookup,
                 producers: ProducerLookup, epoch_ends: EpochEndLookup,
                 metrics: BrokerMetrics | None = None) -> None:
        self.appender = appender
        self.epoch_ends = epoch_ends
        self.metrics = metrics
        self.fetcher = fetcher
        self.offsets = offsets
        self.producers = producers
        self.markers = MarkerWriter(appender)

    async def Produce(self, request: pb.ProduceRequest,
                      context: grpc.aio.ServicerContext) -> pb.ProduceResponse:
        appends = [PartitionAppend(topic.topic, p.partition, p.records,
                                   transactional_id=request.transactional_id)
                   for topic in request.topics for p in topic.partitions]
        results = await self.appender.append(request.acks, appends,
                                             request.timeout_ms or 30_000)
        return _per_topic(pb.ProduceResponse(), request.topics, results, _add_produce_result)

    async def Fetch(self, request: pb.FetchRequest,
                    context: grpc.aio.ServicerContext) -> pb.FetchResponse:
        params = FetchParams.from_consumer(
            max_wait_ms=request.max_wait_ms, min_bytes=request.min_bytes,
            max_bytes=request.max_bytes,
            read_committed=request.isolation_level == pb.READ_COMMITTED,
            partitions=[PartitionFetch(topic.topic, p.partition, p.fetch_offset,
                                       p.partition_max_bytes, p.current_leader_epoch)
                        for topic in request.topics for p in topic.partitions])
        results = await self.fetcher.fetch(params)
        if self.metrics is not None:
            for result in results:
                self.metrics.fetched(result.topic, result.records)
        return _per_topic(pb.FetchResponse(), request.topics, results, _add_fetched)

    async def ListOffsets(self, request: pb.ListOffsetsRequest,
                          context: grpc.aio.ServicerContext) -> pb.ListOffsetsResponse:
        queries = [OffsetQuery(topic.topic, p.partition, p.timestamp)
                   for topic in request.topics for p in topic.partitions]
        answers = await self.offsets.list_offsets(
            queries, request.isolation_level == pb.READ_COMMITTED)
        return _per_topic(pb.ListOffsetsResponse(), request.topics, answers, _add_offset_answer)

    async def OffsetForLeaderEpoch(self, request: pb.OffsetForLeaderEpochRequest,
                                   context: grpc.aio.ServicerContext
                                   ) -> pb.OffsetForLeaderEpochResponse:
        queries = [EpochEndQuery(topic.topic, p.partition, p.current_leader_epoch,
                                 p.leader_epoch)
                   for topic in request.topics for p in topic.partitions]
        answers = await self.epoch_ends.end_offsets(queries)
        return _per_topic(pb.OffsetForLeaderEpochResponse(), request.topics, answers,
                          _add_epoch_end)

    async def WriteTxnMarkers(self, request: storage_pb2.WriteTxnMarkersRequest,
                              context: grpc.aio.ServicerContext
                              ) -> storage_pb2.WriteTxnMarkersResponse:
        markers = [TxnMarker(m.producer_id, m.producer_epoch, m.committed,
                             m.coordinator_epoch,
                             [(t.topic, p) for t in m.topics for p in t.partitions],
                             m.next_producer_epoch if m.HasField("next_producer_epoch")
                             else None)
                   for m in request.markers]
        outcomes = await self.markers.write(markers, request.timeout_ms or 30_000)
        response = storage_pb2.WriteTxnMarkersResponse()
        for marker, results in zip(request.markers, outcomes, strict=True):
            out = response.markers.add(producer_id=marker.producer_id)
            remaining = iter(results)
            for topic in marker.topics:
                parts = out.topics.add(topic=topic.topic).partitions
                for _ in topic.partitions:
                    result = next(remaining)
                    parts.add(partition=result.partition, error_code=result.error_code,
                              error_message=result.error_message)
        return response

    async def DescribeProducers(self, request: storage_pb2.DescribeProducersRequest,
                                context: grpc.aio.ServicerContext
                                ) -> storage_pb2.DescribeProducersResponse:
        answers = await self.producers.describe(
            [(t.topic, p) for t in request.topics for p in t.partitions])
        response = storage_pb2.DescribeProducersResponse()
        for answer in answers:
            response.partitions.add(
                topic=answer.topic, partition=answer.partition, error_code=answer.error_code,
                error_message=answer.error_message, producers=[
                    storage_pb2.ActiveProducer(
                        producer_id=p.producer_id, producer_epoch=p.producer_epoch,
                        last_sequence=p.last_sequence, last_timestamp=p.last_timestamp,
                        coordinator_epoch=p.coordinator_epoch,
                        current_txn_start_offset=p.current_txn_start_offset)
                    for p in answer.producers])
        return response

    async def ReplicaFetch(self, request: storage_pb2.ReplicaFetchRequest,
                           context: grpc.aio.ServicerContext) -> storage_pb2.ReplicaFetchResponse:
        params = FetchParams.from_follower(
            request.replica_id, max_wait_ms=request.max_wait_ms,
            min_bytes=request.min_bytes, max_bytes=request.max_bytes,
            partitions=[PartitionFetch(
                p.topic, p.partition, p.fetch_offset, p.partition_max_bytes,
                p.current_leader_epoch, p.last_fetched_epoch, p.log_start_offset)
                for p in request.partitions])
        response = storage_pb2.ReplicaFetchResponse()
        for result in await self.fetcher.fetch(params):
            _add_replica_fetched(response.partitions, result)
        return response


def _per_topic(response: Response, request_topics: Iterable[Any], results: Iterable[T],
               add: Callable[[Any, T], object]) -> Response:
    """``response`` with the per-partition ``results`` (in request order), grouped by
    topic as the request was; ``add`` builds one partition's answer in place."""
    remaining = iter(results)
    for topic in request_topics:
        partitions = response.topics.add(topic=topic.topic).partitions
        for _ in topic.partitions:
            add(partitions, next(remaining))
    return response


def _add_produce_result(partitions: Any, result: AppendResult) -> None:
    partitions.add(
        partition=result.partition, error_code=result.error_code,
        error_message=result.error_message, base_offset=result.base_offset,
        log_append_time_ms=result.log_append_time_ms, log_start_offset=result.log_start_offset)


def _add_fetched(partitions: Any, result: FetchedPartition) -> None:
    partitions.add(
        partition=result.partition, error_code=result.error_code,
        error_message=result.error_message, high_watermark=result.high_watermark,
        last_stable_offset=result.last_stable_offset, log_start_offset=result.log_start_offset,
        records=result.records, aborted_transactions=[
            pb.AbortedTransaction(producer_id=pid, first_offset=first)
            for pid, first in result.aborted_transactions])


def _add_offset_answer(partitions: Any, answer: OffsetAnswer) -> None:
    partitions.add(
        partition=answer.partition, error_code=answer.error_code,
        error_message=answer.error_message, offset=answer.offset, timestamp=answer.timestamp,
        leader_epoch=answer.leader_epoch)


def _add_epoch_end(partitions: Any, answer: EpochEndAnswer) -> None:
    partitions.add(
        partition=answer.partition, error_code=answer.error_code,
        error_message=answer.error_message, leader_epoch=answer.leader_epoch,
        end_offset=answer.end_offset)


def _add_replica_fetched(partitions: Any, result: FetchedPartition) -> None:
    out = partitions.add(
        topic=result.topic, partition=result.partition,
        error_code=result.error_code,
        error_message=result.error_message, high_watermark=result.high_watermark,
        log_start_offset=result.log_start_offset, log_end_offset=result.log_end_offset,
        records=result.records)
    for traced in result.traces:
        out.traced_appends.add(first_offset=traced.first_offset,
                               last_offset=traced.last_offset, context=dict(traced.context))
    if result.diverging_epoch is not None:
        out.diverging_epoch.epoch, out.diverging_epoch.end_offset = result.diverging_epoch


class StorageProcess:
    def __init__(self, settings: StorageSettings) -> None:
        self.settings = settings
        self.keys = KeySpace(settings.cluster)
        self.cache = MetadataCache(self.keys)
        self._stopping = asyncio.Event()

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        settings = self.settings
        host, port = split_host_port(settings.advertise)
        registration = BrokerRegistration(settings.node_id, host, port, settings.rack)
        etcd = await connect(settings.etcd_endpoints, settings.etcd_tls)
        watcher = MetadataWatcher(etcd, self.cache)
        disk = DiskExecutor(settings.io_threads)
        manager = ReplicaManager(settings.node_id, settings.data_dir, self.cache, disk,
                                 replica_lag_time_max_ms=settings.replica_lag_time_max_ms)
        peers = PeerClients(self.cache, settings.node_id,
                            settings.tls.client if settings.tls else None)
        fetchers = ReplicaFetchers(
            manager, disk, peers,
            throttle_bytes_per_s=settings.reassignment_throttle_bytes_per_s)
        manager.followers = fetchers
        broker_metrics = BrokerMetrics(meter(), manager.replicas)
        manager.isr_changed = broker_metrics.isr_changed
        isr = IsrManager(manager, peers, broker_metrics)
        maintenance = LogMaintenance(manager, disk, settings.maintenance_interval_s)
        registrar = BrokerRegistrar(etcd, self.keys, registration, settings.lease_ttl)
        repairs = ReplicaRepairs(manager, disk, registrar.set_offline_replicas,
                                 probe_interval_s=settings.disk_probe_interval_s,
                                 probe_bytes=settings.disk_probe_bytes)
        manager.storage_failures = repairs
        scrubber = (LogScrubber(manager, disk, repairs, bytes_per_s=settings.scrub_bytes_per_s,
                                interval_s=settings.scrub_interval_s)
                    if settings.scrub_bytes_per_s > 0 else None)
        server, health_servicer = new_server(("storage node", settings.tls))
        storage_pb2_grpc.add_StorageServicer_to_server(StorageServicer(
            Appender(manager, disk, _txn_verifier(settings, peers), broker_metrics),
            Fetcher(manager, disk, isr, repairs),
            OffsetLookup(manager, disk), ProducerLookup(manager, disk),
            EpochEndLookup(manager, disk), broker_metrics), server)
        maintenance_task: asyncio.Task[None] | None = None
        scrub_task: asyncio.Task[None] | None = None
        isr_task: asyncio.Task[None] | None = None
        try:
            await watcher.start()
            await manager.start()
            await serve(server, settings.listen, settings.tls)
            registrar.start()
            await _first_of(registrar.registered.wait(), self._stopping.wait())
            maintenance_task = asyncio.create_task(maintenance.run(), name="log-maintenance")
            isr_task = asyncio.create_task(isr.run(), name="isr-shrink")
            if scrubber is not None:
                scrub_task = asyncio.create_task(scrubber.run(), name="log-scrub")
            if not self._stopping.is_set():
                await set_serving(health_servicer, SERVICE_NAME)
                log.info("storage node serving", extra={
                    "listen": settings.listen, "advertise": settings.advertise,
                    "node_id": settings.node_id, "partitions": len(manager.replicas)})
            await self._stopping.wait()
            log.info("stopping")
            if registrar.registered.is_set():
                await registrar.mark_shutting_down()
                await _controlled_shutdown(manager, peers, registrar,
                                           settings.controlled_shutdown_timeout_s)
        finally:
            if isr_task is not None:
                isr_task.cancel()
            await isr.shutdown()
            await repairs.shutdown()
            await health_servicer.enter_graceful_shutdown()
            manager.begin_shutdown()
            await server.stop(grace=settings.shutdown_grace_s)
            maintenance.stop()
            if maintenance_task is not None:
                await maintenance_task
            if scrubber is not None:
                scrubber.stop()
            if scrub_task is not None:
                await scrub_task
            await fetchers.shutdown()
            await manager.shutdown()
            await peers.close()
            await registrar.stop()
            await watcher.stop()
            await etcd.close()
            disk.shutdown()
            log.info("stopped")


def _txn_verifier(settings: StorageSettings, peers: PeerClients) -> TxnVerifier | None:
    """KIP-890's check of transactional writes: asked of the owning transaction
    coordinator, unless turned off (``--transaction-partition-verification off``)."""
    if not settings.transaction_partition_verification:
        return None
    return CoordinatorTxnVerifier(peers.cache, f"storage node {peers.node_id}", peers.channel)


async def _controlled_shutdown(manager: ReplicaManager, peers: PeerClients,
                               registrar: BrokerRegistrar, timeout_s: float) -> None:
    """Ask the controller to move this node's leaderships away, until none is left that
    could move or ``timeout_s`` passes. A sole in-sync leader keeps its partition:
    nobody else has its data, so there is nothing to hand over."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        movable = _movable_leaderships(manager)
        if not movable:
            log.info("controlled shutdown complete: no leadership left to move")
            return
        try:
            # The registration's broker epoch: the controller acts only on the request
            # of the registered incarnation, marked as shutting down (KIP-380).
            await peers.controlled_shutdown(manager.node_id, registrar.registration.epoch)
        except Exception as exc:
            log.warning("controlled shutdown request failed", extra={"error": str(exc)})
        # The controller's answer is applied through the etcd watch: give it a moment.
        await manager.cache.wait_changed(0.5)
    log.warning("controlled shutdown incomplete; stopping anyway",
                extra={"movable_leaderships": _movable_leaderships(manager)})


def _movable_leaderships(manager: ReplicaManager) -> int:
    return sum(1 for replica in manager.replicas.values()
               if replica.leader_state is not None and len(replica.record.isr) > 1)


async def _first_of(*waits: Coroutine[Any, Any, object]) -> None:
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
