"""The gateway process: strand.v1.Gateway ↔ storage nodes and the active controller.

Stateless: metadata comes from an etcd watch, so any number of gateways can run.
Produce, fetch and list-offsets requests are split per leader node and forwarded
concurrently, one call per node; topic admin goes to the active controller; metadata
and topic configs are answered from the local cache.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc

from services.gateway.groups import GroupRouter
from services.gateway.routing import Routes, route
from strand.cluster.cache import MetadataCache
from strand.cluster.etcd import MetadataWatcher, connect
from strand.cluster.keys import KeySpace
from strand.errors import ErrorCode
from strand.log.config import TOPIC_CONFIG
from strand.service.grpc_server import GRPC_OPTIONS, new_server, serve, set_serving
from strand.v1 import common_pb2 as pb
from strand.v1 import controller_pb2_grpc, gateway_pb2_grpc, storage_pb2_grpc
from strand.v1 import groups_pb2 as pb_groups

log = logging.getLogger(__name__)

CONTROLLER_WAIT_S = 10.0
VALID_ACKS = (0, 1, -1)

Response = TypeVar("Response")


def _code(code: ErrorCode) -> Any:
    return pb.ErrorCode.Value(code.name)


@dataclass(frozen=True, slots=True)
class GatewaySettings:
    etcd_endpoints: list[str]
    cluster: str
    listen: str
    metrics_port: int = 0


class Channels:
    """One channel per remote address, reused by every request."""

    def __init__(self) -> None:
        self._channels: dict[str, grpc.aio.Channel] = {}

    def get(self, address: str) -> grpc.aio.Channel:
        channel = self._channels.get(address)
        if channel is None:
            channel = grpc.aio.insecure_channel(address, options=GRPC_OPTIONS)
            self._channels[address] = channel
        return channel

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()


def _transport_code(exc: grpc.aio.AioRpcError) -> ErrorCode:
    if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
        return ErrorCode.REQUEST_TIMED_OUT
    # The leader is gone or moving: the client refreshes metadata and retries.
    return ErrorCode.NOT_LEADER_OR_FOLLOWER


# Per RPC, the partition reply that carries an error (with its "unknown" fields).
ErrorReply = Callable[[int, ErrorCode, str], Any]


def _produce_error(partition: int, code: ErrorCode, message: str) -> Any:
    return pb.PartitionProduceResponse(partition=partition, error_code=_code(code),
                                       error_message=message)


def _fetch_error(partition: int, code: ErrorCode, message: str) -> Any:
    return pb.PartitionFetchResponse(partition=partition, error_code=_code(code),
                                     error_message=message, high_watermark=-1,
                                     last_stable_offset=-1, log_start_offset=-1)


def _offsets_error(partition: int, code: ErrorCode, message: str) -> Any:
    return pb.PartitionListOffsetsResponse(partition=partition, error_code=_code(code),
                                           error_message=message, offset=-1, timestamp=-1,
                                           leader_epoch=-1)


def _fail_unroutable(results: dict[tuple[str, int], Any], routes: Routes[Any],
                     reply: ErrorReply) -> None:
    for u in routes.unroutable:
        results[(u.topic, u.partition)] = reply(u.partition, u.code, u.message)


def _fail_transport(results: dict[tuple[str, int], Any], entries: list[tuple[str, int, Any]],
                    reply: ErrorReply, address: str, exc: grpc.aio.AioRpcError) -> None:
    message = f"leader {address}: {exc.code().name} {exc.details()}"
    for topic, partition, _ in entries:
        results[(topic, partition)] = reply(partition, _transport_code(exc), message)


def _merge(results: dict[tuple[str, int], Any], topics: Iterable[Any]) -> list[Any]:
    """Record a node's per-partition answers; returns them."""
    merged = []
    for topic_response in topics:
        for part in topic_response.partitions:
            results[(topic_response.topic, part.partition)] = part
            merged.append(part)
    return merged


def _single_node(routes: Routes[Any]) -> str | None:
    """The address when every partition of a request goes to one node, else None."""
    if routes.unroutable or len(routes.by_node) != 1:
        return None
    ((_, address),) = routes.by_node
    return address


