"""The Gateway's requests as they arrive: protobuf bytes of any of its methods, then
what the gateway, the storage node and the controller check and decode of them.

Input: one byte choosing the method (of ``strand.v1.Gateway``, in its proto order),
then the request message's bytes.

Per method, the pure domain code the services run (no server is started):

* every method: the gateway's whole-call ACL check (an authorizer with ACLs on);
* Produce: acks, the partition-entry bound, per-topic ACLs, routing and the split per
  leader node, then per partition the storage node's checks (no control batches from
  producers, the transactional id of a transactional batch) and the leader's record
  validation and producer-state checks;
* Fetch, ListOffsets: routing, the storage node's size and timestamp checks, and the
  read of a real log at the requested offsets (its answer verified as it is served);
* CreateTopics, CreatePartitions, AlterConfigs, DeleteTopics, reassignments: the
  controller's request limits and plans over a snapshot of a small cluster;
* WriteTxnMarkers: the gateway's split per leader, and each leader's marker batch
  built from the request's fields and checked as it is appended;
* JoinGroup, SyncGroup: the consumer protocol's subscription and assignment payloads,
  which a group leader's and members' clients decode (and the sticky assignors'
  member data inside a subscription).

Expected: the typed errors of Strand (``StrandError``) and of the decoders that
define their own (consumer protocol, ACL and quota fields), protobuf's DecodeError.
Anything else is a finding.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import sys
from collections.abc import Callable, Iterable
from typing import Any

from google.protobuf.message import DecodeError, Message  # type: ignore[import-untyped]

from fuzz.harnesses.common import check, scratch_directory
from services.controller.admin import (
    ConfigOp,
    CreateTopicSpec,
    min_insync_replicas,
    plan_alter_config,
    plan_create_partitions,
    plan_create_topic,
    plan_delete_topic,
)
from services.controller.limits import RequestLimits
from services.controller.reassignment import cancel, start
from services.gateway.access import CALLER, AccessControl, Caller
from services.gateway.routing import route
from services.gateway.server import MAX_PARTITION_ENTRIES, VALID_ACKS
from services.gateway.txn_admin import write_txn_markers
from services.storage.produce import _refuse_control_batches
from services.storage.txn_verification import require_transactional_id, transactional_writer
from strand.cluster.cache import MetadataCache
from strand.cluster.keys import KeySpace
from strand.cluster.model import BrokerRegistration, PartitionRecord, TopicRecord
from strand.consumer.assignors.base import UserDataError, decode_member_data
from strand.consumer.protocol import ProtocolError, decode_assignment, decode_subscription
from strand.errors import (
    InvalidFetchSizeError,
    InvalidRequestError,
    StrandError,
    UnknownTopicOrPartitionError,
)
from strand.log.append import split_leader_batches
from strand.log.config import LogConfig
from strand.log.integrity import verify_batches
from strand.log.log import PartitionLog
from strand.log.producer_state import AppendOrigin
from strand.log.producer_state_manager import ProducerStateManager
from strand.records.builder import BatchBuilder
from strand.records.compression import Compression
from strand.records.control import ControlType, build_end_txn_marker
from strand.security.acl import (
    CLUSTER_RESOURCE_NAME,
    AccessControlEntry,
    AclBinding,
    AclPermissionType,
    InvalidAclError,
    Operation,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from strand.security.principal import Principal
from strand.security.quotas import InvalidQuotaError
from strand.security.state import SecurityState
from strand.v1 import (
    common_pb2,
    gateway_pb2,
    groups_pb2,
    security_pb2,
    storage_pb2,
    transactions_pb2,
)

__all__ = ["EXPECTED", "METHODS", "test_one_input"]

EXPECTED = (StrandError, ProtocolError, InvalidAclError, InvalidQuotaError, DecodeError)

_MODULES = (common_pb2, groups_pb2, transactions_pb2, security_pb2, storage_pb2)
_SERVICE = gateway_pb2.DESCRIPTOR.services_by_name["Gateway"]


def _message_class(name: str) -> type[Message]:
    for module in _MODULES:
        if hasattr(module, name):
            cls: type[Message] = getattr(module, name)
            return cls
    raise LookupError(f"no message class {name}")


METHODS: list[tuple[str, type[Message]]] = [
    (method.name, _message_class(method.input_type.name)) for method in _SERVICE.methods]

# -- the cluster the requests meet -----------------------------------------------------------

_BROKERS = {1: "a", 2: "a", 3: "b", 4: "c"}
_TOPICS = {"orders": (3, 3, {}), "ord.keys": (2, 2, {"cleanup.policy": "compact"}),
           "strict": (1, 3, {"min.insync.replicas": "2"}),
           "__consumer_offsets": (2, 3, {"cleanup.policy": "compact"})}


def _cluster() -> MetadataCache:
    cache = MetadataCache(KeySpace("fuzz"))
    cache.brokers = {node: BrokerRegistration(node, f"node{node}", 9000 + node, rack)
                     for node, rack in _BROKERS.items()}
    for name, (partitions, factor, config) in _TOPICS.items():
        cache.topics[name] = TopicRecord(name, f"id-{name}", partitions, factor, dict(config),
                                         internal=name.startswith("__"))
        for p in range(partitions):
            replicas = tuple(1 + (p + i) % len(_BROKERS) for i in range(factor))
            leader = replicas[0] if p != 1 else -1  # one partition without a leader
            cache.partitions[(name, p)] = PartitionRecord(name, p, replicas, leader, 3,
                                                          replicas)
    _allow(cache.security, ResourceType.TOPIC, "ord", PatternType.PREFIXED,
           Operation.ALL, AclPermissionType.ALLOW)
    _allow(cache.security, ResourceType.TOPIC, "ord.keys", PatternType.LITERAL,
           Operation.WRITE, AclPermissionType.DENY)
    _allow(cache.security, ResourceType.GROUP, "g", PatternType.PREFIXED,
           Operation.READ, AclPermissionType.ALLOW)
    _allow(cache.security, ResourceType.TRANSACTIONAL_ID, "tx-*", PatternType.LITERAL,
           Operation.WRITE, AclPermissionType.ALLOW)
    _allow(cache.security, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME, PatternType.LITERAL,
           Operation.DESCRIBE, AclPermissionType.ALLOW)
    return cache


def _allow(state: SecurityState, resource_type: ResourceType, name: str,
           pattern: PatternType, operation: Operation, permission: AclPermissionType) -> None:
    binding = AclBinding(ResourcePattern(resource_type, name, pattern),
                         AccessControlEntry("User:fuzz", "*", operation, permission))
    state.apply_acl(binding.key(), binding.to_json())


_CACHE = _cluster()
_ACCESS = AccessControl(_CACHE.security, enabled=True, super_users=("User:admin",))
_CALLER = Caller(Principal("User", "fuzz"), "10.0.0.7", client_id="fuzzer")
_LIMITS = RequestLimits()
_CONFIGS = {name: LogConfig.from_properties(config) for name, (_, _, config) in _TOPICS.items()}
_SCRATCH = scratch_directory("gateway")
# The gateway's fan-out to leaders is asyncio; its fake leaders answer at once.
_LOOP = asyncio.new_event_loop()
atexit.register(_LOOP.close)


def _read_log() -> PartitionLog:
    """A real partition log the fetch and list-offsets requests read: batches of every
    codec, and a transaction aborted (so read_committed has something to drop)."""
    log = PartitionLog.open(_SCRATCH / "orders-0", clock=lambda: 1_700_000_000_000)
    for i, codec in enumerate(Compression):
        builder = BatchBuilder(compression=codec)
        for j in range(3):
            builder.append(b"value-%d-%d" % (i, j), key=b"k%d" % j, timestamp=1000 * i + j)
        log.append_as_leader(builder.build(), 3)
    txn = BatchBuilder(producer_id=7, producer_epoch=0, base_sequence=0, transactional=True)
    txn.append(b"aborted", timestamp=9000)
    log.append_as_leader(txn.build(), 3)
    log.append_as_leader(build_end_txn_marker(ControlType.ABORT, producer_id=7,
                                              producer_epoch=0, coordinator_epoch=1,
                                              timestamp=9001), 3, AppendOrigin.COORDINATOR)
    log.update_high_watermark(log.log_end_offset)
    return log


_LOG = _read_log()


def test_one_input(data: bytes) -> None:
    if not data:
        return
    name, message_class = METHODS[data[0] % len(METHODS)]
    try:
        request = message_class.FromString(data[1:])
    except DecodeError:
        return
    handler = _HANDLERS.get(name)
    caller = CALLER.set(_CALLER)  # what the gateway's authentication step sets per call
    try:
        with contextlib.suppress(*EXPECTED):
            _ACCESS.check_call(name, request)
        # Whatever this caller may do: one with the ACLs for it gets this far.
        if handler is not None:
            handler(request)
    except EXPECTED:
        pass
    finally:
        CALLER.reset(caller)


# -- produce ------------------------------------------------------------------------------------

def _items(request: Any) -> list[tuple[str, int, Any]]:
    return [(t.topic, p.partition, p) for t in request.topics for p in t.partitions]


def _routed(method: str, request: Any) -> list[tuple[str, int, Any]]:
    """What the gateway forwards: the entries within the bound, the topics the caller
    may use, routed to their leaders (a node's sub-request is split out as the
    scatter-gather does). Returns the routed entries."""
    entries = sum(len(topic.partitions) for topic in request.topics)
    if entries > MAX_PARTITION_ENTRIES:
        raise InvalidRequestError(f"{entries} partition entries")
    allowed = [item for item in _items(request)
               if _ACCESS.topic_refusal(method, item[0]) is None]
    routes = route(_CACHE, allowed)
    check(len(routes.unroutable) + sum(len(v) for v in routes.by_node.values())
          == len(allowed), "routing lost or invented partitions")
    for unroutable in routes.unroutable:
        check(_CACHE.leader_of(unroutable.topic, unroutable.partition) is None,
              "a partition with a live leader was not routed")
    return [entry for entries in routes.by_node.values() for entry in entries]


def _produce(request: common_pb2.ProduceRequest) -> None:
    if request.acks not in VALID_ACKS:
        return  # answered INVALID_REQUIRED_ACKS whole
    if request.transactional_id:
        refused = _ACCESS.refusal(Operation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                  request.transactional_id)
        if refused is not None:
            return
    for topic, partition, entry in _routed("Produce", request):
        with contextlib.suppress(*EXPECTED):  # that partition's error; the others go on
            _append_checks(topic, partition, entry.records, request.transactional_id)


def _append_checks(topic: str, partition: int, records: bytes, transactional_id: str) -> None:
    """The storage node's checks of one partition's records, up to the write."""
    _refuse_control_batches(records)
    writer = transactional_writer(records)
    if writer is not None:
        require_transactional_id(transactional_id, writer, f"{topic}-{partition}")
    view = memoryview(records)
    batches = split_leader_batches(view, _CONFIGS[topic])
    producers = ProducerStateManager(_SCRATCH, 86_400_000)
    producers.find_duplicate([header for _, header in batches])
    offset = 0
    stamped = []
    for pos, header in batches:
        stamped.append((offset, header, view[pos:pos + header.size_in_bytes]))
        offset += header.last_offset_delta + 1
    pending = producers.prepare(stamped, AppendOrigin.CLIENT)
    producers.commit(pending, offset)


# -- fetch and list offsets -------------------------------------------------------------------

def _fetch(request: common_pb2.FetchRequest) -> None:
    upper = (_LOG.last_stable_offset if request.isolation_level == common_pb2.READ_COMMITTED
             else _LOG.high_watermark)
    remaining = request.max_bytes
    for _, _, entry in _routed("Fetch", request):
        try:
            if request.max_bytes < 0 or entry.partition_max_bytes < 0:
                raise InvalidFetchSizeError("negative fetch size")
            data = _LOG.read(entry.fetch_offset, max(0, min(entry.partition_max_bytes,
                                                            remaining)),
                             max_offset=upper, min_one_batch=True)
        except EXPECTED:
            continue
        verified = verify_batches(data)
        check(verified.error is None, f"a read of a sound log fails verification: "
                                      f"{verified.error}")
        remaining -= len(data)
        if data and request.isolation_level == common_pb2.READ_COMMITTED:
            _LOG.aborted_transactions(entry.fetch_offset, verified.next_offset)


def _list_offsets(request: common_pb2.ListOffsetsRequest) -> None:
    for _, _, entry in _routed("ListOffsets", request):
        if entry.timestamp < -2:
            continue  # INVALID_REQUEST
        if entry.timestamp >= 0:
            found = _LOG.offset_for_timestamp(entry.timestamp, max_offset=_LOG.high_watermark)
            check(found is None or found[1] >= entry.timestamp,
                  "offset_for_timestamp answered an earlier record")


# -- topic admin (the controller's plans) ------------------------------------------------------

def _create_topics(request: common_pb2.CreateTopicsRequest) -> None:
    _LIMITS.check_topics(len(request.topics))
    _LIMITS.check_new_partitions({t.name: max(len(t.assignments) or t.num_partitions, 0)
                                  for t in request.topics})
    for topic in request.topics:
        if _ACCESS.may_create_topic(topic.name) is not None:
            continue
        spec = CreateTopicSpec(
            name=topic.name, partitions=topic.num_partitions,
            replication_factor=topic.replication_factor, config=dict(topic.configs),
            assignment={a.partition: list(a.replicas) for a in topic.assignments} or None)
        _planned(functools.partial(_plan_created, spec))


def _plan_created(spec: CreateTopicSpec, cache: MetadataCache) -> None:
    plan = plan_create_topic(spec, cache)
    topic = plan.topic
    check(topic is not None and topic.name == spec.name, "a plan for another topic")
    assert topic is not None
    check(len(plan.partitions) == topic.partitions, "partition records miscounted")
    live = set(_BROKERS)
    for record in plan.partitions:
        check(len(set(record.replicas)) == len(record.replicas) and set(record.replicas)
              <= live, f"partition {record.partition} placed on {record.replicas}")


def _create_partitions(request: common_pb2.CreatePartitionsRequest) -> None:
    _LIMITS.check_topics(len(request.topics))
    existing = _CACHE.topics
    _LIMITS.check_new_partitions({t.name: max(t.count - (
        existing[t.name].partitions if t.name in existing else 0), 0) for t in request.topics})
    for topic in request.topics:
        assignments = [list(a.replicas) for a in topic.assignments]
        _planned(functools.partial(plan_create_partitions, topic.name, topic.count,
                                   assignments=assignments))


def _alter_configs(request: common_pb2.AlterConfigsRequest) -> None:
    _LIMITS.check_topics(len(request.topics))
    for topic in request.topics:
        ops = [ConfigOp(op.key, None if op.kind == common_pb2.AlterConfigsRequest.Op.DELETE
                        else op.value) for op in topic.ops]
        _planned(functools.partial(plan_alter_config, topic.name, ops))


def _delete_topics(request: common_pb2.DeleteTopicsRequest) -> None:
    _LIMITS.check_topics(len(request.topics))
    for name in request.topics:
        _planned(functools.partial(plan_delete_topic, name))


def _reassign(request: common_pb2.AlterPartitionReassignmentsRequest) -> None:
    _LIMITS.check_reassignments(len(request.partitions))
    for part in request.partitions:
        try:
            if part.cancel and part.replicas:
                raise InvalidRequestError("target replicas and cancel")
            record = _CACHE.partitions.get((part.topic, part.partition))
            topic = _CACHE.topics.get(part.topic)
            if record is None or topic is None:
                raise UnknownTopicOrPartitionError(f"{part.topic}-{part.partition}")
            if part.cancel:
                cancel(record, set(_BROKERS))
            else:
                start(record, list(part.replicas), set(_BROKERS),
                      min_insync_replicas(topic.config))
        except EXPECTED:
            continue


def _planned(plan: Callable[[MetadataCache], object]) -> None:
    """One topic's plan, as the controller runs it: its typed error is that topic's."""
    with contextlib.suppress(*EXPECTED):
        plan(_CACHE.snapshot())


# -- transaction markers (KIP-664's abort) -----------------------------------------------------

def _write_txn_markers(request: storage_pb2.WriteTxnMarkersRequest) -> None:
    """The gateway's split of the markers per leader, each leader (faked here) building
    its ABORT marker batch from the request's fields and checking it as it appends."""
    _LOOP.run_until_complete(write_txn_markers(_CACHE, _storage_markers, request))


