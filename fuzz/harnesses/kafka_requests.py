"""Kafka requests as the gateway's Kafka listener reads them off a connection: one
frame's header parsed, then what the listener does with it (served-version check,
authentication gate, the body decoded by kio, the API's handler calling the gateway
servicer, the response encoded and written).

Input: a flags byte, an error-code byte, then one request frame (the bytes after the
4-byte size prefix: request header v1/v2, then the body).

The flags byte (bit 0 lowest):

* bits 0-1, the connection: 0 not authenticated on a gateway that requires it,
  1 anonymous (no authentication required), 2 authenticated by SCRAM as ``alice``
  (a live session), 3 a SASL session that ended (its user's credential is gone);
* bit 2: the connection is TLS (PLAIN is offered); bit 3: a SaslHandshake was already
  answered on it (SCRAM, or PLAIN over TLS), so a SaslAuthenticate goes on from there;
* bits 4-5, how the fake servicer answers every call: 0 an empty response, 1 every
  entry asked (topics, partitions, groups, ...) echoed back with NONE, 2 the same
  with the error code of the second byte, 3 the call aborted with that error (which
  the handlers turn into each entry's code);
* bit 6: the authorizer is on (ACLs for ``User:alice`` only, so most callers are
  refused); bit 7: the connection is a service of the cluster (a super user).

The error-code byte picks a Strand error code (modulo their count). The listener is
the real one (``KafkaListener._answer``) around a fake servicer that never touches
the network or a disk: SASL goes through a real Authenticator (SCRAM, PLAIN), ACL
checks through a real AccessControl, a fetch through a real fetch session cache (a
session, id 1, open at epoch 1), and topic changes it accepts are made visible in its
metadata cache at once (as the controller's watch would), so nothing waits.

Expected: MalformedRequest (header or body), the listener's close (an API or version
not served, a request before authentication, a lapsed session, a failed SASL
authentication once answered). Anything else escaping is a finding: the real
listener would log "kafka request failed" and drop a connection Kafka would have
answered. Checked too: a response written is one frame that kio's reader of that
API and version (v0 for an ApiVersions of an unknown version) reads whole, with the
request's correlation id; no response only for a Produce with acks=0; a connection
the handler marked closing got its answer first; a body with a null where its schema
has none (kio reads a null array as None) is refused, never served.
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import itertools
import struct
import uuid
from collections.abc import Callable, Iterator
from typing import Any, cast

from google.protobuf.descriptor import FieldDescriptor  # type: ignore[import-untyped]
from google.protobuf.message import Message  # type: ignore[import-untyped]
from kio.index import load_request_schema, load_response_schema
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader
from kio.serial._introspect import is_optional
from kio.serial.errors import OutOfBoundValue

from fuzz.harnesses.common import Finding, check
from services.gateway.access import AccessControl
from services.gateway.authenticator import Authenticator
from services.gateway.kafka.call import Connection, KafkaContext, SaslExchange
from services.gateway.kafka.fetch import install_session_cache
from services.gateway.kafka.fetch_sessions import FetchPosition, FetchSessionCache
from services.gateway.kafka.framing import (
    API_VERSIONS_KEY,
    MalformedRequest,
    RequestHeader,
    decode_body,
    parse_header,
)
from services.gateway.kafka.listener import KafkaListener, KafkaListenerSettings, _Close
from services.gateway.kafka.sasl_plain import PLAIN
from services.gateway.throttling import Throttling
from strand.cluster.cache import MetadataCache
from strand.cluster.keys import KeySpace
from strand.cluster.model import TopicRecord
from strand.errors import ErrorCode, StrandError
from strand.security.acl import (
    CLUSTER_RESOURCE_NAME,
    AccessControlEntry,
    AclBinding,
    AclPermissionType,
    Operation,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from strand.security.principal import ANONYMOUS, Principal
from strand.security.scram import MECHANISM, make_credential
from strand.security.sessions import SessionIssuer
from strand.security.state import SecurityState
from strand.v1 import common_pb2, gateway_pb2, groups_pb2, storage_pb2, transactions_pb2
from strand.v1 import security_pb2 as pb_sec

__all__ = ["ACLS_ON", "ANONYMOUS_CONNECTION", "ANSWER", "AUTHENTICATED", "EMPTY", "ERROR",
           "EXPECTED", "LAPSED", "REFUSE", "SASL_STARTED", "SERVICE", "TLS", "UNAUTHENTICATED",
           "test_one_input"]

EXPECTED = (MalformedRequest, _Close)

# The flags byte (see the docstring).
UNAUTHENTICATED, ANONYMOUS_CONNECTION, AUTHENTICATED, LAPSED = 0, 1, 2, 3
TLS, SASL_STARTED = 0x04, 0x08
EMPTY, ANSWER, ERROR, REFUSE = 0x00, 0x10, 0x20, 0x30
ACLS_ON, SERVICE = 0x40, 0x80

_CODES = list(ErrorCode)
_NOW = 1_700_000_000.0
_KEY = bytes(range(32))
_USER, _PASSWORD = "alice", "alice-password"
_KEYS = KeySpace("fuzz")
_SIZE = struct.Struct(">i")
_read_header_v0 = entity_reader(ResponseHeaderV0)
_read_header_v1 = entity_reader(ResponseHeaderV1)

# -- the gateway's state the handlers read ---------------------------------------------------------

_SECURITY = SecurityState()
_SECURITY.apply_user(_USER, make_credential(_PASSWORD, salt=b"fuzz-salt-0123456789").to_json())
# Alice may use the topics starting "ord" and describe groups, transactional ids and
# the cluster; nobody else may do anything while the authorizer is on.
for _pattern, _operation in [
        (ResourcePattern(ResourceType.TOPIC, "ord", PatternType.PREFIXED), Operation.ALL),
        (ResourcePattern(ResourceType.GROUP, "*", PatternType.LITERAL), Operation.DESCRIBE),
        (ResourcePattern(ResourceType.TRANSACTIONAL_ID, "*", PatternType.LITERAL),
         Operation.DESCRIBE),
        (ResourcePattern(ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME, PatternType.LITERAL),
         Operation.DESCRIBE)]:
    _binding = AclBinding(_pattern, AccessControlEntry(f"User:{_USER}", "*", _operation,
                                                       AclPermissionType.ALLOW))
    _SECURITY.apply_acl(_binding.key(), _binding.to_json())

_AUTHENTICATOR = Authenticator(_SECURITY, required=True, session_lifetime_s=60.0)
# A fixed key and clock: the same input always takes the same path.
_AUTHENTICATOR.issuer = SessionIssuer(60.0, key=_KEY, clock=lambda: _NOW)
_LIVE_TOKEN, _ = _AUTHENTICATOR.issuer.issue(_USER, _SECURITY.users[_USER].fingerprint())
_ENDED_TOKEN, _ = _AUTHENTICATOR.issuer.issue("bob", b"gone")  # no such user any more
_ACCESS = {False: AccessControl(_SECURITY), True: AccessControl(_SECURITY, enabled=True)}

_TOPICS = {name: TopicRecord(name, str(uuid.UUID(int=i + 1)), partitions, 3, config)
           for i, (name, partitions, config) in enumerate([
               ("orders", 3, {}), ("ord.keys", 2, {"cleanup.policy": "compact"}),
               ("other", 1, {"retention.ms": "1000"})])}


class _Cache(MetadataCache):
    """The gateway's metadata cache, reset per input; the fake servicer makes the topic
    changes it accepts visible at once, so a handler never has to wait for one."""

    async def wait_changed(self, timeout: float | None = None) -> bool:
        raise Finding("a handler waited for a change the servicer had made visible")


# -- the fake servicer -------------------------------------------------------------------------

_MODULES = (common_pb2, groups_pb2, transactions_pb2, pb_sec, storage_pb2)


def _response_classes() -> dict[str, type[Message]]:
    """Each Gateway method's response class, by method name."""
    out: dict[str, type[Message]] = {}
    for method in gateway_pb2.DESCRIPTOR.services_by_name["Gateway"].methods:
        for module in _MODULES:
            cls = getattr(module, method.output_type.name, None)
            if cls is not None and cls.DESCRIPTOR is method.output_type:
                out[method.name] = cls
    return out


