"""The gateway process: strand.v1.Gateway ↔ storage nodes and the active controller.

Stateless: metadata comes from an etcd watch, so any number of gateways can run.
Produce, fetch, list-offsets and offset-for-leader-epoch requests are split per leader
node and forwarded concurrently, one call per node (:mod:`services.gateway.scatter`);
group calls go to the group's coordinator, topic admin to the active controller;
metadata and topic configs are answered from the local cache.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import grpc

from services.gateway.access import CALLER, AccessControl, SecuritySettings
from services.gateway.authenticator import Authenticator
from services.gateway.coordinators import ShardRouter, peer_host
from services.gateway.kafka.listener import KafkaListener, KafkaListenerSettings
from services.gateway.principals import PrincipalInterceptor
from services.gateway.request_time import RequestTimeInterceptor
from services.gateway.scatter import NodeUnavailable, ScatterGather
from services.gateway.security_admin import SecurityCalls
from services.gateway.throttling import Throttling
from services.gateway.txn_admin import describe_producers, write_txn_markers
from strand.client.channel import AioChannels
from strand.cluster.cache import MetadataCache
from strand.cluster.etcd import MetadataWatcher, connect
from strand.cluster.keys import KeySpace
from strand.errors import ErrorCode, StrandError
from strand.log.config import TOPIC_CONFIG
from strand.security.acl import Operation, ResourceType
from strand.security.tls import ClientTls, ServiceTls
from strand.service.grpc_server import new_server, serve, set_serving
from strand.v1 import common_pb2 as pb
from strand.v1 import controller_pb2_grpc, gateway_pb2_grpc, storage_pb2, storage_pb2_grpc
from strand.v1 import groups_pb2 as pb_groups
from strand.v1 import security_pb2 as pb_sec
from strand.v1 import transactions_pb2 as pb_txn

log = logging.getLogger(__name__)

CONTROLLER_WAIT_S = 10.0
VALID_ACKS = (0, 1, -1)
# Partition entries one Produce, Fetch or ListOffsets may hold (issue 11: one Produce
# of 100,000 empty entries took 12 s and stalled every other producer).
MAX_PARTITION_ENTRIES = 10_000
ENTRIES_FLAG = ("--max-partition-entries", "STRAND_MAX_PARTITION_ENTRIES")


def _code(code: ErrorCode) -> Any:
    return pb.ErrorCode.Value(code.name)


@dataclass(frozen=True, slots=True)
class GatewaySettings:
    etcd_endpoints: list[str]
    cluster: str
    listen: str
    metrics_port: int = 0
    tls: ServiceTls | None = None  # None: plaintext listener and calls
    etcd_tls: ClientTls | None = None  # None: plaintext to etcd
    max_partition_entries: int = MAX_PARTITION_ENTRIES
    security: SecuritySettings = field(default_factory=SecuritySettings)
    kafka: KafkaListenerSettings | None = None  # None: no Kafka-protocol listener


# Calls whose request may have been carried out by a node that did not answer.
_WRITES = frozenset({"Produce", "WriteTxnMarkers"})


def _unavailable(address: str, exc: grpc.aio.AioRpcError,
                 written: bool = False) -> NodeUnavailable:
    # A timeout is the client's to retry; otherwise the leader is gone or moving: the
    # client refreshes metadata and retries. A write the node may have made before it
    # went away is a timeout too, never NOT_LEADER_OR_FOLLOWER, which tells a Kafka
    # client "not written": librdkafka's idempotent producer then takes a new epoch
    # and sends the batch again, a duplicate (seen by the fault harness).
    code = (ErrorCode.REQUEST_TIMED_OUT
            if written or exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            else ErrorCode.NOT_LEADER_OR_FOLLOWER)
    return NodeUnavailable(code, f"leader {address}: {exc.code().name} {exc.details()}")


# -- the partitioned RPCs' specifics: sub-requests, answers, the error answer ------------------

def _splitter(topic_type: Callable[..., Any]) -> Callable[[Any, dict[str, list[Any]]], Any]:
    """Sub-requests of a partitioned request: the given partitions (``topic_type``
    messages), and every other field of the request as it is."""
    def split(request: Any, topics: dict[str, list[Any]]) -> Any:
        fields = {field.name: value for field, value in request.ListFields()
                  if field.name != "topics"}
        return type(request)(**fields, topics=[topic_type(topic=topic, partitions=parts)
                                               for topic, parts in topics.items()])
    return split


def _responder(response_type: Callable[..., Any],
               topic_type: Callable[..., Any]) -> Callable[[list[tuple[str, list[Any]]]], Any]:
    """The client's answer from its topics' per-partition answers."""
    return lambda topics: response_type(topics=[topic_type(topic=topic, partitions=parts)
                                                for topic, parts in topics])


def _produce_error(partition: int, code: ErrorCode, message: str) -> pb.PartitionProduceResponse:
    return pb.PartitionProduceResponse(partition=partition, error_code=_code(code),
                                       error_message=message)


def _fetch_error(partition: int, code: ErrorCode, message: str) -> pb.PartitionFetchResponse:
    return pb.PartitionFetchResponse(partition=partition, error_code=_code(code),
                                     error_message=message, high_watermark=-1,
                                     last_stable_offset=-1, log_start_offset=-1)


def _fetch_nothing(partition: int) -> pb.PartitionFetchResponse:
    """A partition whose node lost the long-poll race: no records this time."""
    return pb.PartitionFetchResponse(partition=partition, high_watermark=-1,
                                     last_stable_offset=-1, log_start_offset=-1)


def _fetch_has_news(answer: pb.PartitionFetchResponse) -> bool:
    return bool(answer.records) or answer.error_code != 0


def _offsets_error(partition: int, code: ErrorCode,
                   message: str) -> pb.PartitionListOffsetsResponse:
    return pb.PartitionListOffsetsResponse(partition=partition, error_code=_code(code),
                                           error_message=message, offset=-1, timestamp=-1,
                                           leader_epoch=-1)


def _epoch_end_error(partition: int, code: ErrorCode,
                     message: str) -> pb.PartitionOffsetForLeaderEpochResponse:
    return pb.PartitionOffsetForLeaderEpochResponse(
        partition=partition, error_code=_code(code), error_message=message, leader_epoch=-1,
        end_offset=-1)


# -- forwarded calls: consumer groups, topic admin ---------------------------------------------

def _forwarded(method: str, response_type: type[Any],
               transactions: bool = False) -> Callable[..., Awaitable[Any]]:
    """A servicer method passing a group (transaction) call on to the coordinator of
    its group (transactional id)."""
    async def call(self: GatewayServicer, request: Any,
                   context: grpc.aio.ServicerContext) -> Any:
        await self._check(method, request, context)
        router = self.transactions if transactions else self.groups
        return await router.forward(method, request, response_type)

    call.__name__ = call.__qualname__ = method
    return call


# Builds the answer of a controller call no controller took: (request, code, message).
Refusal = Callable[[Any, Any, str], Any]


def _to_controller(method: str, refused: Refusal) -> Callable[..., Awaitable[Any]]:
    """A servicer method passing a topic admin call on to the active controller; the
    topics the caller may not change are answered here, the others forwarded."""
    async def call(self: GatewayServicer, request: Any,
                   context: grpc.aio.ServicerContext) -> Any:
        if not hasattr(request, "topics"):  # cluster-wide: checked whole
            await self._check(method, request, context)
            return await self._forward_to_controller(
                method, request, lambda code, why: refused(request, code, why), context)
        return await self._topic_admin(method, request, refused, context)

    call.__name__ = call.__qualname__ = method
    return call


def _topics_refused(response_type: type[Any],
                    names: Callable[[Any], Iterable[str]]) -> Refusal:
    """Refuse every topic ``names(request)`` lists, in a ``response_type``."""
    return lambda request, code, why: response_type(topics=[
        pb.TopicResult(name=name, error_code=code, error_message=why)
        for name in names(request)])


def _named_topics(request: Any) -> list[str]:
    return [topic.name for topic in request.topics]


def _reassignments_refused(request: pb.AlterPartitionReassignmentsRequest, code: Any,
                           why: str) -> pb.AlterPartitionReassignmentsResponse:
    return pb.AlterPartitionReassignmentsResponse(partitions=[
        pb.PartitionResult(topic=p.topic, partition=p.partition, error_code=code,
                           error_message=why) for p in request.partitions])


# The operation on the topic each topic admin call needs (CreateTopics: CREATE, on
# the cluster or the topic).
_TOPIC_ADMIN = {"DeleteTopics": Operation.DELETE, "CreatePartitions": Operation.ALTER,
                "AlterConfigs": Operation.ALTER_CONFIGS}


def _record_bytes(message: Any) -> int:
    """The record bytes a produce request or a fetch answer carries (what the byte-rate
    quotas meter, as Kafka's do)."""
    return sum(len(p.records) for t in message.topics for p in t.partitions)


def _entries(request: Any) -> int:
    """The partition entries a request names."""
    return sum(len(topic.partitions) for topic in request.topics)


def _topic_name(entry: Any) -> str:
    return entry if isinstance(entry, str) else str(entry.name)


class GatewayServicer(gateway_pb2_grpc.GatewayServicer):
    def __init__(self, cache: MetadataCache, channels: AioChannels,
                 max_partition_entries: int = MAX_PARTITION_ENTRIES,
                 security: SecuritySettings | None = None) -> None:
        self.cache = cache
        self.channels = channels
        self.max_partition_entries = max_partition_entries
        security = security or SecuritySettings()
        self.access = AccessControl(cache.security, security.authorizer, security.super_users,
                                    security.allow_everyone_if_no_acl_found)
        self.authenticator = Authenticator(cache.security, security.authentication_required,
                                           security.session_lifetime_s)
        self.security = SecurityCalls(
            cache, self.access, self.authenticator,
            self._forward_to_controller)
        self.throttling = Throttling(cache.security.quotas)
        self.groups = ShardRouter.groups(cache, channels)
        self.transactions = ShardRouter.transactions(cache, channels)
        self.produce: ScatterGather[
            pb.ProduceRequest, pb.ProduceResponse, pb.PartitionProduceResponse
        ] = ScatterGather(
            send=lambda address, request: self._to_storage(
                "Produce", address, request, max(request.timeout_ms, 1000) / 1000 + 5),
            split=_splitter(pb.TopicProduceData),
            respond=_responder(pb.ProduceResponse, pb.TopicProduceResponse),
            error=_produce_error)
        # Every node long-polls on its own; the first one with data (or an error)
        # answers the client, and the others' polls are cancelled rather than awaited.
        self.fetch: ScatterGather[
            pb.FetchRequest, pb.FetchResponse, pb.PartitionFetchResponse
        ] = ScatterGather(
            send=lambda address, request: self._to_storage(
                "Fetch", address, request, request.max_wait_ms / 1000 + 10),
            split=_splitter(pb.TopicFetchData),
            respond=_responder(pb.FetchResponse, pb.TopicFetchResponse), error=_fetch_error,
            unanswered=_fetch_nothing, decisive=_fetch_has_news)
        self.list_offsets: ScatterGather[
            pb.ListOffsetsRequest, pb.ListOffsetsResponse, pb.PartitionListOffsetsResponse
        ] = ScatterGather(
            send=lambda address, request: self._to_storage("ListOffsets", address, request, 30),
            split=_splitter(pb.TopicListOffsets),
            respond=_responder(pb.ListOffsetsResponse, pb.TopicListOffsetsResponse),
            error=_offsets_error)
        self.epoch_ends: ScatterGather[
            pb.OffsetForLeaderEpochRequest, pb.OffsetForLeaderEpochResponse,
            pb.PartitionOffsetForLeaderEpochResponse
        ] = ScatterGather(
            send=lambda address, request: self._to_storage(
                "OffsetForLeaderEpoch", address, request, 30),
            split=_splitter(pb.TopicOffsetForLeaderEpoch),
            respond=_responder(pb.OffsetForLeaderEpochResponse,
                               pb.TopicOffsetForLeaderEpochResponse),
            error=_epoch_end_error)

    # -- consumer groups (forwarded to the coordinator of the group's shard) ------------------

    async def JoinGroup(self, request: pb_groups.JoinGroupRequest,
                        context: grpc.aio.ServicerContext) -> pb_groups.JoinGroupResponse:
        await self._check("JoinGroup", request, context)
        # The coordinator sees only the gateway: tell it where the member is.
        request.client_host = peer_host(context.peer())
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
    TxnOffsetCommit = _forwarded("TxnOffsetCommit", pb_groups.OffsetCommitResponse)

    async def ListGroups(self, request: pb_groups.ListGroupsRequest,
                         context: grpc.aio.ServicerContext) -> pb_groups.ListGroupsResponse:
        wait_s = request.timeout_ms / 1000 if request.timeout_ms > 0 else None
        response: pb_groups.ListGroupsResponse = await self.groups.list_all(request, wait_s)
        if self.access.enabled and not self.access.may_describe(ResourceType.CLUSTER, ""):
            visible = [g for g in response.groups
                       if self.access.may_describe(ResourceType.GROUP, g.group_id)]
            del response.groups[:]
            response.groups.extend(visible)
        return response

    # -- transactions (forwarded to the coordinator of the transactional id's shard) ---------

    async def InitProducerId(self, request: pb_txn.InitProducerIdRequest,
                             context: grpc.aio.ServicerContext) -> pb_txn.InitProducerIdResponse:
        refused = self.access.may_init_producer_id(request.transactional_id)
        if refused is not None:
            await self._refuse(context, refused)
        # Without a transactional id any transaction coordinator answers (no shard).
        response: pb_txn.InitProducerIdResponse = await self.transactions.forward(
            "InitProducerId", request, pb_txn.InitProducerIdResponse,
            any_instance=not request.transactional_id)
        return response

    AddPartitionsToTxn = _forwarded("AddPartitionsToTxn", pb_txn.AddPartitionsToTxnResponse,
                                    transactions=True)
    AddOffsetsToTxn = _forwarded("AddOffsetsToTxn", pb_txn.AddOffsetsToTxnResponse,
                                 transactions=True)
    EndTxn = _forwarded("EndTxn", pb_txn.EndTxnResponse, transactions=True)
    DescribeTransactions = _forwarded("DescribeTransactions",
                                      pb_txn.DescribeTransactionsResponse, transactions=True)

    async def ListTransactions(self, request: pb_txn.ListTransactionsRequest,
                               context: grpc.aio.ServicerContext
                               ) -> pb_txn.ListTransactionsResponse:
        wait_s = request.timeout_ms / 1000 if request.timeout_ms > 0 else None
        response: pb_txn.ListTransactionsResponse = await self.transactions.list_all(
            request, wait_s)
        if self.access.enabled:
            visible = [t for t in response.transactions if self.access.may_describe(
                ResourceType.TRANSACTIONAL_ID, t.transactional_id)]
            del response.transactions[:]
            response.transactions.extend(visible)
        return response

    # -- KIP-664: producers of partitions and aborting a hanging transaction (per leader) ---

    async def DescribeProducers(self, request: storage_pb2.DescribeProducersRequest,
                                context: grpc.aio.ServicerContext
                                ) -> storage_pb2.DescribeProducersResponse:
        await self._bounded("DescribeProducers", _entries(request), context)
        await self._check("DescribeProducers", request, context)
        return await describe_producers(self.cache, lambda address, sub: self._to_storage(
            "DescribeProducers", address, sub, 30), request)

    async def WriteTxnMarkers(self, request: storage_pb2.WriteTxnMarkersRequest,
                              context: grpc.aio.ServicerContext
                              ) -> storage_pb2.WriteTxnMarkersResponse:
        await self._bounded("WriteTxnMarkers", sum(
            _entries(marker) for marker in request.markers), context)
        await self._check("WriteTxnMarkers", request, context)
        timeout_s = (request.timeout_ms or 30_000) / 1000 + 5
        return await write_txn_markers(self.cache, lambda address, sub: self._to_storage(
            "WriteTxnMarkers", address, sub, timeout_s), request)

    # -- produce, fetch, list offsets (split per leader node) -----------------------------------

    async def Produce(self, request: pb.ProduceRequest,
                      context: grpc.aio.ServicerContext) -> pb.ProduceResponse:
        await self._bounded("Produce", _entries(request), context)
        if request.acks not in VALID_ACKS:
            return self.produce.fail_all(
                request, ErrorCode.INVALID_REQUIRED_ACKS,
                f"acks must be 0, 1 or -1 (all), not {request.acks}")
        if request.transactional_id:
            refused = self.access.refusal(Operation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                          request.transactional_id)
            if refused is not None:
                return self.produce.fail_all(request, refused.code, str(refused))
        admission = await self.throttling.admit(self.throttling.produce, CALLER.get(None),
                                                _record_bytes(request))
        response = await self.produce.call(self.cache, request, self._topic_refusal("Produce"))
        response.throttle_time_ms = await self.throttling.hold(admission)
        return response

    async def Fetch(self, request: pb.FetchRequest,
                    context: grpc.aio.ServicerContext) -> pb.FetchResponse:
        await self._bounded("Fetch", _entries(request), context)
        who, quotas = CALLER.get(None), self.throttling.fetch
        await self.throttling.wait_turn(quotas, who)
        response = await self.fetch.call(self.cache, request, self._topic_refusal("Fetch"))
        response.throttle_time_ms = await self.throttling.throttle(
            quotas, who, _record_bytes(response))
        return response

    async def ListOffsets(self, request: pb.ListOffsetsRequest,
                          context: grpc.aio.ServicerContext) -> pb.ListOffsetsResponse:
        await self._bounded("ListOffsets", _entries(request), context)
        return await self.list_offsets.call(self.cache, request,
                                            self._topic_refusal("ListOffsets"))

    async def OffsetForLeaderEpoch(self, request: pb.OffsetForLeaderEpochRequest,
                                   context: grpc.aio.ServicerContext
                                   ) -> pb.OffsetForLeaderEpochResponse:
        await self._bounded("OffsetForLeaderEpoch", _entries(request), context)
        return await self.epoch_ends.call(self.cache, request,
                                          self._topic_refusal("OffsetForLeaderEpoch"))

    async def _bounded(self, method: str, entries: int,
                       context: grpc.aio.ServicerContext) -> None:
        """Refuse, whole and at once, a request naming more partitions than allowed.
        As gRPC's INVALID_ARGUMENT status: an error answer per entry would itself cost
        seconds and megabytes (1.8 s and 21 MB for 100,000 entries), as gRPC refuses
        an oversized message."""
        if entries > self.max_partition_entries:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, (
                f"{ErrorCode.INVALID_REQUEST.name}: this {method} request names {entries} "
                f"partitions; at most {self.max_partition_entries} are allowed in one "
                f"request: split it, or raise the limit with the gateway's {ENTRIES_FLAG[0]} "
                f"(or {ENTRIES_FLAG[1]})"))

    async def _to_storage(self, method: str, address: str, request: Any,
                          timeout_s: float) -> Any:
        stub = storage_pb2_grpc.StorageStub(self.channels.get(address))
        try:
            return await getattr(stub, method)(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise _unavailable(address, exc, method in _WRITES) from exc

    # -- metadata and configs (answered from the cache) ----------------------------------------

    async def Metadata(self, request: pb.MetadataRequest,
                       context: grpc.aio.ServicerContext) -> pb.MetadataResponse:
        cache = self.cache
        named = list(request.topics)
        names = named or sorted(cache.topics)
        topics = []
        for name in names:
            refused = self.access.topic_refusal("Metadata", name)
            if refused is not None:
                if named:  # a listing of every topic leaves these out
                    topics.append(pb.TopicMetadata(name=name, error_code=_code(refused[0]),
                                                   error_message=refused[1]))
                continue
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
        controller = cache.controller.controller_id if cache.controller is not None else ""
        return pb.MetadataResponse(cluster_id=cache.keys.prefix.strip("/"), controller_id=-1,
                                   controller=controller, brokers=brokers, topics=topics)

    async def DescribeConfigs(self, request: pb.DescribeConfigsRequest,
                              context: grpc.aio.ServicerContext) -> pb.DescribeConfigsResponse:
        out = []
        for name in request.topics:
            refused = self.access.topic_refusal("DescribeConfigs", name)
            if refused is not None:
                out.append(pb.DescribeConfigsResponse.Topic(
                    name=name, error_code=_code(refused[0]), error_message=refused[1]))
                continue
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

    CreateTopics = _to_controller(
        "CreateTopics", _topics_refused(pb.CreateTopicsResponse, _named_topics))
    DeleteTopics = _to_controller(
        "DeleteTopics", _topics_refused(pb.DeleteTopicsResponse, lambda r: r.topics))
    CreatePartitions = _to_controller(
        "CreatePartitions", _topics_refused(pb.CreatePartitionsResponse, _named_topics))
    AlterConfigs = _to_controller(
        "AlterConfigs", _topics_refused(pb.AlterConfigsResponse, _named_topics))
    AlterPartitionReassignments = _to_controller(
        "AlterPartitionReassignments", _reassignments_refused)

    async def _topic_admin(self, method: str, request: Any, refused: Refusal,
                           context: grpc.aio.ServicerContext) -> Any:
        """Answer the topics the caller may not change (CREATE on the cluster or the
        topic; DELETE, ALTER, ALTER_CONFIGS on the topic); forward the others."""
        refusals: dict[str, StrandError] = {}
        for entry in request.topics:
            name = _topic_name(entry)
            error: StrandError | None = (
                self.access.may_create_topic(name) if method == "CreateTopics"
                else self.access.refusal(_TOPIC_ADMIN[method], ResourceType.TOPIC, name))
            if error is not None:
                refusals[name] = error
        if not refusals:
            return await self._forward_to_controller(
                method, request, lambda code, why: refused(request, code, why), context)
        allowed = type(request)()
        allowed.CopyFrom(request)
        del allowed.topics[:]
        allowed.topics.extend(e for e in request.topics if _topic_name(e) not in refusals)
        answered: dict[str, Any] = {}
        if allowed.topics:
            forwarded = await self._forward_to_controller(
                method, allowed, lambda code, why: refused(allowed, code, why), context)
            answered = {result.name: result for result in forwarded.topics}
        results = []
        for entry in request.topics:
            name = _topic_name(entry)
            error = refusals.get(name)
            results.append(answered[name] if error is None else pb.TopicResult(
                name=name, error_code=_code(error.code), error_message=str(error)))
        return getattr(pb, f"{method}Response")(topics=results)

    def _topic_refusal(self, method: str) -> Callable[[str], tuple[ErrorCode, str] | None]:
        """Per-topic refusals of a partitioned call; None when there is no authorizer
        (nothing to check: the request passes through untouched)."""
        if not self.access.enabled:
            return lambda topic: None
        return lambda topic: self.access.topic_refusal(method, topic)

    async def _check(self, method: str, request: Any,
                     context: grpc.aio.ServicerContext) -> None:
        """Refuse the whole call, with its typed error, when the caller may not make it."""
        try:
            self.access.check_call(method, request)
        except StrandError as exc:
            await self._refuse(context, exc)

    @staticmethod
    async def _refuse(context: grpc.aio.ServicerContext, exc: StrandError) -> None:
        await context.abort(grpc.StatusCode.PERMISSION_DENIED, f"{exc.code.name}: {exc}")

    # -- security: authentication, ACLs and SCRAM users ----------------------------------

    async def SaslAuthenticate(self, request: pb_sec.SaslAuthenticateRequest,
                               context: grpc.aio.ServicerContext
                               ) -> pb_sec.SaslAuthenticateResponse:
        return self.security.sasl_authenticate(request)

    async def CreateAcls(self, request: pb_sec.CreateAclsRequest,
                         context: grpc.aio.ServicerContext) -> pb_sec.CreateAclsResponse:
        await self._check("CreateAcls", request, context)
        return await self.security.create_acls(request, context)

    async def DeleteAcls(self, request: pb_sec.DeleteAclsRequest,
                         context: grpc.aio.ServicerContext) -> pb_sec.DeleteAclsResponse:
        await self._check("DeleteAcls", request, context)
        return await self.security.delete_acls(request, context)

    async def DescribeAcls(self, request: pb_sec.DescribeAclsRequest,
                           context: grpc.aio.ServicerContext) -> pb_sec.DescribeAclsResponse:
        await self._check("DescribeAcls", request, context)
        return self.security.describe_acls(request)

    async def AlterUserScramCredentials(
        self, request: pb_sec.AlterUserScramCredentialsRequest,
        context: grpc.aio.ServicerContext,
    ) -> pb_sec.AlterUserScramCredentialsResponse:
        await self._check("AlterUserScramCredentials", request, context)
        return await self.security.alter_users(request, context)

    async def DescribeUserScramCredentials(
        self, request: pb_sec.DescribeUserScramCredentialsRequest,
        context: grpc.aio.ServicerContext,
    ) -> pb_sec.DescribeUserScramCredentialsResponse:
        await self._check("DescribeUserScramCredentials", request, context)
        return self.security.describe_users(request)

    async def AlterClientQuotas(self, request: pb_sec.AlterClientQuotasRequest,
                                context: grpc.aio.ServicerContext
                                ) -> pb_sec.AlterClientQuotasResponse:
        await self._check("AlterClientQuotas", request, context)
        return await self.security.alter_quotas(request, context)

    async def DescribeClientQuotas(self, request: pb_sec.DescribeClientQuotasRequest,
                                   context: grpc.aio.ServicerContext
                                   ) -> pb_sec.DescribeClientQuotasResponse:
        await self._check("DescribeClientQuotas", request, context)
        return self.security.describe_quotas(request)

    async def _forward_to_controller(self, method: str, request: Any,
                                     failed: Callable[[Any, str], Any],
                                     context: grpc.aio.ServicerContext) -> Any:
        """Forward to the active controller; if it just changed, wait for the new one.
        ``failed(code, message)`` builds the answer when no controller takes it; a
        request the controller refused whole (over a limit) is refused the same way."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CONTROLLER_WAIT_S
        while True:
            controller = self.cache.controller
            if controller is not None:
                stub = controller_pb2_grpc.ControllerStub(self.channels.get(controller.address))
                try:
                    response = await getattr(stub, method)(request, timeout=30)
                except grpc.aio.AioRpcError as exc:
                    if exc.code() == grpc.StatusCode.INVALID_ARGUMENT:
                        await context.abort(exc.code(), exc.details() or "")
                    failure = f"controller {controller.address}: {exc.code().name}"
                else:
                    results = [*getattr(response, "topics", ()),
                               *getattr(response, "partitions", ()),
                               *getattr(response, "results", ()),
                               *getattr(response, "entries", ())]
                    if not any(r.error_code == _code(ErrorCode.NOT_CONTROLLER) for r in results):
                        return response
                    failure = "the controller changed during the request"
            else:
                failure = "no active controller"
            remaining = deadline - loop.time()
            if remaining <= 0:
                return failed(_code(ErrorCode.NOT_CONTROLLER), failure)
            await self.cache.wait_changed(min(remaining, 1.0))

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


class GatewayProcess:
    def __init__(self, settings: GatewaySettings) -> None:
        self.settings = settings
        self.cache = MetadataCache(KeySpace(settings.cluster))
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        etcd = await connect(self.settings.etcd_endpoints, self.settings.etcd_tls)
        watcher = MetadataWatcher(etcd, self.cache)
        await watcher.start()
        channels = AioChannels("gateway",
                               self.settings.tls.client if self.settings.tls else None)
        servicer = GatewayServicer(self.cache, channels, self.settings.max_partition_entries,
                                   self.settings.security)
        tls = self.settings.tls
        # The principal's check first: the request-time quota reads who is calling.
        server, health_servicer = new_server(interceptors=(
            PrincipalInterceptor(servicer.authenticator, tls.service_names if tls else ()),
            RequestTimeInterceptor(servicer.throttling)))
        gateway_pb2_grpc.add_GatewayServicer_to_server(servicer, server)
        await serve(server, self.settings.listen, self.settings.tls)
        kafka = (KafkaListener(servicer, self.settings.kafka)
                 if self.settings.kafka is not None else None)
        if kafka is not None:
            await kafka.start()
        await set_serving(health_servicer)
        log.info("gateway serving", extra={"listen": self.settings.listen})
        try:
            await self._stopping.wait()
        finally:
            if kafka is not None:
                await kafka.close()
            await server.stop(grace=2)
            await channels.close()
            await watcher.stop()
            await etcd.close()

    def stop(self) -> None:
        self._stopping.set()
