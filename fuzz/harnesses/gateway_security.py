"""The security decoders: SCRAM messages on both sides, session tokens, and the ACL,
quota and SCRAM-credential fields of the security calls.

Input: one byte choosing the decoder, then its bytes:

0. a SaslAuthenticateRequest: the gateway's one step of an exchange;
1. ``client-first NUL client-final``: a whole exchange with the gateway's server side
   (``{nonce}`` in the final message becomes the nonce the server chose, so the
   fuzzer reaches the proof check); a success must give a session whose token
   authenticates as the same user;
2. ``server-first NUL server-final``: the SDK's client side against a server
   (``{nonce}`` as above, the client's nonce);
3. a session token as a client sends it; 4. a token payload the gateway signed itself
   (so its parser runs behind a valid signature);
5. CreateAclsRequest, 6. DeleteAclsRequest, 7. DescribeAclsRequest: bindings and filters
   from the wire's fields; what the controller accepts is written to etcd and read
   back by every gateway as the same binding;
8. AlterUserScramCredentialsRequest: the controller's checks of a credential, and its
   etcd round trip; 9. AlterClientQuotasRequest, 10. DescribeClientQuotasRequest: quota
   entities, values and filters, and their etcd round trip;
11. etcd values as a watcher reads them (credential, binding, quotas and the quota key).

Expected: the typed errors each decoder documents (AuthenticationError and other
StrandErrors, AuthenticationFailed, InvalidSession, InvalidAclError, InvalidQuotaError,
the ValueError of a credential); anything else is a finding.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
from collections.abc import Callable

from google.protobuf.message import DecodeError  # type: ignore[import-untyped]

from fuzz.harnesses.common import check
from services.gateway.authenticator import Authenticator
from strand.cluster.cache import MetadataCache
from strand.cluster.keys import KeySpace
from strand.errors import StrandError
from strand.security.acl import AclBinding, InvalidAclError
from strand.security.acl_fields import binding_from_fields, filter_from_fields, read_fields
from strand.security.principal import Principal
from strand.security.quota_fields import (
    FilterComponent,
    entity_from_parts,
    filter_matches,
    parts_of,
)
from strand.security.quotas import InvalidQuotaError, QuotaEntity, QuotaValues
from strand.security.scram import (
    MECHANISM,
    AuthenticationFailed,
    ScramClientExchange,
    ScramCredential,
    make_credential,
    validate_username,
)
from strand.security.sessions import InvalidSession, SessionIssuer
from strand.v1 import security_pb2 as pb

__all__ = ["MODES", "NONCE", "test_one_input"]

NONCE = b"{nonce}"
_USER, _PASSWORD = "alice", "alice-password"
_NOW = 1_700_000_000.0
_KEY = bytes(range(32))
_DOMAIN = b"strand-session-v1\0"  # strand.security.sessions' signature domain
_KEYS = KeySpace("fuzz")


def _cache() -> MetadataCache:
    cache = MetadataCache(_KEYS)
    credential = make_credential(_PASSWORD, salt=b"fuzz-salt-0123456789")
    cache.apply(_KEYS.user(_USER), credential.to_json())
    return cache


_CACHE = _cache()
_AUTHENTICATOR = Authenticator(_CACHE.security, required=True, session_lifetime_s=60.0)
# A fixed key and clock: the same input always takes the same path.
_ISSUER = SessionIssuer(60.0, key=_KEY, clock=lambda: _NOW)
_AUTHENTICATOR.issuer = SessionIssuer(60.0, key=_KEY, clock=lambda: _NOW)


def test_one_input(data: bytes) -> None:
    if not data:
        return
    mode = MODES[data[0] % len(MODES)]
    with contextlib.suppress(DecodeError):
        mode(data[1:])


# -- SCRAM -----------------------------------------------------------------------------------------

def _sasl_step(payload: bytes) -> None:
    request = pb.SaslAuthenticateRequest.FromString(payload)
    with contextlib.suppress(StrandError):
        _AUTHENTICATOR.sasl(request.mechanism, request.exchange_id, request.auth_bytes)


def _server_exchange(payload: bytes) -> None:
    first, _, final = payload.partition(b"\0")
    try:
        step = _AUTHENTICATOR.sasl(MECHANISM, "", first)
    except StrandError:
        return
    nonce = _attribute(step.auth_bytes, b"r")
    try:
        done = _AUTHENTICATOR.sasl(MECHANISM, step.exchange_id, final.replace(NONCE, nonce))
    except StrandError:
        return
    principal = _AUTHENTICATOR.principal(done.session_token, ())
    check(principal == Principal("User", _USER), f"a session of {principal}")


def _client_exchange(payload: bytes) -> None:
    server_first, _, server_final = payload.partition(b"\0")
    client = ScramClientExchange(_USER, _PASSWORD)
    nonce = _attribute(client.first().encode(), b"r")
    try:
        client.final(server_first.replace(NONCE, nonce).decode("utf-8", "surrogateescape"))
        client.verify(server_final.decode("utf-8", "surrogateescape"))
    except AuthenticationFailed:
        pass


def _attribute(message: bytes, name: bytes) -> bytes:
    for part in message.split(b","):
        if part.startswith(name + b"="):
            return part[len(name) + 1:]
    return b""


# -- session tokens --------------------------------------------------------------------------------

def _token(payload: bytes) -> None:
    token = payload.decode("latin-1")  # gRPC metadata: ASCII, and a little more
    try:
        claim = _ISSUER.verify(token)
    except InvalidSession:
        pass
    else:
        check(bool(claim.username), "a claim without a user")
    with contextlib.suppress(StrandError):
        _AUTHENTICATOR.principal(token, ())


def _signed_payload(payload: bytes) -> None:
    signature = hmac.new(_KEY, _DOMAIN + payload, hashlib.sha256).digest()
    token = f"v1.{_b64(payload)}.{_b64(signature)}"
    try:
        claim = _ISSUER.verify(token)
    except InvalidSession:
        return
    try:  # issue() refuses some names the signed payload can hold (over 1 KiB)
        again, _ = SessionIssuer(60.0, key=_KEY, clock=lambda: claim.expires_at - 60.0
                                 ).issue(claim.username, claim.fingerprint)
    except ValueError:
        return
    check(_ISSUER.verify(again) == claim, "a claim issued again reads differently")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


# -- ACLs ------------------------------------------------------------------------------------------

def _create_acls(payload: bytes) -> None:
    request = pb.CreateAclsRequest.FromString(payload)
    for entry in request.creations:
        try:
            binding = binding_from_fields(read_fields(entry))
        except InvalidAclError:
            continue
        watcher = MetadataCache(_KEYS)
        watcher.apply(_KEYS.acl(binding.key()), binding.to_json())
        check(watcher.security.acls.bindings() == [binding],
              f"the binding {binding} does not read back from etcd")


def _acl_filters(message: type[pb.DeleteAclsRequest] | type[pb.DescribeAclsRequest]
                 ) -> Callable[[bytes], None]:
    def decode(payload: bytes) -> None:
        request = message.FromString(payload)
        entries = (list(request.filters) if isinstance(request, pb.DeleteAclsRequest)
                   else [request.filter])
        for entry in entries:
            try:
                acl_filter = filter_from_fields(read_fields(entry))
            except InvalidAclError:
                continue
            for binding in _CACHE.security.acls.bindings():
                acl_filter.matches(binding)
    return decode


# -- SCRAM credentials and quotas ------------------------------------------------------------------

def _alter_users(payload: bytes) -> None:
    request = pb.AlterUserScramCredentialsRequest.FromString(payload)
    for upsertion in request.upsertions:
        credential = ScramCredential(upsertion.mechanism, upsertion.salt,
                                     upsertion.stored_key, upsertion.server_key,
                                     upsertion.iterations)
        try:
            validate_username(upsertion.user)
            credential.validate()
        except ValueError:
            continue
        watcher = MetadataCache(_KEYS)
        watcher.apply(_KEYS.user(upsertion.user), credential.to_json())
        check(watcher.security.users == {upsertion.user: credential},
              f"the credential of {upsertion.user!r} does not read back from etcd")


def _alter_quotas(payload: bytes) -> None:
    request = pb.AlterClientQuotasRequest.FromString(payload)
    for entry in request.entries:
        try:
            entity = entity_from_parts((p.entity_type, p.name, p.is_default)
                                       for p in entry.entity.parts)
            values = QuotaValues().altered(
                (op.key, None if op.remove else op.value) for op in entry.ops)
        except InvalidQuotaError:
            continue
        check(entity_from_parts(parts_of(entity)) == entity, "entity parts do not round trip")
        if values.is_empty():
            continue
        watcher = MetadataCache(_KEYS)
        watcher.apply(_KEYS.quota(entity.key()), values.to_json())
        check(watcher.security.quotas.items() == [(entity, values)],
              f"the quotas of {entity} do not read back from etcd")


def _describe_quotas(payload: bytes) -> None:
    request = pb.DescribeClientQuotasRequest.FromString(payload)
    components = [FilterComponent(c.entity_type, c.match or "ANY", c.name)
                  for c in request.components]
    try:
        for component in components:
            component.validate()
    except InvalidQuotaError:
        return
    for entity in (QuotaEntity("alice"), QuotaEntity(None, "app"), QuotaEntity("bob", None)):
        filter_matches(entity, components, request.strict)


def _etcd_values(payload: bytes) -> None:
    """What a watcher makes of a value (or a quota key) it did not write itself."""
    with contextlib.suppress(ValueError):
        ScramCredential.from_json(payload)
    with contextlib.suppress(InvalidAclError):
        AclBinding.from_json(payload).validate()
    with contextlib.suppress(InvalidQuotaError):
        QuotaValues.from_json(payload)
    key = payload.decode("utf-8", "surrogateescape")
    try:
        entity = QuotaEntity.parse_key(key)
    except InvalidQuotaError:
        return
    check(entity.key() == key, f"quota key {key!r} parses to {entity}, whose key differs")


MODES: list[Callable[[bytes], None]] = [
    _sasl_step, _server_exchange, _client_exchange, _token, _signed_payload,
    _create_acls, _acl_filters(pb.DeleteAclsRequest), _acl_filters(pb.DescribeAclsRequest),
    _alter_users, _alter_quotas, _describe_quotas, _etcd_values,
]
