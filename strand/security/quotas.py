"""Kafka's client quotas (KIP-13, KIP-55, KIP-257, KIP-546): the quotas set on users
and client ids, which of them applies to a client, and the sampled rate that decides
how long a client over its quota is throttled, so one tenant cannot starve the rest.

Quotas are set per entity (a user, a client id, or both; either may be the default),
stored in etcd one key per entity (``QuotaEntity.key``) as JSON (``QuotaValues``),
held by ``QuotaStore``, which resolves a client's quota with Kafka's precedence.
``ClientQuotas`` is a gateway's accounting for one quota type, as Kafka's
ClientQuotaManager: a meter per Kafka sensor (``meter_key``), each a ``Rate`` over
sampled windows; a request's use is recorded, then the rate checked, and a client
over its quota is throttled for ``throttle_time``.

Where this differs from Kafka: times are float seconds, not integer milliseconds
(throttle times are not rounded); a client no quota applies to is not metered at
all (Kafka meters every client once any quota is set), so use before a quota is set
does not count against it; idle meters are dropped after an hour as Kafka's sensors
are, and their number is bounded too (least recently used first), so a flood of
client ids cannot grow memory; meters are keyed by the kind of the matched entity as
well as Kafka's (user, client-id) tags, so a user named "" cannot share a meter with
a client-id quota; quota values need only be positive and finite (Kafka's byte
rates are integers). Every throttle is bounded (``ClientQuotas.max_throttle_s``):
request time at one window, as Kafka's ClientRequestQuotaManager; byte rates at the
meter's whole span, ``samples * window_s`` (Kafka leaves them unbounded), since the
gateway holds a throttled answer (Kafka answers at once since KIP-219): a hold past
the client's request timeout (30 s) would make it resend a written batch, charged
again. A client still over its quota after a bounded throttle is throttled again on
its next request; simulated, requests of up to a third of ``quota * samples *
window_s`` each (18 MB at 5 MB/s) get Kafka's throttles exactly, larger ones a
little more than their quota (1.2 times it at half that size, 1.5 at 0.9 of it;
Kafka's forgetful windows already let them past: 1.15, 1.06). Not thread-safe: one
event loop owns a ``ClientQuotas``.
"""

from __future__ import annotations

import enum
import json
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields, replace
from typing import Any, Final
from urllib.parse import quote, unquote

__all__ = [
    "ABSENT", "CLIENT_ID", "CONSUMER_BYTE_RATE", "DEFAULT", "INACTIVE_METER_EXPIRY_S",
    "PRODUCER_BYTE_RATE", "QUOTA_KEYS", "REQUEST_PERCENTAGE", "USER", "Absent",
    "ClientQuotas", "EntityName", "InvalidQuotaError", "QuotaEntity", "QuotaStore",
    "QuotaValues", "Rate", "meter_key", "throttle_time",
]

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)
DEFAULT = None
"""The entity name meaning "the default" (Kafka's ``<default>``)."""
INACTIVE_METER_EXPIRY_S = 3600.0
"""Kafka purges quota sensors after an hour of inactivity."""

USER = "user"  # the entity types of Kafka's ClientQuotaEntity
CLIENT_ID = "client-id"
_DEFAULT_TEXT = "<default>"  # in keys: '<' and '>' are always escaped in a name


class InvalidQuotaError(ValueError):
    """An entity, key, value or JSON document that cannot be a client quota."""


def _check_key(key: str) -> None:
    if key not in QUOTA_KEYS:
        raise InvalidQuotaError(f"unknown quota {key!r}: one of {', '.join(QUOTA_KEYS)}")


class Absent(enum.Enum):
    """The type of ``ABSENT``: an entity without this component."""

    ABSENT = "absent"

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = Absent.ABSENT
"""An entity's component that is not there: ``QuotaEntity(user="alice")`` has no
client id (Kafka's ``/users/alice``), unlike ``QuotaEntity("alice", DEFAULT)``
(``/users/alice/clients/<default>``)."""