async def _storage_markers(address: str, request: storage_pb2.WriteTxnMarkersRequest
                           ) -> storage_pb2.WriteTxnMarkersResponse:
    response = storage_pb2.WriteTxnMarkersResponse()
    for marker in request.markers:
        out = response.markers.add(producer_id=marker.producer_id)
        for topic in marker.topics:
            results = out.topics.add(topic=topic.topic).partitions
            for partition in topic.partitions:
                result = results.add(partition=partition)
                try:
                    _append_marker(topic.topic, marker)
                except EXPECTED as exc:
                    result.error_message = str(exc)
    return response


def _append_marker(topic: str, marker: storage_pb2.WritableTxnMarker) -> None:
    batch = build_end_txn_marker(
        ControlType.COMMIT if marker.committed else ControlType.ABORT,
        producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
        coordinator_epoch=marker.coordinator_epoch)
    view = memoryview(batch)
    config = _CONFIGS.get(topic, _CONFIGS["orders"])
    (position, header), = split_leader_batches(view, config)
    producers = ProducerStateManager(_SCRATCH, 86_400_000)
    producers.prepare([(0, header, view[position:position + header.size_in_bytes])],
                      AppendOrigin.COORDINATOR)


# -- group protocol payloads -------------------------------------------------------------------

def _join_group(request: groups_pb2.JoinGroupRequest) -> None:
    for protocol in request.protocols:
        try:
            subscription = decode_subscription(protocol.metadata)
        except ProtocolError:
            continue
        check(all(isinstance(t, str) for t in subscription.topics), "a topic is not text")
        if subscription.user_data:  # the sticky assignors' member data, read by the leader
            with contextlib.suppress(UserDataError):
                decode_member_data(subscription.user_data)


