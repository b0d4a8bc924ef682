"""Record batches as they arrive from outside: a producer's batches at the leader, and
a fetch answer at the consumer.

Input: one flags byte, then the record bytes (a concatenation of RecordBatch v2).

* The leader (``split_leader_batches``: framing, CRC, size, then every record) may
  refuse with the typed errors of ``strand.records``; nothing else.
* The fetch path's fast verification (``verify_batches``) never raises, and agrees
  with ``validate_batch`` on what is valid.
* The consumer (``CompletedFetch``, Strand's own decoder) may refuse with
  CorruptRecordError or UnsupportedCompressionError; nothing else.
* Whatever the leader accepts, stamped with offsets as the leader writes it, decodes
  on the consumer into exactly the records the headers promise (validation.py's
  promise that its acceptance is a subset of the decoder's), and those records built
  again into a batch decode to the same records.
"""

from __future__ import annotations

from fuzz.harnesses.common import check, fix_batch_crcs
from strand.client.structs import TopicPartition
from strand.consumer.fetch_buffer import CompletedFetch
from strand.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
    UnsupportedCompressionError,
)
from strand.log.append import split_leader_batches, stamp_leader_batches
from strand.log.config import LogConfig
from strand.log.integrity import verify_batches
from strand.records.batch import (
    HEADER_SIZE,
    NO_PRODUCER_ID,
    BatchHeader,
    TimestampType,
    read_header,
    split_batches,
)
from strand.records.builder import BatchBuilder
from strand.records.reader import RecordBatch
from strand.records.record import Record

__all__ = ["CONSUMER_ERRORS", "FIX_CRCS", "LEADER_ERRORS", "test_one_input"]

# Flags of the first byte.
FIX_CRCS = 0x01  # recompute CRCs, so mutations reach the records behind them
COMPACTED = 0x02  # the topic is compacted: every record needs a key
NO_CRC_CHECK = 0x04  # the consumer's check_crcs=False
READ_COMMITTED = 0x08  # the consumer drops an aborted transaction of the first producer

LEADER_ERRORS = (CorruptRecordError, InvalidRecordError, InvalidTimestampError,
                 RecordTooLargeError, UnsupportedCompressionError)
CONSUMER_ERRORS = (CorruptRecordError, UnsupportedCompressionError)

# A batch may inflate to 64 MiB on the leader; 1 MiB is the same bounded-decompression
# code and keeps each run cheap.
_MAX_UNCOMPRESSED = 1 << 20
_CONFIGS = {False: LogConfig(), True: LogConfig(cleanup_policy=("compact",))}
_TP = TopicPartition("fuzz", 0)
_LEADER_EPOCH = 7
_FIRST_OFFSET = 1000


def test_one_input(data: bytes) -> None:
    if not data:
        return
    flags = data[0]
    body = bytearray(data[1:])
    if flags & FIX_CRCS:
        fix_batch_crcs(body)
    records = bytes(body)
    _check_verification_agrees(records)
    _consume(records, check_crcs=not flags & NO_CRC_CHECK,
             read_committed=bool(flags & READ_COMMITTED))
    config = _CONFIGS[bool(flags & COMPACTED)]
    try:
        accepted = split_leader_batches(memoryview(records), config)
    except LEADER_ERRORS:
        return
    if any(header.is_control for _, header in accepted):
        return  # the storage node refuses control batches from producers before this
    _check_accepted(records, accepted, config)


def _check_verification_agrees(records: bytes) -> None:
    """The fetch path's fast check and ``validate_batch`` say the same."""
    verified = verify_batches(records)  # raises nothing, by contract
    check(0 <= verified.valid_bytes <= len(records), f"valid bytes {verified.valid_bytes}")
    if verified.error is None:
        check(verified.valid_bytes == len(records), "no error, yet not every byte is valid")
        try:
            split_batches(records)
        except CorruptRecordError as exc:
            raise AssertionError(f"verify_batches passes what validate_batch refuses: {exc}"
                                 ) from exc
    else:
        try:
            valid = split_batches(records[:verified.valid_bytes])
        except CorruptRecordError as exc:
            raise AssertionError(f"validate_batch refuses the prefix verify_batches "
                                 f"passed: {exc}") from exc
        check(len(valid) == verified.batches, "verify_batches miscounted its batches")


