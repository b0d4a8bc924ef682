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


def free_port(preferred: int | None = None) -> int:
    """A port of 127.0.0.1 nobody listens on: ``preferred`` when it is free, else any."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((LOCALHOST, preferred or 0))
        except OSError:
            s.bind((LOCALHOST, 0))
        return int(s.getsockname()[1])


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
