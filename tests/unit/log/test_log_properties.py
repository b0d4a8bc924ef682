"""Property-based tests of the log's invariants (hypothesis).

A state machine drives a log through appends (leader and follower style), rolls,
truncations, clean reopens and crash reopens (the old instance is abandoned with
unflushed index buffers, as after SIGKILL) and checks after every step that:
offsets are contiguous and increasing, and the bytes read back are exactly the
bytes appended (as stamped with their offset and leader epoch).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from strand.log import LogConfig, PartitionLog
from strand.log.cleaner import LogCleaner
from strand.records import BatchBuilder, Compression, stamp
from tests.unit.log.log_helpers import read_all, read_batches

values = st.binary(min_size=0, max_size=300)
codecs = st.sampled_from(list(Compression))


def build_batch(records: list[bytes], codec: Compression) -> bytes:
    builder = BatchBuilder(compression=codec)
    for i, value in enumerate(records):
        builder.append(value, key=b"k%d" % i, timestamp=1_000 + i)
    return builder.build()


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="strand-prop-"))
        self.config = LogConfig(segment_bytes=2_048, index_interval_bytes=256)
        self.log = PartitionLog.open(self.root, self.config)
        self.expected: list[bytes] = []  # stamped batches in log order
        self.epoch = 0

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    @rule(records=st.lists(values, min_size=1, max_size=8), codec=codecs,
          new_epoch=st.booleans())
    def append(self, records: list[bytes], codec: Compression, new_epoch: bool) -> None:
        self.epoch += int(new_epoch)
        batch = build_batch(records, codec)
        base = self.log.log_end_offset
        info = self.log.append_as_leader(batch, leader_epoch=self.epoch)
        assert info.first_offset == base
        assert info.last_offset == base + len(records) - 1
        stamped = bytearray(batch)
        stamp(stamped, 0, base, self.epoch)
        self.expected.append(bytes(stamped))

    @rule(records=st.lists(values, min_size=1, max_size=4))
    def append_as_follower(self, records: list[bytes]) -> None:
        builder = BatchBuilder(base_offset=self.log.log_end_offset,
                               partition_leader_epoch=self.epoch)
        for value in records:
            builder.append(value, timestamp=5)
        batch = builder.build()
        self.log.append_as_follower(batch)
        self.expected.append(batch)

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @precondition(lambda self: self.expected)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        keep = data.draw(st.integers(0, len(self.expected) - 1))
        cut = self.expected[keep]
        base = int.from_bytes(cut[:8], "big")
        last_delta = int.from_bytes(cut[23:27], "big")
        offset = data.draw(st.integers(base, base + last_delta))  # anywhere inside the batch
        self.log.truncate_to(offset)
        del self.expected[keep:]

    @rule()
    def reopen_clean(self) -> None:
        self.log.close()
        self.log = PartitionLog.open(self.root, self.config)

    @rule()
    def reopen_after_crash(self) -> None:
        # Abandon the instance without close(): no clean-shutdown marker, index
        # buffers never written, checkpoints stale. The page cache keeps the data.
        self.log = PartitionLog.open(self.root, self.config)

    @invariant()
    def offsets_contiguous_and_bytes_identical(self) -> None:
        batches = read_batches(self.log)
        assert [b.raw for b in batches] == self.expected
        offsets = [r.offset for r in read_all(self.log)]
        assert offsets == list(range(len(offsets)))
        assert self.log.log_end_offset == len(offsets)
        bases = [s.base_offset for s in self.log.segments]
        assert bases == sorted(set(bases))


LogMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=25, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestLogMachine = LogMachine.TestCase


keys = st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"f"])
entries = st.tuples(keys, st.one_of(st.none(), st.binary(min_size=1, max_size=40)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rounds=st.lists(st.lists(st.lists(entries, min_size=1, max_size=6), min_size=1, max_size=12),
                    min_size=1, max_size=3),
    codec=codecs,
    drop_tombstones=st.booleans(),
)
def test_compaction_keeps_exactly_the_latest_value_per_key(
        rounds: list[list[list[tuple[bytes, bytes | None]]]], codec: Compression,
        drop_tombstones: bool) -> None:
    root = Path(tempfile.mkdtemp(prefix="strand-compact-"))
    try:
        config = LogConfig(segment_bytes=700, cleanup_policy=("compact",),
                           delete_retention_ms=0 if drop_tombstones else 2**62)
        log = PartitionLog.open(root, config)
        original = {}
        now = 2_000_000_000_000
        for batches in rounds:  # several rounds: appends, then a clean
            for batch in batches:
                builder = BatchBuilder(compression=codec)
                for key, value in batch:
                    builder.append(value, key=key, timestamp=1_000)
                log.append_as_leader(builder.build(), leader_epoch=0)
            for record in read_all(log):
                original[record.offset] = record
            log.roll()
            log.update_high_watermark(log.log_end_offset)
            LogCleaner().clean(log, now)
        latest = {}
        for offset in sorted(original):
            latest[original[offset].key] = original[offset]
        expected = sorted(
            (r.offset, r.key, r.value) for r in latest.values()
            if not (drop_tombstones and r.value is None)
        )
        kept = [(r.offset, r.key, r.value) for r in read_all(log)]
        assert kept == expected
        for offset, kept_key, kept_value in kept:  # every kept offset still holds its record
            assert (original[offset].key, original[offset].value) == (kept_key, kept_value)
        log.close()
        reopened = PartitionLog.open(root, config)
        assert [(r.offset, r.key, r.value) for r in read_all(reopened)] == expected
        reopened.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
