"""Acceptance of consumer groups with real processes, through the SDK only:

1. N members of a group split a topic's partitions exactly (each record is read by
   exactly one member), and a member joining rebalances them (eager "range": every
   member first revokes everything it owned).
2. "cooperative-sticky": a member joining moves only the partitions it gets; the
   others keep the rest and are told to revoke only the moved ones, never "lost".
3. A zombie (a member that stopped polling and was removed from the group) cannot
   commit: the generation fence refuses it and the live member's offsets stand.
4. SIGKILL of the storage node leading the group's ``__consumer_offsets`` partition:
   the committed offsets are still there, new commits succeed, the member goes on
   consuming, and a restarted coordinator reads them all back from the log.

Not repeated here (see test_sdk_groups.py): a two-member group, resuming from
commits, a member killed with SIGKILL.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

import grpc
import pytest

from strand import Admin, Consumer, ConsumerRecord, NewTopic, Producer, TopicPartition
from strand.coordination.shards import GROUP_TOPIC, shard_for
from strand.errors import StrandError, UnknownMemberIdError
from strand.launcher import ServiceProcess
from tests.support.waiting import poll_until, wait_until

if TYPE_CHECKING:
    from tests.support.cluster import SdkCluster

Factory = Callable[..., "SdkCluster"]
Read = tuple[int, int]  # (partition, offset)

MEMBER: dict[str, Any] = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 500,
                          "auto_commit_interval_ms": 200, "max_poll_interval_ms": 20_000}
# What the coordinator answers the zombie's commit once the group has moved on
# without it: its member id is no longer a member, UNKNOWN_MEMBER_ID (ILLEGAL_GENERATION
# is for a member still in the group with an old generation, which the test rules out
# by waiting for the live member to be the only one). A client that left on its own
# (max.poll.interval.ms) commits with no member id, which a group with members refuses
# with UNKNOWN_MEMBER_ID too.
ZOMBIE_REFUSED = (UnknownMemberIdError,)


# ------------------------------------------------------------------------- helpers

def create_topic(cluster: SdkCluster, topic: str, partitions: int) -> frozenset[TopicPartition]:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 3)])
    return frozenset(TopicPartition(topic, p) for p in range(partitions))


def produce(cluster: SdkCluster, topic: str, counts: Mapping[int, int]) -> None:
    """``counts[p]`` records to partition ``p``, every one acknowledged by all replicas."""
    with Producer(cluster.bootstrap, acks="all") as producer:
        futures = [producer.send(topic, f"{p}-{i}".encode(), partition=p)
                   for p, n in counts.items() for i in range(n)]
        producer.flush(timeout=45)
        for future in futures:
            future.result(timeout=5)


def partitions_of(owned: frozenset[TopicPartition]) -> list[int]:
    return sorted(tp.partition for tp in owned)


class Member:
    """A group member polling in a thread of its own. It publishes its
    ``assignment()`` after every poll, what it read, and every listener callback."""

    def __init__(self, cluster: SdkCluster, group: str, topic: str, **settings: Any) -> None:
        self.events: list[tuple[str, frozenset[TopicPartition]]] = []
        self.owned: frozenset[TopicPartition] = frozenset()
        self.read: list[Read] = []
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._consumer = Consumer(cluster.bootstrap, group_id=group, **{**MEMBER, **settings})
        self._consumer.subscribe([topic], listener=self)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        self.events.append(("revoked", frozenset(partitions)))

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        self.events.append(("assigned", frozenset(partitions)))

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        self.events.append(("lost", frozenset(partitions)))

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                batches = self._consumer.poll(timeout_ms=200)
                with self._lock:
                    self.read.extend((r.partition, r.offset)
                                     for records in batches.values() for r in records)
                    self.owned = frozenset(self._consumer.assignment())
        except BaseException as exc:  # reported by check() in the test's thread
            self.error = exc

    def reads(self) -> list[Read]:
        with self._lock:
            return list(self.read)

    def revoked_since(self, mark: int) -> list[frozenset[TopicPartition]]:
        return [ps for kind, ps in self.events[mark:] if kind == "revoked"]

    def check(self) -> None:
        if self.error is not None:
            raise AssertionError(f"a member's poll loop failed: {self.error!r}") from self.error

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._consumer.close()
        assert not self._thread.is_alive(), "a member's poll loop did not stop"


@contextmanager
def members_stopped(members: list[Member]) -> Iterator[list[Member]]:
    try:
        yield members
    finally:
        for member in members:
            with suppress(Exception):
                member.stop()


def wait_partitioned(admin: Admin, group: str, members: Sequence[Member],
                     partitions: frozenset[TopicPartition], what: str,
                     timeout: float = 45) -> None:
    """Until every member owns some partitions, together they own each partition
    exactly once, and the coordinator's Stable assignment is that same split."""

    def settled() -> bool:
        for member in members:
            member.check()
        owned = [m.owned for m in members]
        if (not all(owned) or sum(map(len, owned)) != len(partitions)
                or frozenset().union(*owned) != partitions):
            return False
        described = admin.describe_group(group)
        return (described.state == "Stable" and len(described.members) == len(members)
                and {frozenset(m.partitions) for m in described.members} == set(owned))

    try:
        wait_until(settled, timeout, what, interval=0.1)
    except TimeoutError as exc:
        owned = [partitions_of(m.owned) for m in members]
        raise AssertionError(f"{exc}; members own {owned}; "
                             f"{admin.describe_group(group)}") from None


