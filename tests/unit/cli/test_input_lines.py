"""``strand produce`` reads its input with strand.cli.input_lines: every line as
written (the last one may lack its newline), and Ctrl-C interrupts a wait for the
next line even when the kernel hands SIGINT to another thread."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from strand.cli.input_lines import input_lines


def test_lines_come_out_as_written() -> None:
    read_end, write_end = os.pipe()

    def write() -> None:  # more than a pipe holds: written while being read
        os.write(write_end, b"a\nbb\n\nc" + b"x" * 100_000 + b"\nlast")
        os.close(write_end)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert list(input_lines(read_end)) == [b"a\n", b"bb\n", b"\n",
                                               b"c" + b"x" * 100_000 + b"\n", b"last"]
    finally:
        writer.join()
        os.close(read_end)


def test_sigint_to_another_thread_interrupts_the_wait() -> None:
    read_end, write_end = os.pipe()  # open and silent: the reader waits for ever
    helper = threading.Event()

    def other_thread() -> None:
        helper.wait(5)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)

    thread = threading.Thread(target=other_thread)
    # The test runner may have been started with SIGINT ignored (a background job):
    # handle it as Python does by default, as `strand produce` does.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    thread.start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            helper.set()
            next(input_lines(read_end))
        assert time.monotonic() - started < 5
    finally:
        thread.join()
        signal.signal(signal.SIGINT, previous)
        os.close(write_end)
        os.close(read_end)
