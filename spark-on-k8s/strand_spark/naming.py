"""How the mirror names a source topic on the target cluster (a pluggable policy).

- ``prefix`` (the default, MirrorMaker 2's DefaultReplicationPolicy): ``<source>.<topic>``,
  e.g. ``us-east.orders``;
- ``identity``: the same name (MirrorMaker 2's IdentityReplicationPolicy). Cycles are
  still refused, by the provenance headers (strand_spark.provenance).

A policy of one's own: a class with ``target_topic(source_cluster, topic)`` and
``source_topic(source_cluster, target_topic)`` (None when the target topic is not a copy
from that cluster), named ``module:Class`` in the jobs' ``--naming`` option.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Protocol


class NamingPolicy(Protocol):
    def target_topic(self, source_cluster: str, topic: str) -> str: ...

    def source_topic(self, source_cluster: str, target_topic: str) -> str | None: ...


@dataclass(frozen=True)
class PrefixNaming:
    separator: str = "."

    def target_topic(self, source_cluster: str, topic: str) -> str:
        return f"{source_cluster}{self.separator}{topic}"

    def source_topic(self, source_cluster: str, target_topic: str) -> str | None:
        prefix = f"{source_cluster}{self.separator}"
        return target_topic[len(prefix):] if target_topic.startswith(prefix) else None


@dataclass(frozen=True)
class IdentityNaming:
    def target_topic(self, source_cluster: str, topic: str) -> str:
        return topic

    def source_topic(self, source_cluster: str, target_topic: str) -> str | None:
        return target_topic


def naming_policy(name: str) -> NamingPolicy:
    """``prefix``, ``identity`` or ``module:Class`` (constructed without arguments)."""
    if name == "prefix":
        return PrefixNaming()
    if name == "identity":
        return IdentityNaming()
    module_name, _, class_name = name.partition(":")
    if not module_name or not class_name:
        raise ValueError(f"naming policy {name!r}: use 'prefix', 'identity' or "
                         "'module:Class'")
    try:
        policy_class = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"naming policy {name!r} cannot be loaded: {exc}") from exc
    policy: NamingPolicy = policy_class()
    return policy
