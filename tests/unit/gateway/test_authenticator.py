"""The gateway's authentication without gRPC (services/gateway/authenticator.py): a
SCRAM exchange gives a session; the session names its user until it lapses or the
user's credential changes; certificates name their common name; anonymous callers
are refused when authentication is required."""

from __future__ import annotations

import time

import pytest

from services.gateway.authenticator import Authenticator
from strand.errors import AuthenticationError, UnsupportedSaslMechanismError
from strand.security.principal import ANONYMOUS, Principal
from strand.security.scram import MECHANISM, ScramClientExchange, make_credential
from strand.security.state import SecurityState


def with_user(name: str, password: str) -> SecurityState:
    state = SecurityState()
    state.apply_user(name, make_credential(password).to_json())
    return state


def authenticate(gateway: Authenticator, name: str, password: str) -> str:
    client = ScramClientExchange(name, password)
    first = gateway.sasl(MECHANISM, "", client.first().encode())
    assert first.exchange_id and not first.session_token
    final = gateway.sasl(MECHANISM, first.exchange_id,
                         client.final(first.auth_bytes.decode()).encode())
    client.verify(final.auth_bytes.decode())
    assert final.lifetime_ms > 0
    return final.session_token


def test_a_session_names_its_user() -> None:
    gateway = Authenticator(with_user("alice", "secret"), required=True)
    token = authenticate(gateway, "alice", "secret")
    assert gateway.principal(token, []) == Principal("User", "alice")
    # the session wins over a certificate the same connection presents
    assert gateway.principal(token, ["client"]) == Principal("User", "alice")


@pytest.mark.parametrize(("name", "password"), [("alice", "wrong"), ("mallory", "secret")])
def test_wrong_password_and_unknown_user_fail_alike(name: str, password: str) -> None:
    gateway = Authenticator(with_user("alice", "secret"))
    with pytest.raises(AuthenticationError) as failed:
        authenticate(gateway, name, password)
    assert str(failed.value) == f"{MECHANISM} authentication failed: invalid username or password"


def test_a_changed_or_removed_credential_ends_the_session() -> None:
    state = with_user("alice", "secret")
    gateway = Authenticator(state)
    token = authenticate(gateway, "alice", "secret")
    state.apply_user("alice", make_credential("new-secret").to_json())
    with pytest.raises(AuthenticationError, match="changed or removed"):
        gateway.principal(token, [])
    token = authenticate(gateway, "alice", "new-secret")
    state.apply_user("alice", None)
    with pytest.raises(AuthenticationError, match="changed or removed"):
        gateway.principal(token, [])


def test_a_forged_or_foreign_token_is_refused_even_when_anonymous_is_allowed() -> None:
    state = with_user("alice", "secret")
    token = authenticate(Authenticator(state), "alice", "secret")
    other_gateway = Authenticator(state, required=False)
    with pytest.raises(AuthenticationError, match="session refused"):
        other_gateway.principal(token, [])
    with pytest.raises(AuthenticationError):
        other_gateway.principal(token[:-2] + "xx", [])


def test_a_lapsed_session_is_refused() -> None:
    gateway = Authenticator(with_user("alice", "secret"), session_lifetime_s=0.001)
    token = authenticate(gateway, "alice", "secret")
    time.sleep(0.01)
    with pytest.raises(AuthenticationError, match="expired"):
        gateway.principal(token, [])


def test_certificates_and_anonymous_callers() -> None:
    optional = Authenticator(SecurityState(), required=False)
    assert optional.principal(None, ["client", "client.example"]) == Principal("User", "client")
    assert optional.principal(None, []) == ANONYMOUS
    with pytest.raises(AuthenticationError, match="requires authentication"):
        Authenticator(SecurityState(), required=True).principal(None, [])


def test_bad_exchanges() -> None:
    gateway = Authenticator(with_user("alice", "secret"))
    with pytest.raises(UnsupportedSaslMechanismError, match="PLAIN"):
        gateway.sasl("PLAIN", "", b"\0alice\0secret")
    with pytest.raises(AuthenticationError, match="unknown to this gateway"):
        gateway.sasl(MECHANISM, "no-such-exchange", b"c=biws,r=x,p=y")
    with pytest.raises(AuthenticationError, match="UTF-8"):
        gateway.sasl(MECHANISM, "", b"\xff\xfe")
    with pytest.raises(AuthenticationError):
        gateway.sasl(MECHANISM, "", b"garbage")
    # an exchange is used once: replaying its final message fails
    client = ScramClientExchange("alice", "secret")
    first = gateway.sasl(MECHANISM, "", client.first().encode())
    final = client.final(first.auth_bytes.decode()).encode()
    gateway.sasl(MECHANISM, first.exchange_id, final)
    with pytest.raises(AuthenticationError, match="unknown to this gateway"):
        gateway.sasl(MECHANISM, first.exchange_id, final)
