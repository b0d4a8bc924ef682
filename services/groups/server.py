"""The group coordinator process: gRPC ↔ the shard coordinators it owns.

Start: watch the cluster metadata, make sure ``__consumer_offsets`` exists (the
active controller creates it), serve gRPC, then take the shards that rendezvous
hashing gives this instance (:mod:`strand.coordination.ownership`). Each call is routed
by the group's shard; a group whose shard this instance does not serve is answered
NOT_COORDINATOR (the gateway then looks the owner up again), one still loading
COORDINATOR_LOAD_IN_PROGRESS. When the cluster's topics change (a topic deleted or
re-created), every shard is told, to drop the offsets of the deleted ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc

from services.groups.coordinator import DEFAULT_RETENTION_CHECK_INTERVAL_MS, ShardCoordinator
from services.groups.lag import DEFAULT_LAG_INTERVAL_S, ConsumerLag
from services.groups.membership import Protocol
from services.groups.offset_store import DEFAULT_RETENTION_MS
from services.groups.records import OffsetValue
from services.groups.topics import CacheTopics
from strand.client.channel import AioChannels
from strand.client.sasl import SaslCredentials, gateway_sasl
from strand.cluster.cache import MetadataCache
from strand.cluster.controller_calls import ensure_internal_topic
from strand.cluster.etcd import MetadataWatcher, connect
from strand.cluster.gateway_calls import GatewayProducer, latest_offsets
from strand.cluster.keys import KeySpace
from strand.cluster.model import CoordinatorRecord
from strand.cluster.transaction_calls import CoordinatorTxnVerifier
from strand.coordination.ownership import ShardOwnership, ShardSpace
from strand.coordination.serving import ServedShards
from strand.coordination.shard_log import owned_shard_log
from strand.coordination.shards import DEFAULT_SHARDS, GROUP_TOPIC, shard_for
from strand.errors import ErrorCode, StrandError
from strand.security.tls import ClientTls, ServiceTls
from strand.service.grpc_server import new_server, serve, set_serving
from strand.service.telemetry import meter
from strand.v1 import common_pb2, groups_pb2_grpc
from strand.v1 import groups_pb2 as pb

log = logging.getLogger(__name__)
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class GroupsSettings:
    etcd_endpoints: list[str]
    cluster: str
    listen: str
    advertise: str
    instance_id: str
    bootstrap: str  # a gateway: the coordinator reads and writes __consumer_offsets there
    shards: int = DEFAULT_SHARDS
    lease_ttl: int = 5
    initial_rebalance_delay_ms: int = 3000
    offsets_retention_ms: int = DEFAULT_RETENTION_MS
    offsets_retention_check_interval_ms: int = DEFAULT_RETENTION_CHECK_INTERVAL_MS
    metrics_port: int = 0
    lag_interval_s: float = DEFAULT_LAG_INTERVAL_S  # consumer lag measured this often
    tls: ServiceTls | None = None  # None: plaintext listener and calls
    etcd_tls: ClientTls | None = None  # None: plaintext to etcd
    gateway_user: SaslCredentials | None = None  # who it is at its gateway (SCRAM)


def _code(code: ErrorCode) -> Any:
    return common_pb2.ErrorCode.Value(code.name)


_EXPLANATIONS = {
    ErrorCode.UNKNOWN_MEMBER_ID: "member {member!r} is not in group {group!r} (it left, or "
                                 "its session or poll interval expired): rejoin",
    ErrorCode.ILLEGAL_GENERATION: "generation {generation} of member {member!r} is not group "
                                  "{group!r}'s current generation: rejoin",
    ErrorCode.REBALANCE_IN_PROGRESS: "group {group!r} is rebalancing: rejoin",
    ErrorCode.FENCED_INSTANCE_ID: "instance {instance!r} of group {group!r} has been taken "
                                  "over by a newer member with the same group_instance_id",
    ErrorCode.GROUP_NOT_EMPTY: "group {group!r} has active members: its offsets can be set "
                               "from outside only while it is empty; stop its consumers "
                               "(or wait for their sessions to expire) and retry",
}


def _explain(code: ErrorCode, request: Any) -> str:
    """A message for an error the domain answered by its code alone."""
    template = _EXPLANATIONS.get(code, f"{code.name} (group {{group!r}})")
    return template.format(group=getattr(request, "group_id", ""),
                           member=getattr(request, "member_id", ""),
                           generation=getattr(request, "generation_id", -1),
                           instance=getattr(request, "group_instance_id", ""))


class GroupsServicer(groups_pb2_grpc.GroupCoordinatorServicer):
    def __init__(self, cache: MetadataCache) -> None:
        self.cache = cache
        self.served: ServedShards[ShardCoordinator] = ServedShards(cache, GROUP_TOPIC)
        self.shards = self.served.shards
        self.loading = self.served.loading

    def _coordinator(self, group_id: str) -> ShardCoordinator:
        topic = self.cache.topics.get(GROUP_TOPIC)
        if not group_id:
            raise _Refused(ErrorCode.INVALID_GROUP_ID, "the group id must not be empty")
        if topic is None:
            raise _Refused(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{GROUP_TOPIC} does not exist yet")
        shard = shard_for(group_id, topic.partitions)
        coordinator = self.shards.get(shard)
        if coordinator is not None:
            return coordinator
        if shard in self.loading:
            raise _Refused(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, f"shard {shard} is loading")
        raise _Refused(ErrorCode.NOT_COORDINATOR, f"this instance does not serve shard {shard}")

    async def _answer(self, response: R, work: Callable[[], Awaitable[None]],
                      request: Any) -> R:
        try:
            await work()
        except _Refused as refused:
            response.error_code = _code(refused.code)  # type: ignore[attr-defined]
            response.error_message = refused.message  # type: ignore[attr-defined]
        except StrandError as exc:
            response.error_code = _code(exc.code)  # type: ignore[attr-defined]
            response.error_message = str(exc)  # type: ignore[attr-defined]
        code = getattr(response, "error_code", 0)
        if code and not getattr(response, "error_message", ""):
            response.error_message = _explain(  # type: ignore[attr-defined]
                ErrorCode(code), request)
        return response

    async def JoinGroup(self, request: pb.JoinGroupRequest,
                        context: grpc.aio.ServicerContext) -> pb.JoinGroupResponse:
        response = pb.JoinGroupResponse(member_id=request.member_id)

        async def work() -> None:
            coordinator = self._coordinator(request.group_id)
            outcome = await coordinator.join(
                request.group_id, request.member_id, request.group_instance_id or None,
                request.client_id, request.protocol_type,
                [Protocol(p.name, p.metadata) for p in request.protocols],
                request.session_timeout_ms, request.rebalance_timeout_ms, request.client_host)
            response.error_code = _code(outcome.error)
            response.member_id = outcome.member_id
            response.generation_id = outcome.generation
            response.protocol_name = outcome.protocol
            response.leader_id = outcome.leader_id
            for member_id, instance_id, metadata in outcome.members:
                response.members.add(member_id=member_id, group_instance_id=instance_id or "",
                                     metadata=metadata)

        return await self._answer(response, work, request)

    async def SyncGroup(self, request: pb.SyncGroupRequest,
                        context: grpc.aio.ServicerContext) -> pb.SyncGroupResponse:
        response = pb.SyncGroupResponse()

        async def work() -> None:
            coordinator = self._coordinator(request.group_id)
            assignments = ({a.member_id: a.assignment for a in request.assignments}
                           if request.assignments else None)
            group = coordinator.groups.get(request.group_id)
            if group is not None and request.member_id == group.leader_id and assignments is None:
                assignments = {}  # a leader assigning nothing still completes the round
            error, assignment = await coordinator.sync(
                request.group_id, request.member_id, request.generation_id,
                request.group_instance_id or None, assignments)
            response.error_code = _code(error)
            response.assignment = assignment
            group = coordinator.groups.get(request.group_id)
            response.protocol_name = group.protocol if group else ""

        return await self._answer(response, work, request)

    async def Heartbeat(self, request: pb.HeartbeatRequest,
                        context: grpc.aio.ServicerContext) -> pb.HeartbeatResponse:
        response = pb.HeartbeatResponse()

        async def work() -> None:
            coordinator = self._coordinator(request.group_id)
            response.error_code = _code(coordinator.heartbeat(
                request.group_id, request.member_id, request.generation_id,
                request.group_instance_id or None))

        return await self._answer(response, work, request)

    async def LeaveGroup(self, request: pb.LeaveGroupRequest,
                         context: grpc.aio.ServicerContext) -> pb.LeaveGroupResponse:
        response = pb.LeaveGroupResponse()

        async def work() -> None:
            coordinator = self._coordinator(request.group_id)
            response.error_code = _code(coordinator.leave(request.group_id, request.member_id))

        return await self._answer(response, work, request)

    async def OffsetCommit(self, request: pb.OffsetCommitRequest,
                           context: grpc.aio.ServicerContext) -> pb.OffsetCommitResponse:
        response = pb.OffsetCommitResponse()

        async def work() -> None:
            coordinator = self._coordinator(request.group_id)
            error = await coordinator.commit(
                request.group_id, request.member_id, request.generation_id,
                request.group_instance_id or None, _offsets(request.partitions))
            response.error_code = _code(error)

        return _per_partition(await self._answer(response, work, request), request)

    async def TxnOffsetCommit(self, request: pb.TxnOffsetCommitRequest,
                              context: grpc.aio.ServicerContext) -> pb.OffsetCommitResponse:
        response = pb.OffsetCommitResponse()

        async def work() -> None:
            coordinator = self._coordinator(request.group_id)
            error = await coordinator.txn_commit(
                request.transactional_id, request.producer_id, request.producer_epoch,
                request.group_id, request.member_id, request.generation_id,
                request.group_instance_id or None, _offsets(request.partitions))
            response.error_code = _code(error)

        return _per_partition(await self._answer(response, work, request), request)

    async def CompleteTxnOffsets(self, request: pb.CompleteTxnOffsetsRequest,
                                 context: grpc.aio.ServicerContext
                                 ) -> pb.CompleteTxnOffsetsResponse:
        """The transaction coordinator ends a producer's transaction in one shard."""
        response = pb.CompleteTxnOffsetsResponse()

        async def work() -> None:
            coordinator = self.shards.get(request.shard)
            if coordinator is None:
                loading = request.shard in self.loading
                raise _Refused(
                    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if loading
                    else ErrorCode.NOT_COORDINATOR,
                    f"shard {request.shard} of {GROUP_TOPIC} is "
                    + ("loading here; retry" if loading else
                       "not served by this instance; ask its owner"))
            await coordinator.complete_txn(request.producer_id, request.producer_epoch,
                                           request.coordinator_epoch, request.committed)

        return await self._answer(response, work, request)

    async def OffsetFetch(self, request: pb.OffsetFetchRequest,
                          context: grpc.aio.ServicerContext) -> pb.OffsetFetchResponse:
        response = pb.OffsetFetchResponse()

        async def work() -> None:
            coordinator = self._coordinator(request.group_id)
            wanted = ([(p.topic, p.partition) for p in request.partitions]
                      if request.partitions else None)
            found = coordinator.fetch(request.group_id, wanted)
            unstable = coordinator.unstable(request.group_id) if request.require_stable else set()
            listed = wanted if wanted is not None else sorted(set(found) | unstable)
            for topic, partition in listed:
                if (topic, partition) in unstable:
                    response.partitions.add(
                        topic=topic, partition=partition, offset=-1, leader_epoch=-1,
                        error_code=_code(ErrorCode.UNSTABLE_OFFSET_COMMIT),
                        error_message=f"{topic}-{partition} of group {request.group_id!r} "
                        "has transactional offsets pending: retry once the transaction "
                        "commits or aborts")
                    continue
                value = found.get((topic, partition))
                response.partitions.add(
                    topic=topic, partition=partition,
                    offset=value.offset if value else -1,
                    leader_epoch=value.leader_epoch if value else -1,
                    metadata=value.metadata if value else "")

        return await self._answer(response, work, request)

    async def DescribeGroup(self, request: pb.DescribeGroupRequest,
                            context: grpc.aio.ServicerContext) -> pb.DescribeGroupResponse:
        response = pb.DescribeGroupResponse()

        async def work() -> None:
            coordinator = self._coordinator(request.group_id)
            group = coordinator.groups.get(request.group_id)
            if group is None:
                response.state = "Dead"
                return
            response.state = group.state.value
            response.protocol_type = group.protocol_type
            response.protocol = group.protocol
            response.generation_id = group.generation
            response.leader_id = group.leader_id
            for m in group.members.values():
                response.members.add(
                    member_id=m.member_id, group_instance_id=m.group_instance_id or "",
                    client_id=m.client_id, client_host=m.client_host, assignment=m.assignment,
                    metadata=m.metadata(group.protocol) if group.protocol and
                    m.supports(group.protocol) else b"")

        return await self._answer(response, work, request)

    async def ListGroups(self, request: pb.ListGroupsRequest,
                         context: grpc.aio.ServicerContext) -> pb.ListGroupsResponse:
        """The groups of the asked shards this instance serves, loaded; the others are
        named in ``unavailable_shards`` (loading here, or not served here)."""
        response = pb.ListGroupsResponse()
        listing = self.served.listing(request.shards)
        for shard, coordinator in listing.served:
            response.listed_shards.append(shard)
            for name in sorted(set(coordinator.groups) | coordinator.store.groups()):
                group = coordinator.groups.get(name)
                response.groups.add(group_id=name,
                                    state=group.state.value if group else "Empty",
                                    protocol_type=group.protocol_type if group else "consumer")
        listing.report_unavailable(response)
        return response

    async def DeleteGroup(self, request: pb.DeleteGroupRequest,
                          context: grpc.aio.ServicerContext) -> pb.DeleteGroupResponse:
        response = pb.DeleteGroupResponse()

        async def work() -> None:
            coordinator = self._coordinator(request.group_id)
            response.error_code = _code(await coordinator.delete(request.group_id))

        return await self._answer(response, work, request)


