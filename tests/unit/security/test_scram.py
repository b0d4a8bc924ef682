"""strand.security.scram: full exchanges, every way one must fail (and only with
AuthenticationFailed), the unknown user indistinguishable from a wrong password,
credentials (JSON, validation, fingerprint) and interop with scramp's own client and
server and with the RFC 5802 formulas computed independently."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
from collections.abc import Callable

import pytest
import scramp  # type: ignore[import-untyped]
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strand.security.scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MECHANISM,
    MIN_ITERATIONS,
    AuthenticationFailed,
    ScramClientExchange,
    ScramCredential,
    ScramServerExchange,
    make_credential,
    validate_username,
)

PASSWORD = "correct horse battery staple"
ALICE = make_credential(PASSWORD)
USERS: dict[str, ScramCredential] = {"alice": ALICE}

Lookup = Callable[[str], ScramCredential | None]


def exchange(username: str, password: str, lookup: Lookup = USERS.get
             ) -> tuple[ScramClientExchange, ScramServerExchange, str]:
    """Run client and server up to the server's final step; the client-final message."""
    client, server = ScramClientExchange(username, password), ScramServerExchange(lookup)
    return client, server, client.final(server.first(client.first()))


def failure(username: str, password: str, lookup: Lookup = USERS.get) -> AuthenticationFailed:
    _, server, client_final = exchange(username, password, lookup)
    with pytest.raises(AuthenticationFailed) as info:
        server.final(client_final)
    return info.value


def test_full_exchange_authenticates_and_both_sides_agree() -> None:
    client, server, client_final = exchange("alice", PASSWORD)
    client.verify(server.final(client_final))
    assert server.username == "alice"
    assert server.credential == ALICE
    assert server.credential.fingerprint() == ALICE.fingerprint()


def test_wrong_password_fails_at_the_final_step() -> None:
    _, server, client_final = exchange("alice", "wrong")  # the first steps go through
    with pytest.raises(AuthenticationFailed, match="invalid username or password"):
        server.final(client_final)
    with pytest.raises(AuthenticationFailed):
        _ = server.username
    with pytest.raises(AuthenticationFailed):
        _ = server.credential


def test_unknown_user_fails_like_a_wrong_password() -> None:
    wrong, unknown = failure("alice", "wrong"), failure("mallory", PASSWORD)
    assert type(unknown) is type(wrong) is AuthenticationFailed
    assert str(unknown) == str(wrong)
    assert "mallory" not in str(unknown)


def server_first_fields(username: str, lookup: Lookup = USERS.get) -> tuple[str, str]:
    message = ScramServerExchange(lookup).first(ScramClientExchange(username, "x").first())
    fields = dict(part.split("=", 1) for part in message.split(","))
    return fields["s"], fields["i"]


def test_unknown_user_gets_a_decoy_that_looks_real_and_stays_the_same() -> None:
    salt, iterations = server_first_fields("mallory")
    assert len(base64.b64decode(salt)) == len(ALICE.salt)
    assert iterations == str(DEFAULT_ITERATIONS)
    assert server_first_fields("mallory") == (salt, iterations)  # repeated attempts alike
    assert server_first_fields("trudy")[0] != salt
    assert server_first_fields("alice")[0] == base64.b64encode(ALICE.salt).decode()


def test_unusable_stored_credential_is_treated_as_unknown() -> None:
    other = ScramCredential("SCRAM-SHA-256", ALICE.salt, ALICE.stored_key[:32],
                            ALICE.server_key[:32], 4096)
    assert str(failure("bob", PASSWORD, {"bob": other}.get)) == str(failure("alice", "wrong"))


def test_lookup_errors_propagate_unchanged() -> None:
    def broken(name: str) -> ScramCredential | None:
        raise RuntimeError("store unavailable")

    with pytest.raises(RuntimeError, match="store unavailable"):
        ScramServerExchange(broken).first(ScramClientExchange("alice", PASSWORD).first())


def test_client_catches_a_server_without_the_server_key() -> None:
    # A server that stole StoredKey passes the proof check but cannot sign.
    thief = ScramCredential(MECHANISM, ALICE.salt, ALICE.stored_key, bytes(64), 4096)
    client, server, client_final = exchange("alice", PASSWORD, {"alice": thief}.get)
    server_final = server.final(client_final)
    with pytest.raises(AuthenticationFailed, match="did not prove"):
        client.verify(server_final)


