"""Verification of stored batches (strand/log/integrity.py): what is served is checked
batch by batch, a segment is scanned in steps without false alarms at step edges, the
first bad batch of a log is located, and the log is cut there."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from strand.log import LogConfig, PartitionLog
from strand.log.integrity import find_damage, scan_segment, verify_batches
from tests.unit.log.log_helpers import make_batch, read_batches

VALUE = b"v" * 200


def fill(log: PartitionLog, batches: int = 30) -> None:
    for i in range(batches):
        log.append_as_leader(make_batch([VALUE, str(i).encode()]), 0)


def flip(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0xFF
    path.write_bytes(bytes(data))


def test_verify_batches_serves_only_the_valid_prefix(
        open_log: Callable[..., PartitionLog]) -> None:
    log = open_log()
    fill(log, 3)
    data = log.read(0, 1 << 20)
    first = read_batches(log)[0].header.size_in_bytes
    assert verify_batches(data).error is None
    damaged = bytearray(data)
    damaged[first + 100] ^= 0x01
    checked = verify_batches(damaged)
    assert (checked.valid_bytes, checked.batches, checked.next_offset) == (first, 1, 2)
    assert checked.error is not None and "CRC" in checked.error
    assert verify_batches(data[: 2 * first - 1]).valid_bytes == first  # cut off


def test_verify_batches_refuses_offsets_going_back(
        open_log: Callable[..., PartitionLog]) -> None:
    log = open_log()
    fill(log, 2)
    data = log.read(0, 1 << 20)
    first = read_batches(log)[0].header.size_in_bytes
    assert verify_batches(data[first:] + data[:first]).valid_bytes == len(data) - first
    assert verify_batches(data, min_offset=5).valid_bytes == 0


def test_a_clean_segment_scans_clean_in_any_step_size(
        open_log: Callable[..., PartitionLog]) -> None:
    log = open_log()
    fill(log)
    segment = log.segments[0]
    for step_bytes in (1, 100, 333, 4096, 1 << 20):
        position, least, batches = 0, segment.base_offset, 0
        while position < segment.size:
            step = scan_segment(segment, position, least, step_bytes)
            assert step.damage is None, step_bytes
            position, least, batches = step.next_position, step.next_offset, batches + step.batches
        assert batches == 30


def test_the_first_bad_batch_is_found_and_the_log_cut_there(
        open_log: Callable[..., PartitionLog]) -> None:
    log = open_log(LogConfig(segment_bytes=2048))
    fill(log)
    assert len(log.segments) >= 4
    assert find_damage(log, 0) is None
    sealed = log.segments[1]
    batches = read_batches(log)
    inside = [b for b in batches if sealed.base_offset <= b.header.base_offset < sealed.next_offset]
    second = inside[1].header
    position = inside[0].header.size_in_bytes
    flip(sealed.log_path, position + 80)

    damage = find_damage(log, 0)
    assert damage is not None
    assert (damage.segment_base_offset, damage.position, damage.offset) == (
        sealed.base_offset, position, second.base_offset)
    assert "CRC" in damage.detail
    end = log.truncate_at_damage(damage.segment_base_offset, damage.position)
    assert end == log.log_end_offset == second.base_offset
    assert log.segments[-1] is sealed and find_damage(log, 0) is None
    # The cut log takes the rest again, as a follower would fetch it.
    for batch in batches:
        if batch.header.base_offset >= second.base_offset:
            log.append_as_follower(batch.raw)
    assert [b.header.base_offset for b in read_batches(log)] == [
        b.header.base_offset for b in batches]


def test_damage_in_a_header_length_is_found_too(
        open_log: Callable[..., PartitionLog]) -> None:
    log = open_log(LogConfig(segment_bytes=2048))
    fill(log)
    sealed = log.segments[1]
    flip(sealed.log_path, 10)  # the first batch's length field
    damage = find_damage(log, sealed.base_offset)
    assert damage is not None and (damage.segment_base_offset, damage.position) == (
        sealed.base_offset, 0)
    assert log.truncate_at_damage(sealed.base_offset, 0) == sealed.base_offset


def test_a_damage_mark_lasts_until_the_cut(open_log: Callable[..., PartitionLog]) -> None:
    """Marked before the replica leaves the ISR, the damage is still known after a
    restart, and goes with the cut (or when a re-read finds no damage)."""
    config = LogConfig(segment_bytes=2048)
    log = open_log(config)
    fill(log)
    sealed = log.segments[1]
    assert log.damaged_from is None
    log.mark_damaged(sealed.base_offset)
    log.close()
    log = open_log(config)
    assert log.damaged_from == sealed.base_offset
    log.truncate_at_damage(sealed.base_offset, 0)
    assert log.damaged_from is None
    log.close()
    with PartitionLog.open(log.directory, config) as reopened:
        assert reopened.damaged_from is None
        reopened.mark_damaged(3)
        reopened.clear_damage_mark()
    with PartitionLog.open(log.directory, config) as reopened:
        assert reopened.damaged_from is None
