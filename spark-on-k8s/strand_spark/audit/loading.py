"""Reading both sides of an audit from real clusters through the ``strand`` data source.

The runner takes the loading as a function (:data:`Loader`), so tests hand it
DataFrames of their own and share everything else with this path.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

from strand.admin import Admin
from strand.errors import NetworkError, RequestTimedOutError
from strand_spark.audit.arguments import AuditSettings
from strand_spark.audit.records import READ_SCHEMA_DDL

log = logging.getLogger(__name__)


class AuditSetupError(ValueError):
    """The audit cannot start: e.g. a named topic does not exist on the source."""


@dataclass(frozen=True)
class AuditInput:
    """Both sides, with the ``strand`` read schema and headers; ``topics`` are the
    source topics audited."""

    source: DataFrame
    mirror: DataFrame
    topics: tuple[str, ...]


Loader = Callable[[SparkSession, AuditSettings], AuditInput]


def read_options(bootstrap: str, topics: Sequence[str]) -> dict[str, str]:
    """A batch read of every committed record of ``topics`` now, with headers (the
    provenance is in them). ``failOnDataLoss`` is off: records that retention removed
    are the audit's business (``before``/``outside``), not an error of the read."""
    return {"strand.bootstrap": bootstrap, "subscribe": ",".join(topics),
            "startingOffsets": "earliest", "endingOffsets": "latest",
            "includeHeaders": "true", "isolationLevel": "read_committed",
            "failOnDataLoss": "false"}


def source_topics(settings: AuditSettings, existing: Sequence[str]) -> tuple[str, ...]:
    """The source topics to audit, given the topics that exist on the source."""
    if settings.topics_pattern is not None:
        return tuple(t for t in sorted(existing)
                     if re.fullmatch(settings.topics_pattern, t) is not None)
    absent = [t for t in settings.topics if t not in set(existing)]
    if absent:
        raise AuditSetupError(f"topics {', '.join(absent)} do not exist on the source "
                              f"cluster {settings.source_cluster} "
                              f"({settings.source_bootstrap}): check --topics")
    return settings.topics


def target_topics(settings: AuditSettings, topics: Sequence[str],
                  existing: Sequence[str]) -> tuple[str, ...]:
    """The copies of ``topics`` that exist on the target (a copy the mirror has not
    created yet has no records: its source records are pending or overdue)."""
    policy = settings.naming_policy
    present = set(existing)
    named = [policy.target_topic(settings.source_cluster, t) for t in topics]
    for source, target in zip(topics, named, strict=True):
        if target not in present:
            log.warning("audit: no copy of topic yet", extra={
                "topic": source, "copy": target, "target": settings.target_cluster})
    return tuple(dict.fromkeys(t for t in named if t in present))


def _topics_on(bootstrap: str, side: str, cluster: str) -> list[str]:
    try:
        with Admin(bootstrap) as admin:
            return admin.list_topics()
    except (NetworkError, RequestTimedOutError) as exc:
        raise AuditSetupError(f"cannot reach the {side} cluster {cluster} at {bootstrap} "
                              f"({exc}): check --{side}-bootstrap and that the cluster "
                              "runs") from exc


def _read(spark: SparkSession, bootstrap: str, topics: Sequence[str]) -> DataFrame:
    if not topics:
        return spark.createDataFrame([], READ_SCHEMA_DDL)
    return spark.read.format("strand").options(**read_options(bootstrap, topics)).load()


def load_from_strand(spark: SparkSession, settings: AuditSettings) -> AuditInput:
    """Both sides read from the clusters named in ``settings``. The ``strand`` data
    source must be registered in ``spark`` (``strand_spark.register``)."""
    topics = source_topics(settings, _topics_on(settings.source_bootstrap, "source",
                                                settings.source_cluster))
    copies = target_topics(settings, topics, _topics_on(
        settings.target_bootstrap, "target", settings.target_cluster))
    if not topics:
        log.warning("audit: no source topic matches", extra={
            "pattern": settings.topics_pattern, "source": settings.source_cluster})
    return AuditInput(source=_read(spark, settings.source_bootstrap, topics),
                      mirror=_read(spark, settings.target_bootstrap, copies),
                      topics=topics)