def wait_read(members: Sequence[Member], expected: set[Read], what: str) -> None:
    def done() -> bool:
        for member in members:
            member.check()
        return expected <= {r for m in members for r in m.reads()}

    wait_until(done, 45, what, interval=0.1)


# --------------------------------------------------------------------------- tests

def test_members_cover_every_partition_once_and_a_new_member_rebalances(
        sdk_cluster_factory: Factory) -> None:
    cluster = sdk_cluster_factory(nodes=3, coordinators=1)
    topic, group = "spread", "spreaders"
    everything = create_topic(cluster, topic, 8)
    with Admin(cluster.bootstrap) as admin, members_stopped(
            [Member(cluster, group, topic) for _ in range(4)]) as members:
        wait_partitioned(admin, group, members, everything, "4 members to split 8 partitions")
        assert admin.describe_group(group).protocol == "range"  # the first preference
        produce(cluster, topic, dict.fromkeys(range(8), 50))
        first = {(p, o) for p in range(8) for o in range(50)}
        wait_read(members, first, "the 4 members to read the 400 records")

        marks = [len(m.events) for m in members]
        before = [m.owned for m in members]
        members.append(Member(cluster, group, topic))
        wait_partitioned(admin, group, members, everything, "5 members to split 8 partitions")
        # Eager: each of the four first revoked all it owned, whatever it kept.
        for member, mark, owned in zip(members[:4], marks, before, strict=True):
            revoked = member.revoked_since(mark)
            assert revoked and revoked[0] == owned, (partitions_of(owned), revoked)

        produce(cluster, topic, dict.fromkeys(range(8), 50))
        every = {(p, o) for p in range(8) for o in range(100)}
        wait_read(members, every, "the 5 members to read the 400 records after the rebalance")
        counts = Counter(r for m in members for r in m.reads())
        assert set(counts) == every
        duplicates = sorted(r for r, n in counts.items() if n > 1)
        assert not duplicates, f"read more than once: {duplicates[:20]}"
        # Each member read exactly the partitions' records it owned: the 5th its own.
        assert {p for p, _ in members[4].reads()} == set(partitions_of(members[4].owned))


def test_cooperative_members_keep_their_unaffected_partitions(
        sdk_cluster_factory: Factory) -> None:
    cluster = sdk_cluster_factory(nodes=3, coordinators=1)
    topic, group = "sticky", "stickers"
    everything = create_topic(cluster, topic, 6)
    cooperative = {"partition_assignment_strategy": ("cooperative-sticky",)}
    with Admin(cluster.bootstrap) as admin, members_stopped(
            [Member(cluster, group, topic, **cooperative) for _ in range(2)]) as members:
        wait_partitioned(admin, group, members, everything, "2 members to split 6 partitions")
        marks = [len(m.events) for m in members]
        before = [m.owned for m in members]
        members.append(Member(cluster, group, topic, **cooperative))
        wait_partitioned(admin, group, members, everything, "3 members to split 6 partitions")
        assert admin.describe_group(group).protocol == "cooperative-sticky"
        assert [len(m.owned) for m in members] == [2, 2, 2]

        moved: set[TopicPartition] = set()
        for member, mark, owned in zip(members[:2], marks, before, strict=True):
            final = member.owned
            revoked_now = frozenset().union(*member.revoked_since(mark))
            ever_revoked = frozenset().union(*member.revoked_since(0))
            assert final <= owned, "an old member got partitions it did not own"
            assert not ever_revoked & final, (
                f"revoked partitions it still owns: {partitions_of(ever_revoked & final)}")
            assert revoked_now == owned - final, (  # only the moved ones, all of them
                partitions_of(revoked_now), partitions_of(owned), partitions_of(final))
            moved |= revoked_now
        assert members[2].owned == moved  # the newcomer got exactly what moved
        lost = [(i, ps) for i, m in enumerate(members) for kind, ps in m.events if kind == "lost"]
        assert not lost, f"on_partitions_lost called: {lost}"