EntityName = str | None | Absent


def _rank(kind: str, name: object) -> tuple[int, str]:
    """The order of a part (absent, default, then names), checking it."""
    if isinstance(name, Absent) or name is None:
        return (0 if name is ABSENT else 1, "")
    if not isinstance(name, str):
        raise InvalidQuotaError(f"a {kind} name must be a string or DEFAULT, not {name!r}")
    if not name.isascii() and any(0xD800 <= ord(c) <= 0xDFFF for c in name):
        raise InvalidQuotaError(f"a {kind} name must be valid unicode: {name!r}")
    return (2, name)


@dataclass(frozen=True, slots=True, order=True)
class QuotaEntity:
    """Kafka's quota entity: a user and/or a client id, each a name, ``DEFAULT``
    (None) for the default of its type, or ``ABSENT`` (the entity has no such part;
    at least one part is there). Entities order by (user, client id), absent before
    default before names."""

    # Compared first, so names, None and ABSENT (which do not order) are never compared.
    _sort: tuple[int, str, int, str] = field(init=False, repr=False)
    user: EntityName = ABSENT
    client_id: EntityName = ABSENT

    def __post_init__(self) -> None:
        if isinstance(self.user, Absent) and isinstance(self.client_id, Absent):
            raise InvalidQuotaError("a quota entity needs a user, a client id or both")
        sort = _rank(USER, self.user) + _rank(CLIENT_ID, self.client_id)
        object.__setattr__(self, "_sort", sort)

    def _parts(self) -> list[tuple[str, str | None]]:
        both = ((USER, self.user), (CLIENT_ID, self.client_id))
        return [(kind, name) for kind, name in both if not isinstance(name, Absent)]

    def key(self) -> str:
        """The etcd key suffix: ``user=<name>,client-id=<name>`` (the parts there),
        each name percent-escaped (UTF-8, everything but ``A-Za-z0-9_.-~``) or
        ``<default>``; so a key holds no '/', and each entity has exactly one key."""
        return ",".join(f"{kind}={_DEFAULT_TEXT if name is None else quote(name, safe='')}"
                        for kind, name in self._parts())

    @classmethod
    def parse_key(cls, key: str) -> QuotaEntity:
        """The entity of ``key()``; InvalidQuotaError for anything ``key()`` never gives."""
        if not key.isascii():  # key() escapes every other character
            raise InvalidQuotaError(f"not a quota entity key: {key!r} (not ASCII)")
        pairs: list[tuple[str, str | None]] = []
        for part in key.split(","):
            kind, eq, text = part.partition("=")
            if not eq:
                raise InvalidQuotaError(f"not a quota entity key: {key!r} (no '=' in {part!r})")
            try:
                name = None if text == _DEFAULT_TEXT else unquote(text, errors="strict")
            except UnicodeDecodeError:
                name = ""  # never quoted back to the text: refused just below
            if name is not None and quote(name, safe="") != text:
                raise InvalidQuotaError(f"not a quota entity key: {key!r} "
                                        f"({text!r} is not an escaped name)")
            pairs.append((kind, name))
        entity = cls.from_fields(pairs)
        if entity.key() != key:
            raise InvalidQuotaError(f"not a quota entity key: {key!r} (user must come first)")
        return entity

    def to_fields(self) -> list[tuple[str, str | None]]:
        """Kafka's ClientQuotaEntity: (entity type, name or DEFAULT) pairs, user first."""
        return self._parts()

    @classmethod
    def from_fields(cls, pairs: Iterable[tuple[str, str | None]]) -> QuotaEntity:
        names: dict[str, str | None] = {}
        for kind, name in pairs:
            if kind not in (USER, CLIENT_ID):
                raise InvalidQuotaError(f"unknown quota entity type {kind!r}: "
                                        f"use {USER!r} or {CLIENT_ID!r}")
            if kind in names:
                raise InvalidQuotaError(f"quota entity type {kind!r} given twice")
            names[kind] = name
        if not names:
            raise InvalidQuotaError("a quota entity needs a user, a client id or both")
        return cls(names.get(USER, ABSENT), names.get(CLIENT_ID, ABSENT))

    def __str__(self) -> str:
        return ", ".join(f"{kind}={_DEFAULT_TEXT if name is None else name}"
                         for kind, name in self._parts())


