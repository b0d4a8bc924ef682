"""The coordinator of one shard: the consumer groups whose id hashes to it, their
committed offsets, and partition ``shard`` of ``__consumer_offsets`` that holds them.

Requests run on the event loop; the per-group rules are those of
:mod:`services.groups.membership` and :mod:`services.groups.offset_store`. This
module adds time and durability:

* JoinGroup and SyncGroup calls that must wait (for the rebalance to complete, for
  the leader's assignment) wait on futures; one timer task completes rebalances
  and expires silent members at their deadlines (no polling loop).
* Every change that must survive a coordinator's death is written to the shard's
  partition with acks=all before it is answered: committed offsets, and the
  group's generation, members and assignment once the leader's sync completes.
* ``load()`` rebuilds the shard from its partition when this instance takes the
  shard over: offsets, and groups with their members and assignments, so that
  members heartbeating to the new coordinator carry on without a rebalance
  (those that do not come back expire after their session timeout).
* Offsets belong to the topic id they were committed for (:mod:`services.groups.topics`):
  a commit naming a deleted topic's id is refused, fetches skip offsets of deleted
  topics, and every time the topics change (and after a load) those offsets are
  removed with tombstones, so a topic re-created under the same name starts clean.
* Transactional offsets (TxnOffsetCommit) are stored pending per (group, producer)
  once the transaction coordinator confirms that the group's partition of
  ``__consumer_offsets`` is in the producer's open transaction (KIP-890's question,
  through a :class:`~strand.coordination.txn_verifier.TxnVerifier`), and become
  committed offsets, or vanish, when it calls CompleteTxnOffsets at the end of the
  transaction (:mod:`services.groups.txn_offsets`). The calls of one producer run
  one at a time, so a completion never misses a TxnOffsetCommit being written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

from services.groups.membership import Group, GroupState, JoinOutcome, Member, Protocol
from services.groups.offset_store import DEFAULT_RETENTION_MS, OffsetStore
from services.groups.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from services.groups.topics import TopicDirectory, TopicIdentity, belongs
from strand.coordination.shard_log import Record, ShardLog
from strand.coordination.shards import GROUP_TOPIC
from strand.coordination.txn_verifier import TxnVerifier
from strand.errors import (
    CoordinatorNotAvailableError,
    ErrorCode,
    GroupNotEmptyError,
    InvalidRequestError,
    StrandError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from strand.service.aio import wait_event

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
_T = TypeVar("_T")
DEFAULT_RETENTION_CHECK_INTERVAL_MS = 600_000  # Kafka's offsets.retention.check.interval.ms
JOIN_ANSWER_MARGIN_MS = 5000
ORPHAN_RETRY_MS = 1000  # removing a deleted topic's offsets failed: try again after


def monotonic_ms() -> float:
    return time.monotonic() * 1000


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class ShardCoordinator:
    def __init__(self, shard: int, log_: ShardLog, topics: TopicDirectory, *,
                 initial_rebalance_delay_ms: int = 3000,
                 retention_ms: int = DEFAULT_RETENTION_MS,
                 retention_check_interval_ms: int = DEFAULT_RETENTION_CHECK_INTERVAL_MS,
                 clock: Callable[[], float] = monotonic_ms,
                 wall_clock: Callable[[], int] = wall_ms,
                 verifier: TxnVerifier | None = None) -> None:
        self.shard = shard
        self.log = log_
        self.topics = topics
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self.retention_ms = retention_ms
        self.retention_check_interval_ms = retention_check_interval_ms
        self.clock = clock
        self.wall_clock = wall_clock
        self.groups: dict[str, Group] = {}
        self.store = OffsetStore()
        self._joins: dict[str, dict[str, asyncio.Future[JoinOutcome]]] = {}
        self._syncs: dict[str, dict[str, asyncio.Future[tuple[ErrorCode, bytes]]]] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # When to look for offsets of deleted topics next (None: when topics change).
        self._orphans_due: float | None = 0.0
        self._busy: dict[bytes, asyncio.Future[None]] = {}  # record keys being written
        self.verifier = verifier  # None: TxnOffsetCommit is refused (nobody to ask)

    # -- lifecycle ----------------------------------------------------------------------------

    async def load(self) -> None:
        now = self.clock()
        for key_bytes, value_bytes in await self.log.read_all():
            try:
                key = decode_key(key_bytes)
                value = decode_value(key, value_bytes)
            except StrandError:
                log.exception("skipping an unreadable __consumer_offsets record",
                              extra={"shard": self.shard})
                continue
            self.store.apply(key, value)
        for group_id in self.store.groups():
            metadata = self.store.group_metadata(group_id)
            group = self._group(group_id)
            if metadata is not None:
                _restore(group, metadata, now)
            if not group.members:
                self.store.mark_empty(group_id, self.wall_clock())
        log.info("shard loaded", extra={"shard": self.shard, "groups": len(self.groups)})

    def start(self) -> None:
        self._task = asyncio.create_task(self._timers(), name=f"group-shard-{self.shard}")

    async def stop(self) -> None:
        """Stop serving (the shard moves away): waiting calls get NOT_COORDINATOR."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for waiters in self._joins.values():
            for member_id, future in waiters.items():
                if not future.done():
                    future.set_result(JoinOutcome(ErrorCode.NOT_COORDINATOR, member_id))
        for sync_waiters in self._syncs.values():
            for sync_waiter in sync_waiters.values():
                if not sync_waiter.done():
                    sync_waiter.set_result((ErrorCode.NOT_COORDINATOR, b""))
        for group in self.groups.values():
            group.state = GroupState.DEAD

    def topics_changed(self) -> None:
        """The cluster's topics changed: remove the offsets of deleted ones."""
        self._orphans_due = self.clock()
        self._wake.set()

    def _live(self, tp: TopicPartition, value: OffsetValue) -> bool:
        return belongs(tp[1], value, self.topics.current(tp[0]))

    def _group(self, group_id: str) -> Group:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(
                group_id, initial_rebalance_delay_ms=self.initial_rebalance_delay_ms)
        return group

    # -- the group protocol -------------------------------------------------------------------

    async def join(self, group_id: str, member_id: str, group_instance_id: str | None,
                   client_id: str, protocol_type: str, protocols: Sequence[Protocol],
                   session_timeout_ms: int, rebalance_timeout_ms: int,
                   client_host: str = "") -> JoinOutcome:
        group = self._group(group_id)
        outcome = group.join(member_id, group_instance_id, client_id, protocol_type, protocols,
                             session_timeout_ms, rebalance_timeout_ms, self.clock(),
                             client_host)
        if outcome is not None:
            return outcome
        self.store.mark_active(group_id)
        joined_id = (group.static_members[group_instance_id] if group_instance_id is not None
                     else member_id)
        joined = group.members[joined_id]
        future: asyncio.Future[JoinOutcome] = asyncio.get_running_loop().create_future()
        previous = self._joins.setdefault(group_id, {}).pop(joined.member_id, None)
        if previous is not None and not previous.done():
            previous.set_result(JoinOutcome(ErrorCode.UNKNOWN_MEMBER_ID, joined.member_id))
        self._joins[group_id][joined.member_id] = future
        self._fail_syncs(group_id, ErrorCode.REBALANCE_IN_PROGRESS)
        self._wake.set()
        return await future

    async def sync(self, group_id: str, member_id: str, generation: int,
                   group_instance_id: str | None, assignments: dict[str, bytes] | None
                   ) -> tuple[ErrorCode, bytes]:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, b""
        leader_sync = assignments is not None and member_id == group.leader_id
        error, assignment = group.sync(member_id, generation, group_instance_id,
                                       assignments if leader_sync else None, self.clock())
        if error != ErrorCode.NONE:
            return error, b""
        if assignment is None:
            future: asyncio.Future[tuple[ErrorCode, bytes]] = (
                asyncio.get_running_loop().create_future())
            self._syncs.setdefault(group_id, {})[member_id] = future
            return await future
        if leader_sync:
            try:
                await self._persist(group)
            except Exception as exc:
                log.warning("could not store the group's assignment; rebalancing again",
                            extra={"group": group_id, "error": str(exc)})
                group.state = GroupState.COMPLETING_REBALANCE
                group.prepare_rebalance(self.clock(), new_member=False)
                self._fail_syncs(group_id, ErrorCode.REBALANCE_IN_PROGRESS)
                self._wake.set()
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, b""
            for waiting_id, waiter in self._syncs.pop(group_id, {}).items():
                member = group.members.get(waiting_id)
                if not waiter.done():
                    waiter.set_result((ErrorCode.NONE, member.assignment) if member else
                                      (ErrorCode.UNKNOWN_MEMBER_ID, b""))
            group.assignments_delivered(self.clock())
            self._wake.set()  # the expiry deadlines moved
        return ErrorCode.NONE, assignment

    def heartbeat(self, group_id: str, member_id: str, generation: int,
                  group_instance_id: str | None) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return group.heartbeat(member_id, generation, group_instance_id, self.clock())

    def leave(self, group_id: str, member_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        error = group.leave(member_id, self.clock())
        future = self._joins.get(group_id, {}).pop(member_id, None)
        if future is not None and not future.done():
            future.set_result(JoinOutcome(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
        self._fail_syncs(group_id, ErrorCode.REBALANCE_IN_PROGRESS)
        self._wake.set()
        return error

    # -- offsets ------------------------------------------------------------------------------

    async def commit(self, group_id: str, member_id: str, generation: int,
                     group_instance_id: str | None,
                     offsets: dict[TopicPartition, OffsetValue]) -> ErrorCode:
        """Commit ``offsets`` (a value's ``topic_id``: the topic the client consumed,
        "" for the current one); typed errors for a request that is invalid."""
        topics = await self._resolve(group_id, offsets)
        keys = [encode_key(OffsetKey(group_id, t, p)) for t, p in offsets]

        async def write() -> tuple[ErrorCode, Group, int, dict[TopicPartition, OffsetValue]]:
            group = self._group(group_id)
            now = self.wall_clock()
            error = group.check_commit(member_id, generation, group_instance_id)
            if error != ErrorCode.NONE:
                return error, group, now, {}
            if member_id in group.members:
                group.members[member_id].last_heard_ms = self.clock()
            stamped = {tp: OffsetValue(v.offset, v.metadata, v.leader_epoch, now, v.expire_ms,
                                       topics[tp[0]].topic_id)
                       for tp, v in offsets.items()}
            records = self.store.commit(group_id, stamped)  # raises typed errors
            await self._append_applied(records)
            return ErrorCode.NONE, group, now, stamped

        error, group, now, stamped = await self._exclusively(keys, write)
        if error != ErrorCode.NONE:
            return error
        if not all(self._live(tp, v) for tp, v in stamped.items()):
            self.topics_changed()  # deleted while the commit was written: remove it again
        if not group.members:
            self.store.mark_empty(group_id, now)
        return ErrorCode.NONE

    async def _exclusively(self, keys: Iterable[bytes],
                           body: Callable[[], Awaitable[_T]]) -> _T:
        """``body`` holding ``keys`` (:meth:`_writing`), in a task of its own: a caller
        that goes away (a client's deadline cancels its call) leaves it to finish, so
        the keys stay held until its write is applied. Released at the cancellation
        instead, a completion could run between a TxnOffsetCommit's write and its
        apply, find nothing pending, and leave those offsets pending for ever (a
        read_committed pipeline then stalls on UNSTABLE_OFFSET_COMMIT)."""
        wanted = list(keys)

        async def held() -> _T:
            async with self._writing(wanted):
                return await body()

        task = asyncio.ensure_future(held())
        task.add_done_callback(_retrieve)
        return await asyncio.shield(task)

    @contextlib.asynccontextmanager
    async def _writing(self, keys: Iterable[bytes]) -> AsyncIterator[None]:
        """One write at a time per record key, so that a commit and the removal of a
        deleted topic's offset land in the log in the order they change the memory."""
        wanted = set(keys)
        while busy := {self._busy[k] for k in wanted if k in self._busy}:
            await asyncio.wait(busy)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._busy.update(dict.fromkeys(wanted, done))
        try:
            yield
        finally:
            for key in wanted:
                del self._busy[key]
            done.set_result(None)

    async def _resolve(self, group_id: str, offsets: dict[TopicPartition, OffsetValue]
                       ) -> dict[str, TopicIdentity]:
        """The current identity of each topic committed to; raises if a topic does not
        exist, is not the one the client consumed (an older id), or lacks a partition."""
        wanted = {topic: value.topic_id for (topic, _), value in sorted(offsets.items())}
        found: dict[str, TopicIdentity] = {}
        for topic, topic_id in wanted.items():
            identity = await self.topics.resolve(topic, topic_id)
            if identity is not None and topic_id not in ("", identity.topic_id):
                raise UnknownTopicIdError(
                    f"group {group_id!r} cannot commit offsets of topic {topic!r} id "
                    f"{topic_id}: the topic was deleted and re-created (its id is now "
                    f"{identity.topic_id}); refresh the metadata and consume it anew")
            if identity is None:
                error = UnknownTopicIdError if topic_id else UnknownTopicOrPartitionError
                raise error(f"group {group_id!r} cannot commit offsets of topic {topic!r}: "
                            "it does not exist (deleted?)")
            found[topic] = identity
        for topic, partition in sorted(offsets):
            if partition >= found[topic].partitions:
                raise UnknownTopicOrPartitionError(
                    f"group {group_id!r} cannot commit an offset of {topic}-{partition}: "
                    f"{topic!r} has {found[topic].partitions} partition(s)")
        return found

    def fetch(self, group_id: str, partitions: list[TopicPartition] | None
              ) -> dict[TopicPartition, OffsetValue]:
        return self.store.fetch(group_id, partitions, self._live)

    def unstable(self, group_id: str) -> set[TopicPartition]:
        """The partitions of ``group_id`` with transactional offsets pending: a fetch
        asking for stable offsets gets UNSTABLE_OFFSET_COMMIT for them (KIP-447)."""
        return self.store.pending.partitions(group_id)

    # -- transactional offsets ----------------------------------------------------------------

    async def txn_commit(self, transactional_id: str, producer_id: int, producer_epoch: int,
                         group_id: str, member_id: str, generation: int,
                         group_instance_id: str | None,
                         offsets: dict[TopicPartition, OffsetValue]) -> ErrorCode:
        """TxnOffsetCommit: store ``offsets`` pending for the producer's transaction.
        The group's check applies only when the request names a member or a generation
        (KIP-447: a producer without the consumer's group metadata is not checked)."""
        if not transactional_id:
            raise InvalidRequestError(
                f"TxnOffsetCommit for group {group_id!r} has no transactional id")
        if producer_id < 0 or producer_epoch < 0:
            raise InvalidRequestError(
                f"TxnOffsetCommit of {transactional_id!r} for group {group_id!r}: producer "
                f"id {producer_id} / epoch {producer_epoch} is not a producer's; call "
                "InitProducerId first")
        verifier = self.verifier
        if verifier is None:
            raise CoordinatorNotAvailableError(
                f"group coordinator of shard {self.shard} cannot reach the transaction "
                f"coordinators to verify {transactional_id!r}; retry")
        topics = await self._resolve(group_id, offsets)

        async def write() -> ErrorCode:
            error = self._group(group_id).check_txn_commit(member_id, generation,
                                                           group_instance_id)
            if error != ErrorCode.NONE:
                return error
            # Asked under the producer's lock: a completion (which runs once the
            # transaction is decided) cannot slip between this answer and the write.
            await verifier.verify(transactional_id, producer_id, producer_epoch,
                                       GROUP_TOPIC, self.shard)
            now = self.wall_clock()
            stamped = {tp: OffsetValue(v.offset, v.metadata, v.leader_epoch, now, v.expire_ms,
                                       topics[tp[0]].topic_id)
                       for tp, v in offsets.items()}
            records = self.store.stage_txn(group_id, producer_id, producer_epoch, stamped)
            await self._append_applied(records)
            return ErrorCode.NONE

        return await self._exclusively([_producer_key(producer_id)], write)

    async def complete_txn(self, producer_id: int, producer_epoch: int,
                           coordinator_epoch: int, commit: bool) -> int:
        """CompleteTxnOffsets: the producer's transaction ended; its pending offsets in
        this shard become committed (``commit``) or vanish, in one write. Returns how
        many pending offsets it ended (0: nothing pending, nothing written)."""
        async def write() -> list[Record]:
            records = self.store.pending.complete(producer_id, producer_epoch,
                                                  coordinator_epoch, commit)
            if records:
                async with self._writing(r.key for r in records):
                    await self._append_applied(records)
            return records

        records = await self._exclusively([_producer_key(producer_id)], write)
        if not records:
            return 0
        ended = sum(1 for r in records if r.value is None)
        log.info("transactional offsets completed", extra={
            "shard": self.shard, "producer_id": producer_id, "committed": commit,
            "offsets": ended})
        for record in records:
            key = decode_key(record.key)
            value = decode_value(key, record.value)
            if (isinstance(key, OffsetKey) and isinstance(value, OffsetValue)
                    and not self._live((key.topic, key.partition), value)):
                self.topics_changed()  # its topic was deleted meanwhile: remove it again
                break
        return ended

    async def delete(self, group_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is not None and group.members:
            return ErrorCode.GROUP_NOT_EMPTY
        producers = self.store.pending.producers(group_id)
        if producers:
            raise GroupNotEmptyError(
                f"group {group_id!r} has transactional offsets pending (producer ids "
                f"{', '.join(map(str, producers))}): it cannot be deleted until their "
                "transactions commit or abort; retry then")
        if group is None and group_id not in self.store.groups():
            return ErrorCode.GROUP_ID_NOT_FOUND
        records = self.store.delete_group(group_id)
        if records:
            await self._append_applied(records)
        self.groups.pop(group_id, None)
        return ErrorCode.NONE

    # -- timers -------------------------------------------------------------------------------

    async def _timers(self) -> None:
        next_expiry_check = self.clock() + self.retention_check_interval_ms
        while True:
            self._wake.clear()
            now = self.clock()
            deadlines = []
            for group in list(self.groups.values()):
                gone = group.expire(now)
                for member_id in gone:
                    log.info("member session expired", extra={"group": group.group_id,
                                                              "member": member_id})
                if gone:
                    self._fail_syncs(group.group_id, ErrorCode.REBALANCE_IN_PROGRESS)
                if group.rebalance_due(now):
                    self._complete(group)
                for deadline in (group.next_deadline_ms(), group.next_expiry_ms()):
                    if deadline is not None:
                        deadlines.append(deadline)
            if now >= next_expiry_check:
                next_expiry_check = now + self.retention_check_interval_ms
                await self._expire_offsets()
            if self._orphans_due is not None and now >= self._orphans_due:
                self._orphans_due = None
                await self._remove_orphans()
            deadlines.append(next_expiry_check)
            if self._orphans_due is not None:
                deadlines.append(self._orphans_due)
            timeout = max(0.0, (min(deadlines) - self.clock()) / 1000)
            await wait_event(self._wake, timeout + 0.001)

    def _complete(self, group: Group) -> None:
        answers, removed = group.complete_rebalance(self.clock())
        waiters = self._joins.pop(group.group_id, {})
        for member_id, future in waiters.items():
            outcome = answers.get(member_id, JoinOutcome(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
            if not future.done():
                future.set_result(outcome)
        if group.state == GroupState.EMPTY:
            self.store.mark_empty(group.group_id, self.wall_clock())
        log.info("rebalance completed", extra={
            "group": group.group_id, "generation": group.generation,
            "members": len(group.members), "removed": removed, "protocol": group.protocol})

    def _fail_syncs(self, group_id: str, error: ErrorCode) -> None:
        for future in self._syncs.pop(group_id, {}).values():
            if not future.done():
                future.set_result((error, b""))

    async def _expire_offsets(self) -> None:
        def empty(group_id: str) -> bool:
            group = self.groups.get(group_id)
            return group is None or not group.members

        records = self.store.expired(self.wall_clock(), self.retention_ms, empty)
        if not records:
            return
        try:
            await self._append_applied(records)
        except Exception as exc:
            log.warning("could not expire offsets", extra={"error": str(exc)})
            return
        dead = [key.group for key in map(decode_key, (r.key for r in records))
                if isinstance(key, GroupKey)]
        for group_id in dead:  # empty and without offsets: the group is gone (Dead)
            group = self.groups.get(group_id)
            if group is not None and not group.members:
                del self.groups[group_id]
        log.info("expired committed offsets", extra={"shard": self.shard,
                                                     "records": len(records),
                                                     "groups_removed": len(dead)})

    async def _remove_orphans(self) -> None:
        """Tombstone the offsets of deleted topics (a failed write is tried again)."""
        candidates = self.store.orphaned(self._live)
        if not candidates:
            return
        keys = {r.key for r in candidates}
        async with self._writing(keys):
            # Still dead? A commit may have landed while the keys were busy.
            records = [r for r in self.store.orphaned(self._live) if r.key in keys]
            if not records:
                return
            try:
                await self._append_applied(records)
            except Exception as exc:
                log.warning("could not remove the offsets of deleted topics; retrying",
                            extra={"shard": self.shard, "error": str(exc)})
                self._orphans_due = self.clock() + ORPHAN_RETRY_MS
                return
        topics = sorted({key.topic for key in map(decode_key, (r.key for r in records))
                         if isinstance(key, OffsetKey)})
        log.info("removed the offsets of deleted topics", extra={
            "shard": self.shard, "records": len(records), "topics": topics})

    async def _persist(self, group: Group) -> None:
        value = GroupValue(
            group.protocol_type, group.generation, group.protocol, group.leader_id,
            self.wall_clock(), tuple(MemberValue(
                m.member_id, m.group_instance_id, m.client_id, m.session_timeout_ms,
                m.rebalance_timeout_ms, m.metadata(group.protocol), m.assignment,
                m.client_host)
                for m in group.members.values()))
        await self._append_applied([Record(encode_key(GroupKey(group.group_id)),
                                           encode_value(value))])

    async def _append_applied(self, records: list[Record]) -> None:
        """Write ``records`` to the shard, then apply them to memory. Shielded: a
        caller that goes away (a client's deadline cancels its call) must not leave a
        written record unapplied, or memory would no longer be what the log holds."""
        async def write_then_apply() -> None:
            await self.log.append(records)
            self.store.apply_written(records)

        await asyncio.shield(write_then_apply())


def _retrieve(task: asyncio.Future[Any]) -> None:
    """A section left to finish by a caller that went away: its failure is that
    caller's, already gone; read here so asyncio does not report it as lost."""
    if not task.cancelled():
        task.exception()


def _producer_key(producer_id: int) -> bytes:
    """What :meth:`ShardCoordinator._writing` holds for the transactional calls of a
    producer (not a record key: those are JSON)."""
    return b"producer:%d" % producer_id


def _restore(group: Group, value: GroupValue, now_ms: float) -> None:
    """A group as stored by the previous owner of the shard."""
    group.generation = value.generation
    group.protocol_type = value.protocol_type
    group.protocol = value.protocol
    group.leader_id = value.leader
    for m in value.members:
        member = Member(m.member_id, m.group_instance_id, m.client_id,
                        (Protocol(value.protocol, m.subscription),), m.session_timeout_ms,
                        m.rebalance_timeout_ms, now_ms, joined_generation=value.generation,
                        assignment=m.assignment, client_host=m.client_host)
        group.members[m.member_id] = member
        if m.group_instance_id is not None:
            group.static_members[m.group_instance_id] = m.member_id
    group.state = GroupState.STABLE if group.members else GroupState.EMPTY
