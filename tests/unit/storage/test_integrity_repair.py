"""A damaged stored batch on a storage node (issue 11, point 6), without processes:
the fetch path serves only what verifies and reports the rest, the scrub walks sealed
segments at its rate and finds damage there, and the repair fences the replica, cuts
the log at the bad batch and follows its leader again."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import pytest

from services.storage import repair as repair_module
from services.storage.disk import DiskExecutor
from services.storage.repair import ReplicaRepair
from services.storage.replica import Replica
from services.storage.scrub import LogScrubber
from strand.errors import ErrorCode
from strand.log import LogConfig
from strand.log.integrity import scan_segment
from strand.log.segment import LogSegment
from strand.records import iter_record_batches
from tests.unit.storage.test_fetch_path import EPOCH, FOLLOWER, LEADER, Leadership

BIG = b"x" * 300


class Reports:
    """The DamageReport the fetch path and the scrub talk to."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, str]] = []

    def report(self, replica: Replica, offset: int, detail: str, found_by: str) -> None:
        self.seen.append((offset, found_by))


def damage_batch(leading: Leadership, offset: int) -> None:
    """Flip a byte inside the records of the batch at ``offset`` (under its CRC)."""
    for segment in leading.log.segments:
        found = segment.find_batch(offset) if segment.base_offset <= offset else None
        if found is not None and found[1] == offset:
            with open(segment.log_path, "r+b") as f:
                f.seek(found[0] + 70)
                byte = f.read(1)
                f.seek(found[0] + 70)
                f.write(bytes([byte[0] ^ 0xFF]))
            return
    raise AssertionError(f"no batch at {offset}")


def run(tmp: Path, body: Callable[[Leadership], Awaitable[None]],
        config: LogConfig | None = None) -> None:
    async def main() -> None:
        disk = DiskExecutor(2)
        leading = Leadership(tmp, disk)
        if config is not None:
            leading.log.update_config(config)
        try:
            await body(leading)
        finally:
            leading.log.close()
            disk.shutdown()

    asyncio.run(main())


def test_a_fetch_serves_the_valid_batches_and_reports_the_bad_one(tmp_path: Path) -> None:
    async def body(leading: Leadership) -> None:
        reports = Reports()
        leading.fetcher.damage = reports
        for i in range(4):
            leading.append(BIG, str(i).encode())  # batches at 0, 2, 4, 6
        leading.commit(8)
        damage_batch(leading, 4)

        served = await leading.consume(0)
        assert served.error_code == ErrorCode.NONE
        assert reports.seen == [(4, "fetch")]
        assert [b.header.base_offset for b in iter_record_batches(served.records)] == [0, 2]

        refused = await leading.consume(4)
        assert refused.error_code == ErrorCode.KAFKA_STORAGE_ERROR and not refused.records
        assert "offset 4" in refused.error_message and "repaired" in refused.error_message
        replicated = await leading.replicate(5)
        assert replicated.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert reports.seen[1:] == [(4, "fetch"), (5, "replica fetch")]
        assert (await leading.consume(6)).records  # past the bad batch: served

    run(tmp_path, body)


def test_the_scrub_finds_damage_in_sealed_segments_at_its_rate(tmp_path: Path) -> None:
    async def body(leading: Leadership) -> None:
        for i in range(40):
            leading.append(BIG, str(i).encode())
        sealed = leading.log.segments[:-1]
        assert len(sealed) >= 3
        sealed_bytes = sum(s.size for s in sealed)
        reports = Reports()
        rate = sealed_bytes / 0.5  # half a second's worth
        scrubber = LogScrubber(leading.manager, leading.manager.disk, reports,
                               bytes_per_s=rate, interval_s=0)
        started = time.monotonic()
        verified = await scrubber.scrub_once()
        elapsed = time.monotonic() - started
        assert verified == 40 - _batches_in(leading.log.segments[-1])
        assert elapsed >= 0.4, f"scrubbed {sealed_bytes} bytes in {elapsed:.2f}s"
        assert reports.seen == []

        damaged_offset = sealed[1].base_offset + 2
        damage_batch(leading, damaged_offset)
        scrubber.bytes_per_s = 1 << 40
        await scrubber.scrub_once()
        assert reports.seen == [(damaged_offset, "scrub")]

    run(tmp_path, body, LogConfig(segment_bytes=4096))


def _batches_in(segment: LogSegment) -> int:
    return scan_segment(segment, 0, -1, 1 << 30).batches


class Controller:
    """Fences as the controller would: out of the ISR, leadership elsewhere."""

    def __init__(self, replica: Replica) -> None:
        self.replica = replica
        self.calls: list[tuple[int, Sequence[tuple[str, int]]]] = []

    async def fence_replicas(self, broker_id: int, broker_epoch: int,
                             partitions: Sequence[tuple[str, int]], reason: str) -> None:
        self.calls.append((broker_id, list(partitions)))
        record = self.replica.record
        self.replica.set_record(dataclasses.replace(
            record, leader=FOLLOWER, leader_epoch=EPOCH + 1,
            isr=tuple(r for r in record.isr if r != broker_id)))


class Followers:
    def __init__(self) -> None:
        self.following: set[Replica] = set()

    def follow(self, replica: Replica) -> None:
        self.following.add(replica)

    def unfollow(self, replica: Replica) -> None:
        self.following.discard(replica)


def test_the_repair_fences_then_cuts_the_log_then_follows_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(repair_module, "FENCE_RETRY_S", 0.05)

    async def body(leading: Leadership) -> None:
        for i in range(40):
            leading.append(BIG, str(i).encode())
        replica = leading.replica
        followers = Followers()
        leading.manager.followers = followers
        controller = Controller(replica)
        repair = ReplicaRepair(leading.manager, leading.manager.disk, controller, lambda: 7)
        damaged_offset = leading.log.segments[1].base_offset + 2
        damage_batch(leading, damaged_offset)

        repair.report(replica, damaged_offset - 2, "CRC mismatch", "fetch")
        assert replica.damaged_from is not None
        repair.report(replica, damaged_offset, "again", "scrub")  # one repair at a time
        while repair.repairing:
            await asyncio.sleep(0.01)

        assert controller.calls == [(LEADER, [("t", 0)])]
        assert leading.log.log_end_offset == damaged_offset
        assert len(leading.log.segments) == 2
        assert replica.damaged_from is None
        assert followers.following == {replica}  # fetching the rest from node 2

    run(tmp_path, body, LogConfig(segment_bytes=4096))
