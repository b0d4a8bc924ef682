"""Admin.create_partitions(..., assignments=...) end to end: the SDK sends the replica
lists, the gateway passes them to the controller, which places the new partitions
exactly there, or refuses bad lists with InvalidReplicaAssignmentError."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from strand import Admin, NewTopic
from strand.errors import InvalidReplicaAssignmentError

if TYPE_CHECKING:
    from tests.support.cluster import SdkCluster


def test_new_partitions_go_where_the_assignments_say(sdk_cluster: SdkCluster) -> None:
    with Admin(sdk_cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("placed", replica_assignment={0: [1, 2]})])
        admin.create_partitions("placed", 3, assignments=[[2, 1], [1, 2]])
        described = admin.describe_topics(["placed"])[0]
        assert [p.replicas for p in described.partitions] == [(1, 2), (2, 1), (1, 2)]
        assert [p.leader for p in described.partitions] == [1, 2, 1]

        with pytest.raises(InvalidReplicaAssignmentError, match="names brokers that are not "
                                                                "live: \\[7\\]"):
            admin.create_partitions("placed", 4, assignments=[[1, 7]])
        with pytest.raises(InvalidReplicaAssignmentError, match="needs 1 replica lists"):
            admin.create_partitions("placed", 4, assignments=[[1, 2], [2, 1]])
        with pytest.raises(InvalidReplicaAssignmentError, match="replication factor is 2"):
            admin.create_partitions("placed", 4, assignments=[[1]])
        with pytest.raises(TypeError, match="list of broker ids"):
            admin.create_partitions("placed", 4, assignments=["12"])  # type: ignore[list-item]
        assert len(admin.describe_topics(["placed"])[0].partitions) == 3
        admin.delete_topics(["placed"])
