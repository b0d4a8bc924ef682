"""One process of a cluster: etcd or a Strand service, started from this checkout.

A :class:`Process` is spawned with its output in a log file, waited for until it
serves (with the tail of its log in the error when it exits instead), signalled,
paused, killed, stopped (SIGTERM, then SIGKILL) and started again with the same
command line: same ports, same data. It is either this program's child (spawned
here) or known only by its pid (``attach``: the dev cluster's processes, started by
an earlier command).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Self

from strand.launcher import probes
from strand.launcher.signals import with_death_signal
from strand.launcher.system import LOCALHOST, alive, free_port, port_open, wait_until

if TYPE_CHECKING:
    from strand.security.tls import ClientTls, ServiceTls

REPO = Path(__file__).resolve().parents[2]  # holds strand/ and services/
# The order in which a cluster stops: clients of the storage nodes first, storage
# nodes while a controller can still take their controlled shutdown, etcd last.
STOP_ORDER = ("transactions", "groups", "gateway", "storage", "controller", "etcd")
_LOG_TAIL = 3000  # characters of a dead process's log quoted in the error


class LaunchError(RuntimeError):
    """A process could not be started, or exited while it was waited for."""


def pinned_env() -> dict[str, str]:
    """Children import this checkout's code and log at INFO, whatever the caller's
    environment says (tests, benchmarks, the chaos harness)."""
    return {"PYTHONPATH": str(REPO), "STRAND_LOG_LEVEL": "INFO"}


@dataclass(frozen=True)
class Launch:
    """How processes are started."""

    # Own session: the process outlives the command that started it (strand dev up).
    detached: bool = False
    # SIGKILLed by the kernel when the thread that started it ends (see signals.py).
    die_with_parent: bool = False
    # Set over this process's environment (``{}``: the environment as it is).
    env: Mapping[str, str] = field(default_factory=pinned_env)


def etcd_binary() -> str:
    binary = shutil.which("etcd")
    if binary is None:
        raise LaunchError("etcd is not installed: run `make setup` "
                          "(or `apt-get install etcd-server`)")
    return binary


def spawn(command: Sequence[str], log_path: Path, launch: Launch) -> subprocess.Popen[bytes]:
    """Start ``command`` in this checkout, its output appended to ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    if launch.die_with_parent:
        command = with_death_signal(command)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            list(command), cwd=REPO, stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, env={**os.environ, **launch.env},
            start_new_session=launch.detached)


