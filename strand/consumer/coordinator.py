"""A consumer's membership in its group (Kafka's ``ConsumerCoordinator``): join and
sync through the gateway, the leader's assignment with the configured assignors, a
heartbeat thread, and committed offsets.

Eager protocols (range, roundrobin, sticky): every rebalance first revokes all the
member's partitions, then assigns anew. The cooperative protocol
(cooperative-sticky, KIP-429) keeps what stays and revokes only what moves; a member
that had to give partitions up joins once more so they can be handed on.

The heartbeat thread also enforces ``max.poll.interval.ms`` as Kafka's does: a
member whose application has not called ``poll()`` for that long leaves the group
(a static member just stops heartbeating), so that its partitions go to members
that are making progress; its next ``poll()`` reports them lost and rejoins.

Asynchronous commits are sent one at a time in the order they were made, so that an
older commit can never overwrite a newer one (Kafka gets this order from its single
connection; gRPC calls may overtake each other). Their callbacks run in the
consumer's thread, from ``poll()``, ``commit()`` or ``close()``.

A call that gets no answer is raised by ``commit()`` and ``committed()`` as the SDK's
TransportError (RequestTimedOutError for a deadline), never as a gRPC error.

Not thread-safe beyond the heartbeat thread it owns and ``interrupt()``; the
Consumer drives it from ``poll()``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc

from strand.client.channel import transport_error
from strand.client.structs import TopicPartition
from strand.consumer.assignors import (
    PartitionAssignor,
    RebalanceProtocol,
    Subscription,
    assignor_for,
)
from strand.consumer.protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from strand.consumer.subscription_state import SubscriptionState
from strand.errors import (
    ErrorCode,
    RequestTimedOutError,
    StrandError,
    UnknownMemberIdError,
    error_for,
)
from strand.v1 import gateway_pb2_grpc
from strand.v1 import groups_pb2 as pb

log = logging.getLogger(__name__)

_RETRY = frozenset((ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REBALANCE_IN_PROGRESS))
_MEMBERSHIP_GONE = frozenset((ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION,
                              ErrorCode.FENCED_INSTANCE_ID))
RETRY_BACKOFF_S = 0.2
T = TypeVar("T")
CommitCallback = Callable[[dict[TopicPartition, int], Exception | None], None]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadata:
    """Who this member is in its group now (Kafka's ``ConsumerGroupMetadata``): what a
    transactional producer sends with offsets to fence zombies. ``generation_id``
    -1 and an empty ``member_id`` while not a member."""

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None


@dataclass
class Rebalance:
    """What a completed rebalance changed for this member."""

    revoked: set[TopicPartition] = field(default_factory=set)
    assigned: set[TopicPartition] = field(default_factory=set)
    lost: set[TopicPartition] = field(default_factory=set)


class ConsumerCoordinator:
    """Joins with the topics of ``subscriptions`` (the consumer's, shared)."""

    def __init__(self, channel: grpc.Channel, bootstrap: str, group_id: str, client_id: str,
                 subscriptions: SubscriptionState, *,
                 assignors: Sequence[str] = ("range",), group_instance_id: str | None = None,
                 session_timeout_ms: int = 10_000, rebalance_timeout_ms: int = 300_000,
                 heartbeat_interval_ms: int = 3_000, request_timeout_ms: float = 30_000,
                 partitions_for: Callable[[str], int | None],
                 topic_id: Callable[[str], str] = lambda topic: "",
                 wakeup: threading.Event | None = None,
                 check_wakeup: Callable[[], None] = lambda: None,
                 require_stable: bool = False) -> None:
        if not group_id:
            raise ValueError("group_id must not be empty")
        self.stub = gateway_pb2_grpc.GatewayStub(channel)
        self.bootstrap = bootstrap
        self.group_id = group_id
        self.client_id = client_id
        self.subscriptions = subscriptions
        self.assignors: list[PartitionAssignor] = [assignor_for(name) for name in assignors]
        if not self.assignors:
            raise ValueError("at least one partition assignment strategy is needed")
        self.group_instance_id = group_instance_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.request_timeout_s = request_timeout_ms / 1000
        self.partitions_for = partitions_for
        # The id of a topic as this consumer's metadata knows it (""; unknown): sent with
        # commits, so that an offset read from a deleted topic is never applied to a
        # new topic of the same name.
        self.topic_id = topic_id
        # Set by the consumer's wakeup(): sleeps end early, check_wakeup() raises.
        self.wakeup = wakeup or threading.Event()
        self.check_wakeup = check_wakeup
        # read_committed: committed offsets only once no transaction may replace them
        # (KIP-447; Kafka's consumer asks so with isolation.level=read_committed).
        self.require_stable = require_stable
        self.member_id = ""
        self.generation = -1
        self.protocol = ""
        self.owned: set[TopicPartition] = set()
        self.leader_id = ""
        # As the leader: the partition count of each subscribed topic it assigned.
        self.assigned_counts: dict[str, int] = {}
        self._rejoin = True
        self._joining = False  # a join/sync in progress: no heartbeats meanwhile
        self._lost = False
        self._stop = threading.Event()
        self._heartbeats: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pending_call: Any = None  # the grpc future interrupt() cancels
        self.last_poll = time.monotonic()
        # Asynchronous commits: waiting to be sent, the one in flight, and finished
        # ones whose callbacks are still to run in the consumer's thread.
        self._async_queue: deque[tuple[dict[TopicPartition, int], CommitCallback | None]] = (
            deque())
        self._async_inflight = False
        self._async_done: deque[tuple[CommitCallback | None, dict[TopicPartition, int],
                                      Exception | None]] = deque()
        self._async_idle = threading.Condition(self._lock)

    # -- state ----------------------------------------------------------------------------------

    @property
    def cooperative(self) -> bool:
        return all(a.rebalance_protocol == RebalanceProtocol.COOPERATIVE for a in self.assignors)

    @property
    def needs_rejoin(self) -> bool:
        return self._rejoin

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.leader_id == self.member_id

    def request_rejoin(self) -> None:
        self._rejoin = True

    def metadata(self) -> ConsumerGroupMetadata:
        return ConsumerGroupMetadata(self.group_id, self.generation, self.member_id,
                                     self.group_instance_id)

    # -- joining ------------------------------------------------------------------------------

    def ensure_active(self, timeout_s: float,
                      before_join: Callable[[set[TopicPartition]], None] | None = None
                      ) -> Rebalance | None:
        """Rejoin if needed; returns what changed, or None when nothing had to happen.
        ``before_join(partitions)`` is called with the partitions an eager rebalance
        revokes, before the join (commit them there)."""
        if not self._rejoin:
            return None
        deadline = time.monotonic() + timeout_s
        result = Rebalance()
        with self._lock:
            lost, self._lost = self._lost, False
        if lost:
            result.lost, self.owned = set(self.owned), set()
        elif not self.cooperative and self.owned:
            if before_join is not None:
                before_join(set(self.owned))
            result.revoked, self.owned = set(self.owned), set()
        self._joining = True
        try:
            assignment = self._join_until_assigned(deadline)
        finally:
            self._joining = False
        new = set(assignment)
        previous = set(self.owned)
        result.revoked |= previous - new
        result.assigned = new - previous
        self.owned = new
        # Cooperative: partitions given up now go to others in one more round.
        self._rejoin = bool(self.cooperative and previous - new)
        self._start_heartbeats()
        return result

    def _join_until_assigned(self, deadline: float) -> list[TopicPartition]:
        while True:
            self.check_wakeup()
            assignment = self._join_and_sync(deadline)
            if assignment is not None:
                return assignment

    def _join_and_sync(self, deadline: float) -> list[TopicPartition] | None:
        if time.monotonic() > deadline:
            raise RequestTimedOutError(f"could not join group {self.group_id!r} in time")
        joined = self._call(self.stub.JoinGroup, "JoinGroup", pb.JoinGroupRequest(
            group_id=self.group_id, member_id=self.member_id,
            group_instance_id=self.group_instance_id or "", client_id=self.client_id,
            protocol_type="consumer", protocols=[
                pb.GroupProtocol(name=a.name, metadata=encode_subscription(Subscription(
                    self.subscriptions.topics, owned_partitions=tuple(sorted(self.owned)),
                    generation=self.generation, group_instance_id=self.group_instance_id)))
                for a in self.assignors],
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms),
            timeout=self.rebalance_timeout_ms / 1000 + self.request_timeout_s)
        if joined is None:
            return None
        code = ErrorCode(joined.error_code)
        if code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = joined.member_id
            return None
        if code in _MEMBERSHIP_GONE:
            self.member_id, self.generation = "", -1
            return None
        if code in _RETRY:
            self.wakeup.wait(RETRY_BACKOFF_S)
            return None
        if code != ErrorCode.NONE:
            raise error_for(code, f"joining group {self.group_id!r}: {joined.error_message}")
        self.member_id = joined.member_id
        self.generation = joined.generation_id
        self.protocol = joined.protocol_name
        self.leader_id = joined.leader_id
        assignments = []
        if joined.leader_id == self.member_id:
            assignments = self._assign(joined)
        synced = self._call(self.stub.SyncGroup, "SyncGroup", pb.SyncGroupRequest(
            group_id=self.group_id, member_id=self.member_id,
            generation_id=self.generation, group_instance_id=self.group_instance_id or "",
            assignments=assignments), timeout=self.request_timeout_s)
        if synced is None:
            return None
        code = ErrorCode(synced.error_code)
        if code in _MEMBERSHIP_GONE:
            self.member_id, self.generation = "", -1
            return None
        if code in _RETRY:
            return None
        if code != ErrorCode.NONE:
            raise error_for(code, f"syncing group {self.group_id!r}: {synced.error_message}")
        partitions = list(decode_assignment(synced.assignment).partitions)
        log.info("joined group", extra={"group": self.group_id, "member": self.member_id,
                                        "generation": self.generation,
                                        "protocol": self.protocol,
                                        "partitions": len(partitions)})
        return partitions

    def _assign(self, joined: pb.JoinGroupResponse) -> list[pb.SyncGroupAssignment]:
        assignor = next(a for a in self.assignors if a.name == joined.protocol_name)
        subscriptions = {m.member_id: decode_subscription(m.metadata) for m in joined.members}
        topics = sorted({t for s in subscriptions.values() for t in s.topics})
        counts = {t: n for t in topics if (n := self.partitions_for(t)) is not None}
        self.assigned_counts = counts
        assignments = assignor.assign(counts, subscriptions)
        return [pb.SyncGroupAssignment(member_id=member, assignment=encode_assignment(a))
                for member, a in assignments.items()]

    def _call(self, method: Any, name: str, request: object, timeout: float) -> Any:
        """As ``_call_once``, but None after a transport failure or a cancel that was
        not a wakeup (the caller tries again, after a backoff for a failure)."""
        try:
            return self._call_once(method, name, request, timeout)
        except grpc.FutureCancelledError:
            return None
        except StrandError as exc:  # only transport failures: answers are returned
            log.debug("group call failed, retrying: %s", exc)
            self.wakeup.wait(RETRY_BACKOFF_S)
            return None

    def _call_once(self, method: Any, name: str, request: object,
                   timeout: float | None = None) -> Any:
        """A call ``interrupt()`` can cancel: WakeupError when a wakeup() did, else
        the cancel is raised; a transport failure is raised as its StrandError
        (TransportError, RequestTimedOutError for a deadline)."""
        future = method.future(request, timeout=self.request_timeout_s
                               if timeout is None else timeout)
        self._pending_call = future
        try:
            return future.result()
        except grpc.FutureCancelledError:
            self.check_wakeup()  # raises WakeupError when that is why
            raise
        except grpc.RpcError as exc:
            raise transport_error(exc, self.bootstrap, name) from None
        finally:
            self._pending_call = None

    def interrupt(self) -> None:
        """From another thread (the consumer's wakeup()): end a blocking group call."""
        future = self._pending_call
        if future is not None:
            future.cancel()

    # -- heartbeats ---------------------------------------------------------------------------

    def _start_heartbeats(self) -> None:
        if self._heartbeats is not None and self._heartbeats.is_alive():
            return
        self._stop.clear()
        self._heartbeats = threading.Thread(target=self._heartbeat_loop, daemon=True,
                                            name=f"heartbeat-{self.group_id}")
        self._heartbeats.start()

    def _heartbeat_loop(self) -> None:
        # Heartbeats go on after a rebalance is announced, until the member actually
        # rejoins from poll(): a member busy processing between polls stays in the
        # group for max.poll.interval.ms, not just its session timeout (as Kafka's).
        while not self._stop.wait(self.heartbeat_interval_ms / 1000):
            if self._joining or not self.member_id:
                continue
            if time.monotonic() - self.last_poll > self.rebalance_timeout_ms / 1000:
                self._poll_timeout_expired()
                continue
            try:
                answer = self.stub.Heartbeat(pb.HeartbeatRequest(
                    group_id=self.group_id, member_id=self.member_id,
                    generation_id=self.generation,
                    group_instance_id=self.group_instance_id or ""),
                    timeout=self.request_timeout_s)
            except grpc.RpcError:
                continue  # the gateway or coordinator is moving: try next beat
            code = ErrorCode(answer.error_code)
            if code == ErrorCode.REBALANCE_IN_PROGRESS:
                self._rejoin = True
            elif code in _MEMBERSHIP_GONE:
                with self._lock:
                    self._lost = True
                self.member_id, self.generation = "", -1
                self._rejoin = True

    def _poll_timeout_expired(self) -> None:
        """Kafka's ``maybeLeaveGroup("consumer poll timeout has expired")``."""
        log.warning("poll() was not called for max.poll.interval.ms (%d ms): leaving group "
                    "%s so that its partitions go to other members; process records faster "
                    "or raise max_poll_interval_ms / lower max_poll_records",
                    self.rebalance_timeout_ms, self.group_id)
        member_id = self.member_id
        with self._lock:
            self._lost = True
        self.member_id, self.generation = "", -1
        self._rejoin = True
        if self.group_instance_id is None:  # a static member keeps its id: no leave
            self._leave(member_id)

    # -- offsets ------------------------------------------------------------------------------

    def _commit_request(self, offsets: dict[TopicPartition, int]) -> pb.OffsetCommitRequest:
        if self.subscriptions.subscribed and not self.member_id:
            # A subscribed consumer that lost its membership must not commit as a
            # group-less client (member "", generation -1): its partitions may belong
            # to another member now (Kafka's CommitFailedException).
            raise UnknownMemberIdError(
                f"commit to group {self.group_id!r}: this consumer is not in group "
                f"{self.group_id!r} now (its membership was lost or not yet granted); "
                "it rejoins on the next poll(), which re-reads the committed offsets")
        return pb.OffsetCommitRequest(
            group_id=self.group_id, member_id=self.member_id, generation_id=self.generation,
            group_instance_id=self.group_instance_id or "",
            partitions=[pb.OffsetCommitPartition(topic=tp.topic, partition=tp.partition,
                                                 offset=offset, topic_id=self.topic_id(tp.topic))
                        for tp, offset in sorted(offsets.items())])

    def _commit_error(self, answer: pb.OffsetCommitResponse) -> Exception | None:
        if int(answer.error_code) == ErrorCode.NONE:
            return None
        if ErrorCode(answer.error_code) in _MEMBERSHIP_GONE | {ErrorCode.REBALANCE_IN_PROGRESS}:
            self._rejoin = True
        return error_for(answer.error_code,
                         f"commit to group {self.group_id!r}: {answer.error_message}")

    def commit(self, offsets: dict[TopicPartition, int]) -> None:
        """Commit now (fenced by this member's generation), after the asynchronous
        commits made before; raises the typed error."""
        self.flush_async(self.request_timeout_s)
        if not offsets:
            return
        answer = self._call_once(self.stub.OffsetCommit, "OffsetCommit",
                                 self._commit_request(offsets))
        error = self._commit_error(answer)
        if error is not None:
            raise error

    def commit_async(self, offsets: dict[TopicPartition, int],
                     callback: CommitCallback | None) -> None:
        """Queue a commit; sent after the ones before it. ``callback(offsets, error)``
        runs later in the consumer's thread (see ``run_commit_callbacks``)."""
        with self._lock:
            self._async_queue.append((dict(offsets), callback))
            if self._async_inflight:
                return
            self._async_inflight = True
        self._send_next_async()

    def _send_next_async(self) -> None:
        with self._lock:
            if not self._async_queue:
                self._async_inflight = False
                self._async_idle.notify_all()
                return
            offsets, callback = self._async_queue.popleft()
        if not offsets:
            self._async_finished(offsets, callback, None)
            return
        try:
            future = self.stub.OffsetCommit.future(self._commit_request(offsets),
                                                   timeout=self.request_timeout_s)
        except Exception as exc:  # the channel is closed
            self._async_finished(offsets, callback, exc)
            return

        def done(call: Any) -> None:
            try:
                error = self._commit_error(call.result())
            except (grpc.RpcError, grpc.FutureCancelledError) as exc:
                error = RequestTimedOutError(f"commit to group {self.group_id!r}: {exc}")
            self._async_finished(offsets, callback, error)

        future.add_done_callback(done)

    def _async_finished(self, offsets: dict[TopicPartition, int],
                        callback: CommitCallback | None, error: Exception | None) -> None:
        if error is not None:
            log.info("asynchronous commit failed: %s", error)
        with self._lock:
            self._async_done.append((callback, offsets, error))
        self._send_next_async()

    def flush_async(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) until the queued asynchronous commits are
        answered, then run their callbacks."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while self._async_inflight and (left := deadline - time.monotonic()) > 0:
                self._async_idle.wait(left)
        self.run_commit_callbacks()

    def run_commit_callbacks(self) -> None:
        while True:
            with self._lock:
                if not self._async_done:
                    return
                callback, offsets, error = self._async_done.popleft()
            if callback is not None:
                callback(offsets, error)

    def committed(self, partitions: Iterable[TopicPartition], timeout_s: float | None = None
                  ) -> dict[TopicPartition, int | None]:
        """The group's committed offsets (None: nothing committed). Reading
        read_committed (``require_stable``), a partition with transactional offsets
        pending is asked again after a backoff until ``timeout_s`` (default: the
        request timeout; 0: one try) has passed, then UnstableOffsetCommitError (a
        retriable error) is raised: never an offset a transaction may still replace."""
        wanted = list(partitions)
        deadline = time.monotonic() + (self.request_timeout_s if timeout_s is None
                                       else timeout_s)
        request = pb.OffsetFetchRequest(
            group_id=self.group_id, require_stable=self.require_stable, partitions=[
                pb.OffsetFetchRequest.Partition(topic=tp.topic, partition=tp.partition)
                for tp in wanted])
        while True:
            answer = self._call_once(self.stub.OffsetFetch, "OffsetFetch", request)
            if answer.error_code != ErrorCode.NONE:
                raise error_for(answer.error_code,
                                f"offsets of group {self.group_id!r}: {answer.error_message}")
            failed = [p for p in answer.partitions if p.error_code != ErrorCode.NONE]
            if not failed:
                break
            first = failed[0]
            if (first.error_code != ErrorCode.UNSTABLE_OFFSET_COMMIT
                    or time.monotonic() + RETRY_BACKOFF_S > deadline):
                raise error_for(first.error_code, (
                    f"committed offsets of group {self.group_id!r}: "
                    + ", ".join(f"{p.topic}-{p.partition}" for p in failed)
                    + f": {first.error_message}"))
            self.wakeup.wait(RETRY_BACKOFF_S)
            self.check_wakeup()
        found = {TopicPartition(p.topic, p.partition): p.offset for p in answer.partitions
                 if p.offset >= 0}  # -1: nothing committed
        return {tp: found.get(tp) for tp in wanted}

    # -- leaving ------------------------------------------------------------------------------

    def _leave(self, member_id: str) -> None:
        try:
            self.stub.LeaveGroup(pb.LeaveGroupRequest(group_id=self.group_id,
                                                      member_id=member_id),
                                 timeout=self.request_timeout_s)
        except grpc.RpcError as exc:
            log.warning("could not leave group %s: %s", self.group_id, exc)

    def close(self, leave: bool = True) -> None:
        """Stop heartbeating and (``leave``, dynamic members) leave the group at once;
        the member may subscribe and join again later."""
        self._stop.set()
        if self._heartbeats is not None and self._heartbeats is not threading.current_thread():
            self._heartbeats.join(5)
        # A static member does not leave (KIP-345): coming back under its instance id
        # within the session timeout, it gets its partitions again with no rebalance.
        if leave and self.member_id and self.group_instance_id is None:
            self._leave(self.member_id)
        self.member_id, self.generation = "", -1
        self.owned = set()
        self._rejoin = True
