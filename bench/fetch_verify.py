"""The cost of verifying served batches on the fetch path (issue 11, point 6): a 1 MiB
read of a partition log, with and without :func:`verify_batches`, for batches of
1 KiB and 16 KiB. JSON on stdout. ``python -m bench.fetch_verify``."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from strand.log import LogConfig, PartitionLog
from strand.log.integrity import verify_batches
from strand.records import BatchBuilder

READ_BYTES = 1 << 20
ROUNDS = 200


def measure(batch_bytes: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        log = PartitionLog.open(Path(tmp) / "t-0", LogConfig())
        value = b"x" * (batch_bytes - 100)
        for _ in range(2 * READ_BYTES // batch_bytes):
            builder = BatchBuilder()
            builder.append(value, timestamp=1_700_000_000_000)
            log.append_as_leader(builder.build(), 0)
        start = time.perf_counter()
        for _ in range(ROUNDS):
            data = log.read(0, READ_BYTES)
        read_s = (time.perf_counter() - start) / ROUNDS
        start = time.perf_counter()
        for _ in range(ROUNDS):
            verify_batches(data)
        verify_s = (time.perf_counter() - start) / ROUNDS
        log.close()
    return {"batch_bytes": batch_bytes, "read_us": round(read_s * 1e6, 1),
            "verify_us": round(verify_s * 1e6, 1),
            "verify_gb_per_s": round(len(data) / verify_s / 1e9, 2),
            "overhead_pct": round(100 * verify_s / read_s, 1)}


def main() -> None:
    print(json.dumps([measure(size) for size in (1024, 16 * 1024)], indent=2))


if __name__ == "__main__":
    main()
