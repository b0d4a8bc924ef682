"""This node's membership: ``brokers/<node-id>`` in etcd, bound to a lease
(docs/architecture.md §5).

The key lives exactly as long as the lease, so a node that dies (or is cut off from
etcd longer than the lease TTL) disappears from the cluster by itself. If the lease
is lost while the process lives on, the node registers again with a new lease. On a
clean stop the lease is revoked, which deletes the key at once.

A node restarted quickly after a crash finds its previous registration still there
(its lease has not expired yet): the put replaces it and binds it to the new lease,
so the old lease's expiry no longer removes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging

from strand.cluster.etcd import EtcdServices, LeaseKeeper
from strand.cluster.keys import KeySpace
from strand.cluster.model import BrokerRegistration

log = logging.getLogger(__name__)

RETRY_MIN_S = 0.2
RETRY_MAX_S = 5.0


class BrokerRegistrar:
    def __init__(self, etcd: EtcdServices, keys: KeySpace, registration: BrokerRegistration,
                 lease_ttl: int) -> None:
        self.etcd = etcd
        self.key = keys.broker(registration.node_id)
        self.registration = registration
        self.lease_ttl = lease_ttl
        self.registered = asyncio.Event()
        self._lease: LeaseKeeper | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="broker-registration")

    async def _run(self) -> None:
        retry = RETRY_MIN_S
        while True:
            lease = LeaseKeeper(self.etcd, self.lease_ttl)
            try:
                await lease.start()
                self._lease = lease
                # A new registration, a new broker epoch (KIP-380): the lease's id.
                self.registration = dataclasses.replace(self.registration,
                                                        epoch=lease.lease_id)
                await self.etcd.kv.put(self.key, self.registration.to_json(),
                                       lease=lease.lease_id)
            except Exception as exc:  # etcd unreachable: try again, backing off
                log.warning("broker registration failed; retrying", extra={
                    "key": self.key, "error": repr(exc), "retry_s": retry})
                await lease.stop(revoke=True)
                self._lease = None
                await asyncio.sleep(retry)
                retry = min(retry * 2, RETRY_MAX_S)
                continue
            retry = RETRY_MIN_S
            self.registered.set()
            log.info("registered", extra={"key": self.key, "lease": f"{lease.lease_id:x}",
                                          "address": self.registration.address,
                                          "rack": self.registration.rack})
            await lease.lost.wait()
            self.registered.clear()
            log.warning("registration lease lost; registering again",
                        extra={"key": self.key, "lease": f"{lease.lease_id:x}"})
            await lease.stop(revoke=False)
            self._lease = None

    async def mark_shutting_down(self) -> None:
        """Tell the cluster this node is stopping (same key, same lease): leaders stop
        waiting for it, the controller moves its leaderships."""
        lease = self._lease
        if lease is None:
            return
        self.registration = dataclasses.replace(self.registration, shutting_down=True)
        try:
            await self.etcd.kv.put(self.key, self.registration.to_json(), lease=lease.lease_id)
        except Exception as exc:
            log.warning("could not mark the registration as shutting down",
                        extra={"key": self.key, "error": repr(exc)})

    async def set_offline_replicas(self, replicas: tuple[tuple[str, int], ...]) -> None:
        """List the replicas this node cannot write (same key, same lease): the
        controller moves their leaderships and keeps them out of the ISR. Raises if
        etcd does not take it (the caller tries again); a registration made later
        carries the list anyway."""
        self.registration = dataclasses.replace(self.registration, offline_replicas=replicas)
        lease = self._lease
        if lease is not None:
            await self.etcd.kv.put(self.key, self.registration.to_json(), lease=lease.lease_id)

    async def stop(self) -> None:
        """Stop renewing and revoke the lease: the registration is deleted at once."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._lease is not None:
            await self._lease.stop(revoke=True)
            self._lease = None
        self.registered.clear()
        log.info("deregistered", extra={"key": self.key})