def _consume(records: bytes, *, check_crcs: bool, read_committed: bool) -> list[Record]:
    """Everything a consumer reads from ``records`` as a fetch answer from offset 0."""
    aborted = None
    if read_committed and len(records) >= HEADER_SIZE:
        first = read_header(records)
        aborted = [(first.producer_id, first.base_offset)]
    fetched = CompletedFetch(_TP, records, 0, check_crcs=check_crcs,
                             aborted_transactions=aborted)
    out: list[Record] = []
    position = 0
    try:
        while not fetched.done:
            taken, position = fetched.take(position, 100)
            out.extend(Record(r.offset, r.timestamp, r.key, r.value, r.headers)
                       for r in taken)
    except CONSUMER_ERRORS:
        pass
    return out


def _check_accepted(records: bytes, accepted: list[tuple[int, BatchHeader]],
                    config: LogConfig) -> None:
    """What the leader took decodes, once written, into what its headers promise."""
    view = memoryview(records)
    pieces, assigned = stamp_leader_batches(view, accepted, _FIRST_OFFSET, _LEADER_EPOCH, None)
    stored = b"".join(pieces)
    check(len(stored) == len(records), "stamping changed the size of the batches")
    verified = verify_batches(stored, _FIRST_OFFSET)
    check(verified.error is None, f"a stamped, accepted batch fails verification: "
                                  f"{verified.error}")
    expected: list[Record] = []
    position = 0
    for (pos, header), (base_offset, _) in zip(accepted, assigned, strict=True):
        size = header.size_in_bytes
        try:
            decoded = RecordBatch(stored[position:position + size]).records()
        except CONSUMER_ERRORS as exc:
            raise AssertionError(f"the leader accepted a batch the reader cannot decode: "
                                 f"{exc}") from exc
        check(pos == position, "batches are not consecutive")
        _check_batch(decoded, header, base_offset, config)
        _check_rebuilt(decoded, header, base_offset)
        expected.extend(decoded)
        position += size
    consumed = _consume(stored, check_crcs=True, read_committed=False)
    check(consumed == expected,
          f"the consumer read {len(consumed)} records of the {len(expected)} written")


def _check_batch(decoded: list[Record], header: BatchHeader, base_offset: int,
                 config: LogConfig) -> None:
    check(len(decoded) == header.record_count,
          f"{len(decoded)} records decoded, the header says {header.record_count}")
    check([r.offset for r in decoded] == list(range(base_offset, base_offset + len(decoded))),
          "decoded offsets are not the batch's consecutive offsets")
    if header.timestamp_type == TimestampType.CREATE_TIME:
        check(max(r.timestamp for r in decoded) == header.max_timestamp,
              "the header's max timestamp is not the records' latest")
    if config.compact:
        check(all(r.key is not None for r in decoded), "a compacted topic took a null key")


def _check_rebuilt(decoded: list[Record], header: BatchHeader, base_offset: int) -> None:
    """The builder writes the decoded records back into a batch the reader reads alike
    (unless a timestamp is one the builder refuses: it is stricter than the wire)."""
    builder = BatchBuilder(
        producer_id=header.producer_id, producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence, transactional=header.is_transactional,
        base_offset=base_offset)
    if header.producer_id == NO_PRODUCER_ID:
        builder = BatchBuilder(base_offset=base_offset)
    try:
        for record in decoded:
            builder.append(record.value, key=record.key, headers=record.headers,
                           timestamp=record.timestamp, offset=record.offset)
    except InvalidTimestampError:
        return
    again = RecordBatch(builder.build()).records()
    check(again == decoded, "records built again from the decoded ones decode differently")
