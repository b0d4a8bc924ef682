"""TCP proxies the harness can cut: the network fault of the chaos harness.

Every storage node and controller listens on a private port and advertises a proxy
port instead, so every connection *to* it (from the gateway, the controllers, the
other storage nodes) goes through its proxy. Cutting node X then means:

- inbound: X's proxy stops forwarding on its connections and on new ones;
- outbound: every other proxy stops forwarding on connections whose client socket
  belongs to X's process. The owner is found through the kernel: the client's
  source port gives the socket's inode in ``/proc/net/tcp[6]``, and the inode is
  looked up among ``/proc/<pid>/fd`` of X's PID (the harness keeps the PIDs current).

etcd is not proxied, so a cut node keeps its etcd session, its lease and its
registration: it is the "grey" node that the cluster still believes alive while no
peer, gateway or controller can reach it (and it can reach none of them).

Cut modes:

- ``blackhole`` (default): bytes are read and dropped in both directions, new
  connections are accepted and then ignored. Nothing is refused or reset, so
  clients only notice through their deadlines and keepalives, as with a real
  partition that drops packets. On heal those connections are reset (their byte
  streams lost data, so they cannot be resumed) and new ones forward again.
- ``reset``: connections are reset at once and new ones reset on accept (a
  partition that answers with RSTs; faster to detect).

Runs as its own process (``python -m tests.chaos.proxy``) so that forwarding does
not compete for the GIL with the workload's producers and consumers. Commands are
JSON lines on stdin, one JSON answer line each on stdout; EOF on stdin stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import socket
import struct
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

CHUNK = 64 * 1024


def _set_linger_zero(writer: asyncio.StreamWriter) -> None:
    """Make close() send an RST instead of a FIN (a reset, not an orderly end)."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def _reset(writer: asyncio.StreamWriter | None) -> None:
    if writer is None:
        return
    _set_linger_zero(writer)
    writer.transport.abort()


def socket_inodes(pid: int) -> set[int]:
    """Inodes of the sockets process ``pid`` holds open (empty if it is gone)."""
    found: set[int] = set()
    fd_dir = f"/proc/{pid}/fd"
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return found
    for name in names:
        with contextlib.suppress(OSError):
            target = os.readlink(f"{fd_dir}/{name}")
            if target.startswith("socket:["):
                found.add(int(target[8:-1]))
    return found


def connection_inodes() -> dict[tuple[int, int], int]:
    """(local port, remote port) -> socket inode for every TCP socket of this network
    namespace. gRPC connects IPv4 addresses through dual-stack IPv6 sockets, so both
    tables are read; on loopback the two ports identify a connection's client end."""
    table: dict[tuple[int, int], int] = {}
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                next(f, None)  # header line
                for line in f:
                    fields = line.split()
                    if len(fields) < 10:
                        continue
                    local_port = int(fields[1].rsplit(":", 1)[1], 16)
                    remote_port = int(fields[2].rsplit(":", 1)[1], 16)
                    table[(local_port, remote_port)] = int(fields[9])
        except OSError:
            continue
    return table


@dataclass(eq=False)
class Link:
    """One proxied connection: the client's end and, once connected, the upstream's."""

    proxy: Proxy
    client: asyncio.StreamWriter
    client_port: int
    upstream: asyncio.StreamWriter | None = None
    cut_by: str | None = None  # the cut node that silences this link, if any

    def reset(self) -> None:
        _reset(self.client)
        _reset(self.upstream)


@dataclass(eq=False)
class Proxy:
    name: str  # the proxied service ("storage-1", "controller-0")
    listen_port: int
    target_port: int
    server: asyncio.AbstractServer | None = None
    links: set[Link] = field(default_factory=set)
    accepted: int = 0