def _grouped(entries: Iterable[tuple[str, int, Any]]) -> dict[str, list[Any]]:
    topics: dict[str, list[Any]] = {}
    for topic, _partition, item in entries:
        topics.setdefault(topic, []).append(item)
    return topics


def _forwarded(method: str, response_type: type[Any]) -> Callable[..., Awaitable[Any]]:
    """A servicer method passing a group call on to the coordinator of its group."""
    async def call(self: GatewayServicer, request: Any,
                   context: grpc.aio.ServicerContext) -> Any:
        return await self.groups.forward(method, request, response_type)

    call.__name__ = call.__qualname__ = method
    return call


class GatewayServicer(gateway_pb2_grpc.GatewayServicer):
    def __init__(self, cache: MetadataCache, channels: Channels) -> None:
        self.cache = cache
        self.channels = channels
        self.groups = GroupRouter(cache, channels)

    # -- consumer groups (forwarded to the coordinator of the group's shard) ------------------

    async def JoinGroup(self, request: pb_groups.JoinGroupRequest,
                        context: grpc.aio.ServicerContext) -> pb_groups.JoinGroupResponse:
        # A join waits for the rebalance: up to the member's rebalance timeout.
        response: pb_groups.JoinGroupResponse = await self.groups.forward(
            "JoinGroup", request, pb_groups.JoinGroupResponse,
            timeout_s=request.rebalance_timeout_ms / 1000 + 10)
        return response

    SyncGroup = _forwarded("SyncGroup", pb_groups.SyncGroupResponse)
    Heartbeat = _forwarded("Heartbeat", pb_groups.HeartbeatResponse)
    LeaveGroup = _forwarded("LeaveGroup", pb_groups.LeaveGroupResponse)
    OffsetCommit = _forwarded("OffsetCommit", pb_groups.OffsetCommitResponse)
    OffsetFetch = _forwarded("OffsetFetch", pb_groups.OffsetFetchResponse)
    DescribeGroup = _forwarded("DescribeGroup", pb_groups.DescribeGroupResponse)
    DeleteGroup = _forwarded("DeleteGroup", pb_groups.DeleteGroupResponse)

    async def ListGroups(self, request: pb_groups.ListGroupsRequest,
                         context: grpc.aio.ServicerContext) -> pb_groups.ListGroupsResponse:
        wait_s = request.timeout_ms / 1000 if request.timeout_ms > 0 else None
        return await self.groups.list_groups(wait_s)

    def _storage(self, address: str) -> storage_pb2_grpc.StorageStub:
        return storage_pb2_grpc.StorageStub(self.channels.get(address))

    # -- produce ------------------------------------------------------------------------------

    async def Produce(self, request: pb.ProduceRequest,
                      context: grpc.aio.ServicerContext) -> pb.ProduceResponse:
        results: dict[tuple[str, int], pb.PartitionProduceResponse] = {}
        items = [(t.topic, p.partition, p) for t in request.topics for p in t.partitions]
        if request.acks not in VALID_ACKS:
            message = f"acks must be 0, 1 or -1 (all), not {request.acks}"
            for topic, partition, _ in items:
                results[(topic, partition)] = _produce_error(
                    partition, ErrorCode.INVALID_REQUIRED_ACKS, message)
            return self._produce_response(request, results)
        routes = route(self.cache, items)
        _fail_unroutable(results, routes, _produce_error)
        timeout = max(request.timeout_ms, 1000) / 1000 + 5
        single = _single_node(routes)
        if single is not None:
            # The SDK sends one request per leader: pass it on as it came, without
            # copying every batch into a new message (and the answer back unchanged).
            try:
                answer: pb.ProduceResponse = await self._storage(single).Produce(
                    request, timeout=timeout)
                return answer
            except grpc.aio.AioRpcError as exc:
                _fail_transport(results, items, _produce_error, single, exc)
                return self._produce_response(request, results)

        async def forward(address: str, entries: list[tuple[str, int, Any]]) -> None:
            sub = pb.ProduceRequest(acks=request.acks, timeout_ms=request.timeout_ms,
                                    transactional_id=request.transactional_id, topics=[
                                        pb.TopicProduceData(topic=topic, partitions=parts)
                                        for topic, parts in _grouped(entries).items()])
            try:
                response = await self._storage(address).Produce(sub, timeout=timeout)
            except grpc.aio.AioRpcError as exc:
                _fail_transport(results, entries, _produce_error, address, exc)
                return
            _merge(results, response.topics)

        await asyncio.gather(*(forward(address, entries)
                               for (_, address), entries in routes.by_node.items()))
        return self._produce_response(request, results)

    @staticmethod
    def _produce_response(request: pb.ProduceRequest,
                          results: dict[tuple[str, int], pb.PartitionProduceResponse]
                          ) -> pb.ProduceResponse:
        return pb.ProduceResponse(topics=[
            pb.TopicProduceResponse(topic=t.topic, partitions=[
                results.get((t.topic, p.partition)) or _produce_error(
                    p.partition, ErrorCode.UNKNOWN_SERVER_ERROR, "no answer from the leader")
                for p in t.partitions])
            for t in request.topics])

    # -- fetch --------------------------------------------------------------------------------

    async def Fetch(self, request: pb.FetchRequest,
                    context: grpc.aio.ServicerContext) -> pb.FetchResponse:
        results: dict[tuple[str, int], pb.PartitionFetchResponse] = {}
        items = [(t.topic, p.partition, p) for t in request.topics for p in t.partitions]
        routes = route(self.cache, items)
        _fail_unroutable(results, routes, _fetch_error)
        timeout = request.max_wait_ms / 1000 + 10
        single = _single_node(routes)
        if single is not None:  # as for produce: no copy of the records either way
            try:
                answer: pb.FetchResponse = await self._storage(single).Fetch(
                    request, timeout=timeout)
                return answer
            except grpc.aio.AioRpcError as exc:
                _fail_transport(results, items, _fetch_error, single, exc)
                routes.by_node.clear()

        async def forward(address: str, entries: list[tuple[str, int, Any]]) -> bool:
            sub = pb.FetchRequest(max_wait_ms=request.max_wait_ms, min_bytes=request.min_bytes,
                                  max_bytes=request.max_bytes,
                                  isolation_level=request.isolation_level, topics=[
                                      pb.TopicFetchData(topic=topic, partitions=parts)
                                      for topic, parts in _grouped(entries).items()])
            try:
                response = await self._storage(address).Fetch(sub, timeout=timeout)
            except grpc.aio.AioRpcError as exc:
                _fail_transport(results, entries, _fetch_error, address, exc)
                return True
            return any(part.records or part.error_code != 0
                       for part in _merge(results, response.topics))

        # Every node long-polls on its own; the first one with data (or an error)
        # answers the client, and the others' polls are cancelled rather than awaited:
        # their partitions come back empty this time (fetch is a read, so nothing lost).
        pending = {asyncio.ensure_future(forward(address, entries))
                   for (_, address), entries in routes.by_node.items()}
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            if any(task.result() for task in done):
                break
        for task in pending:
            task.cancel()
        for task in pending:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        return pb.FetchResponse(topics=[
            pb.TopicFetchResponse(topic=t.topic, partitions=[
                results.get((t.topic, p.partition)) or pb.PartitionFetchResponse(
                    partition=p.partition, high_watermark=-1, last_stable_offset=-1,
                    log_start_offset=-1)
                for p in t.partitions])
            for t in request.topics])

    # -- list offsets -------------------------------------------------------------------------

    async def ListOffsets(self, request: pb.ListOffsetsRequest,
                          context: grpc.aio.ServicerContext) -> pb.ListOffsetsResponse:
        results: dict[tuple[str, int], pb.PartitionListOffsetsResponse] = {}
        items = [(t.topic, p.partition, p) for t in request.topics for p in t.partitions]
        routes = route(self.cache, items)
        _fail_unroutable(results, routes, _offsets_error)

        async def forward(address: str, entries: list[tuple[str, int, Any]]) -> None:
            sub = pb.ListOffsetsRequest(isolation_level=request.isolation_level, topics=[
                pb.TopicListOffsets(topic=topic, partitions=parts)
                for topic, parts in _grouped(entries).items()])
            try:
                response = await self._storage(address).ListOffsets(sub, timeout=30)
            except grpc.aio.AioRpcError as exc:
                _fail_transport(results, entries, _offsets_error, address, exc)
                return
            _merge(results, response.topics)

        await asyncio.gather(*(forward(address, entries)
                               for (_, address), entries in routes.by_node.items()))
        return pb.ListOffsetsResponse(topics=[
            pb.TopicListOffsetsResponse(topic=t.topic, partitions=[
                results[(t.topic, p.partition)] for p in t.partitions])
            for t in request.topics])

    # -- metadata and configs (answered from the cache) ----------------------------------------

    async def Metadata(self, request: pb.MetadataRequest,
                       context: grpc.aio.ServicerContext) -> pb.MetadataResponse:
        cache = self.cache
        names = list(request.topics) or sorted(cache.topics)
        topics = []
        for name in names:
            record = cache.topics.get(name)
            if record is None:
                topics.append(pb.TopicMetadata(
                    name=name, error_code=_code(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                    error_message=f"unknown topic {name!r}"))
                continue
            partitions = []
            for part in cache.partitions_of(name):
                live = part.leader in cache.brokers
                partitions.append(pb.PartitionMetadata(
                    partition=part.partition,
                    error_code=_code(ErrorCode.NONE if live else ErrorCode.LEADER_NOT_AVAILABLE),
                    leader=part.leader if live else -1, leader_epoch=part.leader_epoch,
                    replicas=list(part.replicas), isr=list(part.isr)))
            topics.append(pb.TopicMetadata(name=name, topic_id=record.topic_id,
                                           is_internal=record.internal, partitions=partitions))
        brokers = [pb.BrokerMetadata(node_id=b.node_id, host=b.host, port=b.port,
                                     rack=b.rack or "")
                   for b in sorted(cache.brokers.values(), key=lambda b: b.node_id)]
        return pb.MetadataResponse(cluster_id=cache.keys.prefix.strip("/"), controller_id=-1,
                                   brokers=brokers, topics=topics)

    async def DescribeConfigs(self, request: pb.DescribeConfigsRequest,
                              context: grpc.aio.ServicerContext) -> pb.DescribeConfigsResponse:
        out = []
        for name in request.topics:
            record = self.cache.topics.get(name)
            if record is None:
                out.append(pb.DescribeConfigsResponse.Topic(
                    name=name, error_code=_code(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                    error_message=f"unknown topic {name!r}"))
                continue
            entries = []
            for key in sorted(TOPIC_CONFIG):
                if key in record.config:
                    entries.append(pb.ConfigEntry(key=key, value=record.config[key]))
                else:
                    default = TOPIC_CONFIG[key].default
                    text = ",".join(default) if isinstance(default, tuple) else str(default)
                    entries.append(pb.ConfigEntry(key=key, value=text.lower()
                                                  if isinstance(default, bool) else text,
                                                  is_default=True))
            out.append(pb.DescribeConfigsResponse.Topic(name=name, configs=entries))
        return pb.DescribeConfigsResponse(topics=out)

    # -- topic admin (forwarded to the active controller) --------------------------------------

    async def _to_controller(self, call: Callable[[controller_pb2_grpc.ControllerStub],
                                                  Awaitable[Response]],
                             failed: Callable[[Any, str], Response]
                             ) -> Response:
        """Forward to the active controller; if it just changed, wait for the new one.
        ``failed(code, message)`` builds the answer when no controller takes it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CONTROLLER_WAIT_S
        while True:
            controller = self.cache.controller
            if controller is not None:
                stub = controller_pb2_grpc.ControllerStub(self.channels.get(controller.address))
                try:
                    response = await call(stub)
                except grpc.aio.AioRpcError as exc:
                    failure = f"controller {controller.address}: {exc.code().name}"
                else:
                    results = [*getattr(response, "topics", ()),
                               *getattr(response, "partitions", ())]
                    if not any(r.error_code == _code(ErrorCode.NOT_CONTROLLER) for r in results):
                        return response
                    failure = "the controller changed during the request"
            else:
                failure = "no active controller"
            remaining = deadline - loop.time()
            if remaining <= 0:
                return failed(_code(ErrorCode.NOT_CONTROLLER), failure)
            await self.cache.wait_changed(min(remaining, 1.0))

    async def CreateTopics(self, request: pb.CreateTopicsRequest,
                           context: grpc.aio.ServicerContext) -> pb.CreateTopicsResponse:
        return await self._to_controller(
            lambda stub: stub.CreateTopics(request, timeout=30),
            lambda code, why: pb.CreateTopicsResponse(topics=_failed_topics(
                [t.name for t in request.topics], code, why)))

    async def DeleteTopics(self, request: pb.DeleteTopicsRequest,
                           context: grpc.aio.ServicerContext) -> pb.DeleteTopicsResponse:
        return await self._to_controller(
            lambda stub: stub.DeleteTopics(request, timeout=30),
            lambda code, why: pb.DeleteTopicsResponse(topics=_failed_topics(
                list(request.topics), code, why)))

    async def CreatePartitions(self, request: pb.CreatePartitionsRequest,
                               context: grpc.aio.ServicerContext) -> pb.CreatePartitionsResponse:
        return await self._to_controller(
            lambda stub: stub.CreatePartitions(request, timeout=30),
            lambda code, why: pb.CreatePartitionsResponse(topics=_failed_topics(
                [t.name for t in request.topics], code, why)))

    async def AlterConfigs(self, request: pb.AlterConfigsRequest,
                           context: grpc.aio.ServicerContext) -> pb.AlterConfigsResponse:
        return await self._to_controller(
            lambda stub: stub.AlterConfigs(request, timeout=30),
            lambda code, why: pb.AlterConfigsResponse(topics=_failed_topics(
                [t.name for t in request.topics], code, why)))

    async def AlterPartitionReassignments(
        self, request: pb.AlterPartitionReassignmentsRequest, context: grpc.aio.ServicerContext
    ) -> pb.AlterPartitionReassignmentsResponse:
        return await self._to_controller(
            lambda stub: stub.AlterPartitionReassignments(request, timeout=30),
            lambda code, why: pb.AlterPartitionReassignmentsResponse(partitions=[
                pb.PartitionResult(topic=p.topic, partition=p.partition, error_code=code,
                                   error_message=why) for p in request.partitions]))

    async def ListPartitionReassignments(
        self, request: pb.ListPartitionReassignmentsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListPartitionReassignmentsResponse:
        wanted = set(request.topics)
        response = pb.ListPartitionReassignmentsResponse()
        for name in sorted(self.cache.topics):
            if wanted and name not in wanted:
                continue
            for part in self.cache.partitions_of(name):
                if part.reassigning:
                    response.reassignments.add(
                        topic=name, partition=part.partition, replicas=part.replicas,
                        adding=part.adding, removing=part.removing, isr=part.isr)
        return response


def _failed_topics(names: list[str], code: Any,
                   message: str) -> list[pb.TopicResult]:
    return [pb.TopicResult(name=n, error_code=code, error_message=message) for n in names]


class GatewayProcess:
    def __init__(self, settings: GatewaySettings) -> None:
        self.settings = settings
        self.cache = MetadataCache(KeySpace(settings.cluster))
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        etcd = await connect(self.settings.etcd_endpoints)
        watcher = MetadataWatcher(etcd, self.cache)
        await watcher.start()
        channels = Channels()
        server, health_servicer = new_server()
        gateway_pb2_grpc.add_GatewayServicer_to_server(GatewayServicer(self.cache, channels),
                                                       server)
        await serve(server, self.settings.listen)
        await set_serving(health_servicer)
        log.info("gateway serving", extra={"listen": self.settings.listen})
        try:
            await self._stopping.wait()
        finally:
            await server.stop(grace=2)
            await channels.close()
            await watcher.stop()
            await etcd.close()

    def stop(self) -> None:
        self._stopping.set()