def _offsets(partitions: Iterable[pb.OffsetCommitPartition]
             ) -> dict[tuple[str, int], OffsetValue]:
    return {(p.topic, p.partition): OffsetValue(p.offset, p.metadata, p.leader_epoch or -1,
                                                topic_id=p.topic_id) for p in partitions}


def _per_partition(response: pb.OffsetCommitResponse,
                   request: pb.OffsetCommitRequest | pb.TxnOffsetCommitRequest
                   ) -> pb.OffsetCommitResponse:
    """Every partition of a commit answered with the commit's error (it is stored
    whole or not at all)."""
    for p in request.partitions:
        response.partitions.add(topic=p.topic, partition=p.partition,
                                error_code=response.error_code)
    return response


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class GroupsProcess:
    def __init__(self, settings: GroupsSettings) -> None:
        self.settings = settings
        self.keys = KeySpace(settings.cluster)
        self.cache = MetadataCache(self.keys)
        self.servicer = GroupsServicer(self.cache)
        self.topics = CacheTopics(self.cache)
        self.channels = AioChannels(
            f"groups-{settings.instance_id}", settings.tls.client if settings.tls else None,
            gateway_sasl(settings.bootstrap, settings.gateway_user))
        self.verifier = CoordinatorTxnVerifier(
            self.cache, f"group coordinator {settings.instance_id}", self.channels.get)
        self._stopping = asyncio.Event()
        self._gateway = GatewayProducer(self.channels, settings.bootstrap)
        self.lag = ConsumerLag(meter(), self._committed, self._latest, settings.lag_interval_s)
        self.ownership: ShardOwnership | None = None

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        settings = self.settings
        etcd = await connect(settings.etcd_endpoints, settings.etcd_tls)
        watcher = MetadataWatcher(etcd, self.cache)
        await watcher.start()
        server, health_servicer = new_server(("group coordinator", settings.tls))
        groups_pb2_grpc.add_GroupCoordinatorServicer_to_server(self.servicer, server)
        await serve(server, settings.listen, settings.tls)
        self.ownership = ownership = ShardOwnership(
            etcd, self.keys, self.cache,
            CoordinatorRecord(settings.instance_id, settings.advertise),
            ShardSpace.groups(self.keys, self.cache),
            self.servicer.served.shard_count, settings.lease_ttl, self._acquire,
            self.servicer.served.release)
        owning = asyncio.create_task(self._own(ownership), name="shard-ownership")
        watching = asyncio.create_task(self._watch_topics(), name="topic-changes")
        measuring = asyncio.create_task(self.lag.run(), name="consumer-lag")
        await set_serving(health_servicer)
        log.info("group coordinator serving", extra={"listen": settings.listen,
                                                     "instance": settings.instance_id})
        try:
            await self._stopping.wait()
        finally:
            ownership.stop()
            await owning
            for task in (watching, measuring):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await server.stop(grace=2)
            await self.channels.close()
            await watcher.stop()
            await etcd.close()

    async def _own(self, ownership: ShardOwnership) -> None:
        await ensure_internal_topic(self.cache, GROUP_TOPIC, self.settings.shards,
                                    self._stopping, self.channels.tls)
        if not self._stopping.is_set():
            await ownership.run()

    def _committed(self) -> dict[str, dict[tuple[str, int], int]]:
        """The committed offsets of the groups of the shards this coordinator owns."""
        committed: dict[str, dict[tuple[str, int], int]] = {}
        for coordinator in list(self.servicer.shards.values()):
            store = coordinator.store
            for group in store.groups():
                offsets = store.fetch(group)
                if offsets:
                    committed[group] = {tp: value.offset for tp, value in offsets.items()}
        return committed

    async def _latest(self, partitions: Iterable[tuple[str, int]]
                      ) -> dict[tuple[str, int], int]:
        return await latest_offsets(self.channels, self._gateway.address, partitions)

    async def _watch_topics(self) -> None:
        """Tell every shard when a topic is deleted or re-created (a new id)."""
        known = self.topics.snapshot()
        while True:
            await self.cache.wait_changed()
            now = self.topics.snapshot()
            if any(now.get(name) != identity for name, identity in known.items()):
                for coordinator in list(self.servicer.shards.values()):
                    coordinator.topics_changed()
            known = now

    async def _acquire(self, shard: int) -> None:
        assert self.ownership is not None
        coordinator = ShardCoordinator(
            shard, owned_shard_log(self._gateway, self.settings.bootstrap, GROUP_TOPIC,
                                   "groups", shard, self.ownership),
            self.topics,
            initial_rebalance_delay_ms=self.settings.initial_rebalance_delay_ms,
            retention_ms=self.settings.offsets_retention_ms,
            retention_check_interval_ms=self.settings.offsets_retention_check_interval_ms,
            verifier=self.verifier)
        await self.servicer.served.acquire(shard, coordinator, self._stopping)
