"""read_committed readers of the transactional topics, on raw gateway Fetch.

The SDK's Consumer keeps only the newest last stable offset (LSO) of a partition, not
the one of the answer that carried each record, so these readers call the gateway's
``Fetch`` themselves (``isolation_level=READ_COMMITTED``) and record, with every
record handed out, the LSO of *that* answer: a record at or above it is a read past
the LSO (``txn_checker.check_past_lso``). The records handed out are decoded by the
SDK's own :class:`~strand.consumer.fetch_buffer.CompletedFetch` with the answer's
aborted transactions, exactly what a read_committed Consumer hands its user
(transaction markers dropped, aborted transactions' records dropped).

- :class:`CommittedReader` follows every partition from the start; on any error it
  opens a new channel (a new session) and carries on from its positions.
- :func:`read_back_committed` is the final read: every partition from the start until
  the position reaches the high watermark and the LSO equals it (every transaction
  decided).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import grpc

from strand import TopicPartition
from strand.consumer.fetch_buffer import CompletedFetch
from strand.errors import ErrorCode
from strand.v1 import common_pb2 as pb
from strand.v1 import gateway_pb2_grpc

from .history import FINAL_SESSION, TxnRead

Tp = tuple[str, int]
MAX_BYTES = 4 << 20
PARTITION_MAX_BYTES = 1 << 20


class CommittedFetcher:
    """One gRPC channel to the gateway; fetches read_committed from positions."""

    def __init__(self, bootstrap: str, session: str, sink: list[TxnRead]) -> None:
        self.channel = grpc.insecure_channel(bootstrap)
        self.stub = gateway_pb2_grpc.GatewayStub(self.channel)
        self.session, self.sink = session, sink
        self.ends: dict[Tp, tuple[int, int]] = {}  # (high watermark, LSO) last answered

    def close(self) -> None:
        self.channel.close()

    def fetch(self, positions: dict[Tp, int], max_wait_ms: int) -> list[str]:
        """One Fetch of every partition at its position: records handed out are
        recorded and the positions advanced. Returns the partitions' errors."""
        topics: dict[str, list[pb.PartitionFetchData]] = {}
        for (topic, partition), offset in positions.items():
            topics.setdefault(topic, []).append(pb.PartitionFetchData(
                partition=partition, fetch_offset=offset,
                partition_max_bytes=PARTITION_MAX_BYTES, current_leader_epoch=-1))
        response = self.stub.Fetch(pb.FetchRequest(
            max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=MAX_BYTES,
            isolation_level=pb.READ_COMMITTED,
            topics=[pb.TopicFetchData(topic=t, partitions=p) for t, p in topics.items()]),
            timeout=max_wait_ms / 1000 + 5)
        now = time.monotonic()
        errors = []
        for topic_answer in response.topics:
            for part in topic_answer.partitions:
                tp = (topic_answer.topic, part.partition)
                if tp not in positions:
                    continue
                if part.error_code != ErrorCode.NONE:
                    errors.append(f"{tp}: {ErrorCode(part.error_code).name} "
                                  f"{part.error_message[:120]}")
                    continue
                lso = part.last_stable_offset if part.high_watermark >= 0 else -1
                if part.high_watermark >= 0:
                    self.ends[tp] = (part.high_watermark, part.last_stable_offset)
                if not part.records:
                    continue
                chunk = CompletedFetch(TopicPartition(*tp), part.records, positions[tp], True,
                                       [(a.producer_id, a.first_offset)
                                        for a in part.aborted_transactions])
                records, position = chunk.take(positions[tp], 1 << 30)
                for r in records:
                    value = "<null>" if r.value is None else r.value.decode("utf-8", "replace")
                    self.sink.append(TxnRead(self.session, tp[0], tp[1], r.offset, value, now,
                                             lso))
                positions[tp] = max(position, positions[tp])
        return errors


class CommittedReader(threading.Thread):
    def __init__(self, name: str, bootstrap: str, tps: list[Tp], sink: list[TxnRead],
                 errors: list[str], stop: threading.Event) -> None:
        super().__init__(name=f"chaos-{name}", daemon=True)
        self.reader_name, self.bootstrap, self.tps = name, bootstrap, tps
        self.sink, self.errors, self.stop_event = sink, errors, stop
        self.positions = {tp: 0 for tp in tps}

    def run(self) -> None:
        number = 0
        while not self.stop_event.is_set():
            session = f"{self.reader_name}#{number}"
            number += 1
            fetcher = CommittedFetcher(self.bootstrap, session, self.sink)
            try:
                while not self.stop_event.is_set():
                    if fetcher.fetch(self.positions, 300):
                        self.stop_event.wait(0.1)  # a partition without a leader: soon
            except grpc.RpcError as exc:  # a new session carries on from the positions
                self.errors.append(f"{session}: {exc.code().name} {str(exc.details())[:160]}")
                self.stop_event.wait(0.5)
            finally:
                fetcher.close()


def read_back_committed(bootstrap: str, tps: list[Tp], sink: list[TxnRead], timeout: float,
                        log: Callable[[str], None] = lambda _: None) -> set[Tp]:
    """Read every partition read_committed from its start until it is at its high
    watermark with nothing undecided (LSO == HW). Returns the partitions read so."""
    positions = {tp: 0 for tp in tps}
    done: set[Tp] = set()
    deadline = time.monotonic() + timeout
    fetcher = CommittedFetcher(bootstrap, FINAL_SESSION, sink)
    try:
        while len(done) < len(tps) and time.monotonic() < deadline:
            todo = {tp: positions[tp] for tp in tps if tp not in done}
            try:
                errors = fetcher.fetch(todo, 200)
            except grpc.RpcError as exc:
                log(f"final read_committed read: {exc.code().name}; retrying")
                time.sleep(0.5)
                continue
            positions.update(todo)
            for tp in todo:
                hw, lso = fetcher.ends.get(tp, (-1, -1))
                if hw >= 0 and lso == hw and positions[tp] >= hw:
                    done.add(tp)
            if errors:
                time.sleep(0.2)
    finally:
        fetcher.close()
    if len(done) < len(tps):
        log(f"final read_committed read: {sorted(set(tps) - done)} not read to a stable end "
            f"(high watermark, LSO: {fetcher.ends}; positions {positions})")
    return done
