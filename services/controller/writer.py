"""Every write of the controller to etcd (admin plans, partition records, producer-id
blocks), each transaction fenced by the controller's epoch.

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
from strand.cluster.model import (
    PartitionRecord,
    ProducerIdBlockRecord,
    ProducerIdsBlock,
    next_producer_ids_block,
)
from strand.errors import (
    InvalidUpdateVersionError,
    NotControllerError,
    StaleBrokerEpochError,
    TopicAlreadyExistsError,
)

MAX_OPS_PER_TXN = 100
# pid-block compare-and-swaps lost in a row before giving up: only another writer of
# the key makes one fail, and the fence leaves none but this controller.
PID_BLOCK_ATTEMPTS = 5


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

    async def allocate_producer_ids(self, coordinator_id: str, coordinator_epoch: int,
                                    size: int) -> ProducerIdsBlock:
        """Grant the next block of producer ids to the transaction coordinator instance
        registered as ``txn-coordinators/<coordinator_id>`` under lease
        ``coordinator_epoch`` (a group coordinator's registration does not qualify).

        One transaction: this controller still holds its election, ``pid-block`` is
        still what was read (compare on its revision: a block is never granted twice,
        not even by two controllers that both believe they are active), and the
        caller's registration lives under that lease (KIP-380's broker epoch check,
        atomic with the grant). Callers check ``coordinator_epoch > 0`` first: a
        missing key compares as lease 0.
        """
        kv = KVService
        key = self.keys.pid_block
        registration = self.keys.txn_coordinator(coordinator_id)
        caller = [_compare_exists(registration),
                  _compare_lease(registration, coordinator_epoch)]
        for _ in range(PID_BLOCK_ATTEMPTS):
            current = await self.etcd.kv.get(key)
            if current.kvs:
                record = ProducerIdBlockRecord.from_json(current.kvs[0].value)
                unchanged = _compare_mod_revision(key, current.kvs[0].mod_revision)
            else:
                record, unchanged = None, kv.txn_compare_create_revision(key, 0)
            block = next_producer_ids_block(record, size)
            granted = ProducerIdBlockRecord(block.next_first, coordinator_id, coordinator_epoch)
            if await self._fenced_txn([*caller, unchanged],
                                      [kv.txn_op_put(key, granted.to_json())]) is not None:
                return block
            held = await self.etcd.kv.get(registration)
            if not held.kvs or held.kvs[0].lease != coordinator_epoch:
                raise StaleBrokerEpochError(
                    f"coordinator {coordinator_id!r} is not registered under lease "
                    f"{coordinator_epoch} (not registered, or registered again since): only "
                    "the live instance itself may ask for producer ids")
        raise InvalidUpdateVersionError(
            f"pid-block changed under every one of {PID_BLOCK_ATTEMPTS} attempts; retry")

    async def write_security(self, puts: Sequence[tuple[str, bytes]],
                             deletes: Sequence[str] = ()) -> int:
        """Put and delete users' and ACLs' keys, fenced, in chunks etcd accepts; the
        revision of the last write (0: nothing to write). Not atomic across chunks,
        as Kafka's CreateAcls is not across bindings: each key is whole either way."""
        kv = KVService
        ops = [*(kv.txn_op_put(key, value) for key, value in puts),
               *(kv.txn_op_delete(key) for key in deletes)]
        revision = 0
        for start in range(0, len(ops), MAX_OPS_PER_TXN):
            written = await self._fenced_txn([], ops[start : start + MAX_OPS_PER_TXN])
            if written is None:  # no compare but the fence: a lost election raised
                raise NotControllerError("this controller lost its election; retry")
            revision = written
        return revision

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


def _compare_lease(key: str, lease: int) -> Compare:
    return Compare(result=Compare.EQUAL, target=Compare.LEASE, key=key.encode(), lease=lease)


def _compare_exists(key: str) -> Compare:
    return Compare(result=Compare.GREATER, target=Compare.CREATE, key=key.encode(),
                   create_revision=0)