def _sync_group(request: groups_pb2.SyncGroupRequest) -> None:
    for assignment in request.assignments:
        try:
            decode_assignment(assignment.assignment)
        except ProtocolError:
            continue


def _names(request: Any) -> Iterable[str]:
    return list(request.topics)


def _per_topic(method: str) -> Callable[[Any], None]:
    """Metadata and DescribeConfigs: a refusal per named topic, answered from the cache."""
    def handle(request: Any) -> None:
        for name in _names(request):
            if _ACCESS.topic_refusal(method, name) is None:
                _CACHE.topics.get(name)
    return handle


_HANDLERS: dict[str, Callable[[Any], None]] = {
    "Produce": _produce,
    "Fetch": _fetch,
    "ListOffsets": _list_offsets,
    "Metadata": _per_topic("Metadata"),
    "DescribeConfigs": _per_topic("DescribeConfigs"),
    "CreateTopics": _create_topics,
    "CreatePartitions": _create_partitions,
    "AlterConfigs": _alter_configs,
    "DeleteTopics": _delete_topics,
    "AlterPartitionReassignments": _reassign,
    "JoinGroup": _join_group,
    "SyncGroup": _sync_group,
    "WriteTxnMarkers": _write_txn_markers,
}

if __name__ == "__main__":  # a quick look: the methods in selector order
    for index, (method_name, cls) in enumerate(METHODS):
        sys.stdout.write(f"{index:3d} {method_name} {cls.DESCRIPTOR.full_name}\n")
