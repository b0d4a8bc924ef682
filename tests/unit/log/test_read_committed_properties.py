"""Property: whatever the interleaving of transactional batches from several
producers, plain batches, COMMIT/ABORT markers and high watermark moves, a
read_committed reader (the storage's fetch bound and aborted list, the consumer's
filter) sees exactly the committed and non-transactional records, in offset order,
never one at or beyond the last stable offset of its read."""

from __future__ import annotations

from pathlib import Path
from tempfile import TemporaryDirectory

from hypothesis import example, given, settings
from hypothesis import strategies as st

from strand.client.structs import TopicPartition
from strand.consumer.fetch_buffer import CompletedFetch
from strand.log import LogConfig, PartitionLog
from strand.log.producer_state import AppendOrigin
from strand.records import BatchBuilder
from strand.records.control import ControlType, build_end_txn_marker

PRODUCERS = (11, 12, 13)
TS = 1_700_000_000_000

Op = tuple[str, int, int]  # (kind, producer index / record count, flag)
ops = st.lists(st.one_of(
    st.tuples(st.just("data"), st.integers(0, 2), st.integers(1, 3)),
    st.tuples(st.just("plain"), st.integers(1, 2), st.just(0)),
    st.tuples(st.just("end"), st.integers(0, 2), st.booleans().map(int)),
    st.tuples(st.just("hw"), st.integers(0, 100), st.just(0)),
    st.tuples(st.just("read"), st.integers(0, 0), st.integers(60, 400)),
), max_size=60)


class Reader:
    """A read_committed consumer of one partition: fetch at its position, bounded by
    the LSO, with the aborted transactions of what it got."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log
        self.position = 0
        self.seen: list[tuple[int, bytes]] = []

    def read(self, max_bytes: int) -> None:
        log = self.log
        lso = log.last_stable_offset
        if self.position >= lso:
            return
        data = log.read(self.position, max_bytes, max_offset=lso)
        if not data:
            return
        chunk = CompletedFetch(TopicPartition("t", 0), data, self.position)
        aborted = [(t.producer_id, t.first_offset)
                   for t in log.aborted_transactions(self.position, chunk.next_fetch_offset)]
        chunk = CompletedFetch(TopicPartition("t", 0), data, self.position,
                               aborted_transactions=aborted)
        records, position = chunk.take(self.position, 1 << 30)
        assert all(r.offset < lso for r in records), (records, lso)
        assert position <= lso
        self.seen += [(r.offset, r.value or b"") for r in records]
        self.position = max(self.position, chunk.next_fetch_offset)


@settings(max_examples=60, deadline=None)
@given(ops)
@example([("plain", 2, 0), ("plain", 2, 0), ("hw", 25, 0), ("read", 0, 60)])
def test_read_committed_sees_exactly_the_committed_records(steps: list[Op]) -> None:
    with TemporaryDirectory() as tmp:
        log = PartitionLog.open(Path(tmp) / "t-0", LogConfig(segment_bytes=600))
        reader = Reader(log)
        sequences = dict.fromkeys(PRODUCERS, 0)
        open_txn: dict[int, list[bytes]] = {}
        committed: set[bytes] = set()
        # Followers copy whole batches, so the high watermark only ever lands on a
        # batch boundary; the "hw" step moves it to one of those.
        boundaries: list[int] = []
        counter = 0

        def end(pid: int, commit: bool) -> None:
            log.append_as_leader(build_end_txn_marker(
                ControlType.COMMIT if commit else ControlType.ABORT, producer_id=pid,
                producer_epoch=0, coordinator_epoch=0, timestamp=TS), leader_epoch=0,
                origin=AppendOrigin.COORDINATOR)
            boundaries.append(log.log_end_offset)
            values = open_txn.pop(pid)
            if commit:
                committed.update(values)

        for kind, a, b in steps:
            if kind == "data":
                pid = PRODUCERS[a]
                builder = BatchBuilder(producer_id=pid, producer_epoch=0,
                                       base_sequence=sequences[pid], transactional=True)
                values = []
                for _ in range(b):
                    counter += 1
                    values.append(b"%d-%d" % (pid, counter))
                    builder.append(values[-1], timestamp=TS)
                log.append_as_leader(builder.build(), leader_epoch=0)
                boundaries.append(log.log_end_offset)
                sequences[pid] += b
                open_txn.setdefault(pid, []).extend(values)
            elif kind == "plain":
                builder = BatchBuilder()
                for _ in range(a):
                    counter += 1
                    committed.add(b"plain-%d" % counter)
                    builder.append(b"plain-%d" % counter, timestamp=TS)
                log.append_as_leader(builder.build(), leader_epoch=0)
                boundaries.append(log.log_end_offset)
            elif kind == "end" and PRODUCERS[a] in open_txn:
                end(PRODUCERS[a], bool(b))
            elif kind == "hw":
                ahead = [end for end in boundaries if end > log.high_watermark]
                if ahead:
                    log.update_high_watermark(ahead[(len(ahead) - 1) * a // 100])
            elif kind == "read":
                reader.read(b)
        for pid in list(open_txn):
            end(pid, commit=pid % 2 == 0)
        log.update_high_watermark(log.log_end_offset)
        assert log.last_stable_offset == log.log_end_offset
        while reader.position < log.log_end_offset:
            reader.read(1 << 20)
        offsets = [offset for offset, _ in reader.seen]
        assert offsets == sorted(offsets)
        assert sorted(value for _, value in reader.seen) == sorted(committed)
        log.close()
