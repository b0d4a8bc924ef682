"""Signal handling shared by the peer benchmarks, so that every process they start is
stopped whatever happens to the benchmark itself.

* :func:`interrupt_on_signals`: SIGINT, SIGTERM and SIGHUP all raise
  ``KeyboardInterrupt`` wherever the main thread is, so ``finally`` blocks and
  context managers run. It also keeps ``asyncio.run`` from installing its own SIGINT
  handler, which *cancels* the running task instead: nats-py turns a cancellation
  that lands in ``publish_async``'s window wait into ``TooManyStalledMsgsError``,
  an ordinary error, and the benchmark would carry on with its next step.
* :func:`deferred_signals`: around cleanup, a signal is remembered instead of
  raised, and re-raised once the cleanup is done (a second Ctrl-C cannot leave half
  the processes running).
* :func:`die_with_parent`: ``preexec_fn`` for children the benchmark starts itself,
  so they get SIGTERM if it is SIGKILLed and has no chance to clean up.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
from collections.abc import Iterator
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_PR_SET_PDEATHSIG = 1


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def interrupt_on_signals() -> None:
    for signum in SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:  # e.g. `nohup`, `cmd &`
            signal.signal(signum, _raise_interrupt)


@contextlib.contextmanager
def deferred_signals() -> Iterator[None]:
    received: list[int] = []
    previous = {signum: signal.getsignal(signum) for signum in SIGNALS
                if signal.getsignal(signum) is not signal.SIG_IGN}

    def remember(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    for signum in previous:
        signal.signal(signum, remember)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if received:
            raise KeyboardInterrupt(signal.Signals(received[0]).name)


def die_with_parent() -> None:  # runs in the child, between fork and exec
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
