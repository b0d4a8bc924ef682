"""strand.security.quotas: entity keys and fields, quota values and their JSON, Kafka's
precedence of quota entities and its sensor tags, the sampled Rate against hand
computations, throttle times, and ClientQuotas simulated with a fake clock."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strand.security.quotas import (
    ABSENT,
    CONSUMER_BYTE_RATE,
    DEFAULT,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotas,
    EntityName,
    InvalidQuotaError,
    QuotaEntity,
    QuotaStore,
    QuotaValues,
    Rate,
    meter_key,
    throttle_time,
)

E = QuotaEntity
names = st.text(alphabet=st.sampled_from("ab/=,%<>.~_- é字😀\x00"), max_size=8) | st.text()
parts: st.SearchStrategy[EntityName] = st.none() | st.just(ABSENT) | names
entities = st.tuples(parts, parts).filter(lambda p: p != (ABSENT, ABSENT)).map(lambda p: E(*p))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


# -- entities ------------------------------------------------------------------------

@given(entities, entities)
def test_entity_key_round_trip(a: QuotaEntity, b: QuotaEntity) -> None:
    assert QuotaEntity.parse_key(a.key()) == a
    assert QuotaEntity.from_fields(a.to_fields()) == a
    assert "/" not in a.key()
    assert (a.key() == b.key()) == (a == b)
    assert (a < b) == (b > a) and (a == b or (a < b) != (b < a))


def test_entity_examples() -> None:
    assert E("alice").key() == "user=alice"
    assert E(DEFAULT, "a/b").key() == "user=<default>,client-id=a%2Fb"
    assert E(client_id="").key() == "client-id="
    assert E("<default>").key() == "user=%3Cdefault%3E" != E(DEFAULT).key()
    assert E("alice", DEFAULT).to_fields() == [("user", "alice"), ("client-id", None)]
    assert E(client_id="x").to_fields() == [("client-id", "x")]
    assert str(E("alice", DEFAULT)) == "user=alice, client-id=<default>"
    assert str(E(client_id="x")) == "client-id=x"
    assert sorted([E("b"), E(client_id="z"), E(DEFAULT, "x"), E("a", "x"), E("a")]) == \
        [E(client_id="z"), E(DEFAULT, "x"), E("a"), E("a", "x"), E("b")]
    assert QuotaEntity.from_fields([("client-id", "x"), ("user", None)]) == E(DEFAULT, "x")


@pytest.mark.parametrize("key", [
    "", "user", "group=x", "user=a,user=b", "client-id=x,user=y", "user=a/b", "user=%zz",
    "user=%ff", "user=%41", "user=a b", "user=<default>x", "user=a,", ",user=a",
    # Found by fuzzing (fuzz/harnesses/gateway_security.py): key() writes ASCII only; a
    # lone surrogate made quote() raise UnicodeEncodeError instead.
    "user=\udc80", "user=\u00e9",
])
def test_parse_key_refuses(key: str) -> None:
    with pytest.raises(InvalidQuotaError):
        QuotaEntity.parse_key(key)


@pytest.mark.parametrize(("pairs", "says"), [
    ([], "needs a user"), ([("group", "x")], "unknown quota entity type"),
    ([("user", "a"), ("user", "b")], "given twice"),
    ([("client-id", None), ("client-id", None)], "given twice"),
    ([("user", 5)], "must be a string"), ([("user", "\udc80")], "valid unicode"),
])
def test_from_fields_refuses(pairs: list[tuple[str, str | None]], says: str) -> None:
    with pytest.raises(InvalidQuotaError, match=says):
        QuotaEntity.from_fields(pairs)


def test_empty_entity_refused() -> None:
    with pytest.raises(InvalidQuotaError):
        QuotaEntity()


# -- values --------------------------------------------------------------------------

rates = st.none() | st.floats(min_value=1e-9, max_value=1e300)


@given(rates, rates, rates)
def test_values_json_round_trip(p: float | None, c: float | None, r: float | None) -> None:
    values = QuotaValues(p, c, r)
    assert QuotaValues.from_json(values.to_json()) == values
    assert values.is_empty() == (p is None and c is None and r is None)


def test_values_json_examples() -> None:
    values = QuotaValues(producer_byte_rate=1024, request_percentage=12.5)
    assert values.to_json() == b'{"producer_byte_rate":1024.0,"request_percentage":12.5}'
    assert QuotaValues().to_json() == b"{}" and QuotaValues().is_empty()
    assert values.as_dict() == {PRODUCER_BYTE_RATE: 1024.0, REQUEST_PERCENTAGE: 12.5}


@pytest.mark.parametrize("data", [
    b"", b"\xff", b"[]", b"1", b'"x"', b"null", b'{"x":1}', b'{"producer_byte_rate":"1"}',
    b'{"producer_byte_rate":true}', b'{"producer_byte_rate":null}',
    b'{"producer_byte_rate":0}', b'{"producer_byte_rate":-1}', b'{"consumer_byte_rate":NaN}',
    b'{"consumer_byte_rate":Infinity}', b'{"consumer_byte_rate":1e999}',
    b'{"consumer_byte_rate":1' + b"0" * 400 + b"}",
])
def test_values_from_json_refuses(data: bytes) -> None:
    with pytest.raises(InvalidQuotaError):
        QuotaValues.from_json(data)


def test_altered() -> None:
    base = QuotaValues(producer_byte_rate=100.0)
    changed = base.altered([(CONSUMER_BYTE_RATE, 5), (PRODUCER_BYTE_RATE, None),
                            (REQUEST_PERCENTAGE, 250.0)])
    assert changed == QuotaValues(None, 5.0, 250.0)
    assert base == QuotaValues(producer_byte_rate=100.0)
    assert base.altered([(PRODUCER_BYTE_RATE, None)]).is_empty()
    assert base.altered([]) == base


@pytest.mark.parametrize(("op", "says"), [
    (("bytes", 1.0), "unknown quota"), ((PRODUCER_BYTE_RATE, 0.0), "positive"),
    ((PRODUCER_BYTE_RATE, -5.0), "positive"), ((CONSUMER_BYTE_RATE, float("nan")), "finite"),
    ((CONSUMER_BYTE_RATE, float("inf")), "finite"), ((REQUEST_PERCENTAGE, True), "number"),
    ((REQUEST_PERCENTAGE, "5"), "number"),
])
def test_altered_refuses(op: tuple[str, float | None], says: str) -> None:
    with pytest.raises(InvalidQuotaError, match=says):
        QuotaValues().altered([op])


# -- precedence ----------------------------------------------------------------------

LEVELS = [E("alice", "x"), E("alice", DEFAULT), E("alice"), E(DEFAULT, "x"),
          E(DEFAULT, DEFAULT), E(DEFAULT), E(client_id="x"), E(client_id=DEFAULT)]
TAGS = [("alice", "x"), ("alice", "x"), ("alice", ""), ("alice", "x"), ("alice", "x"),
        ("alice", ""), ("", "x"), ("", "x")]


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_resolve_precedence(level: int) -> None:
    store = QuotaStore()
    for other in (E("bob", "x"), E("alice", "y"), E("bob"), E(client_id="y"), E("x", "alice")):
        store.put(other, QuotaValues(producer_byte_rate=1.0))
    for i, entity in enumerate(LEVELS[level:], start=level):
        store.put(entity, QuotaValues(producer_byte_rate=100.0 + i))
    assert store.resolve("alice", "x", PRODUCER_BYTE_RATE) == (LEVELS[level], 100.0 + level)
    # An entity that sets another quota only does not shadow this one.
    for entity in LEVELS[:level]:
        store.put(entity, QuotaValues(consumer_byte_rate=7.0))
    assert store.resolve("alice", "x", PRODUCER_BYTE_RATE) == (LEVELS[level], 100.0 + level)
    # Alone, the level applies; the next more specific one shadows it.
    alone = QuotaStore()
    alone.put(LEVELS[level], QuotaValues(producer_byte_rate=5.0))
    assert alone.resolve("alice", "x", PRODUCER_BYTE_RATE) == (LEVELS[level], 5.0)
    if level > 0:
        alone.put(LEVELS[level - 1], QuotaValues(producer_byte_rate=6.0))
        assert alone.resolve("alice", "x", PRODUCER_BYTE_RATE) == (LEVELS[level - 1], 6.0)
    assert meter_key("alice", "x", LEVELS[level]) == TAGS[level]


def test_resolve_nothing_and_store() -> None:
    store = QuotaStore()
    assert store.resolve("alice", "x", PRODUCER_BYTE_RATE) is None
    store.put(E("bob"), QuotaValues(producer_byte_rate=1.0))
    store.put(E(client_id="y"), QuotaValues(producer_byte_rate=1.0))
    assert store.resolve("alice", "x", PRODUCER_BYTE_RATE) is None
    assert store.resolve("bob", "x", CONSUMER_BYTE_RATE) is None
    store.put(E("bob"), QuotaValues())  # empty values remove the entity
    assert store.items() == [(E(client_id="y"), QuotaValues(producer_byte_rate=1.0))]
    store.remove(E(client_id="y"))
    assert len(store) == 0
    with pytest.raises(InvalidQuotaError):
        store.resolve("alice", "x", "bytes")


# -- rate and throttle time ----------------------------------------------------------

def test_rate_by_hand() -> None:
    rate = Rate(samples=3, window_s=1.0)
    assert rate.rate(0.0) == 0.0
    rate.record(10, 0.0)
    assert rate.window_size(0.0) == 2.0  # padded to samples - 1 windows
    assert rate.rate(0.0) == 5.0 and rate.rate(0.5) == 10 / 2.5
    rate.record(20, 1.5)  # a new window, aligned to start at 1.0
    assert rate.window_size(1.5) == 2.5 and rate.rate(1.5) == 12.0
    rate.record(5, 2.25)  # the third window, [2, 3)
    assert rate.window_size(2.25) == 2.25 and rate.rate(2.25) == 35 / 2.25
    rate.record(7, 3.0)  # the ring wraps: the window [0, 1) is reused for [3, 4)
    assert rate.window_size(3.0) == 2.0 and rate.rate(3.0) == 16.0
    assert rate.rate(5.0) == 3.5  # windows started 3 s ago or more are dropped
    assert rate.rate(100.0) == 0.0
    rate.record(4, 100.5)
    assert rate.window_size(100.5) == 2.5 and rate.rate(100.5) == 4 / 2.5


def test_rate_idle_gap_without_measuring() -> None:
    rate = Rate(samples=3, window_s=1.0)
    for value, now in ((10, 0.0), (20, 1.5), (5, 2.25), (7, 3.0)):
        rate.record(value, now)
    rate.record(4, 100.5)  # starts the window [100, 101), on the old windows' grid
    assert rate.window_size(100.5) == 2.5 and rate.rate(100.5) == 4 / 2.5
    rate.record(6, 103.0)  # [103, 104); [100, 101) is 3 s old and dropped
    # Kafka's oldest window starts from the first sample even when it was reset (to
    # the time of the measure that dropped it, 100.5): the span is 2.5 s, not 2.
    assert rate.window_size(103.0) == 2.5 and rate.rate(103.0) == 6 / 2.5


def test_rate_eleven_windows() -> None:
    rate = Rate()
    for second in range(30):
        rate.record(100.0, float(second))
        assert rate.window_size(float(second)) == 10.0  # elapsed, or padded to 10 windows
    assert rate.rate(29.5) == 1100.0 / 10.5
    with pytest.raises(ValueError):
        Rate(samples=0)


@pytest.mark.parametrize(("rate", "quota", "window", "expected"), [
    (2000.0, 1000.0, 10.0, 10.0), (1500.0, 1000.0, 11.0, 5.5), (1000.0, 1000.0, 10.0, 0.0),
    (10.0, 1000.0, 10.0, 0.0), (1100.0, 1000.0, 10.0, 1.0),
])
def test_throttle_time(rate: float, quota: float, window: float, expected: float) -> None:
    assert throttle_time(rate, quota, window) == pytest.approx(expected)


# -- client quotas -------------------------------------------------------------------

def simulate(store: QuotaStore, speed: float, until: float = 80.0) -> tuple[float, float]:
    """A client sending 100-byte requests at `speed` bytes/s that waits out each
    throttle: its byte rate over the whole run and from 20 s on."""
    clock = Clock()
    quotas = ClientQuotas(store, PRODUCER_BYTE_RATE, clock)
    total = late = 0.0
    while clock.now < until:
        throttle = quotas.record("alice", "app", 100.0)
        assert throttle == 0 or quotas.throttled_until("alice", "app") == clock.now + throttle
        total += 100.0
        late += 100.0 if clock.now >= 20.0 else 0.0
        clock.now += max(100.0 / speed, throttle)
    return total / clock.now, late / (clock.now - 20.0)


def test_throttles_bring_a_fast_client_to_its_quota() -> None:
    store = QuotaStore()
    store.put(E(client_id=DEFAULT), QuotaValues(producer_byte_rate=1000.0))
    overall, steady = simulate(store, 2000.0)
    assert steady == pytest.approx(1000.0, rel=0.03)  # 60 s after the first burst
    assert overall == pytest.approx(1000.0, rel=0.08)  # the burst: one window's worth
    assert simulate(store, 500.0) == pytest.approx((500.0, 500.0), rel=0.01)


def test_no_quota_no_throttle() -> None:
    store = QuotaStore()
    store.put(E("bob"), QuotaValues(producer_byte_rate=1.0))
    store.put(E(client_id=DEFAULT), QuotaValues(consumer_byte_rate=1.0))
    assert simulate(store, 2000.0) == pytest.approx((2000.0, 2000.0))
    quotas = ClientQuotas(store, PRODUCER_BYTE_RATE, Clock())
    assert quotas.record("alice", "app", 1e12) == 0.0 and len(quotas) == 0
    assert quotas.throttled_until("alice", "app") == 0.0


def test_quota_change_applies_at_once() -> None:
    store, clock = QuotaStore(), Clock()
    store.put(E("alice"), QuotaValues(producer_byte_rate=1000.0))
    quotas = ClientQuotas(store, PRODUCER_BYTE_RATE, clock)
    assert quotas.record("alice", "a", 5000.0) == 0.0  # 5000 B over 10 s
    assert quotas.record("alice", "b", 5000.0) == 0.0  # the same meter: 1000 B/s
    assert quotas.record("alice", "c", 1000.0) == pytest.approx(1.0)
    assert quotas.throttled_until("alice", "zzz") == pytest.approx(1.0)
    store.put(E("alice"), QuotaValues(producer_byte_rate=2000.0))
    assert quotas.record("alice", "a", 0.0) == 0.0
    store.put(E("alice"), QuotaValues(producer_byte_rate=550.0))
    assert quotas.record("alice", "a", 0.0) == pytest.approx(10.0)  # 1100 B/s over 10 s
    assert quotas.throttled_until("alice", "a") == pytest.approx(10.0)
    assert len(quotas) == 1


def test_meters_follow_the_matched_entity() -> None:
    store, clock = QuotaStore(), Clock()
    store.put(E("alice"), QuotaValues(producer_byte_rate=100.0))
    store.put(E(client_id=DEFAULT), QuotaValues(producer_byte_rate=100.0))
    store.put(E("carol", "x"), QuotaValues(producer_byte_rate=100.0))
    store.put(E("", "x"), QuotaValues(producer_byte_rate=100.0))
    quotas = ClientQuotas(store, PRODUCER_BYTE_RATE, clock)
    for user, client in (("alice", "x"), ("alice", "y"), ("bob", "x"), ("bob", "y"),
                         ("dave", "y"), ("carol", "x"), ("carol", "y"), ("", "x")):
        quotas.record(user, client, 1.0)
    # alice (all her clients); client x; client y (bob's, dave's and carol's y);
    # carol/x; and user "" with client x, apart from client x's meter.
    assert len(quotas) == 5
    assert quotas.record("bob", "x", 2000.0) > 0.0
    assert quotas.throttled_until("dave", "x") > 0.0
    assert quotas.throttled_until("", "x") == 0.0
    assert quotas.throttled_until("carol", "x") == 0.0
    assert quotas.throttled_until("alice", "x") == 0.0
    assert quotas.record("carol", "y", 2000.0) > 0.0
    assert quotas.throttled_until("bob", "y") == quotas.throttled_until("carol", "y") > 0.0


def test_request_percentage() -> None:
    store, clock = QuotaStore(), Clock()
    store.put(E(client_id="x"), QuotaValues(request_percentage=50.0))
    quotas = ClientQuotas(store, REQUEST_PERCENTAGE, clock)
    assert quotas.record("u", "x", 5000.0) == 0.0  # 5 s of a thread over 10 s: 50 %
    assert quotas.record("u", "x", 200.0) == pytest.approx(0.4)  # 52 %: (52-50)/50 * 10 s
    assert quotas.record("u", "x", 1000.0) == 1.0  # 62 %: 2.4 s, at most one window


@pytest.mark.parametrize(("key", "bound"), [(PRODUCER_BYTE_RATE, 11.0),
                                            (CONSUMER_BYTE_RATE, 11.0),
                                            (REQUEST_PERCENTAGE, 1.0)])
def test_every_throttle_is_bounded_by_the_quota_window(key: str, bound: float) -> None:
    """A burst far over quota * window after a long idle time (Kafka's throttle:
    (22000 - 1000) / 1000 * 10 s = 210 s) is held at most the meter's whole span of
    11 windows (request time: one window, as Kafka), and a client still over its
    quota is throttled again on its next request, by the bound again."""
    store, clock = QuotaStore(), Clock()
    store.put(E(client_id="x"), QuotaValues(**{key: 1000.0}))
    quotas = ClientQuotas(store, key, clock)
    assert quotas.record("u", "x", 1.0) == 0.0
    clock.now = 600.0  # idle: every window is dropped
    burst = 220_000.0 * (10.0 if key == REQUEST_PERCENTAGE else 1.0)  # in ms: 10 ms = 1 %
    assert quotas.record("u", "x", burst) == bound
    assert quotas.throttled_until("u", "x") == 600.0 + bound
    clock.now += bound / 2  # still far over (the burst is in the windows 11 s)
    assert quotas.record("u", "x", 0.0) == bound == quotas.max_throttle_s


def flat_out(request: float, bounded: bool) -> tuple[float, float]:
    """A client sending ``request`` bytes as soon as its throttle ends, against 1000
    B/s: its rate from 200 s to 2000 s and its longest throttle."""
    store, clock = QuotaStore(), Clock()
    store.put(E(client_id="x"), QuotaValues(producer_byte_rate=1000.0))
    quotas = ClientQuotas(store, PRODUCER_BYTE_RATE, clock)
    if not bounded:
        quotas.max_throttle_s = math.inf  # Kafka's byte-rate throttle
    sent, longest = 0.0, 0.0
    while clock.now < 2000.0:
        throttle = quotas.record("u", "x", request)
        longest = max(longest, throttle)
        sent += request if clock.now >= 200.0 else 0.0
        clock.now += max(throttle, 0.001)
    return sent / (clock.now - 200.0), longest


def test_the_bound_leaves_requests_up_to_a_third_of_the_span_to_kafkas_throttle() -> None:
    """Requests of 0.3 * quota * 11 s each: the bound never binds, the throttles and
    the rate are Kafka's; at 0.9 of it the bound lets the rate past the quota."""
    rate, longest = flat_out(0.3 * 1000.0 * 11, bounded=True)
    assert longest < 11.0 and (rate, longest) == flat_out(0.3 * 1000.0 * 11, bounded=False)
    assert rate == pytest.approx(1000.0, rel=0.1)
    assert flat_out(0.9 * 1000.0 * 11, bounded=True)[0] == pytest.approx(1485.0, rel=0.05)


