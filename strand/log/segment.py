"""A log segment: one ``.log`` file of record batches with its offset and time indexes.

Only the active (last) segment of a log is appended to. Appends are scatter
writes of already-stamped batch bytes; reads are ``pread`` of whole batches, so
readers need no lock and never see a partly written batch (they bound themselves
by ``size``, which grows only after the bytes are in the file).
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from strand.errors import CorruptRecordError
from strand.log.config import INT_MAX, LogConfig
from strand.log.files import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    Buffer,
    segment_path,
    write_all,
)
from strand.log.offset_index import ENTRY_SIZE as OFFSET_ENTRY_SIZE
from strand.log.offset_index import CorruptIndexError, OffsetIndex
from strand.log.time_index import ENTRY_SIZE as TIME_ENTRY_SIZE
from strand.log.time_index import TimeIndex
from strand.log.txn_index import TransactionIndex
from strand.records.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    SPAN,
    SPAN_SIZE,
    BatchHeader,
    batch_size_at,
    peek_offset_and_size,
    read_header,
    validate_batch,
)
from strand.records.reader import RecordBatch

SCAN_CHUNK = 1 << 20
_write_all = write_all  # how appends reach the file (the crash and disk-full tests wrap it)


class LogSegment:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        file: io.FileIO,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.config = config
        self._file = file
        self._fd = file.fileno()
        self.offset_index = offset_index
        self.time_index = time_index
        self.txn_index = TransactionIndex(segment_path(directory, base_offset, TXN_INDEX_SUFFIX))
        # Set when the aborted-transaction index was dropped (recovery): the partition
        # log rebuilds it from its control batches (strand.log.transactions).
        self.txn_index_stale = False
        self.size = 0
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        # Timestamp of the first batch: segment.ms counts from it (as Kafka does), but
        # never from before this process created or opened the segment, so producer
        # clocks in the past cannot make every batch roll a new segment.
        self.rolling_base_timestamp: int | None = None
        self.opened_ms = 0
        self._bytes_since_last_index_entry = 0

    # -- construction -------------------------------------------------------------------------

    @staticmethod
    def _index_capacity(config: LogConfig) -> tuple[int, int]:
        return (config.segment_index_bytes // OFFSET_ENTRY_SIZE,
                config.segment_index_bytes // TIME_ENTRY_SIZE)

    @classmethod
    def create(
        cls, directory: Path, base_offset: int, config: LogConfig, now_ms: int
    ) -> LogSegment:
        offset_capacity, time_capacity = cls._index_capacity(config)
        log_path = segment_path(directory, base_offset, LOG_SUFFIX)
        file = open(log_path, "a+b", buffering=0)  # noqa: SIM115 - owned by the segment
        if os.fstat(file.fileno()).st_size:
            file.close()
            raise CorruptRecordError(f"{log_path.name} already exists and is not empty")
        segment = cls(
            directory, base_offset, config, file,
            OffsetIndex(segment_path(directory, base_offset, INDEX_SUFFIX), base_offset,
                        offset_capacity),
            TimeIndex(segment_path(directory, base_offset, TIME_INDEX_SUFFIX), base_offset,
                      time_capacity),
        )
        try:
            segment.time_index.reset()
            segment.offset_index.reset()
            segment.txn_index.replace(())  # a stale one left by an older segment
        except OSError:  # no half-made segment stays behind (a full disk)
            file.close()
            segment.delete_files()
            raise
        segment.opened_ms = now_ms
        return segment

    @classmethod
    def open(
        cls, directory: Path, base_offset: int, config: LogConfig, *, recover: bool, now_ms: int
    ) -> tuple[LogSegment, int]:
        """Open an existing segment; returns it and the number of bytes recovery cut off.

        With ``recover`` every batch is checked (length, magic, CRC, offsets), the
        indexes are rebuilt and the file is truncated at the first bad byte. Without
        it the indexes are loaded, sanity-checked and rebuilt only if untrustworthy.
        """
        offset_capacity, time_capacity = cls._index_capacity(config)
        log_path = segment_path(directory, base_offset, LOG_SUFFIX)
        file = open(log_path, "a+b", buffering=0)  # noqa: SIM115 - owned by the segment
        size = os.fstat(file.fileno()).st_size
        index_path = segment_path(directory, base_offset, INDEX_SUFFIX)
        time_path = segment_path(directory, base_offset, TIME_INDEX_SUFFIX)
        segment = cls(
            directory, base_offset, config, file,
            OffsetIndex(index_path, base_offset, offset_capacity),
            TimeIndex(time_path, base_offset, time_capacity),
        )
        segment.size = size
        segment.opened_ms = now_ms
        if not recover:
            try:
                segment.offset_index = OffsetIndex.load(
                    index_path, base_offset, offset_capacity, size)
                segment._load_tail()
                segment.time_index = TimeIndex.load(
                    time_path, base_offset, time_capacity, segment.next_offset)
                segment._check_indexes_agree()
                segment._load_max_timestamp()
                segment.txn_index = TransactionIndex.load(segment.txn_index.path)
                return segment, 0
            except (FileNotFoundError, CorruptIndexError, CorruptRecordError):
                pass  # untrustworthy: rebuild below
        return segment, segment.recover()

    # -- scanning -----------------------------------------------------------------------------

    def headers_from(self, position: int) -> Iterator[tuple[int, BatchHeader]]:
        """Headers of consecutive batches from ``position`` to ``size`` (no CRC check)."""
        end = self.size
        while end - position >= HEADER_SIZE:
            header = read_header(os.pread(self._fd, HEADER_SIZE, position))
            if header.size_in_bytes < HEADER_SIZE or position + header.size_in_bytes > end:
                raise CorruptRecordError(
                    f"batch at byte {position} of {self.base_offset:020d}.log overruns the segment"
                )
            yield position, header
            position += header.size_in_bytes
        if position != end:
            raise CorruptRecordError(f"{end - position} stray bytes end the segment")

    def scan_valid(self, start: int = 0) -> Iterator[tuple[int, BatchHeader, memoryview]]:
        """Validated batches from ``start`` with their bytes; stops at the first bad byte."""
        end = self.size
        pos = start
        buf: bytes = b""
        buf_start = pos
        expected_min_offset = self.base_offset
        while pos < end:
            off = pos - buf_start
            size = batch_size_at(buf, off)
            if size is None or off + size > len(buf):
                buf = os.pread(self._fd, max(SCAN_CHUNK, (size or 0)), pos)
                buf_start, off = pos, 0
                size = batch_size_at(buf, 0)
                if size is None or size > len(buf):
                    return
            if size < HEADER_SIZE:
                return
            try:
                header = validate_batch(buf, off, off + size)
            except CorruptRecordError:
                return
            if header.base_offset < expected_min_offset:
                return  # offsets must increase: anything else is garbage that happens to parse
            if header.last_offset - self.base_offset > INT_MAX:
                return  # past what the indexes address: no append ever put it here
            expected_min_offset = header.next_offset
            yield pos, header, memoryview(buf)[off : off + size]
            pos += size

    def _load_tail(self) -> None:
        """Find the next offset by scanning from the last offset index entry to the end."""
        next_offset = self.base_offset
        check_index = len(self.offset_index) > 0
        for _, header in self.headers_from(self.offset_index.last_position):
            if check_index and header.base_offset != self.offset_index.last_offset:
                raise CorruptIndexError("offset index disagrees with the batch it points at")
            if header.last_offset - self.base_offset > INT_MAX:
                raise CorruptRecordError(
                    f"batch at offset {header.base_offset} lies past what segment "
                    f"{self.base_offset} can index")
            check_index = False
            next_offset = header.next_offset
        if self.size and self.rolling_base_timestamp is None:
            self.rolling_base_timestamp = read_header(
                os.pread(self._fd, HEADER_SIZE, 0)).max_timestamp
        self.next_offset = next_offset

    def _check_indexes_agree(self) -> None:
        """Every offset index entry is written with a time index entry (which may be
        skipped only when the timestamp did not grow), plus one more on roll."""
        offsets, times = len(self.offset_index), len(self.time_index)
        if (offsets and not times) or times > offsets + 1:
            raise CorruptIndexError(
                f"time index ({times} entries) disagrees with offset index ({offsets})"
            )

    def _load_max_timestamp(self) -> None:
        """The segment's newest timestamp: the time index's last entry (T, O) says every
        record up to O is no newer than T, so scanning from O's batch to the end is exact
        even when the time index lost entries (a few headers when it did not)."""
        self.max_timestamp = self.offset_of_max_timestamp = -1
        entry = self.time_index.last_entry()
        position = 0
        if entry is not None:
            self._observe_timestamp(*entry)
            found = self.find_batch(entry[1])
            position = found[0] if found is not None else self.size
        for _, header in self.headers_from(position):
            self._observe_timestamp(header.max_timestamp, header.last_offset)

    def _observe_timestamp(self, timestamp: int, offset: int) -> None:
        if timestamp > self.max_timestamp:
            self.max_timestamp = timestamp
            self.offset_of_max_timestamp = offset

    def recover(self) -> int:
        """Rebuild indexes from validated batches; truncate at the first bad byte."""
        self.time_index.reset()
        self.offset_index.reset()
        self.txn_index.replace(())
        self.txn_index_stale = True
        self.max_timestamp = self.offset_of_max_timestamp = -1
        self.rolling_base_timestamp = None
        self._bytes_since_last_index_entry = 0
        valid_end = 0
        next_offset = self.base_offset
        for pos, header, _ in self.scan_valid(0):
            self._index_batch(header.base_offset, header.last_offset, header.max_timestamp,
                              pos, header.size_in_bytes)
            valid_end = pos + header.size_in_bytes
            next_offset = header.next_offset
        truncated = self.size - valid_end
        if truncated:
            os.ftruncate(self._fd, valid_end)
            self.size = valid_end
        self.next_offset = next_offset
        self._write_indexes()
        return truncated

    # -- writing ------------------------------------------------------------------------------

    def _index_batch(
        self, base_offset: int, last_offset: int, max_timestamp: int, position: int, size: int
    ) -> None:
        if self.rolling_base_timestamp is None:
            self.rolling_base_timestamp = max_timestamp
        self._observe_timestamp(max_timestamp, last_offset)
        if self._bytes_since_last_index_entry > self.config.index_interval_bytes:
            self.offset_index.append(base_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += size

    def should_roll(self, append_bytes: int, last_offset: int, now_ms: int) -> bool:
        if self.size == 0:
            return False
        config = self.config
        if self.size > config.segment_bytes - append_bytes:
            return True
        if self.rolling_base_timestamp is not None:
            rolling_base = max(self.rolling_base_timestamp, self.opened_ms)
            if now_ms - rolling_base > config.segment_ms - config.segment_jitter_ms:
                return True
        if self.offset_index.is_full or self.time_index.is_full:
            return True
        return last_offset - self.base_offset > INT_MAX

    def append(self, pieces: Sequence[Buffer], batches: Sequence[tuple[int, BatchHeader]]) -> None:
        """Write ``pieces`` (the bytes of ``batches``, already stamped) at the end.

        ``batches`` holds (assigned base offset, header) per batch, in order.
        """
        position = self.size
        try:
            _write_all(self._fd, pieces)
        except OSError:
            # A full or failing disk: no partial batch may stay, or later appends would
            # land after it. Should this cut fail too, the torn bytes lie past ``size``,
            # where :meth:`discard_unacknowledged` cuts them.
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, position)
            raise
        for base_offset, header in batches:
            size = header.size_in_bytes
            self._index_batch(base_offset, base_offset + header.last_offset_delta,
                              header.max_timestamp, position, size)
            position += size
        base_offset, header = batches[-1]
        self.next_offset = base_offset + header.last_offset_delta + 1
        self.size = position  # publish last: readers bound themselves by size

    def truncate_to(self, offset: int) -> int:
        """Remove the batch holding ``offset`` and every later one; returns bytes removed."""
        found = self.find_batch(offset)
        if found is None:
            return 0
        return self.truncate_at(found[0])

    def truncate_at(self, position: int) -> int:
        """Remove every byte from ``position`` (where a batch starts) on; returns bytes
        removed. Reads no header there: it may be a damaged one."""
        removed = self.size - position
        self.size = position
        os.ftruncate(self._fd, position)
        self.offset_index.truncate_to_position(position)
        self.rolling_base_timestamp = None
        self._load_tail()
        self.time_index.truncate_to_offset(self.next_offset)
        self.txn_index.truncate_to(self.next_offset)
        self._load_max_timestamp()
        self._bytes_since_last_index_entry = 0
        return removed

    def discard_unacknowledged(self) -> int:
        """Cut whatever a failed write left past ``size`` (every byte below it was
        written in full) and write the indexes out again, overwriting torn entries.
        Returns the bytes cut from the ``.log`` file."""
        extra = os.fstat(self._fd).st_size - self.size
        if extra > 0:
            os.ftruncate(self._fd, self.size)
        self._write_indexes()
        return max(extra, 0)

    def _write_indexes(self, fsync: bool = False) -> None:
        # Time index first: on disk, the offset index must never cover more batches
        # than the time index does, because the max timestamp of a loaded segment is
        # its last time index entry plus a scan from the last offset index entry.
        self.time_index.flush(fsync)
        self.offset_index.flush(fsync)

    def on_become_inactive(self) -> None:
        """Called on roll: record the final max timestamp and write out index buffers."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self._write_indexes()

    def flush(self) -> None:
        os.fsync(self._fd)
        self._write_indexes(fsync=True)
        self.txn_index.flush()

    # -- reading ------------------------------------------------------------------------------

    def find_batch(self, offset: int) -> tuple[int, int, int] | None:
        """(position, base offset, size) of the first batch whose last offset is >= ``offset``.

        Reads only the 27 bytes of each header a scan needs; with the index pointing
        at batch base offsets the first read is usually the answer.
        """
        _, position = self.offset_index.lookup(offset)
        end = self.size
        fd = self._fd
        while end - position >= HEADER_SIZE:
            base_offset, length, last_offset_delta = SPAN.unpack(os.pread(fd, SPAN_SIZE, position))
            size = length + LOG_OVERHEAD
            if size < HEADER_SIZE or position + size > end:
                raise CorruptRecordError(
                    f"batch at byte {position} of {self.base_offset:020d}.log overruns the segment"
                )
            if base_offset + last_offset_delta >= offset:
                return position, base_offset, size
            position += size
        return None

    def read(
        self, offset: int, max_bytes: int, max_offset: int | None, min_one_batch: bool
    ) -> bytes | None:
        """Whole batches from the one holding ``offset``, up to ``max_bytes``.

        Batches whose base offset is >= ``max_offset`` are left out. With
        ``min_one_batch`` the first batch is returned even if it exceeds
        ``max_bytes`` (so a consumer always progresses). None: nothing at or after
        ``offset`` in this segment.
        """
        found = self.find_batch(offset)
        if found is None:
            return None
        position, first_base_offset, first_size = found
        if max_offset is not None and first_base_offset >= max_offset:
            return b""
        want = min(max_bytes, self.size - position)
        if want < first_size:
            if not min_one_batch:
                return b""
            want = first_size
        data = os.pread(self._fd, want, position)
        end = 0
        total = len(data)
        while total - end >= LOG_OVERHEAD:
            base_offset, size = peek_offset_and_size(data, end)
            if (max_offset is not None and base_offset >= max_offset) or end + size > total:
                break
            end += size
        return data if end == total else data[:end]

    def read_at(self, position: int, size: int) -> bytes:
        """``size`` bytes from byte ``position`` (fewer at the end of the file)."""
        return os.pread(self._fd, size, position)

    def find_offset_by_timestamp(self, timestamp: int, min_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``min_offset`` with a
        timestamp >= ``timestamp``, or None."""
        start = max(self.time_index.lookup_before(timestamp), min_offset)
        _, position = self.offset_index.lookup(start)
        for pos, header in self.headers_from(position):
            if header.max_timestamp < timestamp or header.last_offset < min_offset:
                continue
            batch = RecordBatch(os.pread(self._fd, header.size_in_bytes, pos))
            for record in batch.records():
                if record.offset >= min_offset and record.timestamp >= timestamp:
                    return record.offset, record.timestamp
        return None

    def read_all(self) -> Iterator[tuple[BatchHeader, memoryview]]:
        """Every batch of the segment, validated (for the cleaner)."""
        end = 0
        for pos, header, data in self.scan_valid(0):
            end = pos + header.size_in_bytes
            yield header, data
        if end != self.size:
            raise CorruptRecordError(
                f"{self.base_offset:020d}.log has invalid bytes at position {end}"
            )

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def log_path(self) -> Path:
        return segment_path(self.directory, self.base_offset, LOG_SUFFIX)

    def paths(self) -> list[Path]:
        return [self.log_path, self.offset_index.path, self.time_index.path,
                self.txn_index.path]

    def close(self, *, write_indexes: bool = True) -> None:
        """Close the file; ``write_indexes=False`` for a log whose disk failed (the next
        open rebuilds what is missing)."""
        if not self._file.closed:
            if write_indexes:
                self._write_indexes()
            self._file.close()

    def delete_files(self) -> None:
        """Unlink the segment's files. The descriptor is left to the garbage collector so
        that a reader still holding this segment finishes its ``pread`` safely."""
        for path in self.paths():
            path.unlink(missing_ok=True)
