"""The ``strand`` data source's options, parsed and checked on the driver before a job
starts: a bad option is refused with a message naming it and saying what is allowed.

The names and meanings are those of Spark's Kafka source and sink, so switching a job
is a change of format name (and of ``kafka.bootstrap.servers`` to
``strand.bootstrap``). Every other ``strand.<name>`` option is passed to the SDK's
Consumer (reads) or Producer (writes) as the keyword ``<name>`` (``strand.
fetch_max_bytes=1048576``); its value is converted to the keyword's type.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from strand_spark.offsets import (
    OffsetSpec,
    TimestampSpec,
    parse_assign,
    parse_offsets,
    parse_timestamps,
)

__all__ = ["OptionError", "ReadOptions", "Subscription", "WriteOptions", "read_options",
           "write_options"]

BOOTSTRAP = "strand.bootstrap"
CLIENT_PREFIX = "strand."
# Options of Spark's Kafka source that have no meaning here: refused, not ignored,
# so a job switched from format("kafka") does not silently change behaviour.
KAFKA_ONLY = {"kafka.bootstrap.servers": BOOTSTRAP, "kafkaConsumer.pollTimeoutMs": None,
              "fetchOffset.numRetries": None, "fetchOffset.retryIntervalMs": None,
              "groupIdPrefix": None, "kafka.group.id": None}
Isolation = Literal["read_uncommitted", "read_committed"]


class OptionError(ValueError):
    """A ``strand`` data source option is missing, unknown or has a bad value."""


@dataclass(frozen=True)
class Subscription:
    """Which partitions to read: a list of topics, a pattern (re-evaluated as topics
    appear, in streaming), or explicit partitions."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assign: Mapping[str, tuple[int, ...]] | None = None

    def matches(self, topic: str) -> bool:
        if self.assign is not None:
            return topic in self.assign
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None
        return topic in self.topics

    def describe(self) -> str:
        if self.assign is not None:
            return f"assign {dict(self.assign)}"
        if self.pattern is not None:
            return f"subscribePattern {self.pattern!r}"
        return f"subscribe {','.join(self.topics)}"


@dataclass(frozen=True)
class ReadOptions:
    bootstrap: str
    subscription: Subscription
    starting: OffsetSpec | TimestampSpec
    ending: OffsetSpec
    fail_on_data_loss: bool
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    isolation_level: Isolation
    include_headers: bool
    ranges_only: bool
    timestamp_strategy: Literal["error", "latest"]
    client: Mapping[str, Any] = field(default_factory=dict)

    def consumer_settings(self) -> dict[str, Any]:
        """Keywords for the SDK Consumer of a reader (never a group: offsets live in
        Spark's checkpoint)."""
        return {**self.client, "isolation_level": self.isolation_level,
                "auto_offset_reset": "none", "enable_auto_commit": False}


@dataclass(frozen=True)
class WriteOptions:
    bootstrap: str
    topic: str | None
    sink_id: str | None
    transaction_timeout_ms: int
    client: Mapping[str, Any] = field(default_factory=dict)


READ_OPTIONS = ("subscribe", "subscribePattern", "assign", "startingOffsets", "endingOffsets",
                "startingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy",
                "failOnDataLoss", "maxOffsetsPerTrigger", "minPartitions", "isolationLevel",
                "includeHeaders", "offsetRangesOnly", "path")
WRITE_OPTIONS = ("topic", "checkpointLocation", "path")


