"""A harness that fails on purpose, for the runner's own tests: an untyped error on
inputs starting with :data:`CRASH`, a hang on inputs starting with :data:`HANG`.
Both prefixes are too long for libFuzzer to stumble on in a short run."""

from __future__ import annotations

import time

CRASH = b"CRASH-0f3a9c"
HANG = b"HANG-7d21e5"


def test_one_input(data: bytes) -> None:
    if data.startswith(CRASH):
        raise KeyError("the trap harness crashed, as asked")
    if data.startswith(HANG):
        while True:  # busy, as a decoder stuck in a loop would be
            time.monotonic()
