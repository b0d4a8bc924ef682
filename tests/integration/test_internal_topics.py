"""Through the SDK, against real processes: ``__consumer_offsets`` cannot be deleted,
grown or made non-compacted, and the committed offsets it holds survive the attempts."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from strand import Admin, NewTopic, TopicPartition
from strand.coordination.shards import GROUP_TOPIC
from strand.errors import InvalidConfigError, InvalidRequestError

if TYPE_CHECKING:
    from tests.support.cluster import SdkCluster


def test_the_offsets_topic_refuses_deletion_growth_and_losing_compaction(
        group_cluster: SdkCluster) -> None:
    tp = TopicPartition("guarded", 0)
    with Admin(group_cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("guarded", 1, 1)])
        admin.alter_group_offsets("keepers", {tp: 42})
        partitions = admin.describe_topics([GROUP_TOPIC])[0].partitions

        with pytest.raises(InvalidRequestError, match="internal and cannot be deleted"):
            admin.delete_topics([GROUP_TOPIC])
        with pytest.raises(InvalidRequestError, match="partition count cannot change"):
            admin.create_partitions(GROUP_TOPIC, len(partitions) + 1)
        with pytest.raises(InvalidConfigError, match="must stay 'compact'"):
            admin.alter_configs(GROUP_TOPIC, set={"cleanup.policy": "delete"})
        with pytest.raises(InvalidConfigError, match="must stay 'compact'"):
            admin.alter_configs(GROUP_TOPIC, delete=["cleanup.policy"])

        assert GROUP_TOPIC in admin.list_topics(include_internal=True)
        assert len(admin.describe_topics([GROUP_TOPIC])[0].partitions) == len(partitions)
        assert admin.describe_configs(GROUP_TOPIC)["cleanup.policy"].value == "compact"
        assert admin.list_group_offsets("keepers") == {tp: 42}
        admin.alter_configs(GROUP_TOPIC, set={"segment.bytes": str(64 * 1024 * 1024)})
        assert admin.describe_configs(GROUP_TOPIC)["segment.bytes"].value == str(64 << 20)