def test_the_bound_follows_the_windows() -> None:
    store, clock = QuotaStore(), Clock()
    store.put(E(client_id="x"), QuotaValues(producer_byte_rate=1000.0))
    quotas = ClientQuotas(store, PRODUCER_BYTE_RATE, clock, samples=5, window_s=2.0)
    assert quotas.record("u", "x", 1e9) == 10.0  # 5 windows of 2 s
    assert quotas.meter_of("u", "x") == quotas.meter_of("v", "x") is not None
    assert quotas.meter_of("u", "y") is None


def test_meter_expiry_and_bound() -> None:
    store, clock = QuotaStore(), Clock()
    store.put(E(client_id=DEFAULT), QuotaValues(producer_byte_rate=100.0))
    quotas = ClientQuotas(store, PRODUCER_BYTE_RATE, clock, max_meters=3)
    quotas.record("u", "old", 5000.0)
    clock.now = 1800.0
    quotas.record("u", "kept", 1.0)
    clock.now = 3599.0
    quotas.record("u", "new", 1.0)
    assert len(quotas) == 3 and quotas.throttled_until("u", "old") > 0.0
    clock.now = 3600.0
    quotas.record("u", "new", 1.0)  # "old" has been idle an hour
    assert len(quotas) == 2 and quotas.throttled_until("u", "old") == 0.0
    for client in ("a", "b", "c", "d"):
        quotas.record("u", client, 5000.0)
        assert len(quotas) <= 3
    assert quotas.throttled_until("u", "d") > 0.0 and quotas.throttled_until("u", "a") == 0.0
    quotas.record("u", "b", 1.0)  # now c is the least recently used
    assert quotas.record("u", "a", 1.0) == 0.0  # a fresh meter
    assert quotas.throttled_until("u", "b") > 0.0 and quotas.throttled_until("u", "c") == 0.0


def test_client_quotas_refuses() -> None:
    with pytest.raises(InvalidQuotaError):
        ClientQuotas(QuotaStore(), "bytes")
    with pytest.raises(ValueError):
        ClientQuotas(QuotaStore(), PRODUCER_BYTE_RATE, max_meters=0)
    with pytest.raises(ValueError):
        ClientQuotas(QuotaStore(), PRODUCER_BYTE_RATE, window_s=0.0)
