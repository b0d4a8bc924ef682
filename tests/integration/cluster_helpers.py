"""Real processes for integration tests: an etcd server and Strand services.

Imported by name (pytest puts this folder on sys.path). Everything binds to
127.0.0.1 on free ports and lives under the test's temporary directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(condition: Callable[[], bool], timeout: float, what: str,
               interval: float = 0.05) -> None:
    """Wait for an external process to reach a state (tests only: there is no event
    to wait on across a process boundary)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@dataclass
class EtcdServer:
    data_dir: Path
    client_port: int = field(default_factory=free_port)
    peer_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    def start(self) -> None:
        binary = shutil.which("etcd")
        if binary is None:
            raise RuntimeError("etcd is not installed: run `make test`, which installs "
                               "Debian's etcd-server")
        log = open(self.data_dir.with_suffix(".log"), "ab")  # noqa: SIM115 - owned by Popen
        self.process = subprocess.Popen(
            [binary, "--data-dir", str(self.data_dir), "--name", "test",
             "--listen-client-urls", f"http://{self.endpoint}",
             "--advertise-client-urls", f"http://{self.endpoint}",
             "--listen-peer-urls", f"http://127.0.0.1:{self.peer_port}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.peer_port}",
             "--initial-cluster", f"test=http://127.0.0.1:{self.peer_port}",
             "--unsafe-no-fsync"],
            stdout=log, stderr=subprocess.STDOUT,
        )
        wait_until(self._serving, 20, "etcd to serve")

    def _serving(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(f"etcd exited with {self.process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(
                ("127.0.0.1", self.client_port), timeout=0.2):
            return True
        return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@dataclass
class ServiceProcess:
    """A Strand service started as ``python -m services.<name>``."""

    name: str
    args: list[str]
    log_path: Path
    listen_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.listen_port}"

    def start(self) -> ServiceProcess:
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by Popen
        env = {**os.environ, "PYTHONPATH": str(REPO), "STRAND_LOG_LEVEL": "INFO"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", f"services.{self.name}", "--listen", self.address,
             *self.args], cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env)
        wait_until(self.healthy, 30, f"{self.name} on {self.address} to be healthy")
        return self

    def healthy(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.process.returncode}; "
                               f"log:\n{self.log_path.read_text()[-3000:]}")
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        with grpc.insecure_channel(self.address) as channel:
            try:
                response = health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(), timeout=0.5)
            except grpc.RpcError:
                return False
        return bool(response.status == health_pb2.HealthCheckResponse.SERVING)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]
