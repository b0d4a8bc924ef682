"""The consumer-group workload: members of one group, each its own process
(``group_member.py``), consume the chaos topic and commit after processing, while
the harness replaces them so that partitions keep changing owners.

Every ``churn`` seconds (jittered) one member is retired and a new one takes its
slot: usually closed cleanly (it leaves the group), sometimes (``crash_share``)
SIGKILLed — a crash: no commit of what it processed last, no LeaveGroup, its
partitions move only once its session times out, and a commit it had in flight
stays ambiguous. Member names are never reused, so each ownership is one process's.

Each member's stdout (JSON lines, see group_member.py) is turned into the history:
reads (``History.reads``, one session per assignment of a member), ownership periods
(``History.ownerships``) and commits (``History.commits``). Members are started
from this workload's own thread, which outlives them: with ``setpriv --pdeathsig``
they die with it (and with the harness).
"""

from __future__ import annotations

import contextlib
import json
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .harness import GROUP_ID, ChaosCluster, child
from .history import (
    AMBIGUOUS,
    CLOSED,
    CRASHED,
    EXITED,
    LOST,
    OK,
    REVOKED,
    Commit,
    History,
    Ownership,
    Read,
)

CLOSE_TIMEOUT = 45.0  # a LeaveGroup may wait for a shard to find its coordinator


@dataclass(frozen=True)
class GroupSettings:
    members: int = 3  # 0: no group workload
    churn: float = 8.0  # seconds between member replacements (0: never)
    crash_share: float = 0.3  # of the replacements that are SIGKILLs
    session_timeout_ms: int = 6000
    heartbeat_interval_ms: int = 500
    max_poll_interval_ms: int = 30_000
    request_timeout_ms: int = 30_000
    assignor: str = "range"


