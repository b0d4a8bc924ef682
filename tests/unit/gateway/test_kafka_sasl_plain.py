"""SASL/PLAIN on the Kafka listener without a cluster: a PLAIN message is checked
against the user's SCRAM credential (the gateway keeps no password), bad messages and
wrong passwords are typed refusals, and success issues the gateway's own session."""

from __future__ import annotations

import asyncio

import pytest

from services.gateway.authenticator import Authenticator
from services.gateway.kafka.sasl_plain import authenticate_plain
from strand.errors import AuthenticationError, ErrorCode
from strand.security.principal import Principal
from strand.security.scram import make_credential
from strand.security.state import SecurityState


@pytest.fixture(scope="module")
def authenticator() -> Authenticator:
    security = SecurityState()
    security.users["alice"] = make_credential("alice-secret")
    return Authenticator(security, required=True, session_lifetime_s=60)


def test_the_right_password_opens_a_session(authenticator: Authenticator) -> None:
    session = asyncio.run(authenticate_plain(authenticator, b"\0alice\0alice-secret"))
    assert (session.username, session.lifetime_ms) == ("alice", 60_000)
    assert authenticator.principal(session.session_token, ()) == Principal("User", "alice")
    # An authorization id naming the user itself is the same request.
    assert asyncio.run(authenticate_plain(authenticator,
                                          b"alice\0alice\0alice-secret")).username == "alice"


@pytest.mark.parametrize(("message", "why"), [
    (b"\0alice\0wrong", "invalid username or password"),
    (b"\0nobody\0alice-secret", "invalid username or password"),
    (b"bob\0alice\0alice-secret", "authorization id 'bob' is not the user 'alice'"),
    (b"alice-secret", "expected [authzid] NUL username NUL password"),
    (b"\0alice\0", "empty username or password"),
    (b"\0\xff\0x", "not UTF-8"),
    (b"\0alice\0" + b"x" * 1000, "too long"),
])
def test_refusals_are_typed(authenticator: Authenticator, message: bytes, why: str) -> None:
    with pytest.raises(AuthenticationError, match="PLAIN authentication failed") as raised:
        asyncio.run(authenticate_plain(authenticator, message))
    assert why in str(raised.value)
    assert raised.value.code is ErrorCode.SASL_AUTHENTICATION_FAILED
