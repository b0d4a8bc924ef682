"""Topic-level log configuration: Kafka's keys, types, ranges and defaults.

Every key a topic may carry is declared once here with its type, valid range and
default; the controller validates user input against the same table, and a log
reads its typed values through :class:`LogConfig`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from strand.errors import InvalidConfigError
from strand.records.batch import TimestampType

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
        """Return the typed value of ``raw`` or raise InvalidConfigError naming the key."""
        try:
            value = _PARSERS[self.kind](self, raw)
        except (TypeError, ValueError) as exc:
            raise InvalidConfigError(f"invalid value {raw!r} for {self.name}: {exc}") from None
        if self.minimum is not None and value < self.minimum:
            raise InvalidConfigError(f"{self.name} must be >= {self.minimum:g}, got {value}")
        if self.maximum is not None and value > self.maximum:
            raise InvalidConfigError(f"{self.name} must be <= {self.maximum:g}, got {value}")
        return value


def _parse_int(key: ConfigKey, raw: object) -> int:
    if isinstance(raw, bool):
        raise ValueError("expected an integer")
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str):
        return int(raw.strip())
    raise ValueError("expected an integer")


def _parse_double(key: ConfigKey, raw: object) -> float:
    if isinstance(raw, bool):
        raise ValueError("expected a number")
    if isinstance(raw, int | float):
        return float(raw)
    if isinstance(raw, str):
        return float(raw.strip())
    raise ValueError("expected a number")


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
        ConfigKey("max.message.bytes", "int", 1048588, minimum=0, maximum=INT_MAX),
        ConfigKey("message.timestamp.type", "enum", "CreateTime",
                  choices=("CreateTime", "LogAppendTime")),
        ConfigKey("min.insync.replicas", "int", 1, minimum=1, maximum=INT_MAX),
        ConfigKey("unclean.leader.election.enable", "bool", False),
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
    return typed


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
        )
