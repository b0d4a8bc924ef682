"""Offsets by time (Kafka's ``OffsetFetcher``): ListOffsets calls that resolve the
positions of partitions being reset, and the consumer's ``beginning_offsets`` /
``end_offsets`` / ``offsets_for_times``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import grpc

from strand.client.channel import TransportError, transport_error
from strand.client.metadata import MetadataCache
from strand.client.structs import TopicPartition
from strand.consumer.errors import NoOffsetForPartitionError
from strand.consumer.fetcher import STALE_METADATA, TRANSIENT
from strand.consumer.subscription_state import SubscriptionState
from strand.errors import ErrorCode, RequestTimedOutError, StrandError, error_for
from strand.v1 import common_pb2 as pb
from strand.v1 import gateway_pb2_grpc

__all__ = ["EARLIEST", "LATEST", "OffsetLookup"]

EARLIEST = -2
LATEST = -1
_RESET_TIMESTAMP = {"earliest": EARLIEST, "latest": LATEST}


class OffsetLookup:
    def __init__(self, channel: grpc.Channel, bootstrap: str,
                 metadata: MetadataCache, *, isolation: pb.IsolationLevel,
                 request_timeout_ms: float, retry_backoff_ms: float, auto_offset_reset: str,
                 interrupted: threading.Event, check_open: Callable[[], None]) -> None:
        self.stub = gateway_pb2_grpc.GatewayStub(channel)
        self.bootstrap = bootstrap
        self.metadata = metadata
        self.isolation = isolation
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.auto_offset_reset = auto_offset_reset
        self.interrupted = interrupted  # set by close(): ends a retry wait at once
        self.check_open = check_open

    def update_positions(self, subscriptions: SubscriptionState) -> bool:
        """Resolve the assigned partitions' pending resets (and positions never set)
        with one ListOffsets call; True if any position was set."""
        now = time.monotonic()
        wanted: dict[TopicPartition, int] = {}
        for tp, pending in subscriptions.assigned_states():
            if (pending.position is not None or pending.retry_at > now
                    or pending.awaiting_committed):
                continue
            strategy = pending.reset or self.auto_offset_reset
            if strategy == "none":
                raise NoOffsetForPartitionError(
                    f"{tp} has no position and auto_offset_reset='none': seek() it first")
            wanted[tp] = _RESET_TIMESTAMP[strategy]
        if not wanted:
            return False
        versions = {tp: subscriptions.state(tp).version for tp in wanted}
        results = self.once(wanted)
        now = time.monotonic()
        changed = False
        for tp, (code, offset, message) in results.items():
            state = subscriptions.get(tp)
            if state is None or state.version != versions[tp] or state.position is not None:
                continue
            if code == ErrorCode.NONE and offset >= 0:
                state.seek(offset)
                changed = True
            elif code in STALE_METADATA or code in TRANSIENT or code == ErrorCode.NONE:
                if code in STALE_METADATA:
                    self.metadata.request_update()
                state.retry_at = now + self.retry_backoff_ms / 1000
            else:
                state.error = error_for(code, f"list offsets of {tp}: {message}")
        return changed

    def once(self, timestamps: dict[TopicPartition, int]
             ) -> dict[TopicPartition, tuple[int, int, str]]:
        """(error code, offset, message) per partition; a transport failure is reported
        as REQUEST_TIMED_OUT on every partition (retried by the callers)."""
        topics: dict[str, list[pb.PartitionListOffsets]] = {}
        for tp, timestamp in timestamps.items():
            topics.setdefault(tp.topic, []).append(
                pb.PartitionListOffsets(partition=tp.partition, timestamp=timestamp))
        request = pb.ListOffsetsRequest(isolation_level=self.isolation, topics=[
            pb.TopicListOffsets(topic=t, partitions=p) for t, p in topics.items()])
        try:
            response = self.stub.ListOffsets(request, timeout=self.request_timeout_ms / 1000)
        except grpc.RpcError as exc:
            error = transport_error(exc, self.bootstrap, "ListOffsets")
            if isinstance(error, TransportError) and not error.retriable:
                raise error from None
            return {tp: (int(ErrorCode.REQUEST_TIMED_OUT), -1, str(error)) for tp in timestamps}
        out: dict[TopicPartition, tuple[int, int, str]] = {}
        for topic_response in response.topics:
            for part in topic_response.partitions:
                out[TopicPartition(topic_response.topic, part.partition)] = (
                    int(part.error_code), part.offset, part.error_message)
        return out

    def lookup(self, timestamps: dict[TopicPartition, int], timeout_ms: float | None
               ) -> dict[TopicPartition, int]:
        """Offsets for the timestamps (-2 earliest, -1 latest), retrying retriable
        errors until ``timeout_ms`` (default request_timeout_ms)."""
        self.check_open()
        deadline = time.monotonic() + (self.request_timeout_ms if timeout_ms is None
                                       else timeout_ms) / 1000
        pending = dict(timestamps)
        found: dict[TopicPartition, int] = {}
        while True:
            last: StrandError | None = None
            for tp, (code, offset, message) in self.once(pending).items():
                if tp not in pending:
                    continue
                if code == ErrorCode.NONE:
                    found[tp] = offset
                    del pending[tp]
                elif code in STALE_METADATA or code in TRANSIENT:
                    last = error_for(code, f"list offsets of {tp}: {message}")
                else:
                    raise error_for(code, f"list offsets of {tp}: {message}")
            if not pending:
                return found
            if time.monotonic() + self.retry_backoff_ms / 1000 > deadline:
                raise last or RequestTimedOutError("list offsets timed out")
            self.interrupted.wait(self.retry_backoff_ms / 1000)
            self.check_open()