@pytest.mark.parametrize("server_final", [
    "v=" + base64.b64encode(bytes(64)).decode(), "e=invalid-proof", "v=", "", "garbage"])
def test_client_refuses_a_forged_or_garbled_server_final(server_final: str) -> None:
    client, server, client_final = exchange("alice", PASSWORD)
    server.final(client_final)
    with pytest.raises(AuthenticationFailed):
        client.verify(server_final)


@pytest.mark.parametrize("name", ["a,b", "x=y", "=2C", "a=3Db,,==", "ünïcødé user"])
def test_usernames_with_commas_and_equals_signs(name: str) -> None:
    client, server, client_final = exchange(name, PASSWORD, {name: ALICE}.get)
    client.verify(server.final(client_final))
    assert server.username == name


def test_saslname_escaping_on_the_wire() -> None:
    first = ScramClientExchange("a,b=c", PASSWORD).first()
    assert first.startswith("n,,n=a=2Cb=3Dc,r=")


def tampered_proof(message: str) -> str:
    head, proof = message.rsplit(",p=", 1)
    raw = bytearray(base64.b64decode(proof))
    raw[0] ^= 1
    return f"{head},p={base64.b64encode(bytes(raw)).decode()}"


@pytest.mark.parametrize("tamper", [
    tampered_proof,
    lambda m: m.replace(",r=", ",r=X", 1),        # another nonce
    lambda m: m.replace("c=biws", "c=eSws", 1),   # another channel binding flag
    lambda m: m.rsplit(",p=", 1)[0],              # no proof
    lambda m: m + ",x=1",                         # an attribute after the proof
    lambda m: m[: len(m) // 2],
    lambda m: m + "\ud800",
    lambda m: m.replace(",p=", ",x=\ud800,p=", 1),  # an extension scramp lets through
    lambda m: m * 3000,
])
def test_tampered_client_final_fails(tamper: Callable[[str], str]) -> None:
    _, server, client_final = exchange("alice", PASSWORD)
    with pytest.raises(AuthenticationFailed):
        server.final(tamper(client_final))
    with pytest.raises(AuthenticationFailed):  # the exchange is over, even for the original
        server.final(client_final)


def test_replayed_client_final_fails_on_a_new_exchange() -> None:
    _, server, client_final = exchange("alice", PASSWORD)
    server.final(client_final)
    replay = ScramServerExchange(USERS.get)
    replay.first(ScramClientExchange("alice", PASSWORD).first())
    with pytest.raises(AuthenticationFailed):
        replay.final(client_final)
    with pytest.raises(AuthenticationFailed):  # and twice on the same exchange
        server.final(client_final)


def test_client_first_with_an_unencodable_extension_fails() -> None:
    client, server = ScramClientExchange("alice", PASSWORD), ScramServerExchange(USERS.get)
    with pytest.raises(AuthenticationFailed):
        client.final(server.first(client.first() + ",x=\ud800"))


def test_server_calls_out_of_order_fail() -> None:
    client = ScramClientExchange("alice", PASSWORD)
    with pytest.raises(AuthenticationFailed):
        ScramServerExchange(USERS.get).final("c=biws,r=abc,p=AAAA")
    server = ScramServerExchange(USERS.get)
    first = client.first()
    server.first(first)
    with pytest.raises(AuthenticationFailed):
        server.first(first)


def test_client_calls_out_of_order_fail() -> None:
    client = ScramClientExchange("alice", PASSWORD)
    with pytest.raises(AuthenticationFailed):
        client.final("r=abc,s=QUJDREVGR0hJSktM,i=4096")
    with pytest.raises(AuthenticationFailed):
        ScramClientExchange("alice", PASSWORD).verify("v=AAAA")
    client = ScramClientExchange("alice", PASSWORD)
    client.first()
    with pytest.raises(AuthenticationFailed):
        client.first()


@pytest.mark.parametrize("iterations", [1, MIN_ITERATIONS - 1, MAX_ITERATIONS + 1, 10_000_000])
def test_client_refuses_iterations_out_of_range(iterations: int) -> None:
    client = ScramClientExchange("alice", PASSWORD)
    nonce = client.first().split(",r=", 1)[1]
    salt = base64.b64encode(ALICE.salt).decode()
    with pytest.raises(AuthenticationFailed):
        client.final(f"r={nonce}server,s={salt},i={iterations}")


def test_client_accepts_the_whole_iteration_range() -> None:
    for iterations in (MIN_ITERATIONS, MAX_ITERATIONS):
        credential = make_credential(PASSWORD, iterations)
        client, server, client_final = exchange("alice", PASSWORD, {"alice": credential}.get)
        client.verify(server.final(client_final))


@pytest.mark.parametrize("iterations", [0, 1000, MIN_ITERATIONS - 1, MAX_ITERATIONS + 1])
def test_credentials_below_or_above_the_range_are_refused(iterations: int) -> None:
    with pytest.raises(ValueError, match="iterations"):
        make_credential(PASSWORD, iterations)
    weak = ScramCredential(MECHANISM, ALICE.salt, ALICE.stored_key, ALICE.server_key,
                           iterations)
    with pytest.raises(ValueError, match="iterations"):
        weak.validate()
    assert server_first_fields("alice", {"alice": weak}.get)[1] == str(DEFAULT_ITERATIONS)


# Messages a peer could send: anything, with the grammar's characters overrepresented.
junk = st.text(st.one_of(st.characters(), st.sampled_from(
    [",", "=", "n", "r", "p", "c", "s", "i", "v", "e", "y", "\x00", "\ud800", "2", "3", "C", "D"])),
    max_size=300)
client_firsts = st.one_of(junk, junk.map(lambda s: "n,,n=" + s),
                          st.builds(lambda n, r: f"n,,n={n},r={r}", junk, junk))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(message=client_firsts)
def test_random_client_first_raises_only_authentication_failed(message: str) -> None:
    with contextlib.suppress(AuthenticationFailed):  # a well-formed one may pass
        assert ScramServerExchange(USERS.get).first(message).startswith("r=")


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(message=junk, prefix=st.booleans())
def test_random_client_final_raises_only_authentication_failed(message: str,
                                                               prefix: bool) -> None:
    client = ScramClientExchange("alice", PASSWORD)
    server = ScramServerExchange(USERS.get)
    nonce = server.first(client.first()).split(",", 1)[0][2:]
    candidate = f"c=biws,r={nonce},p={message}" if prefix else message
    with pytest.raises(AuthenticationFailed):
        server.final(candidate)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(message=junk, position=st.integers(min_value=0), kept=st.booleans())
def test_mutated_valid_messages_fail_on_both_sides(message: str, position: int,
                                                   kept: bool) -> None:
    client, server, client_final = exchange("alice", PASSWORD)
    at = position % (len(client_final) + 1)
    mutated = client_final[:at] + message + client_final[at + (0 if kept else 1):]
    try:
        server_final = server.final(mutated)
    except AuthenticationFailed:
        return
    # Only the same message may pass (base64 leaves the proof's last bits unchecked).
    assert same_message(mutated, client_final)
    client.verify(server_final)


def same_message(one: str, other: str) -> bool:
    (head, proof), (other_head, other_proof) = one.rsplit(",p=", 1), other.rsplit(",p=", 1)
    return head == other_head and base64.b64decode(proof) == base64.b64decode(other_proof)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(message=junk)
def test_random_server_messages_raise_only_authentication_failed(message: str) -> None:
    client = ScramClientExchange("alice", PASSWORD)
    client.first()
    with pytest.raises(AuthenticationFailed):
        client.final(message)
    client, server, client_final = exchange("alice", PASSWORD)
    server.final(client_final)
    with pytest.raises(AuthenticationFailed):
        client.verify(message)


def test_credential_json_round_trip_is_stable() -> None:
    data = ALICE.to_json()
    assert ScramCredential.from_json(data) == ALICE
    assert ScramCredential.from_json(data).to_json() == data
    assert data.startswith(b'{"iterations":4096,"mechanism":"SCRAM-SHA-512","salt":')


@pytest.mark.parametrize("data", [
    b"", b"not json", b"[]", b"null", b"\xff\xfe", b"[" * 100_000,
    b'{"mechanism":"SCRAM-SHA-512"}',
    ALICE.to_json().replace(b'"iterations":4096', b'"iterations":"4096"'),
    ALICE.to_json().replace(b'"iterations":4096', b'"iterations":true'),
    ALICE.to_json().replace(b'"iterations":4096', b'"iterations":100'),
    ALICE.to_json().replace(b'"salt":"', b'"salt":"!'),
    ALICE.to_json().replace(b'"mechanism":"SCRAM-SHA-512"', b'"mechanism":"SCRAM-SHA-256"'),
    ALICE.to_json()[:-1] + b',"extra":1}',
])
def test_credential_from_junk_json_raises_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        ScramCredential.from_json(data)


@pytest.mark.parametrize(("change", "error"), [
    ({"mechanism": "SCRAM-SHA-256"}, "mechanism"),
    ({"iterations": MIN_ITERATIONS - 1}, "iterations"),
    ({"iterations": MAX_ITERATIONS + 1}, "iterations"),
    ({"salt": b""}, "salt"),
    ({"salt": b"short"}, "salt"),
    ({"stored_key": bytes(32)}, "stored_key"),
    ({"server_key": bytes(65)}, "server_key"),
])
def test_credential_validation(change: dict[str, object], error: str) -> None:
    fields: dict[str, object] = {"mechanism": ALICE.mechanism, "salt": ALICE.salt,
                                 "stored_key": ALICE.stored_key,
                                 "server_key": ALICE.server_key,
                                 "iterations": ALICE.iterations, **change}
    with pytest.raises(ValueError, match=error):
        ScramCredential(**fields).validate()  # type: ignore[arg-type]


def test_fingerprint_changes_with_every_password_change() -> None:
    same = ScramCredential.from_json(ALICE.to_json())
    assert same.fingerprint() == ALICE.fingerprint()
    assert len(ALICE.fingerprint()) == 32
    again = make_credential(PASSWORD)  # the same password: a new salt, new keys
    assert again.fingerprint() != ALICE.fingerprint()
    fixed = make_credential(PASSWORD, salt=ALICE.salt)
    assert fixed == ALICE and fixed.fingerprint() == ALICE.fingerprint()
    assert make_credential(PASSWORD, 8192, ALICE.salt).fingerprint() != ALICE.fingerprint()


@pytest.mark.parametrize("password", ["", "\u00ad", "bad\x07bell"])
def test_make_credential_refuses_unusable_passwords(password: str) -> None:
    with pytest.raises(ValueError, match="password"):
        make_credential(password)
    with pytest.raises(ValueError):
        ScramClientExchange("alice", password)


@pytest.mark.parametrize("name", ["", "x" * 257, "tab\there", "nul\x00", "zero\u200bwidth",
                                  "\ufb01ne", "a\u00a0b", "\U000f0000"])
def test_unusable_usernames_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="username"):
        validate_username(name)
    with pytest.raises(ValueError):
        ScramClientExchange(name, PASSWORD)