def test_a_zombie_members_commit_is_refused(sdk_cluster_factory: Factory) -> None:
    cluster = sdk_cluster_factory(nodes=3, coordinators=1)
    topic, group = "fenced", "fencers"
    everything = create_topic(cluster, topic, 4)
    produce(cluster, topic, dict.fromkeys(range(4), 10))
    tp = TopicPartition(topic, 0)
    zombie_offset = 999_999
    quick = {**MEMBER, "max_poll_interval_ms": 3000}  # the rebalance timeout
    with Admin(cluster.bootstrap) as admin, \
            Consumer(cluster.bootstrap, group_id=group, enable_auto_commit=False,
                     **quick) as zombie, \
            Consumer(cluster.bootstrap, group_id=group, **quick) as live:
        zombie.subscribe([topic])
        poll_until(zombie, lambda: zombie.assignment() == everything, 30,
                   "the first member to own every partition")
        first = admin.describe_group(group)
        (zombie_id,) = (m.member_id for m in first.members)

        # The zombie polls no more (its heartbeat thread still runs); the live member
        # joins and the rebalance waits for the zombie's rejoin up to its timeout.
        live.subscribe([topic])

        def live_owns_everything() -> bool:
            if live.assignment() != everything:
                return False
            described = admin.describe_group(group)
            return described.state == "Stable" and [m.member_id for m in described.members] \
                != [zombie_id] and len(described.members) == 1

        poll_until(live, live_owns_everything, 45,
                   "the group to drop the zombie and give the live member every partition")
        assert admin.describe_group(group).generation > first.generation

        with pytest.raises(StrandError) as refused:
            zombie.commit({tp: zombie_offset})
        assert isinstance(refused.value, ZOMBIE_REFUSED), repr(refused.value)
        assert "not in group 'fencers'" in str(refused.value), str(refused.value)
        assert live.committed(tp) != zombie_offset
        assert zombie_offset not in admin.list_group_offsets(group).values()
        # The live member's commits are accepted (the refusal is the zombie's own).
        live.commit({tp: 7})
        assert live.committed(tp) == 7


def test_committed_offsets_survive_sigkill_of_the_offsets_partition_leader(
        sdk_cluster_factory: Factory) -> None:
    cluster = sdk_cluster_factory(nodes=3, coordinators=1)
    topic, group = "durable", "durables"
    tps = sorted(create_topic(cluster, topic, 4))
    counts = {p: 5 + 3 * p for p in range(4)}  # different offsets per partition
    produce(cluster, topic, counts)
    with Admin(cluster.bootstrap) as admin, \
            Consumer(cluster.bootstrap, group_id=group, enable_auto_commit=False,
                     **MEMBER) as member:
        member.subscribe([topic])
        read: list[Read] = []

        def keep(record: ConsumerRecord) -> None:
            read.append((record.partition, record.offset))

        poll_until(member, lambda: len(read) == sum(counts.values()), 45,
                   "the member to read every record", each=keep)
        member.commit()  # its positions: counts[p] in each partition p
        expected = {tp: counts[tp.partition] for tp in tps}
        assert {tp: member.committed(tp) for tp in tps} == expected

        (offsets,) = admin.describe_topics([GROUP_TOPIC])
        shard = offsets.partitions[shard_for(group, len(offsets.partitions))]
        assert len(shard.replicas) == 3 and shard.leader is not None, shard
        victim = node(cluster, shard.leader)
        victim.kill()  # SIGKILL

        def new_leader() -> bool:
            (now,) = admin.describe_topics([GROUP_TOPIC])
            leader = now.partitions[shard.partition].leader
            return leader is not None and leader != shard.leader

        wait_until(new_leader, 30, f"a new leader of {GROUP_TOPIC}-{shard.partition}", 0.2)

        def committed_served() -> bool:
            member.poll(timeout_ms=100)  # stays a live member meanwhile
            try:
                return {tp: member.committed(tp) for tp in tps} == expected
            except (StrandError, grpc.RpcError):
                return False

        wait_until(committed_served, 60, "the committed offsets after the leader's SIGKILL")

        produce(cluster, topic, dict.fromkeys(range(4), 4))
        poll_until(member, lambda: len(read) == sum(counts.values()) + 16, 60,
                   "the member to read records produced after the kill", each=keep)
        assert sorted(read) == sorted(
            (p, o) for p, n in counts.items() for o in range(n + 4))
        member.commit()
        expected = {tp: counts[tp.partition] + 4 for tp in tps}
        assert {tp: member.committed(tp) for tp in tps} == expected

        # The coordinator answered from memory so far: a new one must read the offsets
        # back from __consumer_offsets, whose first leader is dead.
        cluster.coordinators[0].stop()
        cluster.coordinators.append(cluster.group_coordinator(1).start())

        def reloaded() -> bool:
            try:
                return admin.list_group_offsets(group) == expected
            except (StrandError, grpc.RpcError):
                return False

        wait_until(reloaded, 60, "a new coordinator to load the offsets from the log", 0.2)


def node(cluster: SdkCluster, node_id: int) -> ServiceProcess:
    """The storage process started with ``--node-id node_id``."""
    (found,) = (p for p in cluster.storage if p.args[p.args.index("--node-id") + 1]
                == str(node_id))
    return found
