"""etcd plumbing shared by the services: leases kept alive, a watched metadata cache,
and the election of the single ``controller`` key (docs/architecture.md §5).

Nobody polls: a lease is renewed on its own schedule (a third of its TTL), the cache
follows a watch that resumes from its revision, and a standby controller watches the
election key and campaigns when it is deleted (its holder's lease expired).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import grpc
from etcd3aio import Etcd3Client, prefix_range_end
from etcd3aio.kv import KVService
from etcd3aio.lease import LeaseService
from etcd3aio.watch import WatchService

from strand.cluster.cache import MetadataCache
from strand.cluster.keys import KeySpace
from strand.cluster.model import ControllerRecord
from strand.security.tls import ClientTls, TlsError

log = logging.getLogger(__name__)

_EVENT_DELETE = 1  # mvccpb.Event.EventType


@dataclass(slots=True)
class EtcdServices:
    """The connected service facades of one client (typed, never None)."""

    client: Etcd3Client
    kv: KVService
    lease: LeaseService
    watch: WatchService

    async def close(self) -> None:
        await self.client.close()


async def connect(endpoints: Sequence[str], tls: ClientTls | None = None) -> EtcdServices:
    """A client of the etcd cluster at ``endpoints`` (TLS with ``tls``: etcd's
    certificate verified with its CA, the client certificate presented if given)."""
    if tls is None:
        client = Etcd3Client(list(endpoints))
    else:
        ca, key, chain = _tls_files(tls)
        client = Etcd3Client(list(endpoints), ca_cert=ca, cert_key=key, cert_chain=chain)
    await client.connect()
    assert client.kv and client.lease and client.watch
    return EtcdServices(client, client.kv, client.lease, client.watch)


def _tls_files(tls: ClientTls) -> tuple[bytes, bytes | None, bytes | None]:
    """The CA, key and certificate chain etcd3aio's client takes (a CA is required)."""
    if tls.ca is None:
        raise TlsError("TLS to etcd needs the CA bundle etcd's certificate chains to: "
                       "give --etcd-tls-ca")
    return (tls.ca.read_bytes(), tls.key.read_bytes() if tls.key else None,
            tls.cert.read_bytes() if tls.cert else None)


class LeaseKeeper:
    """Grants a lease and renews it every third of its TTL; ``lost`` is set when the
    lease expired (the process was paused, etcd was unreachable too long) or was
    revoked, so its owner can stop acting on what the lease stood for."""

    def __init__(self, etcd: EtcdServices, ttl: int) -> None:
        self.etcd = etcd
        self.ttl = ttl
        self.lease_id = 0
        self.lost = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> int:
        response = await self.etcd.lease.grant(ttl=self.ttl)
        self.lease_id = int(response.ID)
        self._task = asyncio.create_task(self._renew(), name=f"lease-{self.lease_id:x}")
        return self.lease_id

    async def _renew(self) -> None:
        interval = max(0.2, self.ttl / 3)
        failures_since_ok = 0.0
        while True:
            await asyncio.sleep(interval)
            try:
                ttl = await self._keep_alive_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # any failure counts toward losing the lease
                failures_since_ok += interval
                reason = exc.code().name if isinstance(exc, grpc.aio.AioRpcError) else repr(exc)
                log.warning("lease keepalive failed", extra={"lease": self.lease_id,
                                                             "error": reason})
                if failures_since_ok >= self.ttl:
                    break
                continue
            if ttl <= 0:
                break
            failures_since_ok = 0.0
        log.warning("lease lost", extra={"lease": self.lease_id})
        self.lost.set()

    async def _keep_alive_once(self) -> int:
        stream = self.etcd.lease.keep_alive(self.lease_id)
        try:
            async for response in stream:
                return int(response.TTL)
            return 0
        finally:
            stream.cancel()

    async def stop(self, revoke: bool = True) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if revoke and self.lease_id:
            with contextlib.suppress(Exception):
                await self.etcd.lease.revoke(self.lease_id)