_RESPONSES = _response_classes()
# The servicer's methods that answer every call and never abort it (GatewayServicer's
# Metadata and SaslAuthenticate): their handlers call them without expecting a refusal.
_NEVER_REFUSED = frozenset({"Metadata", "SaslAuthenticate"})
# Answers whose entries are the request's, one for one and in order (the controller's
# CreateAcls and DeleteAcls, which the handlers read back by position).
_ALIGNED = {"CreateAcls": ("creations", "results"), "DeleteAcls": ("filters", "results")}
_NAME_FIELDS = ("name", "topic", "group_id", "transactional_id")


def _mirror(request: Message, response: Message, code: int) -> None:
    """Fill ``response`` with what ``request`` asked for, field by field of the same name
    (a list of names becoming entries named so), each error code ``code``: the answer
    of a servicer that knew every entry."""
    asked = request.DESCRIPTOR.fields_by_name
    for field in response.DESCRIPTOR.fields:
        repeated = field.is_repeated
        if field.name == "error_code" and not repeated:
            setattr(response, field.name, code)
            continue
        source = asked.get(field.name)
        if source is None or source.is_repeated != repeated:
            continue
        value = getattr(request, field.name)
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            if field.message_type.GetOptions().map_entry:
                continue
            if source.type == FieldDescriptor.TYPE_STRING and repeated:
                fields = field.message_type.fields_by_name
                for key in (n for n in _NAME_FIELDS if n in fields):
                    for text in value:
                        entry = getattr(response, field.name).add()
                        setattr(entry, key, text)
                        if "error_code" in fields:
                            entry.error_code = code
                    break
                continue
            if source.type != FieldDescriptor.TYPE_MESSAGE:
                continue
            if repeated:
                for item in value:
                    _mirror(item, getattr(response, field.name).add(), code)
            elif request.HasField(field.name):
                _mirror(value, getattr(response, field.name), code)
        elif source.type == field.type and (field.type != FieldDescriptor.TYPE_ENUM
                                            or source.enum_type is field.enum_type):
            if repeated:
                getattr(response, field.name).extend(value)
            else:
                setattr(response, field.name, value)