class MemberProcess:
    """One member process and the thread turning its stdout into the history."""

    def __init__(self, name: str, command: list[str], log_path: Path, history: History,
                 errors: list[str]) -> None:
        self.name, self.history, self.errors = name, history, errors
        self.process = child(command, log_path)
        self.t_killed = -1.0
        self.owned: dict[int, Ownership] = {}
        self.sessions = 0
        self.commits: dict[int, list[Commit]] = {}
        self.closed_at = -1.0
        self.reader = threading.Thread(target=self._read, name=f"chaos-{name}-out", daemon=True)
        self.reader.start()

    # -- control --------------------------------------------------------------------------

    def request_close(self) -> None:
        """Ask it to close: it stops polling, closes its consumer (LeaveGroup), exits."""
        with contextlib.suppress(OSError, ValueError):
            assert self.process.stdin is not None
            self.process.stdin.write("stop\n")
            self.process.stdin.close()

    def wait_closed(self, timeout: float) -> None:
        """Wait for it to close; SIGKILL it if it takes longer (then it counts as
        crashed, and the slow close is reported among the group's errors)."""
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.history.group_errors.append(
                f"{self.name} did not close within {timeout:g}s: killed")
            self.kill()
        self.reader.join(10)

    def close(self, timeout: float) -> None:
        self.request_close()
        self.wait_closed(timeout)

    def kill(self) -> None:
        """SIGKILL: a crash."""
        if self.process.poll() is None:
            self.t_killed = time.monotonic()
            self.process.kill()
        self.process.wait()
        with contextlib.suppress(OSError, ValueError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        self.reader.join(10)

    # -- its reports ----------------------------------------------------------------------

    def _read(self) -> None:
        out: IO[str] | None = self.process.stdout
        assert out is not None
        for line in out:
            try:
                self._event(json.loads(line))
            except (ValueError, KeyError, TypeError) as exc:
                self.errors.append(f"{self.name}: unreadable report {line[:200]!r}: {exc}")
        self.process.wait()
        self._ended()

    def _event(self, event: dict[str, Any]) -> None:
        kind, t = event["e"], float(event["t"])
        if kind == "reads":
            period = self.owned.get(int(event["p"]))
            session = period.session if period else f"{self.name}/unowned"
            for offset, value in event["r"]:
                self.history.reads.append(Read(session, int(event["p"]), int(offset),
                                               str(value), t))
        elif kind == "assigned":
            self.sessions += 1
            session = f"{self.name}/a{self.sessions}"
            for p in event["parts"]:
                seen = event["committed"].get(str(p))
                period = Ownership(self.name, session, int(p), int(event["gen"]),
                                   float(event["since"]), t, seen,
                                   announced=bool(event["announced"]))
                self._end(int(p), t, REVOKED)  # a second assignment ends the first
                self.owned[int(p)] = period
                self.history.ownerships.append(period)
        elif kind in ("revoked", "lost"):
            for p in event["parts"]:
                self._end(int(p), t, REVOKED if kind == "revoked" else LOST)
        elif kind == "commit":
            commits = [Commit(self.name, int(p), int(o), int(event["gen"]), t)
                       for p, o in event["offsets"].items()]
            self.commits[int(event["id"])] = commits
            self.history.commits.extend(commits)
        elif kind == "committed":
            for commit in self.commits.pop(int(event["id"]), []):
                commit.t_end = t
                commit.outcome = OK if event["ok"] else AMBIGUOUS
                commit.error = str(event["error"])
        elif kind == "error":
            self.history.group_errors.append(f"{self.name}: {event['error']}")
        elif kind == "closed":
            self.closed_at = t

    def _end(self, partition: int, t: float, how: str) -> None:
        period = self.owned.pop(partition, None)
        if period is not None:
            period.t_end, period.end = t, how

    def _ended(self) -> None:
        """The process is gone: what it owned ends, what it was committing is ambiguous."""
        if self.closed_at >= 0:
            how, t = CLOSED, self.closed_at
        elif self.t_killed >= 0:
            how, t = CRASHED, self.t_killed
        else:
            how, t = EXITED, time.monotonic()
            self.errors.append(f"{self.name} exited on its own with status "
                               f"{self.process.returncode}")
        for partition in list(self.owned):
            self._end(partition, t, how)
        for commits in self.commits.values():
            for commit in commits:
                commit.t_end, commit.outcome = t, AMBIGUOUS
                commit.error = f"no answer: the member {how}"
        self.commits.clear()
        self.history.members[self.name] = how


class GroupWorkload(threading.Thread):
    """Keeps ``settings.members`` members running and replaces one every ``churn`` s."""

    def __init__(self, cluster: ChaosCluster, topic: str, settings: GroupSettings,
                 history: History, rng: random.Random, errors: list[str],
                 say: Callable[[str], None]) -> None:
        super().__init__(name="chaos-group", daemon=True)
        self.cluster, self.topic, self.settings = cluster, topic, settings
        self.history, self.rng, self.errors, self.say = history, rng, errors, say
        self.stop_event = threading.Event()
        self.aborted = False
        self.slots: list[MemberProcess | None] = [None] * settings.members
        self.started = 0
        self.logs = cluster.workdir / "logs" / "members"

    def run(self) -> None:
        try:
            self.logs.mkdir(parents=True, exist_ok=True)
            for slot in range(len(self.slots)):
                self.slots[slot] = self._start()
            churn = self.settings.churn
            while not self.stop_event.wait(churn * self.rng.uniform(0.5, 1.5) if churn > 0
                                           else 3600):
                if not self.aborted:
                    self._replace(self.rng.randrange(len(self.slots)))
        except Exception as exc:  # reported by the runner: the workload broke
            self.errors.append(f"group workload: {type(exc).__name__}: {exc}")
        finally:  # this thread's children die with it: close them first
            members = [member for member in self.slots if member is not None]
            if self.aborted:
                for member in members:
                    member.kill()
            for member in members:
                member.request_close()
            for member in members:
                member.wait_closed(CLOSE_TIMEOUT)

    def stop(self, timeout: float = CLOSE_TIMEOUT + 15) -> None:
        """Close every member (in parallel) and end."""
        self.stop_event.set()
        self.join(timeout)

    def abort(self) -> None:
        """The run was interrupted: SIGKILL every member, no close."""
        self.aborted = True
        self.stop_event.set()
        for member in list(self.slots):
            if member is not None:
                member.kill()
        self.join(10)

    def _replace(self, slot: int) -> None:
        old = self.slots[slot]
        if old is not None:
            if self.rng.random() < self.settings.crash_share:
                self.say(f"group: crashing member {old.name} (SIGKILL)")
                old.kill()
            else:
                self.say(f"group: closing member {old.name}")
                old.close(CLOSE_TIMEOUT)
        self.slots[slot] = None if self.stop_event.is_set() else self._start()

    def _start(self) -> MemberProcess:
        s = self.settings
        name = f"m{self.started}"
        self.started += 1
        command = [
            sys.executable, "-m", "tests.chaos.group_member", "--bootstrap",
            self.cluster.bootstrap, "--topic", self.topic, "--group", GROUP_ID, "--name", name,
            "--tag", self.cluster.name, "--assignor", s.assignor,
            "--session-timeout-ms", str(s.session_timeout_ms),
            "--heartbeat-interval-ms", str(s.heartbeat_interval_ms),
            "--max-poll-interval-ms", str(s.max_poll_interval_ms),
            "--request-timeout-ms", str(s.request_timeout_ms)]
        member = MemberProcess(name, command, self.logs / f"{name}.log", self.history,
                               self.errors)
        self.cluster.spawned.add(member.process.pid)
        self.history.members[name] = "running"
        return member
