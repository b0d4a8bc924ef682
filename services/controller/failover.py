"""The active controller's partition-state duties (docs/architecture.md §3), applied to etcd:

* follow broker membership (the etcd watch, no polling): a broker whose lease
  expired leaves every ISR and loses its leaderships to the next in-sync replica;
  a returning broker leads again partitions left leaderless with it in the ISR;
* the same, per partition, for the replicas a broker lists as offline in its
  registration (it cannot write them: a full or failing disk; Kafka's log directory
  failure): they leave the ISR, lose their leadership to an in-sync replica and may
  not rejoin until the broker lists them no more;
* apply the ISR changes partition leaders ask for (AlterPartition);
* controlled shutdown: move a stopping broker's leaderships away before it exits;
* restore preferred leaders every ``preferred_leader_interval_s``;
* start, complete and cancel partition reassignments (KIP-455): a reassignment
  completes on the first metadata change after its new replicas are all in sync.

Decisions are the pure functions of :mod:`services.controller.leadership`; every
write is a compare-and-swap on the partition record's etcd revision, fenced by the
controller's election, and all decisions (admin requests included) are serialized
by one lock and made on a cache that has caught up with the previous write.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable

from services.controller import reassignment
from services.controller.admin import min_insync_replicas
from services.controller.leadership import (
    IsrChange,
    apply_isr_change,
    elect_leader,
    move_leadership_away,
    preferred_leader,
)
from services.controller.writer import MetadataWriter
from strand.cluster.cache import MetadataCache
from strand.cluster.model import NO_LEADER, BrokerRegistration, PartitionRecord
from strand.errors import (
    InvalidRequestError,
    InvalidUpdateVersionError,
    StaleBrokerEpochError,
    StrandError,
    UnknownTopicOrPartitionError,
)
from strand.log.config import TOPIC_CONFIG

log = logging.getLogger(__name__)

READ_YOUR_WRITES_TIMEOUT_S = 10.0
# A broker in controlled shutdown is forgotten when its registration disappears or
# is replaced (it stopped, or stopped and started again), or after this long.
SHUTDOWN_MEMORY_S = 120.0
# How long a controlled-shutdown request waits to see the broker's own "shutting down"
# mark in etcd: the broker writes it just before asking, and the watch may lag.
SHUTDOWN_MARK_WAIT_S = 3.0
# Partitions decided between two returns to the event loop (a few milliseconds' work).
YIELD_EVERY = 1000

Decision = Callable[[PartitionRecord], PartitionRecord | None]


class PartitionStateKeeper:
    def __init__(self, cache: MetadataCache, lock: asyncio.Lock,
                 preferred_leader_interval_s: float = 30.0) -> None:
        self.cache = cache
        self.lock = lock  # shared with topic admin: one metadata decision at a time
        self.preferred_leader_interval_s = preferred_leader_interval_s
        # broker -> (monotonic time it asked, its registration's incarnation then)
        self._shutting_down: dict[int, tuple[float, int]] = {}
        self._incarnations: dict[int, int] | None = None  # last seen registrations

    # -- the active controller's loop ---------------------------------------------------------

    async def run(self, writer: MetadataWriter) -> None:
        """React to membership changes until cancelled (when this controller steps down)."""
        next_preferred = time.monotonic() + self.preferred_leader_interval_s
        while True:
            revision = self.cache.revision
            try:
                await self.react_to_brokers(writer)
                if time.monotonic() >= next_preferred:
                    next_preferred = time.monotonic() + self.preferred_leader_interval_s
                    await self.restore_preferred_leaders(writer)
            except asyncio.CancelledError:
                raise
            except StrandError as exc:  # NOT_CONTROLLER: the caller notices the lost lease
                log.warning("partition state update failed", extra={"error": str(exc)})
                await asyncio.sleep(0.5)
            except Exception:
                log.exception("partition state update failed")
                await asyncio.sleep(0.5)
            if self.cache.revision == revision:
                timeout = max(0.05, next_preferred - time.monotonic())
                await self.cache.wait_changed(timeout)

    def _live(self) -> set[int]:
        live = set(self.cache.brokers)
        now = time.monotonic()
        incarnations = self.cache.broker_incarnations
        for broker, (since, incarnation) in list(self._shutting_down.items()):
            if (broker not in live or incarnations.get(broker) != incarnation
                    or now - since > SHUTDOWN_MEMORY_S):
                del self._shutting_down[broker]
        return live

    def _unclean(self, topic: str) -> bool:
        record = self.cache.topics.get(topic)
        raw = record.config.get("unclean.leader.election.enable") if record else None
        key = TOPIC_CONFIG["unclean.leader.election.enable"]
        return bool(key.default if raw is None else key.parse(raw))

    def _restarted(self) -> set[int]:
        """Brokers registered again since the last look (a restart within the lease TTL
        never shows as an absence). They are treated as having died once: they lose
        their leaderships and ISR places and come back as followers that catch up,
        under a new leader epoch, as after any crash."""
        current = dict(self.cache.broker_incarnations)
        previous, self._incarnations = self._incarnations, current
        if previous is None:  # just became active: nothing to compare with
            return set()
        brokers = self.cache.brokers
        return {b for b, rev in current.items() if b in previous and previous[b] != rev
                and not brokers[b].shutting_down}  # a re-put marking a clean stop

    def _stopping(self) -> set[int]:
        """Brokers in controlled shutdown: asked us, or marked their registration."""
        marked = {b for b, reg in self.cache.brokers.items() if reg.shutting_down}
        return set(self._shutting_down) | marked

    def _ineligible(self, record: PartitionRecord, stopping: set[int]) -> set[int]:
        """Brokers that may not lead ``record``'s partition or be in its ISR: the
        stopping ones, and those whose replica of it is offline."""
        brokers = self.cache.brokers
        offline = {b for b in record.replicas
                   if (reg := brokers.get(b)) is not None
                   and reg.is_offline(record.topic, record.partition)}
        return stopping | offline if offline else stopping

    async def react_to_brokers(self, writer: MetadataWriter) -> int:
        """Elect leaders and shrink ISRs after membership changes; returns changes made."""
        async with self.lock:
            live = self._live()
            stopping = self._stopping()
            restarted = self._restarted()
            changes = 0
            if restarted:
                log.warning("brokers restarted; moving their partitions",
                            extra={"brokers": sorted(restarted)})
                up = live - restarted
                changes += await self._apply_all(writer, lambda r: elect_leader(
                    r, up, unclean=self._unclean(r.topic),
                    shutting_down=self._ineligible(r, stopping)))
            changes += await self._apply_all(writer, lambda r: elect_leader(
                r, live, unclean=self._unclean(r.topic),
                shutting_down=self._ineligible(r, stopping)))
            return changes + await self._apply_all(
                writer, lambda r: reassignment.complete(r, live))

    async def reassign(self, writer: MetadataWriter, topic: str, partition: int,
                       target: list[int] | None) -> PartitionRecord:
        """Start a reassignment to ``target`` (None: cancel the ongoing one)."""
        async with self.lock:
            tp = (topic, partition)
            current = self.cache.partitions.get(tp)
            record = self.cache.topics.get(topic)
            if current is None or record is None or partition >= record.partitions:
                raise UnknownTopicOrPartitionError(f"no partition {topic}-{partition}")
            live = self._live()
            updated = (reassignment.cancel(current, live) if target is None
                       else reassignment.start(current, target, live,
                                               min_insync_replicas(record.config)))
            if updated is current:
                return current
            revision = await writer.update_partition(updated, self.cache.partition_revisions[tp])
            if revision is None:
                raise InvalidUpdateVersionError(f"{topic}-{partition} changed meanwhile; retry")
            await self.cache.wait_for_revision(revision, READ_YOUR_WRITES_TIMEOUT_S)
            log.info("reassignment " + ("cancelled" if target is None else "started"), extra={
                "topic": topic, "partition": partition, "replicas": list(updated.replicas),
                "adding": list(updated.adding), "removing": list(updated.removing)})
            return updated

    async def restore_preferred_leaders(self, writer: MetadataWriter) -> int:
        async with self.lock:
            live = self._live()
            stopping = self._stopping()
            return await self._apply_all(writer, lambda r: preferred_leader(
                r, live, self._ineligible(r, stopping)))

    async def check_shutdown_request(self, broker: int, broker_epoch: int) -> None:
        """Refuse a controlled shutdown that the broker itself did not ask for: the
        epoch must be its current registration's (KIP-380) and the registration, which
        only the broker writes (under its lease), must say it is shutting down. So a
        stray or forged request cannot take a healthy node out of service."""
        registration = self.check_broker_epoch(broker, broker_epoch, "its controlled shutdown")
        deadline = time.monotonic() + SHUTDOWN_MARK_WAIT_S
        while not registration.shutting_down:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise InvalidRequestError(
                    f"broker {broker} has not marked its registration as shutting down: a "
                    "broker asks for its controlled shutdown only as it stops")
            await self.cache.wait_changed(remaining)
            current = self.cache.brokers.get(broker)
            if current is None or current.epoch != broker_epoch:
                raise StaleBrokerEpochError(f"broker {broker} registered again meanwhile")
            registration = current

    def check_broker_epoch(self, broker: int, broker_epoch: int,
                           what: str) -> BrokerRegistration:
        """``broker``'s registration, if ``broker_epoch`` is its current one (KIP-380):
        only the registered broker itself may ask for ``what``."""
        registration = self.cache.brokers.get(broker)
        if registration is None:
            raise StaleBrokerEpochError(f"broker {broker} is not registered")
        if broker_epoch != registration.epoch:
            raise StaleBrokerEpochError(
                f"broker {broker}'s epoch is {registration.epoch}, not {broker_epoch}: only "
                f"the registered broker itself may ask for {what}")
        return registration

    async def controlled_shutdown(self, writer: MetadataWriter, broker: int) -> int:
        """Move ``broker``'s leaderships away and take it out of every ISR; returns how
        many partitions it still leads (nobody else in sync to take over). The request
        is checked first (:meth:`check_shutdown_request`)."""
        async with self.lock:
            self._shutting_down.setdefault(
                broker, (time.monotonic(), self.cache.broker_incarnations.get(broker, -1)))
            live = self._live()
            stopping = self._stopping()
            await self._apply_all(writer, lambda r: move_leadership_away(
                r, broker, live, self._ineligible(r, stopping))
                if broker in r.isr or r.leader == broker else None)
            return sum(1 for r in self._served() if r.leader == broker)

    async def alter_isr(self, writer: MetadataWriter, topic: str, partition: int,
                        change: IsrChange) -> PartitionRecord:
        """Apply a leader's ISR change (CAS); typed errors when it is refused."""
        async with self.lock:
            tp = (topic, partition)
            current = self.cache.partitions.get(tp)
            if current is None or topic not in self.cache.topics:
                raise UnknownTopicOrPartitionError(f"no partition {topic}-{partition}")
            live = self._live()
            updated = apply_isr_change(current, change, live,
                                       self._ineligible(current, self._stopping()))
            if updated is current:
                return current
            revision = await writer.update_partition(updated, self.cache.partition_revisions[tp])
            if revision is None:
                raise InvalidUpdateVersionError(
                    f"{topic}-{partition} changed meanwhile; retry with the new partition epoch")
            await self.cache.wait_for_revision(revision, READ_YOUR_WRITES_TIMEOUT_S)
            log.info("ISR changed", extra={"topic": topic, "partition": partition,
                                           "isr": list(updated.isr), "leader": updated.leader,
                                           "partition_epoch": updated.partition_epoch})
            return updated

    # -- helpers ------------------------------------------------------------------------------

    def _served(self) -> Iterable[PartitionRecord]:
        topics = self.cache.topics
        return [r for (t, p), r in self.cache.partitions.items()
                if t in topics and p < topics[t].partitions]

    async def _apply_all(self, writer: MetadataWriter, decide: Decision) -> int:
        """Write every partition ``decide`` changes (CAS); a lost CAS is left to the next
        round, which sees the newer record. Waits until the cache has the writes."""
        last_revision = 0
        changes = 0
        for count, record in enumerate(self._served(), 1):
            if count % YIELD_EVERY == 0:
                await asyncio.sleep(0)  # a large cluster: let keep-alives and requests in
            updated = decide(record)
            if updated is None:
                continue
            tp = (record.topic, record.partition)
            revision = await writer.update_partition(updated,
                                                     self.cache.partition_revisions[tp])
            if revision is None:
                continue
            changes += 1
            last_revision = max(last_revision, revision)
            level = logging.WARNING if updated.leader == NO_LEADER else logging.INFO
            log.log(level, "partition state changed", extra={
                "topic": record.topic, "partition": record.partition,
                "leader": updated.leader, "leader_epoch": updated.leader_epoch,
                "isr": list(updated.isr), "previous_leader": record.leader,
                "previous_isr": list(record.isr)})
        if last_revision:
            await self.cache.wait_for_revision(last_revision, READ_YOUR_WRITES_TIMEOUT_S)
        return changes