def _check_value(key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidQuotaError(f"quota {key} must be a number, not {value!r}")
    try:
        number = float(value)
    except OverflowError:
        raise InvalidQuotaError(f"quota {key} is too large: {value!r}") from None
    if not math.isfinite(number) or number <= 0:
        raise InvalidQuotaError(f"quota {key} must be positive and finite, not {value!r}")
    return number


@dataclass(frozen=True, slots=True)
class QuotaValues:
    """The quotas set on one entity, each optional: bytes per second for the byte
    rates, percent of one thread's time for the request percentage."""

    producer_byte_rate: float | None = None
    consumer_byte_rate: float | None = None
    request_percentage: float | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                object.__setattr__(self, f.name, _check_value(f.name, value))

    def as_dict(self) -> dict[str, float]:
        """The quotas set, by key."""
        return {key: value for key in QUOTA_KEYS if (value := getattr(self, key)) is not None}

    def to_json(self) -> bytes:
        """Canonical JSON: an object of the quotas set, sorted, compact."""
        return json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"),
                          allow_nan=False).encode()

    @classmethod
    def from_json(cls, data: bytes) -> QuotaValues:
        try:
            raw: Any = json.loads(data)
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise InvalidQuotaError(f"not client quotas: {exc}") from None
        if not isinstance(raw, dict):
            raise InvalidQuotaError(f"not client quotas: a JSON object expected, "
                                    f"not {type(raw).__name__}")
        if any(value is None for value in raw.values()):
            raise InvalidQuotaError("not client quotas: a null value")
        return cls().altered(raw.items())

    def altered(self, ops: Iterable[tuple[str, float | None]]) -> QuotaValues:
        """These quotas with each op applied in turn: (key, value) sets the key,
        (key, None) removes it."""
        changes: dict[str, float | None] = {}
        for key, value in ops:
            _check_key(key)
            changes[key] = None if value is None else _check_value(key, value)
        return replace(self, **changes)

    def is_empty(self) -> bool:
        return not self.as_dict()


def _precedence(user: str, client_id: str) -> tuple[QuotaEntity, ...]:
    return (QuotaEntity(user, client_id), QuotaEntity(user, DEFAULT), QuotaEntity(user),
            QuotaEntity(DEFAULT, client_id), QuotaEntity(DEFAULT, DEFAULT),
            QuotaEntity(DEFAULT), QuotaEntity(client_id=client_id),
            QuotaEntity(client_id=DEFAULT))


class QuotaStore:
    """The quotas set, by entity: fed from etcd key by key, read by the gateways."""

    def __init__(self) -> None:
        self._values: dict[QuotaEntity, QuotaValues] = {}

    def put(self, entity: QuotaEntity, values: QuotaValues) -> None:
        """Set the entity's quotas (empty values remove it)."""
        self._values[entity] = values
        if values.is_empty():
            del self._values[entity]

    def remove(self, entity: QuotaEntity) -> None:
        self._values.pop(entity, None)

    def items(self) -> list[tuple[QuotaEntity, QuotaValues]]:
        """Every entity with quotas and its quotas, in entity order."""
        return sorted(self._values.items())

    def __len__(self) -> int:
        return len(self._values)

    def resolve(self, user: str, client_id: str, key: str) -> tuple[QuotaEntity, float] | None:
        """The entity whose ``key`` quota applies to this user's client, and the quota;
        None if none does. Kafka's precedence, most specific first: /users/<user>/
        clients/<client-id>, /users/<user>/clients/<default>, /users/<user>,
        /users/<default>/clients/<client-id>, /users/<default>/clients/<default>,
        /users/<default>, /clients/<client-id>, /clients/<default>."""
        _check_key(key)
        if not self._values:
            return None
        for entity in _precedence(user, client_id):
            values = self._values.get(entity)
            if values is not None and (quota := getattr(values, key)) is not None:
                return entity, quota
        return None


