"""The mirror keeps the target's topics in step with the source's (strand_spark.mirror.
topic_sync): copies are created with the source's partitions and configs, then follow
new partitions, config changes and new topics matching the pattern; the mirror's and
the sink's own topics are never mirrored."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from strand import Admin, NewTopic
from strand_spark.mirror.topic_sync import TopicSync, exclusive_pattern, never_mirrored
from strand_spark.naming import PrefixNaming
from tests.support.cluster import SdkCluster, start_sdk_cluster, unique

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SdkCluster]:
    cluster = start_sdk_cluster(tmp_path_factory.mktemp("sync-target"), nodes=1,
                                name="target", txn_coordinators=0)
    yield cluster
    cluster.stop()


def describe(cluster: SdkCluster, topic: str) -> tuple[int, dict[str, str]]:
    with Admin(cluster.bootstrap) as admin:
        partitions = len(admin.describe_topics([topic])[0].partitions)
        configs = {k: v.value for k, v in admin.describe_configs(topic).items()
                   if not v.is_default}
    return partitions, configs


def test_copies_follow_partitions_configs_and_new_topics(
        strand_cluster: SdkCluster, target: SdkCluster, tmp_path: Path) -> None:
    prefix = unique("sync")
    with Admin(strand_cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(f"{prefix}-a", 2, 1, config={"retention.ms": "3600000"}),
                             NewTopic(f"strand-sinks.{prefix}", 1, 1)])
    sync = TopicSync(strand_cluster.bootstrap, target.bootstrap, "src", PrefixNaming(),
                     pattern=f"{prefix}.*|strand-sinks\\..*")
    report = sync.sync()
    assert report.created == [f"src.{prefix}-a"]
    assert describe(target, f"src.{prefix}-a") == (2, {"retention.ms": "3600000"})
    with Admin(strand_cluster.bootstrap) as admin:
        admin.create_partitions(f"{prefix}-a", 5)
        admin.alter_configs(f"{prefix}-a", set={"retention.ms": "7200000",
                                                "cleanup.policy": "compact"})
        admin.create_topics([NewTopic(f"{prefix}-b", 3, 1)])
    report = sync.sync()
    assert report.grown == [f"src.{prefix}-a"] and report.reconfigured == [f"src.{prefix}-a"]
    assert report.created == [f"src.{prefix}-b"]
    assert describe(target, f"src.{prefix}-a") == (
        5, {"retention.ms": "7200000", "cleanup.policy": "compact"})
    assert sync.sync().created == []  # in step: nothing to do
    with Admin(target.bootstrap) as admin:
        assert not [t for t in admin.list_topics() if t.startswith("src.strand-sinks")]


def test_the_mirrors_own_topics_never_match() -> None:
    import re

    assert never_mirrored("strand-mirror.east.offsets") and never_mirrored("strand-sinks.x")
    assert never_mirrored("__consumer_offsets") and not never_mirrored("orders")
    pattern = re.compile(exclusive_pattern(".*"))
    assert pattern.fullmatch("orders")
    assert not pattern.fullmatch("strand-mirror.heartbeats")
    assert not pattern.fullmatch("strand-sinks.mirror.east.west")