@pytest.mark.parametrize("name", ["alice", "User:alice", "a,b=c", "x" * 256, "ünïcødé user"])
def test_usable_usernames(name: str) -> None:
    validate_username(name)


def rfc5802_keys(password: str, salt: bytes, iterations: int) -> tuple[bytes, bytes]:
    """StoredKey and ServerKey by the RFC's formulas, with hashlib alone."""
    salted = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha512).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha512).digest()
    return hashlib.sha512(client_key).digest(), server_key


def test_make_credential_matches_the_rfc_formulas() -> None:
    credential = make_credential("pencil", 4096, b"QSXCR+Q6sek8bf92")
    assert (credential.stored_key, credential.server_key) == rfc5802_keys(
        "pencil", b"QSXCR+Q6sek8bf92", 4096)
    assert (ALICE.stored_key, ALICE.server_key) == rfc5802_keys(PASSWORD, ALICE.salt, 4096)


def test_scramps_own_client_authenticates_against_our_server() -> None:
    theirs = scramp.ScramClient([MECHANISM], "alice", PASSWORD)
    server = ScramServerExchange(USERS.get)
    theirs.set_server_first(server.first(theirs.get_client_first()))
    theirs.set_server_final(server.final(theirs.get_client_final()))
    assert server.username == "alice"


def test_our_client_authenticates_against_scramps_own_server() -> None:
    def auth(name: str) -> tuple[bytes, bytes, bytes, int]:
        return ALICE.salt, ALICE.stored_key, ALICE.server_key, ALICE.iterations

    theirs = scramp.ScramMechanism(MECHANISM).make_server(auth)
    client = ScramClientExchange("alice", PASSWORD)
    theirs.set_client_first(client.first())
    client_final = client.final(theirs.get_server_first())
    theirs.set_client_final(client_final)
    client.verify(theirs.get_server_final())
