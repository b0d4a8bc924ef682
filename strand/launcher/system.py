"""What the operating system says about processes and ports, and waiting on it.

Processes of a cluster are watched from outside: there is no event to subscribe to
across a process boundary, so :func:`wait_until` polls.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path

LOCALHOST = "127.0.0.1"


def _ephemeral_low() -> int:
    """The lowest port the kernel picks for outgoing connections and port-0 binds."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_BLOCK = 1000  # ports per test worker
_FIRST_BLOCK = 10000


def _port_block() -> range:
    """Where this process hands out ports: below the kernel's ephemeral range, so that
    no outgoing connection (ours or anyone's) takes a port between the moment it is
    handed out and the moment its service binds it; and a block per pytest-xdist
    worker (``PYTEST_XDIST_WORKER`` = gw0, gw1, ...), so that two workers never hand
    out the same one. Empty when the ephemeral range leaves no room (then: port 0)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) + 1 if worker.startswith("gw") and worker[2:].isdigit() else 0
    start = _FIRST_BLOCK + index * _BLOCK
    return range(start, min(start + _BLOCK, _ephemeral_low()))


class _PortCycle:
    """The ports of :func:`_port_block` in turn, starting at a random one (a previous
    run's ports may still linger), so that a port handed out and not yet bound is not
    handed out again before the whole block has gone round."""

    def __init__(self) -> None:
        self.block = _port_block()
        self.next = int.from_bytes(os.urandom(2), "big") % len(self.block) if self.block else 0

    def take(self) -> int | None:
        for _ in range(len(self.block)):
            port = self.block[self.next]
            self.next = (self.next + 1) % len(self.block)
            if _bindable(port):
                return port
        return None


_cycle: _PortCycle | None = None


def _bindable(port: int) -> int | None:
    """``port`` if nobody listens on it (0: whatever the kernel gives), else None."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((LOCALHOST, port))
        except OSError:
            return None
        return int(s.getsockname()[1])


def free_port(preferred: int | None = None) -> int:
    """A port of 127.0.0.1 nobody listens on: ``preferred`` when it is free, else one
    of this process's block (see :func:`_port_block`), else any."""
    global _cycle
    if preferred and _bindable(preferred):
        return preferred
    if _cycle is None:
        _cycle = _PortCycle()
    port = _cycle.take() or _bindable(0)
    if port is None:
        raise OSError("no free port on 127.0.0.1")
    return port


def port_open(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:``port``."""
    with contextlib.suppress(OSError), socket.create_connection((LOCALHOST, port), 0.2):
        return True
    return False


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs; a zombie counts as dead (reaped if it is our child)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    return process_state(pid) not in ("Z", None)


def process_state(pid: int) -> str | None:
    """The state letter of ``/proc/PID/stat`` (``R``, ``S``, ``Z`` …); None when gone."""
    with contextlib.suppress(OSError, IndexError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return None


def cpu_seconds(pid: int) -> float:
    """The CPU time (user + system) process ``pid`` has used, from /proc/<pid>/stat;
    OSError when it is gone."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # fields 14 and 15 of the whole line
    return ticks / os.sysconf("SC_CLK_TCK")


def command_line(pid: int) -> list[str]:
    """The arguments process ``pid`` was started with (empty when it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def wait_until(condition: Callable[[], bool], timeout: float, what: str = "the condition",
               interval: float = 0.05) -> None:
    """Call ``condition`` every ``interval`` seconds until it is true; TimeoutError
    naming ``what`` once ``timeout`` seconds have passed (it is not called after
    that). An exception from ``condition`` ends the wait."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")
