"""Applies admin plans to etcd, every transaction fenced by the controller's epoch.

etcd caps a transaction at 128 operations by default, so a topic's partition records
are written first, in fenced chunks, and the topic record last: a topic exists
exactly when its record does (readers ignore partitions of unknown topics), so a
controller that dies half way leaves nothing visible, and the next create of that
name simply overwrites the leftovers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from etcd3aio import prefix_range_end
from etcd3aio._protobuf import Compare
from etcd3aio.kv import KVService

from services.controller.admin import Plan
from strand.cluster.etcd import ControllerElection, EtcdServices
from strand.cluster.keys import KeySpace
from strand.cluster.model import PartitionRecord
from strand.errors import NotControllerError, TopicAlreadyExistsError

MAX_OPS_PER_TXN = 100


class MetadataWriter:
    def __init__(self, etcd: EtcdServices, keys: KeySpace, election: ControllerElection) -> None:
        self.etcd = etcd
        self.keys = keys
        self.election = election

    async def apply(self, plan: Plan) -> int:
        """Write the plan; returns the etcd revision of its last write."""
        kv = KVService
        revision = 0
        if plan.delete_topic is not None:
            name = plan.delete_topic
            prefix = self.keys.topic_partitions(name)
            return await self._txn([], [
                kv.txn_op_delete(self.keys.topic(name)),
                kv.txn_op_delete(prefix, range_end=prefix_range_end(prefix.encode())),
            ])
        topic_absent = []
        if plan.topic is not None and plan.create_only:
            topic_absent = [kv.txn_compare_create_revision(self.keys.topic(plan.topic.name), 0)]
        for start in range(0, len(plan.partitions), MAX_OPS_PER_TXN):
            # Serialized chunk by chunk: between two transactions the event loop serves
            # lease keep-alives and other requests (issue 11).
            puts = [kv.txn_op_put(self.keys.partition(p.topic, p.partition), p.to_json())
                    for p in plan.partitions[start : start + MAX_OPS_PER_TXN]]
            revision = await self._txn(topic_absent, puts)
        if plan.topic is not None:
            revision = await self._txn(
                topic_absent, [kv.txn_op_put(self.keys.topic(plan.topic.name),
                                             plan.topic.to_json())])
        return revision

    async def update_partition(self, record: PartitionRecord, expected_revision: int) -> int | None:
        """Replace a partition record if it is still at ``expected_revision`` (its etcd mod
        revision): the new revision, or None when someone changed it first."""
        key = self.keys.partition(record.topic, record.partition)
        return await self._fenced_txn([_compare_mod_revision(key, expected_revision)],
                                      [KVService.txn_op_put(key, record.to_json())])

    async def _txn(self, compares: Sequence[Any], ops: Sequence[Any]) -> int:
        revision = await self._fenced_txn(compares, ops)
        if revision is None:
            raise TopicAlreadyExistsError("the topic was created concurrently")
        return revision

    async def _fenced_txn(self, compares: Sequence[Any], ops: Sequence[Any]) -> int | None:
        """Run ``ops`` if this controller still holds its election and ``compares``
        hold: the new revision, None when a compare failed; NotControllerError when
        the election is lost."""
        response = await self.etcd.kv.txn(
            compare=[self.election.fence(), *compares], success=list(ops),
            failure=[KVService.txn_op_get(self.keys.controller)],
        )
        if response.succeeded:
            return int(response.header.revision)
        held = response.responses[0].response_range.kvs
        if not held or held[0].create_revision != self.election.epoch:
            raise NotControllerError("this controller lost its election; retry on the active one")
        return None


def _compare_mod_revision(key: str, revision: int) -> Compare:
    """etcd3aio has helpers for value, version and create revision; this is the fourth."""
    return Compare(result=Compare.EQUAL, target=Compare.MOD, key=key.encode(),
                   mod_revision=revision)
