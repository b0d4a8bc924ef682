"""What a Topic resource asks for: the Strand topic's name, partitions, replicas and
config, and whether the operator may act on it (its annotations)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from strand.errors import InvalidConfigError
from strand.log.config import TOPIC_CONFIG, validate_topic_config

__all__ = [
    "CLUSTER_LABEL",
    "GROUP",
    "MANAGED_ANNOTATION",
    "MAX_PARTITIONS",
    "MAX_REPLICAS",
    "PAUSED_ANNOTATION",
    "PLURAL",
    "VERSION",
    "DesiredTopic",
    "InvalidTopicSpec",
    "desired_topic",
    "is_managed",
    "is_paused",
    "topic_name",
]

GROUP = "strand.io"
VERSION = "v1"
PLURAL = "topics"
CLUSTER_LABEL = "strand.io/cluster"
MANAGED_ANNOTATION = "strand.io/managed"
PAUSED_ANNOTATION = "strand.io/paused"
# The CRD's maxima (helm/strand/crds/topics.strand.io.yaml); 100,000 partitions is the
# controller's limit too (services/controller/topic_rules.py).
MAX_PARTITIONS = 100_000
MAX_REPLICAS = 32_767


class InvalidTopicSpec(ValueError):
    """A Topic's spec Strand cannot carry out; ``reason`` is the Ready condition's."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class DesiredTopic:
    name: str
    partitions: int
    replicas: int
    config: Mapping[str, str] = field(default_factory=dict)


def topic_name(metadata_name: str, spec: Mapping[str, Any]) -> str:
    """The Strand topic's name: spec.topicName when given, else the resource's name."""
    name = spec.get("topicName")
    return name if isinstance(name, str) and name else metadata_name


def is_managed(annotations: Mapping[str, str]) -> bool:
    return annotations.get(MANAGED_ANNOTATION, "true").strip().lower() != "false"


def is_paused(annotations: Mapping[str, str]) -> bool:
    return annotations.get(PAUSED_ANNOTATION, "false").strip().lower() == "true"


def _config_text(value: object) -> str:
    """A config value as Strand takes it: YAML's booleans in lower case."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def desired_topic(metadata_name: str, spec: Mapping[str, Any]) -> DesiredTopic:
    """The topic ``spec`` asks for; InvalidTopicSpec when Strand could not hold it.

    The CRD's schema checks types and ranges before a Topic is stored; this checks
    again (a schema can be bypassed, e.g. by an older CRD) and adds what a schema
    cannot say: unknown config keys and rules between keys (Strand's own table).
    """
    name = topic_name(metadata_name, spec)
    partitions, replicas = spec.get("partitions"), spec.get("replicas")
    for what, value, most in (("partitions", partitions, MAX_PARTITIONS),
                              ("replicas", replicas, MAX_REPLICAS)):
        if type(value) is not int or value < 1:
            raise InvalidTopicSpec("InvalidSpec",
                                   f"spec.{what} must be an integer of at least 1, got {value!r}")
        if value > most:  # a placement would take the operator minutes, or forever
            raise InvalidTopicSpec("InvalidSpec",
                                   f"spec.{what} must be at most {most}, got {value}")
    assert isinstance(partitions, int) and isinstance(replicas, int)
    raw = spec.get("config") or {}
    if not isinstance(raw, Mapping):
        raise InvalidTopicSpec("InvalidConfig", f"spec.config must be a map, got {raw!r}")
    config = {str(k): _config_text(v) for k, v in raw.items()}
    try:
        validate_topic_config(config)
    except InvalidConfigError as exc:
        raise InvalidTopicSpec("InvalidConfig", f"spec.config: {exc}") from None
    min_insync = int(TOPIC_CONFIG["min.insync.replicas"].parse(
        config.get("min.insync.replicas", "1")))
    if min_insync > replicas:
        raise InvalidTopicSpec(
            "InvalidConfig",
            f"spec.config min.insync.replicas={min_insync} is more than spec.replicas="
            f"{replicas}: no acks=all write could succeed; lower it or add replicas")
    return DesiredTopic(name, partitions, replicas, config)
