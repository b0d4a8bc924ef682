"""Issue 12, acceptance 3: segments holding transactional batches and COMMIT/ABORT
control batches, as the partition log writes them (leader appends and coordinator
markers), parse with kafka-python's and aiokafka's record readers: CRC, the
transactional and control flags, the control record type; and the segment's
``.txnindex`` has Kafka's TransactionIndex layout."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from aiokafka.record.control_record import ABORT_MARKER, COMMIT_MARKER
from aiokafka.record.control_record import ControlRecord as AiokafkaControlRecord

from strand.log import LogConfig, PartitionLog
from strand.log.files import TXN_INDEX_SUFFIX
from strand.log.producer_state import AppendOrigin
from strand.records import BatchBuilder, Compression, ControlType, build_end_txn_marker
from strand.records.batch import split_batches
from tests.compat.test_kafka_compat import READERS, LibReader, library_parse

T0 = 1_700_000_000_000


def _txn(pid: int, seq: int, compression: Compression) -> bytes:
    builder = BatchBuilder(producer_id=pid, producer_epoch=3, base_sequence=seq,
                           transactional=True, compression=compression)
    for i in range(3):
        builder.append(b"v%d" % (seq + i), key=b"k%d" % i, timestamp=T0)
    return builder.build()


def _marker(pid: int, control_type: ControlType) -> bytes:
    return build_end_txn_marker(control_type, producer_id=pid, producer_epoch=3,
                                coordinator_epoch=9, timestamp=T0)


@pytest.mark.parametrize("lib", READERS)
def test_segments_with_transactions_parse_with_kafka_readers(lib: LibReader,
                                                             tmp_path: Path) -> None:
    if lib.missing_codec(Compression.GZIP) is not None:
        pytest.skip(str(lib.missing_codec(Compression.GZIP)))
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    log.append_as_leader(_txn(501, 0, Compression.NONE), leader_epoch=4)
    log.append_as_leader(_txn(502, 0, Compression.GZIP), leader_epoch=4)
    log.append_as_leader(_txn(501, 3, Compression.NONE), leader_epoch=4)
    for pid, control in ((501, ControlType.COMMIT), (502, ControlType.ABORT)):
        log.append_as_leader(_marker(pid, control), leader_epoch=4,
                             origin=AppendOrigin.COORDINATOR)
    log.close()

    data = (tmp_path / "t-0" / f"{0:020d}.log").read_bytes()
    batches = [library_parse(lib, data[pos:pos + header.size_in_bytes])
               for pos, header in split_batches(memoryview(data))]
    assert all(b.crc_valid and b.is_transactional for b in batches)
    assert [(b.base_offset, b.producer_id, b.is_control) for b in batches] == [
        (0, 501, False), (3, 502, False), (6, 501, False), (9, 501, True), (10, 502, True)]
    assert [r.value for r in batches[1].records] == [b"v0", b"v1", b"v2"]
    markers = [AiokafkaControlRecord.parse(b.records[0].key) for b in batches[3:]]
    assert markers == [COMMIT_MARKER, ABORT_MARKER]
    assert [b.records[0].value for b in batches[3:]] == [struct.pack(">hi", 0, 9)] * 2

    # Kafka's TransactionIndex entry: version, producer id, first offset, last offset,
    # last stable offset (none other open: the marker's offset + 1).
    index = (tmp_path / "t-0" / f"{0:020d}{TXN_INDEX_SUFFIX}").read_bytes()
    assert struct.unpack(">hqqqq", index) == (0, 502, 3, 10, 11)