class FakeServicer:
    """What the listener and the API handlers touch of the gateway servicer."""

    def __init__(self) -> None:
        self.cache = _Cache(_KEYS)
        self.authenticator = _AUTHENTICATOR
        self.throttling = Throttling(SecurityState().quotas)  # no quota: nothing timed
        self.access = _ACCESS[False]
        self.behaviour = EMPTY
        self.code = ErrorCode.NONE

    def __getattr__(self, name: str) -> Callable[[Message, KafkaContext], Any]:
        response = _RESPONSES.get(name)
        if response is None:
            raise AttributeError(name)

        async def method(request: Message, context: KafkaContext) -> Message:
            return await self._answer(name, response, request, context)
        return method

    async def _answer(self, name: str, response_class: type[Message], request: Message,
                      context: KafkaContext) -> Message:
        if self.behaviour == REFUSE and name not in _NEVER_REFUSED:
            # The servicer's abort: details start with the Strand error's name (NONE
            # stands for details that name none, an unknown server error).
            await context.abort(None, "refused by the fuzzer" if self.code is ErrorCode.NONE
                                else f"{self.code.name}: refused by the fuzzer")
        code = int(self.code) if self.behaviour in (ERROR, REFUSE) else int(ErrorCode.NONE)
        response = response_class()
        if name in _ALIGNED:
            asked, answered = _ALIGNED[name]
            for _ in getattr(request, asked):
                getattr(response, answered).add(error_code=code)
            return response
        if self.behaviour == EMPTY:
            return response
        if name == "SaslAuthenticate" and code == ErrorCode.NONE:
            return _sasl(cast(pb_sec.SaslAuthenticateRequest, request))
        _mirror(request, response, code)
        if name in ("CreateTopics", "CreatePartitions", "DeleteTopics"):
            self._make_visible(name, request, response)
        return response

    def _make_visible(self, name: str, request: Any, response: Any) -> None:
        """What the controller's watch would bring: the topic changes answered NONE."""
        done = {result.name for result in response.topics if not result.error_code}
        topics = self.cache.topics
        if name == "DeleteTopics":
            for topic in done:
                topics.pop(topic, None)
            return
        for asked in request.topics:
            if asked.name not in done:
                continue
            count = asked.count if name == "CreatePartitions" else (
                len(asked.assignments) or asked.num_partitions)
            old = topics.get(asked.name)
            topics[asked.name] = TopicRecord(asked.name, "", max(count, old.partitions
                                                                if old else 0), 3)