def meter_key(user: str, client_id: str, matched: QuotaEntity) -> tuple[str, str]:
    """Kafka's quota sensor tags (user, client-id) for a client whose quota comes from
    ``matched``: clients share a meter when their tags are equal. A quota on a user
    alone (/users/alice, or /users/<default> per user) meters all of the user's
    clients together: (user, ""); one on a client id alone: ("", client id); one on
    both: (user, client id)."""
    return ("" if isinstance(matched.user, Absent) else user,
            "" if isinstance(matched.client_id, Absent) else client_id)


def throttle_time(rate: float, quota: float, window_size_s: float) -> float:
    """Kafka's QuotaUtils.throttleTime, in seconds: the delay X that brings the observed
    rate O over window W down to the quota T if nothing more is recorded,
    O * W / (W + X) = T, so X = (O - T) / T * W; 0 within the quota."""
    return 0.0 if rate <= quota else (rate - quota) / quota * window_size_s


@dataclass(slots=True)
class _Sample:
    start: float
    value: float = 0.0
    active: bool = True


class Rate:
    """Kafka's Rate over a SampledStat (WindowedSum): a ring of ``samples`` windows of
    ``window_s`` seconds; when the current window is over, the next one starts at the
    window boundary at or before now. Measuring first resets the windows that started
    ``samples * window_s`` or more ago. The rate is the windows' sum over the span
    from the oldest kept window's start to now, padded with empty windows to at least
    ``samples - 1`` whole windows (Kafka's Rate.windowSize): a first burst is not read
    as a huge rate."""

    def __init__(self, samples: int = 11, window_s: float = 1.0) -> None:
        if samples < 1 or not window_s > 0:
            raise ValueError(f"a rate needs samples >= 1, window_s > 0: {samples}, {window_s}")
        self.samples, self.window_s = samples, window_s
        self._ring: list[_Sample] = []
        self._current = 0

    def _current_sample(self, now: float) -> _Sample:
        if not self._ring:
            self._ring.append(_Sample(now))
        return self._ring[self._current]

    def record(self, value: float, now: float) -> None:
        sample = self._current_sample(now)
        if now - sample.start >= self.window_s:
            previous_end = sample.start + self.window_s
            self._current = (self._current + 1) % self.samples
            start = now - (now - previous_end) % self.window_s
            if self._current >= len(self._ring):
                sample = _Sample(start)
                self._ring.append(sample)
            else:
                sample = self._ring[self._current]
                sample.start, sample.value = start, 0.0
        sample.value += value
        sample.active = True

    def _purge(self, now: float) -> None:
        for sample in self._ring:
            if now - sample.start >= self.samples * self.window_s:
                sample.start, sample.value, sample.active = now, 0.0, False

    def window_size(self, now: float) -> float:
        """The span the rate is over, in seconds (Kafka's Rate.windowSize)."""
        self._purge(now)
        if not self._ring:
            self._ring.append(_Sample(now))
        oldest = self._ring[0]  # Kafka starts from the first sample, active or not
        for sample in self._ring[1:]:
            if sample.active and sample.start < oldest.start:
                oldest = sample
        elapsed = now - oldest.start
        missing = (self.samples - 1) - int(elapsed // self.window_s)
        return elapsed + missing * self.window_s if missing > 0 else elapsed

    def rate(self, now: float) -> float:
        """The total recorded in the kept windows per second of the window size."""
        self._purge(now)
        total = math.fsum(sample.value for sample in self._ring)
        return total / self.window_size(now)


@dataclass(slots=True)
class _Meter:
    rate: Rate
    last_used: float
    throttled_until: float = 0.0


_MeterId = tuple[str, str, str]  # (matched entity's shape, user tag, client-id tag)


class ClientQuotas:
    """The gateway's quota accounting for one quota type (``key``: produce bytes,
    fetch bytes, or request time): record what a request used, get how long to
    throttle it (Kafka's ClientQuotaManager.recordAndGetThrottleTimeMs).

    For REQUEST_PERCENTAGE the value is the request's handling time in ms, counted as
    Kafka's ClientRequestQuotaManager does as percent of one thread's second (ms / 10,
    Kafka's nanos * 100 / 1e9): the rate is in percent, compared with the quota itself
    (100 = 1000 ms/s).

    Every throttle is Kafka's (``throttle_time`` over the rate's window size) bounded
    by ``max_throttle_s`` (QuotaUtils.boundedThrottleTime): one window for request
    time, as Kafka; the whole sampled span for byte rates (see the module)."""

    def __init__(self, store: QuotaStore, key: str,
                 clock: Callable[[], float] = time.monotonic, samples: int = 11,
                 window_s: float = 1.0, max_meters: int = 100_000,
                 idle_expiry_s: float = INACTIVE_METER_EXPIRY_S) -> None:
        _check_key(key)
        if max_meters < 1:
            raise ValueError(f"max_meters must be at least 1, not {max_meters}")
        Rate(samples, window_s)  # checks them
        self.store, self.key, self.clock = store, key, clock
        self.samples, self.window_s = samples, window_s
        self.max_meters, self.idle_expiry_s = max_meters, idle_expiry_s
        self.max_throttle_s = window_s if key == REQUEST_PERCENTAGE else samples * window_s
        self._meters: OrderedDict[_MeterId, _Meter] = OrderedDict()  # least recent first

    def meter_of(self, user: str, client_id: str) -> _MeterId | None:
        """The meter this user's client is metered on (clients on one meter share
        its throttle); None if no quota applies to it."""
        found = self._meter_id(user, client_id)
        return None if found is None else found[0]

    def _meter_id(self, user: str, client_id: str) -> tuple[_MeterId, float] | None:
        found = self.store.resolve(user, client_id, self.key)
        if found is None:
            return None
        entity, quota = found
        shape = f"{isinstance(entity.user, Absent):d}{isinstance(entity.client_id, Absent):d}"
        return (shape, *meter_key(user, client_id, entity)), quota

    def _expire(self, now: float) -> None:
        meters = self._meters
        while meters and now - next(iter(meters.values())).last_used >= self.idle_expiry_s:
            meters.popitem(last=False)

    def record(self, user: str, client_id: str, value: float) -> float:
        """Record what a request used; how long to throttle it, in seconds (0: within
        its quota, or none applies; at most ``max_throttle_s``). Recorded first, then
        checked, as Kafka does."""
        now = self.clock()
        self._expire(now)
        found = self._meter_id(user, client_id)
        if found is None:
            return 0.0
        meter_id, quota = found
        meter = self._meters.get(meter_id)
        if meter is None:
            meter = _Meter(Rate(self.samples, self.window_s), now)
            self._meters[meter_id] = meter
            while len(self._meters) > self.max_meters:
                self._meters.popitem(last=False)
        else:
            self._meters.move_to_end(meter_id)
            meter.last_used = now
        amount = value / 10.0 if self.key == REQUEST_PERCENTAGE else value
        meter.rate.record(amount, now)
        rate = meter.rate.rate(now)
        throttle = min(throttle_time(rate, quota, meter.rate.window_size(now)),
                       self.max_throttle_s)
        if throttle > 0:
            meter.throttled_until = max(meter.throttled_until, now + throttle)
        return throttle

    def throttled_until(self, user: str, client_id: str) -> float:
        """The clock time before which this client's meter should not be served again
        (Kafka mutes the connection until then); 0.0 if it has no meter."""
        found = self._meter_id(user, client_id)
        meter = None if found is None else self._meters.get(found[0])
        return 0.0 if meter is None else meter.throttled_until

    def __len__(self) -> int:
        """How many meters are kept."""
        return len(self._meters)
