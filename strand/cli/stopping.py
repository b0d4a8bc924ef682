"""Stopping a console consumer cleanly: on SIGTERM or SIGINT, or when it has been
idle for ``--idle-timeout-ms``.

A signal only sets the reason and wakes the consumer up (``Consumer.wakeup()``, from
a short-lived thread: the handler runs between two bytecodes of the main thread,
which may be inside the consumer's own calls). The command's loop then finishes
writing what it polled, and closing the consumer commits exactly that and leaves
the group at once — rather than dying mid-stream and handing the records printed
since the last auto commit to the next member again.
"""

from __future__ import annotations

import signal
import threading
import time
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:  # clients (gRPC) and rich load when a command runs
    from strand.consumer import Consumer


__all__ = ["Stopper"]

_SIGNALS = {signal.SIGTERM: "SIGTERM", signal.SIGINT: "SIGINT"}
# Conventional exit statuses: SIGINT is 128 + 2; SIGTERM is the expected way to stop
# a long-running consumer (a service manager, a container), so a clean stop is 0.
EXIT_STATUS = {"SIGINT": 130}


class Stopper:
    def __init__(self, consumer: Consumer, idle_timeout_ms: float | None = None,
                 started: float | None = None) -> None:
        self.consumer = consumer
        self.idle_timeout_s = None if idle_timeout_ms is None else idle_timeout_ms / 1000
        self.reason: str | None = None
        self._last = time.monotonic() if started is None else started
        self._done = threading.Event()
        self._threads: list[threading.Thread] = []
        self._previous: dict[int, Any] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> Stopper:
        if threading.current_thread() is threading.main_thread():
            for signum in _SIGNALS:
                self._previous[signum] = signal.signal(signum, self._on_signal)
        if self.idle_timeout_s is not None:
            self._spawn(self._watch_idle, "idle-watchdog")
        return self

    def _spawn(self, target: Any, name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stop(_SIGNALS.get(signal.Signals(signum), str(signum)))

    def stop(self, reason: str) -> None:
        """Stop for ``reason`` (the first one given counts); any thread."""
        with self._lock:
            if self.reason is not None:
                return
            self.reason = reason
        self._spawn(self.consumer.wakeup, "stop-wakeup")

    def activity(self) -> None:
        """A record arrived: the idle time starts again."""
        self._last = time.monotonic()

    def _watch_idle(self) -> None:
        assert self.idle_timeout_s is not None
        while not self._done.wait(0.05):
            if time.monotonic() - self._last >= self.idle_timeout_s:
                self.stop("idle")
                return

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._done.set()
        # The wakeup must land before the consumer's final commit, not during it.
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(5)
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)

    def exit(self, ctx: click.Context) -> None:
        """End the command with the status its stop calls for."""
        status = EXIT_STATUS.get(self.reason or "", 0)
        if status:
            ctx.exit(status)