def _sasl(request: pb_sec.SaslAuthenticateRequest) -> pb_sec.SaslAuthenticateResponse:
    """The servicer's SaslAuthenticate (services.gateway.security_admin): the real
    authenticator's step."""
    try:
        step = _AUTHENTICATOR.sasl(request.mechanism, request.exchange_id, request.auth_bytes)
    except StrandError as exc:
        return pb_sec.SaslAuthenticateResponse(error_code=exc.code.name, error_message=str(exc))
    return pb_sec.SaslAuthenticateResponse(
        exchange_id=step.exchange_id, auth_bytes=step.auth_bytes,
        session_token=step.session_token, session_lifetime_ms=step.lifetime_ms)


class _Writer:
    """The connection's StreamWriter: what the listener writes, kept."""

    def __init__(self) -> None:
        self.written = bytearray()

    def write(self, data: bytes) -> None:
        self.written += data

    async def drain(self) -> None:
        return None


_SERVICER = FakeServicer()
_LISTENER = KafkaListener(cast(Any, _SERVICER),
                          KafkaListenerSettings("127.0.0.1:0", "gateway.fuzz:9093"))
_LOOP = asyncio.new_event_loop()
atexit.register(_LOOP.close)


def _connection(flags: int) -> Connection:
    state = flags & 0x03
    connection = Connection("10.0.0.7", tls=bool(flags & TLS), service=bool(flags & SERVICE))
    if state == ANONYMOUS_CONNECTION:
        connection.principal = ANONYMOUS
    elif state in (AUTHENTICATED, LAPSED):
        connection.principal = Principal("User", _USER if state == AUTHENTICATED else "bob")
        connection.mechanism = MECHANISM
        connection.session_token = _LIVE_TOKEN if state == AUTHENTICATED else _ENDED_TOKEN
    if flags & SASL_STARTED:
        connection.sasl = SaslExchange(PLAIN if flags & TLS else MECHANISM)
    return connection


def _sessions() -> FetchSessionCache:
    """A fetch session cache holding one session (id 1, next epoch 1) over orders-0."""
    ids = itertools.count(1)
    cache = FetchSessionCache(new_id=lambda: next(ids), clock=lambda: _NOW)
    cache.context(0, 0, [(("orders", 0), FetchPosition(0, 1 << 20))])
    return cache


