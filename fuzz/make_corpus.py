"""Write the kept seed corpus, ``fuzz/corpus/<harness>/seed-*``, from Strand's real
builders: record batches of every codec, real request messages, a real partition
directory written by the log, the repository's example resources.

    python -m fuzz.make_corpus [--corpus DIR]

Seeds are deterministic (fixed timestamps, ids and salts), so running it again
rewrites the same bytes; it replaces only ``seed-*`` files. Inputs the fuzzer found
(``found-*``, added by hand: see docs/fuzzing.md) are kept as they are.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import datetime
import io
import json
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from google.protobuf.message import Message  # type: ignore[import-untyped]
from kio.index import load_payload_module, load_request_schema
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_writer
from kio.serial._introspect import EntityField, EntityTupleField, classify_field
from kio.static.constants import EntityType
from kio.static.primitive import Records, i16, i32
from scramp import ScramClient, ScramMechanism  # type: ignore[import-untyped]

from fuzz.harnesses import (
    HARNESSES,
    gateway_requests,
    gateway_security,
    kafka_requests,
    log_recovery,
)
from fuzz.harnesses import record_batch as rb
from services.gateway.kafka.apis import api_table
from services.gateway.kafka.listener import api_name
from strand.client.structs import TopicPartition
from strand.consumer.assignors.base import (
    Assignment,
    MemberData,
    Subscription,
    encode_member_data,
)
from strand.consumer.protocol import encode_assignment, encode_subscription
from strand.errors import ErrorCode
from strand.log.config import LogConfig
from strand.log.log import PartitionLog
from strand.log.producer_state import AppendOrigin
from strand.records.builder import BatchBuilder
from strand.records.compression import Compression
from strand.records.control import ControlType, build_end_txn_marker
from strand.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclPermissionType,
    Operation,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from strand.security.quotas import QuotaEntity, QuotaValues
from strand.security.scram import MECHANISM, make_credential
from strand.security.sessions import SessionIssuer
from strand.v1 import common_pb2, groups_pb2, storage_pb2
from strand.v1 import security_pb2 as sec

__all__ = ["main", "seeds"]

REPO = Path(__file__).resolve().parents[1]
_TS = 1_700_000_000_000
_CLIENT_NONCE, _SERVER_NONCE = "fuzz-client-nonce", "fuzz-server-nonce"
Seeds = Iterator[tuple[str, bytes]]


# -- record batches ------------------------------------------------------------------------------

def _batch(codec: Compression = Compression.NONE, count: int = 3, *, size: int = 8,
           keys: bool = True, headers: bool = False, **producer: int | bool) -> bytes:
    builder = BatchBuilder(compression=codec, **producer)  # type: ignore[arg-type]
    for i in range(count):
        builder.append((b"value-%d-" % i) * (size // 8 or 1), key=b"key-%d" % i if keys else None,
                       headers=[("trace", b"t-%d" % i), ("empty", None)] if headers else (),
                       timestamp=_TS + i)
    return builder.build()


def _marker(control: ControlType) -> bytes:
    return build_end_txn_marker(control, producer_id=42, producer_epoch=1, coordinator_epoch=3,
                                timestamp=_TS + 9)


def record_batch_seeds() -> Seeds:
    for codec in Compression:
        name = codec.name.lower()
        yield f"{name}-3-records", bytes([0]) + _batch(codec, headers=True)
        yield f"{name}-large-values-fix-crcs", bytes([rb.FIX_CRCS]) + _batch(codec, 20, size=600)
    yield "idempotent", bytes([0]) + _batch(producer_id=42, producer_epoch=1, base_sequence=0)
    yield "transactional-read-committed", bytes([rb.READ_COMMITTED]) + _batch(
        producer_id=42, producer_epoch=1, base_sequence=5, transactional=True) + _marker(
        ControlType.ABORT)
    yield "compacted-keys", bytes([rb.COMPACTED]) + _batch(Compression.LZ4)
    yield "compacted-null-key", bytes([rb.COMPACTED | rb.FIX_CRCS]) + _batch(keys=False)
    yield "two-batches-no-crc-check", bytes([rb.NO_CRC_CHECK]) + _batch() + _batch(
        Compression.ZSTD, 2)
    yield "commit-marker", bytes([rb.FIX_CRCS]) + _marker(ControlType.COMMIT)
    lying = bytearray(_batch(count=3))
    lying[57:61] = (5).to_bytes(4, "big")  # the header claims 5 records, the body holds 3
    yield "record-count-lies-fix-crcs", bytes([rb.FIX_CRCS]) + bytes(lying)
    cut = _batch(Compression.GZIP, 5)
    yield "cut-off-tail", bytes([0]) + _batch() + cut[:len(cut) // 2]


# -- gateway requests ----------------------------------------------------------------------------

def _wire(message: Message) -> bytes:
    wire: bytes = message.SerializeToString(deterministic=True)  # maps in a fixed order
    return wire


def _method(name: str) -> bytes:
    return bytes([[m for m, _ in gateway_requests.METHODS].index(name)])


def gateway_request_seeds() -> Seeds:
    for index, (name, message) in enumerate(gateway_requests.METHODS):
        yield f"{name}-empty", bytes([index]) + _wire(message())
    produce = common_pb2.ProduceRequest(acks=-1, timeout_ms=5000, topics=[
        common_pb2.TopicProduceData(topic="orders", partitions=[
            common_pb2.PartitionProduceData(partition=0, records=_batch(Compression.LZ4)),
            common_pb2.PartitionProduceData(partition=2, records=_batch(
                producer_id=9, producer_epoch=0, base_sequence=0))]),
        common_pb2.TopicProduceData(topic="ord.keys", partitions=[
            common_pb2.PartitionProduceData(partition=0, records=_batch(keys=False))]),
        common_pb2.TopicProduceData(topic="unknown", partitions=[
            common_pb2.PartitionProduceData(partition=0, records=_batch())])])
    yield "Produce-three-topics", _method("Produce") + _wire(produce)
    transactional = common_pb2.ProduceRequest(acks=1, transactional_id="tx-*", topics=[
        common_pb2.TopicProduceData(topic="orders", partitions=[
            common_pb2.PartitionProduceData(partition=0, records=_batch(
                producer_id=7, producer_epoch=2, base_sequence=0, transactional=True))])])
    yield "Produce-transactional", _method("Produce") + _wire(transactional)
    fetch = common_pb2.FetchRequest(max_wait_ms=100, min_bytes=1, max_bytes=1 << 20,
                                    isolation_level=common_pb2.READ_COMMITTED, topics=[
        common_pb2.TopicFetchData(topic="orders", partitions=[
            common_pb2.PartitionFetchData(partition=0, fetch_offset=3,
                                          partition_max_bytes=4096)])])
    yield "Fetch-read-committed", _method("Fetch") + _wire(fetch)
    offsets = common_pb2.ListOffsetsRequest(topics=[common_pb2.TopicListOffsets(
        topic="orders", partitions=[common_pb2.PartitionListOffsets(partition=0, timestamp=t)
                                    for t in (-1, -2, 2001)])])
    yield "ListOffsets", _method("ListOffsets") + _wire(offsets)
    create = common_pb2.CreateTopicsRequest(topics=[
        common_pb2.CreatableTopic(name="ord-new", num_partitions=6, replication_factor=3,
                                  configs={"cleanup.policy": "compact",
                                           "min.insync.replicas": "2"}),
        common_pb2.CreatableTopic(name="ord-placed", assignments=[
            common_pb2.ReplicaAssignment(partition=p, replicas=[1 + p, 2 + p])
            for p in range(2)])])
    yield "CreateTopics", _method("CreateTopics") + _wire(create)
    new_partition = common_pb2.CreatePartitionsRequest.Assignment
    grow = common_pb2.CreatePartitionsRequest(topics=[common_pb2.CreatePartitionsRequest.Topic(
        name="orders", count=5, assignments=[new_partition(replicas=[1, 2, 3]),
                                             new_partition(replicas=[2, 3, 4])])])
    yield "CreatePartitions", _method("CreatePartitions") + _wire(grow)
    alter = common_pb2.AlterConfigsRequest(topics=[common_pb2.AlterConfigsRequest.Topic(
        name="orders", ops=[common_pb2.AlterConfigsRequest.Op(key="retention.ms", value="1000"),
                            common_pb2.AlterConfigsRequest.Op(
                                key="cleanup.policy",
                                kind=common_pb2.AlterConfigsRequest.Op.DELETE)])])
    yield "AlterConfigs", _method("AlterConfigs") + _wire(alter)
    delete = common_pb2.DeleteTopicsRequest(topics=["orders", "__consumer_offsets"])
    yield "DeleteTopics", _method("DeleteTopics") + _wire(delete)
    target = common_pb2.AlterPartitionReassignmentsRequest.Partition
    reassign = common_pb2.AlterPartitionReassignmentsRequest(partitions=[
        target(topic="orders", partition=0, replicas=[2, 3, 4]),
        target(topic="strict", partition=0, cancel=True)])
    yield "AlterPartitionReassignments", (_method("AlterPartitionReassignments")
                                          + _wire(reassign))
    user_data = encode_member_data(MemberData((TopicPartition("orders", 0),), 4))
    join = groups_pb2.JoinGroupRequest(group_id="g1", protocols=[groups_pb2.GroupProtocol(
        name="cooperative-sticky", metadata=encode_subscription(Subscription(
            ("orders",), user_data, (TopicPartition("orders", 1),), 3)))])
    yield "JoinGroup-sticky", _method("JoinGroup") + _wire(join)
    sync = groups_pb2.SyncGroupRequest(group_id="g1", assignments=[groups_pb2.SyncGroupAssignment(
        member_id="m1", assignment=encode_assignment(Assignment(
            (TopicPartition("orders", 0),))))])
    yield "SyncGroup", _method("SyncGroup") + _wire(sync)
    markers = storage_pb2.WriteTxnMarkersRequest(timeout_ms=1000, markers=[
        storage_pb2.WritableTxnMarker(producer_id=7, producer_epoch=2, coordinator_epoch=4,
                                      topics=[storage_pb2.WritableTxnMarkerTopic(
                                          topic="orders", partitions=[0, 1, 2])]),
        storage_pb2.WritableTxnMarker(producer_id=8, committed=True, topics=[
            storage_pb2.WritableTxnMarkerTopic(topic="ord.keys", partitions=[0])])])
    yield "WriteTxnMarkers", _method("WriteTxnMarkers") + _wire(markers)
    yield "Metadata", _method("Metadata") + _wire(common_pb2.MetadataRequest(
        topics=["orders", "ord.keys", "nope"]))


# -- security --------------------------------------------------------------------------------

def _mode(function: Callable[[bytes], None]) -> bytes:
    return bytes([gateway_security.MODES.index(function)])


def gateway_security_seeds() -> Seeds:
    gs = gateway_security
    credential = make_credential("alice-password", salt=b"fuzz-salt-0123456789")
    # scramp itself, with fixed nonces: Strand's exchanges draw theirs at random.
    client = ScramClient([MECHANISM], "alice", "alice-password", c_nonce=_CLIENT_NONCE)
    server = ScramMechanism(MECHANISM).make_server(
        lambda _: (credential.salt, credential.stored_key, credential.server_key,
                   credential.iterations), s_nonce=_SERVER_NONCE)
    client_first = client.get_client_first()
    server.set_client_first(client_first)
    server_first = server.get_server_first()
    client.set_server_first(server_first)
    client_final = client.get_client_final()
    server.set_client_final(client_final)
    server_final = server.get_server_final()
    client_nonce, server_nonce = _CLIENT_NONCE, _CLIENT_NONCE + _SERVER_NONCE
    yield "sasl-first", _mode(gs._sasl_step) + _wire(sec.SaslAuthenticateRequest(
        mechanism="SCRAM-SHA-512", auth_bytes=client_first.encode()))
    yield "server-exchange", _mode(gs._server_exchange) + client_first.encode() + b"\0" + (
        client_final.replace(server_nonce, "{nonce}").encode())
    yield "client-exchange", _mode(gs._client_exchange) + server_first.replace(
        client_nonce, "{nonce}", 1).encode() + b"\0" + server_final.encode()
    token, _ = SessionIssuer(60.0, key=bytes(range(32)),
                             clock=lambda: 1_700_000_000.0).issue("alice", b"\x01" * 32)
    yield "session-token", _mode(gs._token) + token.encode()
    middle = token.split(".")[1]  # the payload the gateway signed
    raw = base64.urlsafe_b64decode(middle + "=" * (-len(middle) % 4))
    yield "signed-payload", _mode(gs._signed_payload) + raw
    entry = sec.AclEntry(resource_type="TOPIC", resource_name="orders", pattern_type="PREFIXED",
                         principal="User:alice", host="*", operation="WRITE",
                         permission="ALLOW")
    cluster = sec.AclEntry(resource_type="CLUSTER", resource_name="strand-cluster",
                           principal="User:*", operation="DESCRIBE")
    yield "create-acls", _mode(gs._create_acls) + _wire(sec.CreateAclsRequest(
        creations=[entry, cluster]))
    match = sec.AclEntry(resource_type="TOPIC", resource_name="orders-1", pattern_type="MATCH")
    yield "delete-acls", _mode(gs.MODES[6]) + _wire(sec.DeleteAclsRequest(
        filters=[match, sec.AclEntry()]))
    yield "describe-acls", _mode(gs.MODES[7]) + _wire(sec.DescribeAclsRequest(filter=entry))
    upsert = sec.ScramCredentialUpsertion(
        user="bob", mechanism=credential.mechanism, iterations=credential.iterations,
        salt=credential.salt, stored_key=credential.stored_key,
        server_key=credential.server_key)
    yield "alter-users", _mode(gs._alter_users) + _wire(sec.AlterUserScramCredentialsRequest(
        upsertions=[upsert], deletions=[sec.ScramCredentialDeletion(
            user="carol", mechanism="SCRAM-SHA-512")]))
    quota = sec.AlterClientQuotasRequest(entries=[sec.AlterClientQuotasRequest.Entry(
        entity=sec.QuotaEntity(parts=[
            sec.QuotaEntityPart(entity_type="user", name="al/ice=1"),
            sec.QuotaEntityPart(entity_type="client-id", is_default=True)]),
        ops=[sec.AlterClientQuotasRequest.Op(key="producer_byte_rate", value=1048576.0),
             sec.AlterClientQuotasRequest.Op(key="request_percentage", remove=True)])])
    yield "alter-quotas", _mode(gs._alter_quotas) + _wire(quota)
    describe = sec.DescribeClientQuotasRequest(strict=True, components=[
        sec.DescribeClientQuotasRequest.Component(entity_type="user", match="EXACT",
                                                  name="alice"),
        sec.DescribeClientQuotasRequest.Component(entity_type="client-id", match="DEFAULT")])
    yield "describe-quotas", _mode(gs._describe_quotas) + _wire(describe)
    etcd = _mode(gs._etcd_values)
    yield "etcd-credential", etcd + credential.to_json()
    yield "etcd-binding", etcd + AclBinding(
        ResourcePattern(ResourceType.GROUP, "g", PatternType.PREFIXED),
        AccessControlEntry("User:alice", "*", Operation.READ, AclPermissionType.ALLOW)).to_json()
    yield "etcd-quotas", etcd + QuotaValues(producer_byte_rate=1024.0).to_json()
    yield "etcd-quota-key", etcd + QuotaEntity("al/ice", None).key().encode()


# -- kafka requests ------------------------------------------------------------------------------

# What the example requests name, by field: the fake cluster's topics, a group, alice.
_KAFKA_TEXT = {"name": "orders", "topic": "orders", "resource_name": "orders",
               "topic_names": "orders", "group_id": "g1", "groups": "g1", "groups_names": "g1",
               "key": "g1", "coordinator_keys": "g1", "member_id": "m1",
               "transactional_id": "tx-1", "transactional_ids": "tx-1",
               "protocol_type": "consumer", "protocol_name": "range",
               "mechanism": MECHANISM, "principal": "User:alice", "host": "*",
               "client_software_name": "fuzz", "client_software_version": "1.0",
               "state_filters": "Ongoing", "states_filter": "Stable",
               "types_filter": "classic", "rack_id": "a", "value": "1000",
               "configuration_keys": "retention.ms", "committed_metadata": ""}
# Kafka's numbers a useful example has other than 0 (ACL enums, sizes, counts).
_KAFKA_NUMBERS = {"resource_type": 2, "resource_pattern_type": 3, "pattern_type_filter": 3,
                  "operation": 3, "permission_type": 3, "acks": -1, "max_bytes": 1 << 20,
                  "partition_max_bytes": 1 << 16, "min_bytes": 1, "count": 4,
                  "num_partitions": -1, "replication_factor": -1, "timestamp": -1,
                  "broker_ids": 1, "generation_id": 1, "generation_id_or_member_epoch": 1,
                  "producer_epoch": 0, "committed_offset": 5, "endpoint_type": 1}


def _kafka_value(name: str, kafka_type: str) -> object:
    if kafka_type == "string":
        return _KAFKA_TEXT.get(name, "x")
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(milliseconds=1000)
    if kafka_type == "datetime_i64":
        return datetime.datetime.fromtimestamp(_TS / 1000, datetime.UTC)
    if kafka_type == "uuid":
        return uuid.UUID(int=1)  # the topic id of "orders" in the harness's cluster
    if kafka_type == "records":
        return Records(_batch())
    if kafka_type == "bytes":
        return b""
    if kafka_type == "bool":
        return False
    if kafka_type == "float64":
        return 0.0
    if kafka_type == "error_code":
        return KafkaErrorCode.none
    return _KAFKA_NUMBERS.get(name, 0)


def _kafka_example(cls: type[Any], **values: Any) -> Any:
    """An instance of a kio request (or nested) class: its schema's defaults, else a
    value of each field's type (one entry per array), ``values`` first."""
    out: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if field.name in values:
            out[field.name] = values[field.name]
        elif (field.default is not dataclasses.MISSING
              and field.name not in _KAFKA_TEXT and field.name not in _KAFKA_NUMBERS):
            out[field.name] = field.default
        else:
            kind = classify_field(field)
            if isinstance(kind, EntityField | EntityTupleField):
                entity = _kafka_example(kind.type_)
                out[field.name] = (entity,) if kind.is_array else entity
            else:
                value = _kafka_value(field.name, field.metadata["kafka_type"])
                out[field.name] = (value,) if kind.is_array else value
    return cls(**out)


