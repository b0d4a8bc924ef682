"""Topic-level log configuration: Kafka's keys, types, ranges and defaults.

Every key a topic may carry is declared once here with its type, valid range and
default; the controller validates user input against the same table, and a log
reads its typed values through :class:`LogConfig`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from strand.errors import InvalidConfigError
from strand.records.batch import HEADER_SIZE, TimestampType

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    kind: str  # "int", "long", "double", "bool", "enum", "list"
    default: Any
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    doc: str = ""

    def parse(self, raw: object) -> Any:
        """Return the typed value of ``raw`` or raise InvalidConfigError naming the key,
        the value and what is expected (as Kafka's ConfigException does)."""
        try:
            value = _PARSERS[self.kind](self, raw)
        except (TypeError, ValueError) as exc:
            raise InvalidConfigError(
                f"invalid value {raw!r} for configuration {self.name}: {exc}") from None
        below = self.minimum is not None and value < self.minimum
        if below or (self.maximum is not None and value > self.maximum):
            raise InvalidConfigError(
                f"invalid value {value!r} for configuration {self.name}: "
                f"must be {self.expected()}")
        return value

    def expected(self) -> str:
        """What a valid value is, in words: its kind and its range."""
        kind = _KIND_WORDS[self.kind]
        if self.choices:
            return f"{kind} from {', '.join(self.choices)}"
        bounds = [f"{sign} {_number(limit)}" for sign, limit in
                  ((">=", self.minimum), ("<=", self.maximum)) if limit is not None]
        return f"{kind} {' and '.join(bounds)}" if bounds else kind


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


_KIND_WORDS = {"int": "an integer (int)", "long": "an integer (long)",
               "double": "a number (double)", "bool": "true or false", "enum": "one value",
               "list": "a comma-separated list"}


def _not_a(key: ConfigKey) -> ValueError:
    return ValueError(f"expected {key.expected()}")


def _parse_int(key: ConfigKey, raw: object) -> int:
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if isinstance(raw, str):
        try:
            return int(raw.strip())
        except ValueError:  # Python's own message names neither the key nor the range
            pass
    raise _not_a(key)


def _parse_double(key: ConfigKey, raw: object) -> float:
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        return float(raw)
    if isinstance(raw, str):
        try:
            value = float(raw.strip())
        except ValueError:
            pass
        else:
            if math.isfinite(value):
                return value
    raise _not_a(key)


def _parse_bool(key: ConfigKey, raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise ValueError("expected true or false")


def _parse_enum(key: ConfigKey, raw: object) -> str:
    text = str(raw).strip()
    for choice in key.choices:
        if text.lower() == choice.lower():
            return choice
    raise ValueError(f"expected one of {', '.join(key.choices)}")


def _parse_list(key: ConfigKey, raw: object) -> tuple[str, ...]:
    items = raw.split(",") if isinstance(raw, str) else list(raw)  # type: ignore[call-overload]
    values = tuple(sorted({str(item).strip().lower() for item in items if str(item).strip()}))
    if not values:
        raise ValueError("expected at least one value")
    unknown = [v for v in values if v not in key.choices]
    if unknown:
        raise ValueError(f"unknown {', '.join(unknown)}; expected from {', '.join(key.choices)}")
    return values


_PARSERS: dict[str, Callable[[ConfigKey, object], Any]] = {
    "int": _parse_int,
    "long": _parse_int,
    "double": _parse_double,
    "bool": _parse_bool,
    "enum": _parse_enum,
    "list": _parse_list,
}

_DAY_MS = 24 * 60 * 60 * 1000
# The smallest batch that holds a record: the batch header and one record with no
# key, no value and no header (length, attributes, two deltas, two lengths, count:
# one byte each). A max.message.bytes below it would refuse every write.
SMALLEST_BATCH = HEADER_SIZE + 7

TOPIC_CONFIG: dict[str, ConfigKey] = {
    key.name: key
    for key in (
        ConfigKey("cleanup.policy", "list", ("delete",), choices=("compact", "delete"),
                  doc="delete old segments, compact to the latest value per key, or both"),
        ConfigKey("segment.bytes", "int", 1 << 30, minimum=14, maximum=INT_MAX),
        ConfigKey("segment.ms", "long", 7 * _DAY_MS, minimum=1, maximum=LONG_MAX),
        ConfigKey("segment.jitter.ms", "long", 0, minimum=0, maximum=LONG_MAX),
        ConfigKey("segment.index.bytes", "int", 10 * 1024 * 1024, minimum=8, maximum=INT_MAX),
        ConfigKey("index.interval.bytes", "int", 4096, minimum=0, maximum=INT_MAX),
        ConfigKey("retention.ms", "long", 7 * _DAY_MS, minimum=-1, maximum=LONG_MAX),
        ConfigKey("retention.bytes", "long", -1, minimum=-1, maximum=LONG_MAX),
        ConfigKey("delete.retention.ms", "long", _DAY_MS, minimum=0, maximum=LONG_MAX),
        ConfigKey("min.compaction.lag.ms", "long", 0, minimum=0, maximum=LONG_MAX),
        ConfigKey("max.compaction.lag.ms", "long", LONG_MAX, minimum=1, maximum=LONG_MAX),
        ConfigKey("min.cleanable.dirty.ratio", "double", 0.5, minimum=0.0, maximum=1.0),
        ConfigKey("flush.messages", "long", LONG_MAX, minimum=1, maximum=LONG_MAX),
        ConfigKey("flush.ms", "long", LONG_MAX, minimum=0, maximum=LONG_MAX),
        ConfigKey("max.message.bytes", "int", 1048588, minimum=SMALLEST_BATCH,
                  maximum=INT_MAX),
        ConfigKey("message.timestamp.type", "enum", "CreateTime",
                  choices=("CreateTime", "LogAppendTime")),
        ConfigKey("min.insync.replicas", "int", 1, minimum=1, maximum=INT_MAX),
        ConfigKey("unclean.leader.election.enable", "bool", False),
        # A broker setting in Kafka; per topic here, like the other log settings.
        ConfigKey("producer.id.expiration.ms", "int", _DAY_MS, minimum=1, maximum=INT_MAX,
                  doc="forget a producer id idle this long (its duplicates are then "
                      "no longer recognised)"),
        # Strand never re-encodes a batch (docs/architecture.md §2): only the producer's
        # codec is kept.
        ConfigKey("compression.type", "enum", "producer", choices=("producer",)),
    )
}


def validate_topic_config(properties: Mapping[str, object]) -> dict[str, Any]:
    """Typed values for ``properties``; unknown keys and bad values raise InvalidConfigError."""
    typed: dict[str, Any] = {}
    for name, raw in properties.items():
        key = TOPIC_CONFIG.get(name)
        if key is None:
            raise InvalidConfigError(f"unknown topic config {name!r}")
        typed[name] = key.parse(raw)
    _check_together(typed)
    return typed


def _check_together(typed: Mapping[str, Any]) -> None:
    """Rules between keys (Kafka's LogConfig.validateValues)."""
    def value(name: str) -> Any:
        return typed.get(name, TOPIC_CONFIG[name].default)

    low, high = value("min.compaction.lag.ms"), value("max.compaction.lag.ms")
    if low > high:
        raise InvalidConfigError(
            f"min.compaction.lag.ms ({low}) must not be greater than max.compaction.lag.ms "
            f"({high}): lower the first or raise the second")


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = TOPIC_CONFIG["segment.bytes"].default
    segment_ms: int = TOPIC_CONFIG["segment.ms"].default
    segment_jitter_ms: int = 0
    segment_index_bytes: int = TOPIC_CONFIG["segment.index.bytes"].default
    index_interval_bytes: int = 4096
    retention_ms: int = TOPIC_CONFIG["retention.ms"].default
    retention_bytes: int = -1
    cleanup_policy: tuple[str, ...] = ("delete",)
    delete_retention_ms: int = TOPIC_CONFIG["delete.retention.ms"].default
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    max_message_bytes: int = TOPIC_CONFIG["max.message.bytes"].default
    message_timestamp_type: TimestampType = TimestampType.CREATE_TIME
    min_insync_replicas: int = 1
    unclean_leader_election: bool = False
    producer_id_expiration_ms: int = TOPIC_CONFIG["producer.id.expiration.ms"].default

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @classmethod
    def from_properties(cls, properties: Mapping[str, object]) -> LogConfig:
        typed = validate_topic_config(properties)

        def get(name: str) -> Any:
            return typed.get(name, TOPIC_CONFIG[name].default)

        timestamp_type = (
            TimestampType.LOG_APPEND_TIME
            if get("message.timestamp.type") == "LogAppendTime"
            else TimestampType.CREATE_TIME
        )
        return cls(
            segment_bytes=get("segment.bytes"),
            segment_ms=get("segment.ms"),
            segment_jitter_ms=get("segment.jitter.ms"),
            segment_index_bytes=get("segment.index.bytes"),
            index_interval_bytes=get("index.interval.bytes"),
            retention_ms=get("retention.ms"),
            retention_bytes=get("retention.bytes"),
            cleanup_policy=get("cleanup.policy"),
            delete_retention_ms=get("delete.retention.ms"),
            min_compaction_lag_ms=get("min.compaction.lag.ms"),
            max_compaction_lag_ms=get("max.compaction.lag.ms"),
            min_cleanable_dirty_ratio=get("min.cleanable.dirty.ratio"),
            flush_messages=get("flush.messages"),
            flush_ms=get("flush.ms"),
            max_message_bytes=get("max.message.bytes"),
            message_timestamp_type=timestamp_type,
            min_insync_replicas=get("min.insync.replicas"),
            unclean_leader_election=get("unclean.leader.election.enable"),
            producer_id_expiration_ms=get("producer.id.expiration.ms"),
        )