class ProxyServer:
    def __init__(self, mode: str) -> None:
        if mode not in ("blackhole", "reset"):
            raise ValueError(f"unknown cut mode {mode!r}")
        self.mode = mode
        self.proxies: dict[str, Proxy] = {}
        self.pids: dict[str, int] = {}
        self.cut: set[str] = set()

    # ---------------------------------------------------------------- forwarding

    async def _accept(self, proxy: Proxy, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        link = Link(proxy, writer, int(peer[1]) if peer else -1)
        proxy.accepted += 1
        proxy.links.add(link)
        try:
            link.cut_by = self._culprit(link, self._cut_inodes() if self.cut else {})
            if link.cut_by is not None:
                if self.mode == "reset":
                    link.reset()
                    return
                await self._discard(reader, link)
                return
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1",
                                                                     proxy.target_port)
            except OSError:
                link.reset()  # the service is down: the client sees a reset connection
                return
            link.upstream = up_writer
            await asyncio.gather(self._pump(reader, up_writer, link),
                                 self._pump(up_reader, writer, link))
        except Exception:  # a connection's failure must never stop the proxy
            link.reset()
        finally:
            proxy.links.discard(link)
            for end in (link.client, link.upstream):
                if end is not None:
                    end.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    link: Link) -> None:
        try:
            while True:
                data = await reader.read(CHUNK)
                if not data:
                    break
                if link.cut_by is not None:
                    continue  # blackholed: the bytes are lost, as packets would be
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            # One side ended: end the other too (gRPC never half-closes).
            if link.cut_by is None:
                writer.close()
            else:
                link.reset()

    async def _discard(self, reader: asyncio.StreamReader, link: Link) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while await reader.read(CHUNK):
                pass

    # ---------------------------------------------------------------- cutting

    def _cut_inodes(self) -> dict[int, str]:
        """Socket inode -> cut node, for every socket of a cut node's process."""
        owned: dict[int, str] = {}
        for name in self.cut:
            pid = self.pids.get(name)
            if pid is not None:
                for inode in socket_inodes(pid):
                    owned[inode] = name
        return owned

    def _culprit(self, link: Link, owned: dict[int, str],
                 table: dict[tuple[int, int], int] | None = None) -> str | None:
        """The cut node this link touches: the proxied node itself, or the client."""
        if link.proxy.name in self.cut:
            return link.proxy.name
        if not owned:
            return None
        if table is None:
            table = connection_inodes()
        inode = table.get((link.client_port, link.proxy.listen_port))
        return owned.get(inode) if inode is not None else None

    def cut_nodes(self, names: list[str]) -> int:
        self.cut.update(names)
        owned = self._cut_inodes()
        table = connection_inodes()
        silenced = 0
        for proxy in self.proxies.values():
            for link in list(proxy.links):
                if link.cut_by is not None:
                    continue
                culprit = self._culprit(link, owned, table)
                if culprit is not None:
                    link.cut_by = culprit
                    silenced += 1
                    if self.mode == "reset":
                        link.reset()
        return silenced

    def heal_nodes(self, names: list[str]) -> int:
        self.cut.difference_update(names)
        reset = 0
        for proxy in self.proxies.values():
            for link in list(proxy.links):
                if link.cut_by in names:
                    link.reset()
                    reset += 1
        return reset

    # ---------------------------------------------------------------- commands

    async def command(self, message: dict[str, Any]) -> dict[str, Any]:
        op = message.get("op")
        if op == "add":
            proxy = Proxy(str(message["name"]), int(message["listen"]), int(message["target"]))
            proxy.server = await asyncio.start_server(
                functools.partial(self._accept, proxy), "127.0.0.1", proxy.listen_port,
                reuse_address=True)
            self.proxies[proxy.name] = proxy
            return {"ok": True}
        if op == "pid":
            self.pids[str(message["name"])] = int(message["pid"])
            return {"ok": True}
        if op == "cut":
            return {"ok": True, "silenced": self.cut_nodes([str(n) for n in message["names"]])}
        if op == "heal":
            return {"ok": True, "reset": self.heal_nodes([str(n) for n in message["names"]])}
        if op == "stats":
            return {"ok": True, "cut": sorted(self.cut), "proxies": {
                p.name: {"links": len(p.links), "accepted": p.accepted}
                for p in self.proxies.values()}}
        return {"ok": False, "error": f"unknown op {op!r}"}


def _serve_commands(server: ProxyServer, loop: asyncio.AbstractEventLoop,
                    done: asyncio.Event) -> None:
    """Read commands on a thread (stdin is blocking); run each on the loop."""
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
            answer = asyncio.run_coroutine_threadsafe(server.command(message), loop).result(30)
        except Exception as exc:
            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    loop.call_soon_threadsafe(done.set)


async def _main(mode: str) -> None:
    server = ProxyServer(mode)
    done = asyncio.Event()
    reader = threading.Thread(target=_serve_commands,
                              args=(server, asyncio.get_running_loop(), done), daemon=True)
    reader.start()
    await done.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="blackhole", choices=["blackhole", "reset"])
    parser.add_argument("--tag", default="", help="ignored: marks the process (for pgrep)")
    args = parser.parse_args()
    asyncio.run(_main(args.mode))


if __name__ == "__main__":
    main()
