"""Lines of standard input that Ctrl-C can interrupt.

``for line in sys.stdin.buffer`` blocks the main thread in ``read()``. A SIGINT
that the kernel hands to another thread (the SDK's gRPC threads are many) does not
interrupt that read: Python runs its handler only when the main thread next runs,
i.e. after the next line or the end of input, so Ctrl-C at a terminal seemed
ignored. A reader thread feeds the lines through a bounded queue instead, and the
main thread waits on it in short slices, running the handler within 0.1 s. The
thread reads the file descriptor itself (``os.read``), not the buffered stream: a
daemon thread blocked inside a buffered read holds its lock, and the interpreter
aborts at exit when it finds that lock taken.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from collections.abc import Iterator

__all__ = ["input_lines"]

_END = b""  # a line read from a file is never empty: it has at least its newline
POLL_S = 0.1
BUFFERED_LINES = 1024  # back-pressure: the reader stays this far ahead at most
CHUNK = 64 * 1024


def input_lines(fd: int | None = None) -> Iterator[bytes]:
    """Each line of file descriptor ``fd`` (standard input by default), with its
    newline (the last one may have none)."""
    if fd is None:
        try:
            fd = sys.stdin.fileno()
        except (OSError, ValueError):  # not a file (a test's in-memory input)
            yield from sys.stdin.buffer
            return
    source = fd
    lines: queue.Queue[bytes | BaseException] = queue.Queue(BUFFERED_LINES)

    def read() -> None:
        pending = b""
        try:
            while chunk := os.read(source, CHUNK):
                pending += chunk
                *complete, pending = pending.split(b"\n")
                for line in complete:
                    lines.put(line + b"\n")
            if pending:
                lines.put(pending)
            lines.put(_END)
        except BaseException as exc:  # an I/O error is the caller's to see
            lines.put(exc)

    threading.Thread(target=read, name="stdin-reader", daemon=True).start()
    while True:
        try:
            item = lines.get(timeout=POLL_S)
        except queue.Empty:
            continue
        if isinstance(item, BaseException):
            raise item
        if item == _END:
            return
        yield item
