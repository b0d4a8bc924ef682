"""Keeps the target cluster's topics in step with the source's: each mirrored source
topic has its copy (named by the naming policy) with at least as many partitions and
the same configs the source topic sets (its overrides; defaults stay defaults). New
topics, new partitions and config changes are followed on every sync; a copy is never
shrunk or deleted (MirrorMaker 2 does not either).

The mirror's and the sink's own topics (``strand-mirror.*``, ``strand-sinks.*``) and
internal ones (``__*``) are never mirrored, whatever the pattern.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from strand import Admin, NewTopic
from strand.errors import TopicAlreadyExistsError
from strand.mirror.offset_map import MAP_PREFIX
from strand_spark.ledger import LEDGER_PREFIX
from strand_spark.naming import NamingPolicy

log = logging.getLogger(__name__)

NEVER_MIRRORED = (MAP_PREFIX, LEDGER_PREFIX, "__")
# Configs that belong to the target cluster's own shape, not to the data.
NOT_COPIED = frozenset({"min.insync.replicas"})


def never_mirrored(topic: str) -> bool:
    return topic.startswith(NEVER_MIRRORED)


def exclusive_pattern(pattern: str) -> str:
    """``pattern`` that can never match the mirror's and sink's own topics."""
    prefixes = "|".join(re.escape(p) for p in NEVER_MIRRORED)
    return f"(?!{prefixes})(?:{pattern})"


@dataclass
class SyncReport:
    created: list[str]
    grown: list[str]
    reconfigured: list[str]


class TopicSync:
    def __init__(self, source_bootstrap: str, target_bootstrap: str, source_cluster: str,
                 naming: NamingPolicy, topics: tuple[str, ...] = (),
                 pattern: str | None = None, replication_factor: int | None = None) -> None:
        self.source_bootstrap = source_bootstrap
        self.target_bootstrap = target_bootstrap
        self.source_cluster = source_cluster
        self.naming = naming
        self.topics = topics
        self.pattern = re.compile(pattern) if pattern is not None else None
        self.replication_factor = replication_factor

    def source_topics(self, source: Admin) -> list[str]:
        present = source.list_topics()
        if self.pattern is not None:
            return sorted(t for t in present
                          if not never_mirrored(t) and self.pattern.fullmatch(t))
        return [t for t in self.topics if t in present and not never_mirrored(t)]

    def sync(self) -> SyncReport:
        report = SyncReport([], [], [])
        with Admin(self.source_bootstrap) as source, Admin(self.target_bootstrap) as target:
            wanted = self.source_topics(source)
            if not wanted:
                return report
            existing = set(target.list_topics())
            rf = self.replication_factor or max(1, min(3, len(
                target.describe_cluster().brokers)))
            described = {d.name: d for d in source.describe_topics(wanted)}
            for topic in wanted:
                partitions = len(described[topic].partitions)
                configs = {name: c.value for name, c in source.describe_configs(topic).items()
                           if not c.is_default and name not in NOT_COPIED}
                copy = self.naming.target_topic(self.source_cluster, topic)
                if copy not in existing:
                    try:
                        target.create_topics([NewTopic(copy, partitions, rf, config=configs)])
                        report.created.append(copy)
                        continue
                    except TopicAlreadyExistsError:
                        pass  # another mirror (active/active, identity naming) made it
                have = len(target.describe_topics([copy])[0].partitions)
                if have < partitions:
                    target.create_partitions(copy, partitions)
                    report.grown.append(copy)
                current = {name: c.value for name, c in target.describe_configs(copy).items()
                           if not c.is_default}
                changed = {k: v for k, v in configs.items() if current.get(k) != v}
                if changed:
                    target.alter_configs(copy, set=changed)
                    report.reconfigured.append(copy)
        if report.created or report.grown or report.reconfigured:
            log.info("mirror topics: created %s, grown %s, reconfigured %s",
                     report.created, report.grown, report.reconfigured)
        return report
