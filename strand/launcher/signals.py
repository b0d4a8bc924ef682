"""Signals around launched processes, so that every process a program starts is
stopped whatever happens to the program itself.

* :func:`with_death_signal` (a command run under ``setpriv --pdeathsig``) and
  :func:`die_with_parent` (called first thing in a worker process): the kernel
  signals the child when the *thread* that started it ends (``PR_SET_PDEATHSIG``),
  even when that thread's process is SIGKILLed and has no chance to clean up. Start
  such children from a thread that outlives them (the main thread, usually). Not a
  ``preexec_fn``: Python code between fork and exec runs the at-fork handlers gRPC
  registers, and with other threads inside gRPC the child can crash (SIGSEGV) before
  it execs.
* :func:`interrupt_on_signals`: SIGINT, SIGTERM and SIGHUP all raise
  ``KeyboardInterrupt`` wherever the main thread is, so ``finally`` blocks and
  context managers run. It also keeps ``asyncio.run`` from installing its own SIGINT
  handler, which *cancels* the running task instead (a library may turn that
  cancellation into an ordinary error, and the program would carry on).
* :func:`deferred_signals`: around cleanup, a signal is remembered instead of
  raised, and re-raised once the cleanup is done (a second Ctrl-C cannot leave half
  the processes running).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import shutil
import signal
from collections.abc import Callable, Iterator, Sequence
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_PR_SET_PDEATHSIG = 1


@functools.cache
def _prctl() -> Callable[..., int] | None:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        prctl: Callable[..., int] = libc.prctl
        return prctl
    return None


def die_with_parent(signum: int = signal.SIGKILL) -> None:
    """Have the kernel send ``signum`` to this process when its parent thread ends
    (Linux; elsewhere nothing happens)."""
    prctl = _prctl()
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, int(signum))


def with_death_signal(command: Sequence[str], signum: int = signal.SIGKILL) -> list[str]:
    """``command`` run by ``setpriv --pdeathsig`` (util-linux), which sets the death
    signal and execs it (same pid); the command alone where setpriv is missing."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return list(command)
    name = signal.Signals(signum).name.removeprefix("SIG")
    return [setpriv, "--pdeathsig", name, "--", *command]


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