def test_one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    flags, code, frame = data[0], data[1], data[2:]
    try:
        header = parse_header(frame)
    except MalformedRequest:
        return
    _SERVICER.behaviour = flags & 0x30
    _SERVICER.code = _CODES[code % len(_CODES)]
    _SERVICER.access = _ACCESS[bool(flags & ACLS_ON)]
    _SERVICER.cache.topics = dict(_TOPICS)
    install_session_cache(cast(Any, _SERVICER), _sessions())
    connection = _connection(flags)
    writer = _Writer()
    nulls = _nulls(frame, header)
    try:
        _LOOP.run_until_complete(_LISTENER._answer(
            frame, header, connection, KafkaContext("ipv4:10.0.0.7:50000"),
            cast(asyncio.StreamWriter, writer)))
    except EXPECTED:
        check(connection.closing is None or bool(writer.written),
              f"closed for {connection.closing!r} without the answer")
        return
    except Exception as exc:
        # Name the cause when it is a null where the schema has none (what a handler
        # then trips over is incidental).
        if nulls:
            raise Finding(f"a null {', '.join(nulls)} (not nullable in api key "
                          f"{header.api_key} v{header.api_version}) reached the handler, "
                          f"which raised {exc!r}: Kafka refuses such a body") from exc
        raise
    check(not nulls, f"a null {', '.join(nulls)} (not nullable in api key {header.api_key} "
                     f"v{header.api_version}) was accepted: Kafka refuses such a body")
    if writer.written:
        _check_response(bytes(writer.written), header)
    else:
        check(header.api_key == 0 and decode_body(
            frame, header, load_request_schema(0, header.api_version)).acks == 0,
            f"no response to api key {header.api_key} v{header.api_version}")


def _nulls(frame: bytes, header: RequestHeader) -> list[str]:
    """The fields of the request's body that kio read as null although its schema does
    not let them be (kio refuses a null string there, but reads a null array as None);
    none for a body the listener would not read."""
    if not _LISTENER.table.serves(header.api_key, header.api_version):
        return []
    try:
        body = decode_body(frame, header, load_request_schema(header.api_key,
                                                              header.api_version))
    except MalformedRequest:
        return []
    return list(_null_fields(body, type(body).__name__))


def _null_fields(entity: Any, path: str) -> Iterator[str]:
    for field in dataclasses.fields(entity):
        value = getattr(entity, field.name)
        where = f"{path}.{field.name}"
        if value is None and not is_optional(field):
            yield where
        elif dataclasses.is_dataclass(value):
            yield from _null_fields(value, where)
        elif isinstance(value, tuple):
            for item in value:
                if dataclasses.is_dataclass(item):
                    yield from _null_fields(item, f"{where}[]")


def _check_response(written: bytes, header: RequestHeader) -> None:
    """One frame, read whole by kio as the response to this request."""
    (size,) = _SIZE.unpack_from(written)
    check(size == len(written) - _SIZE.size, f"frame size {size} of {len(written)} bytes")
    key = header.api_key
    served = _LISTENER.table.serves(key, header.api_version)
    version = header.api_version if served else 0  # ApiVersions' unsupported answer
    flexible = served and header.flexible and key != API_VERSIONS_KEY
    try:
        response_header, used = (_read_header_v1 if flexible else _read_header_v0)(
            written, _SIZE.size)
    except Exception as exc:  # kio raises several kinds on bytes it cannot read
        raise Finding(f"api key {key} v{version}: an unreadable response header: "
                      f"{exc!r}") from exc
    check(int(response_header.correlation_id) == header.correlation_id,
          f"correlation id {response_header.correlation_id} for {header.correlation_id}")
    at = _SIZE.size + used
    try:
        _, used = entity_reader(load_response_schema(key, version))(written, at)
    except OutOfBoundValue as exc:
        if "negative timestamp" in str(exc):
            # Kafka's -1 for "no time" (DescribeTransactions' start time of a transaction
            # not under way), which its clients read and kio's reader does not.
            return
        raise Finding(f"api key {key} v{version}: kio cannot read the response "
                      f"written: {exc!r}") from exc
    except Exception as exc:
        raise Finding(f"api key {key} v{version}: kio cannot read the response "
                      f"written: {exc!r}") from exc
    check(at + used == len(written), f"{len(written) - at - used} bytes after the response")
