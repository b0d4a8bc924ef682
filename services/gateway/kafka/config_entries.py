"""Strand's configs as Kafka's DescribeConfigs and IncrementalAlterConfigs see them.

Pure values: the Kafka types, sources and broker-level synonyms of Strand's topic
configs (:data:`strand.log.config.TOPIC_CONFIG`), the read-only broker resource (the
defaults a topic without overrides gets, under Kafka's broker names), and how an
incremental APPEND or SUBTRACT turns into the value to set.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from strand.errors import InvalidConfigError, InvalidRequestError
from strand.log.config import TOPIC_CONFIG, ConfigKey

__all__ = ["DEFAULT_NUM_PARTITIONS", "DEFAULT_REPLICATION_FACTOR", "AlterOp",
           "ConfigSource", "ConfigType", "DescribedConfig", "ResourceKind", "Synonym",
           "alteration", "broker_configs", "default_text", "topic_config"]

# What CreateTopics' -1 (the broker's default) means: Kafka's num.partitions and
# default.replication.factor defaults.
DEFAULT_NUM_PARTITIONS = 1
DEFAULT_REPLICATION_FACTOR = 1


class ResourceKind(enum.IntEnum):
    """Kafka's ConfigResource.Type codes Strand answers (others are refused)."""

    TOPIC = 2
    BROKER = 4


class ConfigSource(enum.IntEnum):
    """Kafka's DescribeConfigsResponse.ConfigSource."""

    DYNAMIC_TOPIC_CONFIG = 1
    DEFAULT_CONFIG = 5


class ConfigType(enum.IntEnum):
    """Kafka's DescribeConfigsResponse.ConfigType (v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    DOUBLE = 6
    LIST = 7


class AlterOp(enum.IntEnum):
    """Kafka's AlterConfigOp.OpType codes."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


_TYPES = {"int": ConfigType.INT, "long": ConfigType.LONG, "double": ConfigType.DOUBLE,
          "bool": ConfigType.BOOLEAN, "enum": ConfigType.STRING, "list": ConfigType.LIST}

# The broker config that sets each topic config's default in Kafka (its synonym).
BROKER_SYNONYMS: dict[str, str] = {
    "cleanup.policy": "log.cleanup.policy",
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.index.bytes": "log.index.size.max.bytes",
    "index.interval.bytes": "log.index.interval.bytes",
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "producer.id.expiration.ms": "producer.id.expiration.ms",
    "compression.type": "compression.type",
}


@dataclass(frozen=True, slots=True)
class Synonym:
    name: str
    value: str
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class DescribedConfig:
    name: str
    value: str
    source: ConfigSource
    read_only: bool
    config_type: ConfigType
    documentation: str
    synonyms: tuple[Synonym, ...]
    sensitive: bool = False  # no Strand config is a secret


def default_text(key: ConfigKey) -> str:
    """A config's default as text (as DescribeConfigs shows it)."""
    default = key.default
    if isinstance(default, bool):
        return str(default).lower()
    if isinstance(default, tuple):
        return ",".join(default)
    return str(default)


def documentation(key: ConfigKey) -> str:
    what = f"{key.doc[0].upper()}{key.doc[1:]}. " if key.doc else ""
    return f"{what}Valid values: {key.expected()}."


def topic_config(name: str, value: str, is_default: bool) -> DescribedConfig:
    """A topic config as Kafka describes it: its own override first among its
    synonyms, then the broker default it falls back to."""
    key = TOPIC_CONFIG.get(name)
    if key is None:  # a key this gateway's table does not know (a newer controller)
        return DescribedConfig(name, value, ConfigSource.DEFAULT_CONFIG if is_default
                               else ConfigSource.DYNAMIC_TOPIC_CONFIG, False,
                               ConfigType.UNKNOWN, "", ())
    fallback = Synonym(BROKER_SYNONYMS.get(name, name), default_text(key),
                       ConfigSource.DEFAULT_CONFIG)
    if is_default:
        return DescribedConfig(name, value, ConfigSource.DEFAULT_CONFIG, False,
                               _TYPES[key.kind], documentation(key), (fallback,))
    own = Synonym(name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG)
    return DescribedConfig(name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG, False,
                           _TYPES[key.kind], documentation(key), (own, fallback))


def broker_configs() -> list[DescribedConfig]:
    """The broker resource: the topic defaults under Kafka's broker names, and what
    CreateTopics' -1 means. Read-only: Strand sets configs per topic only."""
    def default(name: str, value: str, kind: ConfigType, doc: str) -> DescribedConfig:
        return DescribedConfig(name, value, ConfigSource.DEFAULT_CONFIG, True, kind, doc,
                               (Synonym(name, value, ConfigSource.DEFAULT_CONFIG),))

    entries = [
        default("num.partitions", str(DEFAULT_NUM_PARTITIONS), ConfigType.INT,
                "The partitions of a topic created without a count."),
        default("default.replication.factor", str(DEFAULT_REPLICATION_FACTOR),
                ConfigType.INT, "The replication factor of a topic created without one."),
    ]
    entries += [default(BROKER_SYNONYMS.get(name, name), default_text(key), _TYPES[key.kind],
                        f"The default of the topic config {name}. {documentation(key)}")
                for name, key in TOPIC_CONFIG.items()]
    return sorted(entries, key=lambda entry: entry.name)


def selected(entries: Iterable[DescribedConfig],
             keys: Iterable[str] | None) -> list[DescribedConfig]:
    """The entries a DescribeConfigs resource asks for (None or none named: all)."""
    wanted = set(keys or ())
    return [e for e in entries if not wanted or e.name in wanted]


def alteration(name: str, op: int, value: str | None,
               current: str | None) -> tuple[bool, str]:
    """(set?, value) of one IncrementalAlterConfigs entry: set to value, or back to the
    default (False). ``current`` is the topic's value now (APPEND/SUBTRACT start from
    it, the default included, as Kafka's do)."""
    try:
        kind = AlterOp(op)
    except ValueError:
        raise InvalidRequestError(
            f"config {name}: operation {op} is unknown; expected 0 (SET), 1 (DELETE), "
            "2 (APPEND) or 3 (SUBTRACT)") from None
    if kind is AlterOp.DELETE:
        return False, ""
    if value is None:
        raise InvalidRequestError(f"config {name}: {kind.name} needs a value (null given)")
    if kind is AlterOp.SET:
        return True, value
    key = TOPIC_CONFIG.get(name)
    if key is None:
        raise InvalidConfigError(f"unknown topic config {name!r}")
    if key.kind != "list":
        raise InvalidConfigError(
            f"config {name} is not a list ({key.expected()}): {kind.name} works on list "
            "configs only; SET it instead")
    items = [item.strip() for item in (current or "").split(",") if item.strip()]
    given = [item.strip() for item in value.split(",") if item.strip()]
    if kind is AlterOp.APPEND:
        items += [item for item in given if item not in items]
    else:
        items = [item for item in items if item not in given]
    return True, ",".join(items)
