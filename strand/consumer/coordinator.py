"""A consumer's membership in its group (Kafka's ``ConsumerCoordinator``): join and
sync through the gateway, the leader's assignment with the configured assignors, a
heartbeat thread, and committed offsets.

Eager protocols (range, roundrobin, sticky): every rebalance first revokes all the
member's partitions, then assigns anew. The cooperative protocol
(cooperative-sticky, KIP-429) keeps what stays and revokes only what moves; a member
that had to give partitions up joins once more so they can be handed on.

Not thread-safe beyond the heartbeat thread it owns; the Consumer drives it from
``poll()``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import grpc

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
from strand.errors import ErrorCode, RequestTimedOutError, error_for
from strand.v1 import gateway_pb2_grpc
from strand.v1 import groups_pb2 as pb

log = logging.getLogger(__name__)

_RETRY = frozenset((ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REBALANCE_IN_PROGRESS))
_MEMBERSHIP_GONE = frozenset((ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION,
                              ErrorCode.FENCED_INSTANCE_ID))
RETRY_BACKOFF_S = 0.2
T = TypeVar("T")


@dataclass
class Rebalance:
    """What a completed rebalance changed for this member."""

    revoked: set[TopicPartition] = field(default_factory=set)
    assigned: set[TopicPartition] = field(default_factory=set)
    lost: set[TopicPartition] = field(default_factory=set)


class ConsumerCoordinator:
    def __init__(self, stub: gateway_pb2_grpc.GatewayStub, group_id: str, client_id: str, *,
                 assignors: Sequence[str] = ("range",), group_instance_id: str | None = None,
                 session_timeout_ms: int = 10_000, rebalance_timeout_ms: int = 300_000,
                 heartbeat_interval_ms: int = 3_000, request_timeout_ms: float = 30_000,
                 partitions_for: Callable[[str], int | None]) -> None:
        if not group_id:
            raise ValueError("group_id must not be empty")
        self.stub = stub
        self.group_id = group_id
        self.client_id = client_id
        self.assignors: list[PartitionAssignor] = [assignor_for(name) for name in assignors]
        if not self.assignors:
            raise ValueError("at least one partition assignment strategy is needed")
        self.group_instance_id = group_instance_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.request_timeout_s = request_timeout_ms / 1000
        self.partitions_for = partitions_for
        self.topics: tuple[str, ...] = ()
        self.member_id = ""
        self.generation = -1
        self.protocol = ""
        self.owned: set[TopicPartition] = set()
        self._rejoin = True
        self._lost = False
        self._stop = threading.Event()
        self._heartbeats: threading.Thread | None = None
        self._lock = threading.Lock()

    # -- subscription -------------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        topics = tuple(sorted(set(topics)))
        if topics != self.topics:
            self.topics = topics
            self._rejoin = True

    @property
    def cooperative(self) -> bool:
        return all(a.rebalance_protocol == RebalanceProtocol.COOPERATIVE for a in self.assignors)

    @property
    def needs_rejoin(self) -> bool:
        return self._rejoin

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
        while True:
            assignment = self._join_and_sync(deadline)
            if assignment is None:
                continue
            new = set(assignment)
            previous = set(self.owned)
            result.revoked |= previous - new
            result.assigned = new - previous
            self.owned = new
            # Cooperative: partitions given up now go to others in one more round.
            self._rejoin = bool(self.cooperative and previous - new)
            self._start_heartbeats()
            return result

    def _join_and_sync(self, deadline: float) -> list[TopicPartition] | None:
        if time.monotonic() > deadline:
            raise RequestTimedOutError(f"could not join group {self.group_id!r} in time")
        joined = self._call(self.stub.JoinGroup, pb.JoinGroupRequest(
            group_id=self.group_id, member_id=self.member_id,
            group_instance_id=self.group_instance_id or "", client_id=self.client_id,
            protocol_type="consumer", protocols=[
                pb.GroupProtocol(name=a.name, metadata=encode_subscription(Subscription(
                    self.topics, owned_partitions=tuple(sorted(self.owned)),
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
            time.sleep(RETRY_BACKOFF_S)
            return None
        if code != ErrorCode.NONE:
            raise error_for(code, f"joining group {self.group_id!r}: {joined.error_message}")
        self.member_id = joined.member_id
        self.generation = joined.generation_id
        self.protocol = joined.protocol_name
        assignments = []
        if joined.leader_id == self.member_id:
            assignments = self._assign(joined)
        synced = self._call(self.stub.SyncGroup, pb.SyncGroupRequest(
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
        assignments = assignor.assign(counts, subscriptions)
        return [pb.SyncGroupAssignment(member_id=member, assignment=encode_assignment(a))
                for member, a in assignments.items()]

    def _call(self, method: Callable[..., T], request: object, timeout: float) -> T | None:
        try:
            return method(request, timeout=timeout)
        except grpc.RpcError as exc:
            log.debug("group call failed, retrying: %s", exc)
            time.sleep(RETRY_BACKOFF_S)
            return None

    # -- heartbeats ---------------------------------------------------------------------------

    def _start_heartbeats(self) -> None:
        if self._heartbeats is not None and self._heartbeats.is_alive():
            return
        self._stop.clear()
        self._heartbeats = threading.Thread(target=self._heartbeat_loop, daemon=True,
                                            name=f"heartbeat-{self.group_id}")
        self._heartbeats.start()

    def _heartbeat_loop(self) -> None:
        while not self._stop.wait(self.heartbeat_interval_ms / 1000):
            if self._rejoin or not self.member_id:
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

    # -- offsets ------------------------------------------------------------------------------

    def commit(self, offsets: dict[TopicPartition, int]) -> None:
        """Commit (fenced by this member's generation); raises the typed error."""
        if not offsets:
            return
        answer = self.stub.OffsetCommit(pb.OffsetCommitRequest(
            group_id=self.group_id, member_id=self.member_id, generation_id=self.generation,
            group_instance_id=self.group_instance_id or "",
            partitions=[pb.OffsetCommitPartition(topic=tp.topic, partition=tp.partition,
                                                 offset=offset)
                        for tp, offset in sorted(offsets.items())]),
            timeout=self.request_timeout_s)
        if answer.error_code != ErrorCode.NONE:
            if ErrorCode(answer.error_code) in _MEMBERSHIP_GONE | {ErrorCode.REBALANCE_IN_PROGRESS}:
                self._rejoin = True
            raise error_for(answer.error_code,
                            f"commit to group {self.group_id!r}: {answer.error_message}")

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        wanted = list(partitions)
        answer = self.stub.OffsetFetch(pb.OffsetFetchRequest(
            group_id=self.group_id, partitions=[
                pb.OffsetFetchRequest.Partition(topic=tp.topic, partition=tp.partition)
                for tp in wanted]), timeout=self.request_timeout_s)
        if answer.error_code != ErrorCode.NONE:
            raise error_for(answer.error_code,
                            f"offsets of group {self.group_id!r}: {answer.error_message}")
        found = {TopicPartition(p.topic, p.partition): p.offset for p in answer.partitions
                 if p.offset >= 0}  # -1: nothing committed
        return {tp: found.get(tp) for tp in wanted}

    # -- leaving ------------------------------------------------------------------------------

    def close(self, leave: bool = True) -> None:
        self._stop.set()
        if self._heartbeats is not None:
            self._heartbeats.join(5)
        if leave and self.member_id:
            try:
                self.stub.LeaveGroup(pb.LeaveGroupRequest(group_id=self.group_id,
                                                          member_id=self.member_id),
                                     timeout=self.request_timeout_s)
            except grpc.RpcError as exc:
                log.warning("could not leave group %s: %s", self.group_id, exc)
        self.member_id, self.generation = "", -1
