"""strand.security.sessions and strand.security.pending: session tokens that round
trip, refuse any altered character, expire by the (injected) clock and belong to one
issuer's key; pending exchanges bounded by time and number, taken once."""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strand.security.pending import PendingExchanges
from strand.security.sessions import (
    DEFAULT_LIFETIME_S,
    InvalidSession,
    SessionClaim,
    SessionIssuer,
)

KEY = bytes(range(32))
FINGERPRINT = bytes(range(100, 132))


class Clock:
    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def reason(issuer: SessionIssuer, token: str) -> str:
    with pytest.raises(InvalidSession) as info:
        issuer.verify(token)
    assert "authenticate again" in str(info.value)
    return info.value.reason


def test_issue_verify_round_trip() -> None:
    clock = Clock(1_000.0)
    issuer = SessionIssuer(key=KEY, clock=clock)
    token, expires_at = issuer.issue("a,b=c ünïcødé", FINGERPRINT)
    assert expires_at == 1_000.0 + DEFAULT_LIFETIME_S
    assert token.isascii()
    assert set(token) <= set(string.ascii_letters + string.digits + "-_.")
    assert issuer.verify(token) == SessionClaim("a,b=c ünïcødé", FINGERPRINT, expires_at)


def test_fractional_expiry_and_empty_fingerprint_survive() -> None:
    issuer = SessionIssuer(lifetime_s=0.25, key=KEY, clock=Clock(1_700_000_000.123456))
    token, expires_at = issuer.issue("alice", b"")
    assert issuer.verify(token) == SessionClaim("alice", b"", expires_at)


def test_tampering_any_character_fails() -> None:
    issuer = SessionIssuer(key=KEY, clock=Clock())
    token, _ = issuer.issue("alice", FINGERPRINT)
    alphabet = string.ascii_letters + string.digits + "-_.=+/ "
    for at, original in enumerate(token):
        for replacement in alphabet:
            if replacement == original:
                continue
            tampered = token[:at] + replacement + token[at + 1:]
            with pytest.raises(InvalidSession):
                issuer.verify(tampered)
        with pytest.raises(InvalidSession):
            issuer.verify(token[:at] + token[at + 1:])  # a character dropped
    for suffix in ("A", "=", ".", "AA"):
        with pytest.raises(InvalidSession):
            issuer.verify(token + suffix)


def test_a_changed_claim_fails_on_the_signature() -> None:
    issuer = SessionIssuer(key=KEY, clock=Clock())
    alice, _ = issuer.issue("alice", FINGERPRINT)
    bob, _ = issuer.issue("bob", FINGERPRINT)
    version, _, signature = alice.split(".")
    forged = f"{version}.{bob.split('.')[1]}.{signature}"  # bob's claim, alice's signature
    assert reason(issuer, forged) == "signature"


def test_expiry_follows_the_clock() -> None:
    clock = Clock(1_000.0)
    issuer = SessionIssuer(lifetime_s=60.0, key=KEY, clock=clock)
    token, expires_at = issuer.issue("alice", FINGERPRINT)
    assert expires_at == 1_060.0
    clock.now = 1_059.999
    assert issuer.verify(token).username == "alice"
    clock.now = 1_060.0
    assert reason(issuer, token) == "expired"
    clock.now = 5_000.0
    assert reason(issuer, token) == "expired"


def test_another_issuers_key_fails() -> None:
    token, _ = SessionIssuer(key=KEY).issue("alice", FINGERPRINT)
    assert reason(SessionIssuer(key=bytes(32)), token) == "signature"
    assert reason(SessionIssuer(), token) == "signature"  # a random key per process
    one, two = SessionIssuer(), SessionIssuer()
    assert reason(two, one.issue("alice", FINGERPRINT)[0]) == "signature"


@pytest.mark.parametrize("token", ["", "v1", "v1..", "v2.AAAA.AAAA", "v1.AAAA", "v1.A.A",
                                   "v1.AAAA.AAAA.AAAA", "v1.!!!!.AAAA", "x" * 5000,
                                   "v1.AAAA.AAAA", "v1.AAAA." + "A" * 44])
def test_malformed_tokens(token: str) -> None:
    assert reason(SessionIssuer(key=KEY), token) == "malformed"


def test_well_formed_token_of_no_issuer_fails_on_the_signature() -> None:
    assert reason(SessionIssuer(key=KEY), "v1.AAAA." + "A" * 43) == "signature"


@settings(max_examples=300)
@given(token=st.text(max_size=200) | st.text(alphabet="AZaz09-_.v1", max_size=200))
def test_random_tokens_raise_only_invalid_session(token: str) -> None:
    with pytest.raises(InvalidSession):
        SessionIssuer(key=KEY).verify(token)


@pytest.mark.parametrize("kwargs", [{"lifetime_s": 0.0}, {"lifetime_s": -1.0},
                                    {"lifetime_s": float("inf")}, {"key": b"short"}])
def test_issuer_settings_that_cannot_work(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        SessionIssuer(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(("username", "fingerprint"), [("", FINGERPRINT),
                                                       ("\ud800", FINGERPRINT),
                                                       ("alice", bytes(256))])
def test_issue_refuses_claims_it_cannot_carry(username: str, fingerprint: bytes) -> None:
    with pytest.raises(ValueError):
        SessionIssuer(key=KEY).issue(username, fingerprint)


# ------------------------------------------------------------------ pending exchanges

def test_take_returns_and_removes() -> None:
    pending: PendingExchanges[str] = PendingExchanges(clock=Clock())
    first, second = pending.add("one"), pending.add("two")
    assert first != second and len(pending) == 2
    assert pending.take(first) == "one"
    assert pending.take(first) is None  # taken once
    assert len(pending) == 1
    assert pending.take("unknown") is None
    assert pending.take(second) == "two"
    assert len(pending) == 0


def test_exchanges_expire_after_ttl() -> None:
    clock = Clock(0.0)
    pending: PendingExchanges[str] = PendingExchanges(ttl_s=30.0, clock=clock)
    old = pending.add("old")
    clock.now = 20.0
    young = pending.add("young")
    clock.now = 29.999
    assert len(pending) == 2
    clock.now = 30.0
    assert len(pending) == 1  # the old one is gone, the young one lives until 50
    assert pending.take(old) is None
    clock.now = 49.0
    assert pending.take(young) == "young"


def test_an_expired_exchange_is_not_taken_before_it_is_swept() -> None:
    clock = Clock(0.0)
    pending: PendingExchanges[str] = PendingExchanges(ttl_s=5.0, clock=clock)
    exchange_id = pending.add("x")
    clock.now = 5.0
    assert pending.take(exchange_id) is None


def test_limit_drops_the_oldest() -> None:
    pending: PendingExchanges[int] = PendingExchanges(limit=3, clock=Clock())
    ids = [pending.add(n) for n in range(5)]
    assert len(pending) == 3
    assert pending.take(ids[0]) is None and pending.take(ids[1]) is None
    assert [pending.take(i) for i in ids[2:]] == [2, 3, 4]


def test_ids_are_opaque_and_url_safe() -> None:
    pending: PendingExchanges[int] = PendingExchanges()
    ids = {pending.add(n) for n in range(100)}
    assert len(ids) == 100
    assert all(len(i) >= 32 and set(i) <= set(string.ascii_letters + string.digits + "-_")
               for i in ids)


@pytest.mark.parametrize("kwargs", [{"ttl_s": 0.0}, {"ttl_s": float("nan")}, {"limit": 0}])
def test_pending_settings_that_cannot_work(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        PendingExchanges(**kwargs)  # type: ignore[arg-type]