class MetadataWatcher:
    """Keeps a :class:`MetadataCache` equal to the cluster prefix: a snapshot, then a
    watch from the snapshot's revision (resumed by the client after reconnects)."""

    def __init__(self, etcd: EtcdServices, cache: MetadataCache) -> None:
        self.etcd = etcd
        self.cache = cache
        self.ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        prefix = self.cache.keys.prefix
        snapshot = await self.etcd.kv.get(prefix, range_end=prefix_range_end(prefix.encode()))
        for kv in snapshot.kvs:
            self.cache.apply(kv.key.decode(), kv.value, create_revision=kv.create_revision,
                             revision=kv.mod_revision)
        self.cache.revision = max(self.cache.revision, int(snapshot.header.revision))
        self.cache.notify()
        self.ready.set()
        self._task = asyncio.create_task(self._follow(int(snapshot.header.revision) + 1),
                                         name="metadata-watch")

    async def _follow(self, start_revision: int) -> None:
        """Follow the watch; if it ever ends or fails (etcd compacted past us, a bug),
        take a fresh snapshot and go on rather than serve stale metadata silently."""
        while True:
            try:
                await self._watch_from(start_revision)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("metadata watch failed; taking a fresh snapshot")
            await asyncio.sleep(0.5)
            with contextlib.suppress(Exception):
                start_revision = await self._resnapshot()

    async def _resnapshot(self) -> int:
        prefix = self.cache.keys.prefix
        snapshot = await self.etcd.kv.get(prefix, range_end=prefix_range_end(prefix.encode()))
        present = {kv.key.decode() for kv in snapshot.kvs}
        for key in self.cache.known_keys() - present:
            self.cache.apply(key, None, revision=int(snapshot.header.revision))
        for kv in snapshot.kvs:
            self.cache.apply(kv.key.decode(), kv.value, create_revision=kv.create_revision,
                             revision=kv.mod_revision)
        self.cache.revision = max(self.cache.revision, int(snapshot.header.revision))
        self.cache.notify()
        return int(snapshot.header.revision) + 1

    async def _watch_from(self, start_revision: int) -> None:
        prefix = self.cache.keys.prefix
        async for response in self.etcd.watch.watch(
                prefix, range_end=prefix_range_end(prefix.encode()),
                start_revision=start_revision):
            for event in response.events:
                value = None if event.type == _EVENT_DELETE else event.kv.value
                self.cache.apply(event.kv.key.decode(), value,
                                 create_revision=event.kv.create_revision,
                                 revision=event.kv.mod_revision)
            if response.events:
                self.cache.notify()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


class ControllerElection:
    """Campaigns for the single election key, bound to this process's lease.

    The winner's epoch is the key's create revision: every metadata write it makes
    is a transaction guarded by "the key still has that create revision", so a
    deposed controller (lease expired, key gone or re-created) can no longer write.
    """

    def __init__(self, etcd: EtcdServices, keys: KeySpace, record: ControllerRecord,
                 lease: LeaseKeeper) -> None:
        self.etcd = etcd
        self.keys = keys
        self.record = record
        self.lease = lease
        self.epoch = -1

    async def campaign(self) -> int:
        """Return once this process holds the key; the epoch is its create revision."""
        key = self.keys.controller
        kv = self.etcd.kv
        while True:
            response = await kv.txn(
                compare=[KVService.txn_compare_create_revision(key, 0)],
                success=[KVService.txn_op_put(key, self.record.to_json(),
                                              lease=self.lease.lease_id)],
                failure=[KVService.txn_op_get(key)],
            )
            if response.succeeded:
                self.epoch = int(response.header.revision)
                return self.epoch
            await self._until_deleted(key, int(response.header.revision) + 1)

    async def _until_deleted(self, key: str, start_revision: int) -> None:
        async for response in self.etcd.watch.watch(key, start_revision=start_revision):
            if any(e.type == _EVENT_DELETE for e in response.events):
                return

    def fence(self) -> object:
        """The compare that every write of this controller carries."""
        return KVService.txn_compare_create_revision(self.keys.controller, self.epoch)

    async def resign(self) -> None:
        if self.epoch > 0:
            with contextlib.suppress(Exception):
                await self.etcd.kv.txn(compare=[self.fence()],
                                       success=[KVService.txn_op_delete(self.keys.controller)])
        self.epoch = -1