def _kafka_frame(key: int, version: int, body: Any = None, *, correlation_id: int = 7,
                 **values: Any) -> bytes:
    """A request frame (header and body, no size prefix) of ``key`` at ``version``."""
    schema = load_request_schema(key, version)
    out = io.BytesIO()
    header: type[Any] = RequestHeaderV2 if schema.__flexible__ else RequestHeaderV1
    entity_writer(header)(out, header(request_api_key=i16(key), request_api_version=i16(version),
                                      correlation_id=i32(correlation_id), client_id="fuzz"))
    entity_writer(schema)(out, body if body is not None else _kafka_example(schema, **values))
    return out.getvalue()


def kafka_request_seeds() -> Seeds:
    kr = kafka_requests
    anonymous, code = bytes([kr.ANONYMOUS_CONNECTION | kr.ANSWER, 0]), 0
    table = api_table()
    for key, (low, high) in sorted(table.versions.items()):
        name = api_name(key, low)
        for version in sorted({low, (low + high) // 2, high}):
            yield f"{name}-v{version}", anonymous + _kafka_frame(key, version)
    # ApiVersions of a version not served yet: answered v0, UNSUPPORTED_VERSION.
    yield "ApiVersions-unknown-v9", anonymous + _kafka_frame(18, 4)[:2] + b"\0\x09" + (
        _kafka_frame(18, 4)[4:])
    unauthenticated = bytes([kr.UNAUTHENTICATED | kr.ANSWER, code])
    yield "SaslHandshake-unauthenticated", unauthenticated + _kafka_frame(17, 1)
    yield "SaslAuthenticate-scram-first", bytes([kr.SASL_STARTED | kr.ANSWER, code]) + (
        _kafka_frame(36, 2, auth_bytes=b"n,,n=alice,r=" + _CLIENT_NONCE.encode()))
    yield "SaslAuthenticate-plain-tls", bytes([kr.TLS | kr.SASL_STARTED | kr.ANSWER, code]) + (
        _kafka_frame(36, 1, auth_bytes=b"\0alice\0alice-password"))
    yield "Metadata-unauthenticated", unauthenticated + _kafka_frame(3, 12)
    yield "Metadata-session-ended", bytes([kr.LAPSED | kr.ANSWER, code]) + _kafka_frame(3, 9)
    yield "DescribeUserScramCredentials-not-served", anonymous + _kafka_frame(50, 0)
    lz4 = Records(_batch(Compression.LZ4, producer_id=9, producer_epoch=0, base_sequence=0))
    produce = _kafka_frame(0, 9, topic_data=(_kafka_example(
        load_payload_module(0, 9, EntityType.request).TopicProduceData, partition_data=(
            _kafka_example(load_payload_module(0, 9, EntityType.request).PartitionProduceData,
                           records=lz4),)),))
    yield "Produce-lz4-batch", anonymous + produce
    yield "Produce-acks-0", anonymous + _kafka_frame(0, 7, acks=0)
    yield "Fetch-incremental-session", anonymous + _kafka_frame(1, 12, session_id=1,
                                                                 session_epoch=1)
    yield "Fetch-new-session", anonymous + _kafka_frame(1, 11, session_id=0, session_epoch=0)
    yield "Metadata-v0-every-topic", anonymous + _kafka_frame(3, 0, topics=())
    acl_alice = kr.AUTHENTICATED | kr.ACLS_ON
    errors = list(ErrorCode)
    for name, key, version, behaviour, error in [
            ("Produce", 0, 11, kr.REFUSE, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
            ("Fetch", 1, 17, kr.ERROR, ErrorCode.NOT_LEADER_OR_FOLLOWER),
            ("JoinGroup", 11, 3, kr.ERROR, ErrorCode.MEMBER_ID_REQUIRED),
            ("OffsetCommit", 8, 9, kr.REFUSE, ErrorCode.COORDINATOR_NOT_AVAILABLE),
            ("CreateTopics", 19, 7, kr.ANSWER, ErrorCode.NONE),
            ("DeleteTopics", 20, 6, kr.EMPTY, ErrorCode.NONE),
            ("DescribeConfigs", 32, 4, kr.ERROR, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            ("InitProducerId", 22, 5, kr.REFUSE, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)]:
        yield (f"{name}-v{version}-acls-{behaviour >> 4}-{error.name.lower()}",
               bytes([acl_alice | behaviour, errors.index(error)]) + _kafka_frame(key, version))


# -- log recovery ----------------------------------------------------------------------------

def _log_directory(root: Path) -> Path:
    """A partition log with several segments, index entries, idempotent and
    transactional producers (a commit and an abort), two leader epochs and snapshots."""
    directory = root / "orders-0"
    log = PartitionLog.open(directory, LogConfig(segment_bytes=700, index_interval_bytes=150),
                            clock=lambda: _TS)
    for i in range(6):
        log.append_as_leader(_batch(Compression.LZ4 if i % 2 else Compression.NONE, 2,
                                    producer_id=5, producer_epoch=0, base_sequence=2 * i), 1)
    for control in (ControlType.COMMIT, ControlType.ABORT):
        log.append_as_leader(_batch(producer_id=42, producer_epoch=1, base_sequence=0
                                    if control == ControlType.COMMIT else 3, count=3,
                                    transactional=True), 2)
        log.append_as_leader(_marker(control), 2, AppendOrigin.COORDINATOR)
    log.append_as_leader(_batch(Compression.ZSTD, 4), 2)
    log.update_high_watermark(log.log_end_offset - 2)
    log.close()
    return directory


def log_recovery_seeds() -> Seeds:
    lr = log_recovery
    with tempfile.TemporaryDirectory() as tmp:
        directory = _log_directory(Path(tmp))
        yield "clean-shutdown", lr.encode_directory(directory, lr.CLEAN)
        yield "unclean-dense-index", lr.encode_directory(directory, lr.DENSE_INDEX)
        yield "unclean-fix-crcs", lr.encode_directory(directory, lr.FIX_CRCS)
        (directory / "offsets-checkpoint").unlink()
        yield "unclean-no-checkpoint", lr.encode_directory(directory, 0)
        segments = sorted(directory.glob("*.log"))
        last = segments[-1]
        last.write_bytes(last.read_bytes()[:-20])  # a torn tail
        yield "torn-tail", lr.encode_directory(directory, 0)
        shutil.copy(segments[0], segments[0].with_name(segments[0].name + ".swap"))
        (directory / "damaged-from").write_text("3\n")
        yield "swap-and-damage-mark", lr.encode_directory(directory, lr.CLEAN)


# -- operator resources ------------------------------------------------------------------------

def operator_seeds() -> Seeds:
    """Resources like the repository's examples (k8s/examples/), and a Topic already
    reconciled, with a status and annotations, against each state of the fake cluster."""
    topic_flag, user_flag = 0, 1  # see operator_validation's flags
    label = {"strand.io/cluster": "strand"}
    yield "topic-compacted", bytes([topic_flag]) + json.dumps({
        "apiVersion": "strand.io/v1", "kind": "Topic",
        "metadata": {"name": "customer-events", "labels": label},
        "spec": {"partitions": 12, "replicas": 3, "config": {
            "cleanup.policy": "compact,delete", "retention.ms": 604800000,
            "min.insync.replicas": 2, "max.message.bytes": 2097152,
            "min.cleanable.dirty.ratio": 0.3, "unclean.leader.election.enable": False}},
    }).encode()
    yield "topic-named", bytes([topic_flag]) + json.dumps({
        "metadata": {"name": "payments-ledger", "labels": label},
        "spec": {"topicName": "Payments_Ledger.v2", "partitions": 3, "replicas": 3,
                 "config": {"retention.ms": -1}}}).encode()
    yield "user-scram-acls-quotas", bytes([user_flag]) + json.dumps({
        "apiVersion": "strand.io/v1", "kind": "StrandUser",
        "metadata": {"name": "orders-app", "labels": label},
        "spec": {"authentication": {"type": "scram-sha-512"},
                 "authorization": {"type": "simple", "acls": [
                     {"resource": {"type": "topic", "name": "orders.", "patternType": "prefix"},
                      "operations": ["Write", "Read", "Describe"]},
                     {"resource": {"type": "group", "name": "orders-app"},
                      "operations": ["Read"]},
                     {"resource": {"type": "cluster"}, "operations": ["IdempotentWrite"]},
                     {"resource": {"type": "topic", "name": "orders.audit",
                                   "patternType": "literal"},
                      "operations": ["Write"], "type": "deny"}]},
                 "quotas": {"producerByteRate": 5242880, "consumerByteRate": 10485760}}}
    ).encode()
    yield "user-scram-password-ref", bytes([user_flag]) + json.dumps({
        "metadata": {"name": "reporting"},
        "spec": {"authentication": {"type": "scram-sha-512", "password": {"valueFrom": {
            "secretKeyRef": {"name": "reporting-password", "key": "password"}}}},
            "authorization": {"type": "simple", "acls": [
                {"resource": {"type": "topic", "name": "*"},
                 "operations": ["Read", "Describe"], "host": "10.0.0.1"}]}}}).encode()
    reconciled = {
        "metadata": {"name": "orders", "namespace": "apps", "generation": 3,
                     "annotations": {"strand.io/paused": "false"}},
        "spec": {"topicName": "orders.v2", "partitions": 6, "replicas": 3,
                 "config": {"retention.ms": 86400000, "cleanup.policy": "delete"}},
        "status": {"topicId": "id-1", "conditions": [
            {"type": "Ready", "status": "False", "reason": "InvalidConfig",
             "lastTransitionTime": "2024-01-01T00:00:00Z"}],
            "replicasChange": {"from": 2, "to": 3, "startedAt": "2024-01-01T00:00:00Z"}}}
    for existing in (0, 1, 2):
        yield f"topic-reconciled-existing-{existing}", bytes([existing << 1]) + json.dumps(
            reconciled).encode()
    yield "topic-unmanaged", bytes([0]) + json.dumps(
        {"metadata": {"name": "t", "annotations": {"strand.io/managed": "false"}},
         "spec": {"partitions": 1, "replicas": 1}}).encode()


SEEDS: dict[str, Callable[[], Seeds]] = {
    "record_batch": record_batch_seeds,
    "gateway_requests": gateway_request_seeds,
    "gateway_security": gateway_security_seeds,
    "log_recovery": log_recovery_seeds,
    "operator_validation": operator_seeds,
    "kafka_requests": kafka_request_seeds,
}


def seeds(harness: str) -> list[tuple[str, bytes]]:
    return list(SEEDS[harness]())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz.make_corpus",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(REPO / "fuzz" / "corpus"))
    args = parser.parse_args(argv)
    assert set(SEEDS) == set(HARNESSES), "a harness without seeds"
    for harness in HARNESSES:
        directory = Path(args.corpus) / harness
        directory.mkdir(parents=True, exist_ok=True)
        for old in directory.glob("seed-*"):
            old.unlink()
        written = seeds(harness)
        for name, data in written:
            (directory / f"seed-{name}").write_bytes(data)
        print(f"{harness}: {len(written)} seeds, {sum(len(d) for _, d in written):,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
