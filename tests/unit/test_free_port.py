"""free_port hands out ports no outgoing connection and no other test worker takes."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from strand.launcher import system
from strand.launcher.system import free_port


def _ports_of(worker: str, count: int) -> list[int]:
    script = (f"from strand.launcher.system import free_port\n"
              f"print(*[free_port() for _ in range({count})])")
    env = {"PYTEST_XDIST_WORKER": worker} if worker else {}
    out = subprocess.run([sys.executable, "-c", script], env={**env, "PATH": ""},
                         capture_output=True, text=True, check=True).stdout
    return [int(p) for p in out.split()]


def test_ports_stay_below_the_ephemeral_range_and_apart_per_worker() -> None:
    low = system._ephemeral_low()
    blocks = {worker: _ports_of(worker, 50) for worker in ("", "gw0", "gw1")}
    for ports in blocks.values():
        assert len(set(ports)) == 50
        assert all(port < low for port in ports)
    assert not set(blocks[""]) & set(blocks["gw0"])
    assert not set(blocks["gw0"]) & set(blocks["gw1"])


def test_a_port_someone_listens_on_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    cycle = system._PortCycle()
    monkeypatch.setattr(system, "_cycle", cycle)
    taken = free_port()
    following = cycle.block[cycle.next]  # what the next call hands out when it is free
    cycle.next = cycle.block.index(taken)
    with socket.socket() as listener:
        listener.bind((system.LOCALHOST, taken))
        listener.listen()
        assert free_port() == following
        assert free_port(taken) not in (taken, following)  # preferred but taken


def test_without_room_below_the_ephemeral_range_any_free_port(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(system, "_ephemeral_low", lambda: 1024)
    monkeypatch.setattr(system, "_cycle", None)
    port = free_port()
    assert port > 0
    with socket.socket() as s:
        s.bind((system.LOCALHOST, port))
