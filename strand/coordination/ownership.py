"""Which shards of an internal topic this coordinator instance serves.

The instance registers under its lease in its kind's :class:`ShardSpace`
(``coordinators/<id>`` for the group coordinator, ``txn-coordinators/<id>`` for the
transaction coordinator: each kind hashes its shards over its own instances only).
On every change of the registrations (the etcd watch, no polling) it computes, by
rendezvous hashing over the live instances of its kind, the shards it should own:

* a wanted shard whose key (``shards/groups/<k>``, ``shards/txns/<k>``) is free is
  taken with a create-if-absent transaction bound to the lease, loaded from its
  partition, and then served. The same etcd transaction increments the shard's
  epoch counter (``shard-epochs/.../<k>``, compared on its version so two take-overs
  cannot both count the same number): :meth:`ShardOwnership.shard_epoch` grows by
  one with every take-over, so a later owner's writes can fence an earlier one's
  (the transaction coordinator's epoch in its markers). It stays small: Kafka's
  coordinator epoch is an int32 (WriteTxnMarkers, the EndTransactionMarker on disk),
  which an etcd revision (int64) would outgrow in a long-lived cluster;
* a shard it holds but no longer wants (another instance joined) is stopped first
  and then released (its key deleted), so two instances never serve one shard.

If the lease is lost (the process paused, etcd unreachable past the TTL) every shard
is dropped at once: another instance may hold them already. A dead instance's keys
vanish with its lease and the survivors take its shards over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from etcd3aio.kv import KVService

from strand.cluster.cache import MetadataCache
from strand.cluster.etcd import EtcdServices, LeaseKeeper
from strand.cluster.keys import KeySpace
from strand.cluster.model import CoordinatorRecord
from strand.coordination.shards import shards_of
from strand.errors import UnknownServerError
from strand.service.aio import wait_event

log = logging.getLogger(__name__)

RETRY_S = 1.0
MAX_SHARD_EPOCH = (1 << 31) - 1  # Kafka's coordinator epoch is an int32

ShardAction = Callable[[int], Awaitable[None]]


class ShardEpochExhaustedError(UnknownServerError):
    """A shard's epoch counter reached int32's maximum."""


@dataclass(frozen=True, slots=True)
class ShardSpace:
    """One coordinator kind in etcd: where its instances register, the key that
    grants shard ``k``, and both as the metadata cache sees them."""

    registration: Callable[[str], str]
    instances: Callable[[], Mapping[str, CoordinatorRecord]]
    key: Callable[[int], str]
    owners: Callable[[], Mapping[int, CoordinatorRecord]]
    epoch_key: Callable[[int], str]

    @classmethod
    def groups(cls, keys: KeySpace, cache: MetadataCache) -> ShardSpace:
        return cls(keys.coordinator, lambda: cache.coordinators, keys.group_shard,
                   lambda: cache.group_shard_owners, keys.group_shard_epoch)

    @classmethod
    def transactions(cls, keys: KeySpace, cache: MetadataCache) -> ShardSpace:
        return cls(keys.txn_coordinator, lambda: cache.txn_coordinators, keys.txn_shard,
                   lambda: cache.txn_shard_owners, keys.txn_shard_epoch)


class ShardOwnership:
    def __init__(self, etcd: EtcdServices, keys: KeySpace, cache: MetadataCache,
                 record: CoordinatorRecord, space: ShardSpace,
                 shard_count: Callable[[], int | None],
                 lease_ttl: int, acquire: ShardAction, release: ShardAction) -> None:
        self.etcd = etcd
        self.keys = keys
        self.cache = cache
        self.record = record
        self.space = space
        self.shard_count = shard_count
        self.lease_ttl = lease_ttl
        self.acquire = acquire
        self.release = release
        self.owned: set[int] = set()
        self._shard_epochs: dict[int, int] = {}
        # The instance's epoch: the id of the lease its live registration is under (0:
        # not registered). Requests only this incarnation may make carry it (as a
        # storage node's broker epoch, KIP-380), e.g. AllocateProducerIds.
        self.epoch = 0
        self._stopping = asyncio.Event()
        # Shards whose writer was lost (strand.coordination.shard_log): released and
        # taken again, under a new epoch, by the next pass.
        self._given_up: set[int] = set()
        self._poke = asyncio.Event()

    def stop(self) -> None:
        self._stopping.set()

    def give_up(self, shard: int) -> None:
        """Let ``shard`` go and take it again (a new epoch, a reload): its state in
        memory may no longer match its log."""
        self._given_up.add(shard)
        self._poke.set()

    def shard_epoch(self, shard: int) -> int:
        """Which take-over of ``shard`` this instance's is (1, 2, ...; 0: not held)."""
        return self._shard_epochs.get(shard, 0) if shard in self.owned else 0

    async def run(self) -> None:
        while not self._stopping.is_set():
            lease = LeaseKeeper(self.etcd, self.lease_ttl)
            try:
                await lease.start()
                await self.etcd.kv.put(self.space.registration(self.record.instance_id),
                                       self.record.to_json(), lease=lease.lease_id)
                self.epoch = lease.lease_id
            except Exception as exc:
                log.warning("cannot register with etcd; retrying", extra={"error": repr(exc)})
                await wait_event(self._stopping, RETRY_S)
                continue
            try:
                await self._serve(lease)
            finally:
                self.epoch = 0
                for shard in sorted(self.owned):
                    await self.release(shard)
                self.owned.clear()
                try:
                    await lease.stop(revoke=self._stopping.is_set())
                except Exception as exc:
                    log.warning("could not release the lease", extra={"error": repr(exc)})

    async def _serve(self, lease: LeaseKeeper) -> None:
        while not self._stopping.is_set() and not lease.lost.is_set():
            revision = self.cache.revision
            try:
                await self._until_lost(self._rebalance(lease), lease)
            except Exception:
                log.exception("shard ownership update failed")
                await wait_event(self._stopping, RETRY_S)
            if self.cache.revision == revision and not self._poke.is_set():
                # Woken by stop() too: a SIGTERMed coordinator must not sit out the
                # quiet period before it releases its shards and exits.
                waits = [asyncio.ensure_future(self._poke.wait()),
                         asyncio.ensure_future(self._stopping.wait()),
                         asyncio.ensure_future(self.cache.wait_changed(RETRY_S * 5))]
                try:
                    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for waiting in waits:
                        waiting.cancel()
            self._poke.clear()
        if lease.lost.is_set():
            log.warning("coordinator lease lost: dropping every shard",
                        extra={"shards": sorted(self.owned)})

    @staticmethod
    async def _until_lost(work: Awaitable[None], lease: LeaseKeeper) -> None:
        """``work``, cancelled if the lease is lost meanwhile: a pass stuck in a shard's
        load (its partition unreadable, its writer fenced) must not keep the instance
        from seeing the loss, dropping its shards and registering again."""
        task = asyncio.ensure_future(work)
        lost = asyncio.ensure_future(lease.lost.wait())
        try:
            await asyncio.wait({task, lost}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            lost.cancel()
            if not task.done():
                task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task  # its failure, if it ended by itself; nothing once cancelled

    async def _rebalance(self, lease: LeaseKeeper) -> None:
        count = self.shard_count()
        me = self.record.instance_id
        instances = self.space.instances()
        if count is None or me not in instances:
            return  # no internal topic yet, or our registration is not visible yet
        wanted = set(shards_of(me, sorted(instances), count))
        given_up, self._given_up = self._given_up & self.owned, set()
        for shard in sorted((self.owned - wanted) | given_up):
            await self.release(shard)
            self.owned.discard(shard)
            await self.etcd.kv.txn(
                compare=[KVService.txn_compare_value(self.space.key(shard),
                                                     self.record.to_json())],
                success=[KVService.txn_op_delete(self.space.key(shard))], failure=[])
            log.info("released shard", extra={"shard": shard})
        for shard in sorted(wanted - self.owned):
            if shard in self.space.owners():
                continue  # still held by its previous owner: wait for it to let go
            key, epoch_key = self.space.key(shard), self.space.epoch_key(shard)
            counted = await self.etcd.kv.get(epoch_key)
            previous, version = ((int(counted.kvs[0].value), counted.kvs[0].version)
                                 if counted.kvs else (0, 0))
            epoch = next_shard_epoch(previous, shard)
            response = await self.etcd.kv.txn(
                compare=[KVService.txn_compare_create_revision(key, 0),
                         KVService.txn_compare_version(epoch_key, version)],
                success=[KVService.txn_op_put(key, self.record.to_json(),
                                              lease=lease.lease_id),
                         KVService.txn_op_put(epoch_key, str(epoch))], failure=[])
            if not response.succeeded:
                continue  # taken meanwhile (or taken and let go): the next pass looks again
            self.owned.add(shard)
            self._shard_epochs[shard] = epoch
            await self.acquire(shard)
            log.info("took shard", extra={"shard": shard})


def next_shard_epoch(previous: int, shard: int) -> int:
    """The epoch of the take-over after ``previous``. Past int32 the coordinators'
    epochs would no longer fit Kafka's fields: refused, never wrapped or clamped."""
    if previous >= MAX_SHARD_EPOCH:
        raise ShardEpochExhaustedError(
            f"shard {shard} has been taken over {previous} times: its next coordinator "
            f"epoch would pass {MAX_SHARD_EPOCH}, the largest Kafka's int32 field holds; "
            "it cannot be taken again. Move the coordinators to a new cluster prefix")
    return previous + 1
