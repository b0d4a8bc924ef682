"""A damaged stored batch on a storage node (issue 11, point 6), without processes:
the fetch path serves only what verifies and reports the rest, the scrub walks sealed
segments at its rate and finds damage there, and the repair lists the replica in the
registration (the controller fences it), cuts the log at the bad batch and follows its
leader again; a damage mark left by a restart is repaired before the replica follows."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from services.controller.leadership import elect_leader
from services.storage import repair as repair_module
from services.storage.disk import DiskExecutor
from services.storage.repair import ReplicaRepairs
from services.storage.replica import Replica
from services.storage.scrub import LogScrubber
from strand.errors import ErrorCode
from strand.log import LogConfig
from strand.log.failure import DAMAGE_MARK_FILE
from strand.log.integrity import scan_segment
from strand.log.log import PartitionLog
from strand.log.segment import LogSegment
from strand.records import iter_record_batches
from tests.unit.storage.test_fetch_path import FOLLOWER, LEADER, Leadership

BIG = b"x" * 300


class Reports:
    """The DamageReport the fetch path and the scrub talk to."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, str]] = []

    def damaged(self, replica: Replica, offset: int, detail: str, found_by: str) -> None:
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
    """Reads the registration's list as the controller does (failover's _ineligible):
    a listed replica leaves the ISR and its leadership goes to an in-sync replica."""

    def __init__(self, replica: Replica) -> None:
        self.replica = replica
        self.listings: list[tuple[tuple[str, int], ...]] = []

    async def publish(self, listed: tuple[tuple[str, int], ...]) -> None:
        self.listings.append(listed)
        record = self.replica.record
        if (record.topic, record.partition) in listed:
            moved = elect_leader(record, {LEADER, FOLLOWER}, shutting_down={LEADER})
            if moved is not None:
                self.replica.set_record(moved)


class Followers:
    def __init__(self) -> None:
        self.following: set[Replica] = set()

    def follow(self, replica: Replica) -> None:
        self.following.add(replica)

    def unfollow(self, replica: Replica) -> None:
        self.following.discard(replica)


async def repaired(repairs: ReplicaRepairs) -> None:
    while repairs.repairing:
        await asyncio.sleep(0.01)


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
        repairs = ReplicaRepairs(leading.manager, leading.manager.disk, controller.publish)
        damaged_offset = leading.log.segments[1].base_offset + 2
        damage_batch(leading, damaged_offset)

        repairs.damaged(replica, damaged_offset - 2, "CRC mismatch", "fetch")
        assert replica.out_of_service is not None
        repairs.damaged(replica, damaged_offset, "again", "scrub")  # one repair at a time
        await repaired(repairs)

        # Listed (the controller fenced it: leader 2, out of the ISR), then unlisted.
        assert controller.listings == [(("t", 0),), ()]
        assert (replica.record.leader, replica.record.isr) == (FOLLOWER, (FOLLOWER,))
        assert leading.log.log_end_offset == damaged_offset
        assert len(leading.log.segments) == 2
        assert replica.out_of_service is None
        assert leading.log.damaged_from is None
        assert not (leading.log.directory / DAMAGE_MARK_FILE).exists()
        assert followers.following == {replica}  # fetching the rest from node 2

    run(tmp_path, body, LogConfig(segment_bytes=4096))


def test_a_damage_mark_survives_a_restart_and_is_repaired_before_following(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fenced, then restarted before the cut: the reopened log still says where it is
    damaged, and the replica is repaired before it may follow (and rejoin the ISR)."""
    monkeypatch.setattr(repair_module, "FENCE_RETRY_S", 0.05)

    async def body(leading: Leadership) -> None:
        for i in range(40):
            leading.append(BIG, str(i).encode())
        damaged_offset = leading.log.segments[1].base_offset + 2
        damage_batch(leading, damaged_offset)
        leading.log.mark_damaged(damaged_offset)
        leading.log.close()  # the node stops before cutting

        reopened = PartitionLog.open(leading.log.directory, LogConfig(segment_bytes=4096))
        leading.log = reopened  # closed by run()
        assert reopened.damaged_from == damaged_offset
        replica = Replica("topic-id", leading.replica.record, reopened)
        leading.manager.replicas[("t", 0)] = replica
        followers = Followers()
        leading.manager.followers = followers
        controller = Controller(replica)
        repairs = ReplicaRepairs(leading.manager, leading.manager.disk, controller.publish)

        repairs.opened(replica)
        assert replica.out_of_service is not None  # so the manager gives it no role
        await repaired(repairs)
        assert controller.listings == [(("t", 0),), ()]
        assert reopened.log_end_offset == damaged_offset
        assert reopened.damaged_from is None
        assert not (reopened.directory / DAMAGE_MARK_FILE).exists()
        assert followers.following == {replica}

    run(tmp_path, body, LogConfig(segment_bytes=4096))


def test_an_unconfirmed_damage_report_changes_nothing(tmp_path: Path) -> None:
    async def body(leading: Leadership) -> None:
        for i in range(4):
            leading.append(BIG, str(i).encode())
        replica = leading.replica
        controller = Controller(replica)
        repairs = ReplicaRepairs(leading.manager, leading.manager.disk, controller.publish)
        repairs.damaged(replica, 2, "a read that went wrong once", "fetch")
        await repaired(repairs)
        assert controller.listings == []  # never listed: the controller saw nothing
        assert leading.log.log_end_offset == 8 and replica.out_of_service is None

    run(tmp_path, body)
