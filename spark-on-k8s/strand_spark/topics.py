"""The small topics the sink and the mirror keep for themselves in a cluster (the
sink's ledger, the mirror's offset map and heartbeats): created on first use, one
partition, replicated like the data (up to 3 replicas)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

from strand import Admin, NewTopic
from strand.errors import TopicAlreadyExistsError


def ensure_topic(bootstrap: str, topic: str, config: Mapping[str, str]) -> None:
    """Create ``topic`` unless it exists (another task or job may make it meanwhile)."""
    with Admin(bootstrap) as admin:
        if topic in admin.list_topics():
            return
        rf = max(1, min(3, len(admin.describe_cluster().brokers)))
        settings = {"min.insync.replicas": "2" if rf >= 3 else "1", **config}
        with contextlib.suppress(TopicAlreadyExistsError):
            admin.create_topics([NewTopic(topic, 1, rf, config=settings)])
