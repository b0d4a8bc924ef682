"""The controller process: gRPC ↔ admin domain, election loop, health.

Any number of controllers run; the one holding the etcd election key is active and
applies admin requests, the others answer NOT_CONTROLLER. When the active one's
lease is lost (it died, paused or lost etcd) its key vanishes and a standby wins.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import grpc

from services.controller.admin import (
    ConfigOp,
    CreateTopicSpec,
    Plan,
    plan_alter_config,
    plan_create_partitions,
    plan_create_topic,
    plan_delete_topic,
    plan_internal_topic,
)
from services.controller.controller_metrics import ControllerMetrics
from services.controller.failover import PartitionStateKeeper
from services.controller.leadership import IsrChange
from services.controller.limits import RequestLimits
from services.controller.producer_ids import ProducerIdControl
from services.controller.security_admin import BootstrapUser, SecurityAdmin
from services.controller.topic_rules import INTERNAL_TOPICS
from services.controller.writer import MetadataWriter
from strand.cluster.cache import MetadataCache
from strand.cluster.etcd import (
    ControllerElection,
    EtcdServices,
    LeaseKeeper,
    MetadataWatcher,
    connect,
)
from strand.cluster.keys import KeySpace
from strand.cluster.model import ControllerRecord
from strand.errors import ErrorCode, InvalidRequestError, NotControllerError, StrandError
from strand.security.acl import InvalidAclError
from strand.security.acl_fields import (
    binding_from_fields,
    fields_of,
    filter_from_fields,
    read_fields,
)
from strand.security.quota_fields import entity_from_parts
from strand.security.quotas import InvalidQuotaError
from strand.security.scram import ScramCredential
from strand.security.tls import ClientTls, ServiceTls
from strand.service.aio import wait_event
from strand.service.grpc_server import new_server, serve, set_serving
from strand.service.telemetry import meter
from strand.v1 import common_pb2 as pb
from strand.v1 import controller_pb2 as pb_ctl
from strand.v1 import controller_pb2_grpc
from strand.v1 import security_pb2 as pb_sec

log = logging.getLogger(__name__)
READ_YOUR_WRITES_TIMEOUT_S = 10.0
ETCD_RETRY_MIN_S = 0.2
ETCD_RETRY_MAX_S = 2.0


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    etcd_endpoints: list[str]
    cluster: str
    listen: str
    advertise: str
    controller_id: str
    lease_ttl: int = 5
    metrics_port: int = 0
    tls: ServiceTls | None = None  # None: plaintext listener and calls
    etcd_tls: ClientTls | None = None  # None: plaintext to etcd
    preferred_leader_interval_s: float = 30.0
    limits: RequestLimits = field(default_factory=RequestLimits)
    bootstrap_user: BootstrapUser | None = None


class ControllerServicer(controller_pb2_grpc.ControllerServicer):
    def __init__(self, cache: MetadataCache, preferred_leader_interval_s: float = 30.0,
                 limits: RequestLimits | None = None) -> None:
        self.cache = cache
        self.limits = limits or RequestLimits()
        self.writer: MetadataWriter | None = None  # set while this controller is active
        self._admin_lock = asyncio.Lock()
        self.partitions = PartitionStateKeeper(cache, self._admin_lock,
                                               preferred_leader_interval_s)
        self.producer_ids = ProducerIdControl()
        self.security = SecurityAdmin(cache)

    async def _run(
        self, name: str, plan: Callable[[MetadataCache], Plan], validate_only: bool
    ) -> pb.TopicResult:
        result = pb.TopicResult(name=name)
        try:
            async with self._admin_lock:  # one admin change at a time, on fresh metadata
                writer = self._writer()
                # Off the event loop (placing many partitions takes seconds of CPU),
                # on a copy of the metadata the watch cannot change meanwhile: lease
                # keep-alives and other requests go on being served (issue 11).
                decided = await asyncio.to_thread(plan, self.cache.snapshot())
                if decided.topic is not None:
                    result.topic_id = decided.topic.topic_id
                if not validate_only:
                    revision = await writer.apply(decided)
                    await self.cache.wait_for_revision(revision, READ_YOUR_WRITES_TIMEOUT_S)
        except Exception as exc:  # typed, or a bug / etcd outage: report, keep serving
            _set_error(result, exc, "admin request", topic=name)
        return result

    async def CreateTopics(self, request: pb.CreateTopicsRequest,
                           context: grpc.aio.ServicerContext) -> pb.CreateTopicsResponse:
        await _within(context, self.limits.check_topics, len(request.topics))
        try:
            self.limits.check_new_partitions({
                t.name: max(len(t.assignments) or t.num_partitions, 0) for t in request.topics})
        except StrandError as exc:
            return pb.CreateTopicsResponse(topics=_refused(_named(request.topics), exc))
        results = []
        for topic in request.topics:
            spec = CreateTopicSpec(
                name=topic.name, partitions=topic.num_partitions,
                replication_factor=topic.replication_factor, config=dict(topic.configs),
                assignment={a.partition: list(a.replicas) for a in topic.assignments} or None,
            )
            results.append(await self._run(
                topic.name, functools.partial(plan_create_topic, spec), request.validate_only))
        return pb.CreateTopicsResponse(topics=results)

    async def DeleteTopics(self, request: pb.DeleteTopicsRequest,
                           context: grpc.aio.ServicerContext) -> pb.DeleteTopicsResponse:
        await _within(context, self.limits.check_topics, len(request.topics))
        results = [await self._run(name, functools.partial(plan_delete_topic, name), False)
                   for name in request.topics]
        return pb.DeleteTopicsResponse(topics=results)

    async def CreatePartitions(self, request: pb.CreatePartitionsRequest,
                               context: grpc.aio.ServicerContext) -> pb.CreatePartitionsResponse:
        await _within(context, self.limits.check_topics, len(request.topics))
        existing = self.cache.topics
        try:
            self.limits.check_new_partitions({t.name: max(t.count - (
                existing[t.name].partitions if t.name in existing else 0), 0)
                for t in request.topics})
        except StrandError as exc:
            return pb.CreatePartitionsResponse(topics=_refused(_named(request.topics), exc))
        results = [await self._run(t.name, functools.partial(
            plan_create_partitions, t.name, t.count,
            assignments=[list(a.replicas) for a in t.assignments]), request.validate_only)
            for t in request.topics]
        return pb.CreatePartitionsResponse(topics=results)

    async def AlterConfigs(self, request: pb.AlterConfigsRequest,
                           context: grpc.aio.ServicerContext) -> pb.AlterConfigsResponse:
        await _within(context, self.limits.check_topics, len(request.topics))
        results = []
        for topic in request.topics:
            ops = [ConfigOp(op.key, None if op.kind == pb.AlterConfigsRequest.Op.DELETE
                            else op.value) for op in topic.ops]
            results.append(await self._run(
                topic.name, functools.partial(plan_alter_config, topic.name, ops),
                request.validate_only))
        return pb.AlterConfigsResponse(topics=results)

    async def EnsureInternalTopic(self, request: pb_ctl.EnsureInternalTopicRequest,
                                  context: grpc.aio.ServicerContext) -> pb.TopicResult:
        if request.name in self.cache.topics:
            return pb.TopicResult(name=request.name,
                                  topic_id=self.cache.topics[request.name].topic_id)
        if request.name not in INTERNAL_TOPICS:
            return pb.TopicResult(name=request.name, error_code=pb.ErrorCode.Value(
                ErrorCode.INVALID_TOPIC_EXCEPTION.name),
                error_message=f"{request.name!r} is not an internal topic")
        return await self._run(request.name, functools.partial(
            plan_internal_topic, request.name, request.partitions), False)

    def _active_writer(self, response: Any) -> MetadataWriter | None:
        """The writer while active (the answer carries its epoch), else None with the
        answer set to NOT_CONTROLLER."""
        writer = self.writer
        if writer is None:
            response.error_code = pb.ErrorCode.Value(ErrorCode.NOT_CONTROLLER.name)
            response.error_message = "not the active controller"
            return None
        response.controller_epoch = writer.election.epoch
        return writer

    async def AlterPartition(self, request: pb_ctl.AlterPartitionRequest,
                             context: grpc.aio.ServicerContext) -> pb_ctl.AlterPartitionResponse:
        response = pb_ctl.AlterPartitionResponse()
        writer = self._active_writer(response)
        if writer is None:
            return response
        for part in request.partitions:
            out = response.partitions.add(topic=part.topic, partition=part.partition)
            change = IsrChange(request.broker_id, part.leader_epoch, part.partition_epoch,
                               tuple(part.new_isr))
            try:
                record = await self.partitions.alter_isr(writer, part.topic, part.partition,
                                                         change)
            except Exception as exc:
                _set_error(out, exc, "AlterPartition", topic=part.topic,
                           partition=part.partition)
                continue
            out.leader = record.leader
            out.leader_epoch = record.leader_epoch
            out.partition_epoch = record.partition_epoch
            out.isr.extend(record.isr)
        return response

    async def ControlledShutdown(
        self, request: pb_ctl.ControlledShutdownRequest, context: grpc.aio.ServicerContext
    ) -> pb_ctl.ControlledShutdownResponse:
        response = pb_ctl.ControlledShutdownResponse()
        writer = self._active_writer(response)
        if writer is None:
            return response
        try:
            await self.partitions.check_shutdown_request(request.broker_id,
                                                         request.broker_epoch)
            response.remaining_leaderships = await self.partitions.controlled_shutdown(
                writer, request.broker_id)
        except Exception as exc:
            _set_error(response, exc, "ControlledShutdown", broker=request.broker_id)
        log.info("controlled shutdown", extra={
            "broker": request.broker_id, "remaining": response.remaining_leaderships})
        return response

    async def AllocateProducerIds(
        self, request: pb_ctl.AllocateProducerIdsRequest, context: grpc.aio.ServicerContext
    ) -> pb_ctl.AllocateProducerIdsResponse:
        response = pb_ctl.AllocateProducerIdsResponse()
        writer = self._active_writer(response)
        if writer is None:
            return response
        try:
            block = await self.producer_ids.allocate(writer, request.coordinator_id,
                                                     request.coordinator_epoch)
        except Exception as exc:
            _set_error(response, exc, "AllocateProducerIds", coordinator=request.coordinator_id)
            return response
        response.first_producer_id = block.first
        response.count = block.size
        return response

    async def AlterPartitionReassignments(
        self, request: pb.AlterPartitionReassignmentsRequest, context: grpc.aio.ServicerContext
    ) -> pb.AlterPartitionReassignmentsResponse:
        response = pb.AlterPartitionReassignmentsResponse()
        await _within(context, self.limits.check_reassignments, len(request.partitions))
        for part in request.partitions:
            out = response.partitions.add(topic=part.topic, partition=part.partition)
            writer = self.writer
            try:
                if writer is None:
                    raise NotControllerError("not the active controller")
                if part.cancel and part.replicas:
                    raise InvalidRequestError("give either target replicas or cancel, not both")
                await self.partitions.reassign(writer, part.topic, part.partition,
                                               None if part.cancel else list(part.replicas))
            except Exception as exc:
                _set_error(out, exc, "reassignment", topic=part.topic, partition=part.partition)
        return response


    # -- users and ACLs (security/ in etcd) -----------------------------------------------

    async def CreateAcls(self, request: pb_sec.CreateAclsRequest,
                         context: grpc.aio.ServicerContext) -> pb_sec.CreateAclsResponse:
        await _within(context, self.limits.check_entries("ACL bindings"), len(request.creations))
        results = [pb_sec.AclResult() for _ in request.creations]
        valid = []
        for result, entry in zip(results, request.creations, strict=True):
            try:
                valid.append((result, binding_from_fields(read_fields(entry))))
            except InvalidAclError as exc:
                _set_error(result, InvalidRequestError(f"invalid ACL binding: {exc}"), "acl")
        if valid:
            try:
                revision = await self.security.create_acls(self._writer(),
                                                           [b for _, b in valid])
                await self.cache.wait_for_revision(revision, READ_YOUR_WRITES_TIMEOUT_S)
            except Exception as exc:
                for result, _ in valid:
                    _set_error(result, exc, "create ACLs")
        return pb_sec.CreateAclsResponse(results=results)

    async def DeleteAcls(self, request: pb_sec.DeleteAclsRequest,
                         context: grpc.aio.ServicerContext) -> pb_sec.DeleteAclsResponse:
        await _within(context, self.limits.check_entries("ACL filters"), len(request.filters))
        response = pb_sec.DeleteAclsResponse()
        for entry in request.filters:
            result = response.results.add()
            try:
                matched = self.security.matching(filter_from_fields(read_fields(entry)))
                revision = await self.security.delete_acls(self._writer(), matched)
                await self.cache.wait_for_revision(revision, READ_YOUR_WRITES_TIMEOUT_S)
            except InvalidAclError as exc:
                _set_error(result, InvalidRequestError(f"invalid ACL filter: {exc}"), "acl")
            except Exception as exc:
                _set_error(result, exc, "delete ACLs")
            else:
                result.deleted.extend(pb_sec.AclEntry(**fields_of(b)) for b in matched)
        return response

    async def AlterUserScramCredentials(
        self, request: pb_sec.AlterUserScramCredentialsRequest,
        context: grpc.aio.ServicerContext,
    ) -> pb_sec.AlterUserScramCredentialsResponse:
        await _within(context, self.limits.check_entries("user changes"),
                      len(request.deletions) + len(request.upsertions))
        response = pb_sec.AlterUserScramCredentialsResponse()
        for deletion in request.deletions:
            result = response.results.add(user=deletion.user)
            try:
                revision = await self.security.delete_user(self._writer(), deletion.user,
                                                           deletion.mechanism)
                await self.cache.wait_for_revision(revision, READ_YOUR_WRITES_TIMEOUT_S)
            except Exception as exc:
                _set_error(result, exc, "delete SCRAM user", user=deletion.user)
        for upsertion in request.upsertions:
            result = response.results.add(user=upsertion.user)
            try:
                credential = ScramCredential(upsertion.mechanism, upsertion.salt,
                                             upsertion.stored_key, upsertion.server_key,
                                             upsertion.iterations)
                revision = await self.security.upsert_user(self._writer(), upsertion.user,
                                                           credential)
                await self.cache.wait_for_revision(revision, READ_YOUR_WRITES_TIMEOUT_S)
            except Exception as exc:
                _set_error(result, exc, "upsert SCRAM user", user=upsertion.user)
        return response

    async def AlterClientQuotas(self, request: pb_sec.AlterClientQuotasRequest,
                                context: grpc.aio.ServicerContext
                                ) -> pb_sec.AlterClientQuotasResponse:
        await _within(context, self.limits.check_entries("quota entities"), len(request.entries))
        response = pb_sec.AlterClientQuotasResponse()
        for entry in request.entries:
            result = response.entries.add(entity=entry.entity)
            try:
                entity = entity_from_parts(
                    (p.entity_type, p.name, p.is_default) for p in entry.entity.parts)
                revision = await self.security.alter_quotas(
                    self._writer(), entity,
                    [(op.key, None if op.remove else op.value) for op in entry.ops],
                    request.validate_only)
                if revision:
                    await self.cache.wait_for_revision(revision, READ_YOUR_WRITES_TIMEOUT_S)
            except InvalidQuotaError as exc:
                _set_error(result, InvalidRequestError(f"client quotas: {exc}"), "quotas")
            except Exception as exc:
                _set_error(result, exc, "alter client quotas")
        return response

    def _writer(self) -> MetadataWriter:
        writer = self.writer
        if writer is None:
            raise NotControllerError("not the active controller")
        return writer


async def _within(context: grpc.aio.ServicerContext, check: Callable[[int], None],
                  count: int) -> None:
    """Refuse a request naming too many topics or partitions as a whole, with gRPC's
    INVALID_ARGUMENT: one refusal per entry would itself cost seconds and megabytes
    for the requests this guards against (as gRPC refuses an oversized message)."""
    try:
        check(count)
    except StrandError as exc:
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{exc.code.name}: {exc}")


def _named(topics: Iterable[Any]) -> list[str]:
    return [topic.name for topic in topics]


def _refused(names: Iterable[str], exc: StrandError) -> list[pb.TopicResult]:
    """Every topic of a request refused whole (over a limit), with the same error."""
    results = []
    for name in names:
        result = pb.TopicResult(name=name)
        _set_error(result, exc, "admin request")
        results.append(result)
    return results


def _set_error(out: Any, exc: BaseException, what: str, **context: object) -> None:
    """Answer with ``exc``'s typed code; an untyped exception is a bug (or an etcd
    outage): logged with its traceback and answered UNKNOWN_SERVER_ERROR."""
    if isinstance(exc, StrandError):
        out.error_code = pb.ErrorCode.Value(exc.code.name)
        out.error_message = str(exc)
        return
    log.error("%s failed", what, exc_info=exc, extra=context)
    out.error_code = pb.ErrorCode.Value(ErrorCode.UNKNOWN_SERVER_ERROR.name)
    out.error_message = f"{type(exc).__name__}: {exc}"


class ControllerProcess:
    def __init__(self, settings: ControllerSettings) -> None:
        self.settings = settings
        self.keys = KeySpace(settings.cluster)
        self.cache = MetadataCache(self.keys)
        self.servicer = ControllerServicer(self.cache, settings.preferred_leader_interval_s,
                                           settings.limits)
        self.metrics = ControllerMetrics(meter(), self.cache,
                                         lambda: self.servicer.writer is not None)
        self._stopping = asyncio.Event()

    async def run(self, on_ready: Callable[[], Awaitable[None]] | None = None) -> None:
        settings = self.settings
        etcd = await connect(settings.etcd_endpoints, settings.etcd_tls)
        watcher = MetadataWatcher(etcd, self.cache)
        await watcher.start()
        server, health_servicer = new_server(("controller", settings.tls))
        controller_pb2_grpc.add_ControllerServicer_to_server(self.servicer, server)
        await serve(server, settings.listen, settings.tls)
        await set_serving(health_servicer)
        log.info("controller serving", extra={"listen": settings.listen,
                                              "controller_id": settings.controller_id})
        if on_ready is not None:
            await on_ready()
        try:
            await self._elect_forever(etcd)
        finally:
            self.servicer.writer = None
            await server.stop(grace=1)
            await watcher.stop()
            await etcd.close()

    async def _elect_forever(self, etcd: EtcdServices) -> None:
        settings = self.settings
        record = ControllerRecord(settings.controller_id, settings.advertise)
        retry_s = ETCD_RETRY_MIN_S
        while not self._stopping.is_set():
            lease = LeaseKeeper(etcd, settings.lease_ttl)
            try:
                await lease.start()
            except Exception as exc:  # etcd unreachable: stand by and try again
                log.warning("cannot get a lease from etcd; retrying",
                            extra={"error": repr(exc), "retry_s": retry_s})
                await wait_event(self._stopping, retry_s)
                retry_s = min(retry_s * 2, ETCD_RETRY_MAX_S)
                continue
            retry_s = ETCD_RETRY_MIN_S
            election = ControllerElection(etcd, self.keys, record, lease)
            campaign = asyncio.create_task(election.campaign())
            lost = asyncio.create_task(lease.lost.wait())
            stop = asyncio.create_task(self._stopping.wait())
            await asyncio.wait({campaign, lost, stop}, return_when=asyncio.FIRST_COMPLETED)
            if campaign.done() and not campaign.cancelled() and campaign.exception() is None:
                writer = MetadataWriter(etcd, self.keys, election)
                self.servicer.writer = writer
                log.info("became the active controller", extra={"epoch": election.epoch})
                keeper = asyncio.create_task(self.servicer.partitions.run(writer),
                                             name="partition-state")
                if settings.bootstrap_user is not None:
                    await self._bootstrap_user(writer, settings.bootstrap_user)
                await asyncio.wait({lost, stop}, return_when=asyncio.FIRST_COMPLETED)
                self.servicer.writer = None
                keeper.cancel()
                await asyncio.gather(keeper, return_exceptions=True)
                log.warning("stepped down", extra={"epoch": election.epoch})
            elif campaign.done() and not campaign.cancelled():
                log.warning("campaign failed; retrying",
                            extra={"error": repr(campaign.exception())})
                await asyncio.sleep(ETCD_RETRY_MIN_S)
            for task in (campaign, lost, stop):
                task.cancel()
            try:
                if self._stopping.is_set():
                    await election.resign()
                    await lease.stop(revoke=True)
                else:
                    await lease.stop(revoke=False)
            except Exception as exc:  # etcd gone: the lease expires by itself
                log.warning("could not release the lease", extra={"error": repr(exc)})

    async def _bootstrap_user(self, writer: MetadataWriter, user: BootstrapUser) -> None:
        try:
            if await self.servicer.security.ensure_bootstrap_user(writer, user):
                log.info("created the bootstrap SCRAM user", extra={"user": user.name})
        except Exception as exc:  # the next active controller tries again
            log.error("could not create the bootstrap SCRAM user",
                      extra={"user": user.name, "error": repr(exc)})

    def stop(self) -> None:
        self._stopping.set()


def new_controller_id() -> str:
    return f"controller-{uuid.uuid4().hex[:8]}"