def canonical(options: Mapping[str, str]) -> dict[str, str]:
    """Spark hands options over with lower-cased names: give them back their case."""
    names = {n.lower(): n for n in (*READ_OPTIONS, *WRITE_OPTIONS, *KAFKA_ONLY,
                                    "strand.sinkId", "strand.transaction_timeout_ms")}
    return {names.get(k.lower(), k): v for k, v in options.items()}


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = options.get(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise OptionError(f"option {name}={value!r}: use true or false")
    return lowered == "true"


def _positive(options: Mapping[str, str], name: str) -> int | None:
    value = options.get(name)
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number <= 0:
        raise OptionError(f"option {name}={value!r}: must be a positive integer")
    return number


def _bootstrap(options: Mapping[str, str]) -> str:
    value = options.get(BOOTSTRAP, "").strip()
    if not value:
        raise OptionError(f"option {BOOTSTRAP} is required: the host:port of a Strand "
                          "gateway (e.g. 127.0.0.1:7070)")
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise OptionError(f"option {BOOTSTRAP}={value!r}: expected host:port")
    return value


def _refuse_kafka_only(options: Mapping[str, str]) -> None:
    for name, instead in KAFKA_ONLY.items():
        if name in options:
            hint = f"use {instead}" if instead else "it has no meaning for Strand"
            raise OptionError(f"option {name} is Spark's Kafka source's: {hint}")


def _client_settings(options: Mapping[str, str], target: Callable[..., Any],
                     reserved: set[str], kind: str) -> dict[str, Any]:
    """``strand.<keyword>`` options as keywords of ``target`` (the SDK's Consumer or
    Producer), converted to the type of the keyword's default."""
    parameters = inspect.signature(target).parameters
    settings: dict[str, Any] = {}
    for name, raw in options.items():
        if not name.startswith(CLIENT_PREFIX) or name == BOOTSTRAP:
            continue
        keyword = name[len(CLIENT_PREFIX):]
        if keyword in reserved:
            raise OptionError(f"option {name} is set by the data source itself "
                              f"for its {kind}s; use the data source's own option")
        parameter = parameters.get(keyword)
        if parameter is None or parameter.kind is not inspect.Parameter.KEYWORD_ONLY:
            known = sorted(p for p, v in parameters.items()
                           if v.kind is inspect.Parameter.KEYWORD_ONLY and p not in reserved)
            raise OptionError(f"option {name}: the SDK {kind} has no setting {keyword!r}; "
                              f"known: {', '.join(known)}")
        settings[keyword] = _convert(name, raw, parameter.default)
    return settings


def _convert(name: str, raw: str, default: Any) -> Any:
    try:
        if isinstance(default, bool):
            if raw.lower() not in ("true", "false"):
                raise ValueError(raw)
            return raw.lower() == "true"
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            return float(raw)
        if isinstance(default, tuple):
            return tuple(part.strip() for part in raw.split(",") if part.strip())
        if default is None and raw.lower() in ("none", "null", ""):
            return None
        if default is None:
            try:
                return int(raw)
            except ValueError:
                return raw
        return raw
    except ValueError:
        raise OptionError(f"option {name}={raw!r}: expected a value like {default!r}") \
            from None


def _subscription(options: Mapping[str, str]) -> Subscription:
    given = [name for name in ("subscribe", "subscribePattern", "assign") if name in options]
    if len(given) != 1:
        raise OptionError("exactly one of the options subscribe, subscribePattern and "
                          f"assign must be set, not {given or 'none'}")
    name = given[0]
    value = options[name]
    if name == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise OptionError(f"option subscribe={value!r}: name at least one topic")
        return Subscription(topics=topics)
    if name == "subscribePattern":
        try:
            re.compile(value)
        except re.error as exc:
            raise OptionError(f"option subscribePattern={value!r}: not a regular "
                              f"expression ({exc})") from None
        return Subscription(pattern=value)
    assign = parse_assign(value, "assign")
    return Subscription(assign={t: tuple(sorted(p)) for t, p in assign.items()})


_TLS_SETTINGS = frozenset(f"{CLIENT_PREFIX}{name}" for name in (
    "security_protocol", "ssl_cafile", "ssl_certfile", "ssl_keyfile"))


def _refuse_unknown(options: Mapping[str, str], known: Iterable[str], doing: str,
                    also: str) -> None:
    """Kafka-only options by name, then any other option the data source does not know
    (``strand.<setting>`` goes to the SDK client)."""
    _refuse_kafka_only(options)
    tls = sorted(name for name in options if name in _TLS_SETTINGS)
    if tls:
        raise OptionError(f"option {tls[0]}: the strand data source and the Spark jobs do "
                          "not speak TLS yet (their Admin calls are plaintext); use them "
                          "with a cluster whose gateway serves plaintext")
    known = set(known)
    for name in options:
        if name not in known and not name.startswith(CLIENT_PREFIX):
            raise OptionError(f"unknown option {name!r} for {doing} strand; known: "
                              f"{', '.join(sorted(known - {'path'}))}, {also}")


def read_options(options: Mapping[str, str], streaming: bool) -> ReadOptions:
    """Parse and check the options of a batch (``streaming=False``) or streaming read."""
    from strand import Consumer

    options = canonical(options)
    _refuse_unknown(options, READ_OPTIONS, "reading from", "strand.<setting>")
    bootstrap = _bootstrap(options)
    subscription = _subscription(options)
    if "startingOffsets" in options and "startingOffsetsByTimestamp" in options:
        raise OptionError("set startingOffsets or startingOffsetsByTimestamp, not both")
    starting: OffsetSpec | TimestampSpec
    if "startingOffsetsByTimestamp" in options:
        starting = parse_timestamps(options["startingOffsetsByTimestamp"],
                                    "startingOffsetsByTimestamp")
    else:
        starting = parse_offsets(options.get("startingOffsets",
                                             "latest" if streaming else "earliest"),
                                 "startingOffsets")
        if not streaming and starting == "latest":
            raise OptionError("startingOffsets=latest is not allowed in a batch query: "
                              "it would read nothing")
    if streaming and "endingOffsets" in options:
        raise OptionError("endingOffsets is for batch queries: a streaming query reads on")
    ending = parse_offsets(options.get("endingOffsets", "latest"), "endingOffsets",
                           ending=True)
    if not streaming and "maxOffsetsPerTrigger" in options:
        raise OptionError("maxOffsetsPerTrigger is for streaming queries")
    isolation = options.get("isolationLevel", "read_uncommitted")
    if isolation not in ("read_uncommitted", "read_committed"):
        raise OptionError(f"option isolationLevel={isolation!r}: use read_committed or "
                          "read_uncommitted")
    strategy = options.get("startingOffsetsByTimestampStrategy", "error")
    if strategy not in ("error", "latest"):
        raise OptionError(f"option startingOffsetsByTimestampStrategy={strategy!r}: use "
                          "error or latest")
    client = _client_settings(options, Consumer, {
        "isolation_level", "auto_offset_reset", "enable_auto_commit", "group_id",
        "group_instance_id", "consumer_timeout_ms"}, "Consumer")
    return ReadOptions(
        bootstrap=bootstrap, subscription=subscription, starting=starting, ending=ending,
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        max_offsets_per_trigger=_positive(options, "maxOffsetsPerTrigger"),
        min_partitions=_positive(options, "minPartitions"),
        isolation_level=isolation,  # type: ignore[arg-type]
        include_headers=_bool(options, "includeHeaders", False),
        ranges_only=_bool(options, "offsetRangesOnly", False),
        timestamp_strategy=strategy,  # type: ignore[arg-type]
        client=client)


SINK_ID = "strand.sinkId"
TXN_TIMEOUT = "strand.transaction_timeout_ms"
DEFAULT_SINK_TXN_TIMEOUT_MS = 600_000
_SINK_ID = re.compile(r"[A-Za-z0-9._-]{1,100}")


def write_options(options: Mapping[str, str], streaming: bool) -> WriteOptions:
    """Parse and check the options of a batch or streaming write."""
    from strand import Producer

    options = canonical(options)
    _refuse_unknown(options, WRITE_OPTIONS, "writing to",
                    f"{SINK_ID}, {TXN_TIMEOUT} and strand.<setting>")
    topic = options.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("option topic must not be empty")
    sink_id = options.get(SINK_ID)
    if sink_id is not None and not _SINK_ID.fullmatch(sink_id):
        raise OptionError(f"option {SINK_ID}={sink_id!r}: 1-100 characters of letters, "
                          "digits, '.', '_' and '-'")
    if streaming and sink_id is None:
        raise OptionError(
            f"a streaming write to strand is exactly-once and needs a name that stays the "
            f"same across restarts of the query: set option {SINK_ID} (e.g. the query's "
            "name); a different name starts a new sink")
    timeout = _positive(options, TXN_TIMEOUT) or DEFAULT_SINK_TXN_TIMEOUT_MS
    client = _client_settings(
        {k: v for k, v in options.items() if k not in (SINK_ID, TXN_TIMEOUT)}, Producer,
        {"transactional_id", "enable_idempotence", "transaction_timeout_ms", "acks"},
        "Producer")
    return WriteOptions(bootstrap=_bootstrap(options), topic=topic, sink_id=sink_id,
                        transaction_timeout_ms=timeout, client=client)
