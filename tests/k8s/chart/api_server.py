"""kmock's Kubernetes emulator (tests/support/kube_emulator.py) on a port of
127.0.0.1, served from a thread of its own: the chart's processes (the storage pods'
init container, the operator) call it while the test itself waits synchronously on
them."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.request
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, Self, TypeVar

import kmock

from tests.support.kube_emulator import KubeEmulator, declare_topic_resources

T = TypeVar("T")


class EmulatedApiServer:
    def __init__(self, namespaces: tuple[str, ...] = ()) -> None:
        self._namespaces = namespaces
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="kmock",
                                        daemon=True)
        self._emulator: kmock.KubernetesEmulator | None = None
        self._server: kmock.Server | None = None

    def _run(self, coroutine: Coroutine[Any, Any, T], timeout: float = 10.0) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    def __enter__(self) -> Self:
        self._thread.start()

        async def start() -> None:
            self._emulator = KubeEmulator()
            self._emulator.namespaces = self._namespaces
            await self._emulator.__aenter__()
            self._server = kmock.Server(self._emulator)
            await self._server.__aenter__()

        self._run(start())
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        async def stop() -> None:
            if self._server is not None:
                await self._server.__aexit__(None, None, None)
            if self._emulator is not None:
                await self._emulator.__aexit__(None, None, None)

        try:
            self._run(stop())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    @property
    def emulator(self) -> kmock.KubernetesEmulator:
        assert self._emulator is not None, "the emulated API server is not running"
        return self._emulator

    @property
    def url(self) -> str:
        assert self._server is not None, "the emulated API server is not running"
        return str(self._server.url).rstrip("/")

    def declare_topic_resources(self) -> None:
        """What kopf discovers: Topics, Events, namespaces, CRDs."""
        async def declare() -> None:
            declare_topic_resources(self.emulator)

        self._run(declare())

    def store(self, resource: str, namespace: str | None, name: str,
              obj: dict[str, Any]) -> None:
        """Put an object into the emulator as if it existed in the cluster."""
        async def store() -> None:
            self.emulator.objects[resource, namespace, name] = obj

        self._run(store())

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One HTTP call to the emulator, as a user's kubectl would make it."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.url + path, data=data, method=method,
            headers={"Content-Type": "application/json"} if data else {})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read() or b"null")