class Process:
    """The state and controls every process type shares; subclasses say what to run
    (:meth:`command`), where it answers (:attr:`address`) and when it serves."""

    def __init__(self, id: str, role: str, log_path: Path, launch: Launch) -> None:
        self.id = id
        self.role = role  # etcd, controller, storage, gateway, groups or transactions
        self.log_path = log_path
        self.launch = launch
        self.process: subprocess.Popen[bytes] | None = None  # when spawned here
        self.attached_pid: int | None = None  # when known by its pid only
        self.on_spawn: Callable[[Process], None] | None = None

    @property
    def address(self) -> str:
        raise NotImplementedError

    def command(self) -> list[str]:
        raise NotImplementedError

    def serving(self) -> bool:
        """Whether it answers (asked only while it runs)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id} {self.address} pid={self.pid}>"

    # -- state -----------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else self.attached_pid

    def attach(self, pid: int) -> Self:
        """Take over a process started elsewhere with this command line."""
        self.process, self.attached_pid = None, pid
        return self

    def running(self) -> bool:
        if self.process is not None:
            return self.process.poll() is None
        return self.attached_pid is not None and alive(self.attached_pid)

    @property
    def returncode(self) -> int | None:
        """Its exit status once it has ended (negative: the signal that ended it)."""
        return self.process.poll() if self.process is not None else None

    def ready(self) -> bool:
        """Whether it serves; LaunchError, quoting its log, when it has exited."""
        if not self.running():
            tail = ""
            if self.log_path.exists():
                tail = self.log_path.read_text(errors="replace")[-_LOG_TAIL:]
            raise LaunchError(f"{self.id} exited (status {self.returncode}); its log "
                              f"({self.log_path}) ends with:\n{tail}")
        return self.serving()

    # -- controls --------------------------------------------------------------------------

    def spawn(self) -> None:
        """Start it without waiting (so that several can boot at once)."""
        if self.running():
            raise LaunchError(f"{self.id} is already running (pid {self.pid})")
        self.process, self.attached_pid = spawn(self.command(), self.log_path, self.launch), None
        if self.on_spawn is not None:
            self.on_spawn(self)

    def wait_serving(self, timeout: float) -> None:
        wait_until(self.ready, timeout, f"{self.id} on {self.address} to serve")

    def start(self, timeout: float = 30.0) -> Self:
        """Spawn it (again: same command line, ports and data) and wait until it serves."""
        self.spawn()
        self.wait_serving(timeout)
        return self

    def signal(self, signum: int) -> None:
        pid = self.pid
        if pid is None:
            raise LaunchError(f"{self.id} was never started")
        os.kill(pid, signum)

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL, and wait until it is gone."""
        if not self.running():
            return
        with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
            self.signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait()
        else:
            wait_until(lambda: not self.running(), 10, f"{self.id} to die", 0.02)

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (continued first if paused); SIGKILL after ``timeout`` seconds."""
        stop_in_order([self], timeout)


def stop_in_order(processes: Iterable[Process], timeout: float = 15.0,
                  progress: Callable[[str], None] = lambda _: None) -> int:
    """Stop the running ones role by role in STOP_ORDER (others first): a role's
    processes get SIGTERM together, SIGKILL if still running ``timeout`` seconds
    later. Returns how many were running."""
    running = [p for p in processes if p.running()]
    roles = sorted({p.role for p in running},
                   key=lambda r: STOP_ORDER.index(r) if r in STOP_ORDER else -1)
    for role in roles:
        group = [p for p in running if p.role == role]
        for p in group:
            progress(f"stopping {p.id} (pid {p.pid})")
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                p.resume()  # a paused process does not act on SIGTERM
                p.signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while any(p.running() for p in group) and time.monotonic() < deadline:
            time.sleep(0.05)
        for p in group:
            if p.running():
                progress(f"{p.id} did not stop in {timeout:.0f}s: SIGKILL")
                p.kill()
    return len(running)


# ------------------------------------------------------------------------ process types

class EtcdServer(Process):
    """A single-member etcd on 127.0.0.1; serves once its client port accepts."""

    def __init__(self, data_dir: Path, client_port: int | None = None,
                 peer_port: int | None = None, *, name: str = "strand",
                 log_path: Path | None = None, unsafe_no_fsync: bool = False,
                 launch: Launch | None = None, tls: ServiceTls | None = None) -> None:
        super().__init__("etcd", "etcd", log_path or data_dir.with_suffix(".log"),
                         launch or Launch())
        self.data_dir = data_dir
        self.client_port = client_port or free_port()
        self.peer_port = peer_port or free_port()
        self.name = name  # the member's name (recorded in its data)
        self.unsafe_no_fsync = unsafe_no_fsync  # tests: faster, and no durability needed
        # Clients over TLS (its certificate, the CA of client certificates when
        # required); the peer port stays plaintext on loopback (a single member).
        self.tls = tls

    @property
    def endpoint(self) -> str:
        return f"{LOCALHOST}:{self.client_port}"

    @property
    def address(self) -> str:
        return self.endpoint

    def command(self) -> list[str]:
        peer = f"http://{LOCALHOST}:{self.peer_port}"
        scheme = "https" if self.tls is not None else "http"
        return [etcd_binary(), "--data-dir", str(self.data_dir), "--name", self.name,
                "--listen-client-urls", f"{scheme}://{self.endpoint}",
                "--advertise-client-urls", f"{scheme}://{self.endpoint}",
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", f"{self.name}={peer}",
                *(["--unsafe-no-fsync"] if self.unsafe_no_fsync else []),
                *self._tls_flags()]

    def _tls_flags(self) -> list[str]:
        if self.tls is None:
            return []
        server = self.tls.server
        flags = ["--cert-file", str(server.cert), "--key-file", str(server.key)]
        if server.ca is not None:
            flags += ["--trusted-ca-file", str(server.ca)]
        if server.require_client_cert:
            flags.append("--client-cert-auth")
        return flags

    def serving(self) -> bool:
        return port_open(self.client_port)

    def start(self, timeout: float = 20.0) -> Self:
        return super().start(timeout)


class ServiceProcess(Process):
    """A Strand service: ``python -m services.<name> --listen 127.0.0.1:<port> ARGS``;
    serves once its gRPC health check says so."""

    def __init__(self, name: str, args: Sequence[str], log_path: Path,
                 listen_port: int | None = None, *, id: str | None = None,
                 launch: Launch | None = None, tls: ClientTls | None = None) -> None:
        super().__init__(id or name, name, log_path, launch or Launch())
        self.name = name
        self.args = list(args)
        self.listen_port = listen_port or free_port()
        self.tls = tls  # how the health check reaches a TLS listener

    @property
    def address(self) -> str:
        return f"{LOCALHOST}:{self.listen_port}"

    def command(self) -> list[str]:
        return [sys.executable, "-m", f"services.{self.name}", "--listen", self.address,
                *self.args]

    def serving(self) -> bool:
        return probes.healthy(self.address, tls=self.tls)
