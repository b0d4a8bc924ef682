"""kmock's Kubernetes emulator on a port of 127.0.0.1, served from a thread of its
own: the chart's processes (the storage pods' init container, the operator) call it
while the test itself waits synchronously on them."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.request
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, Self, TypeVar

import aiohttp.web
import kmock

T = TypeVar("T")
NAMESPACES_PATH = "/api/v1/namespaces"


class _Emulator(kmock.KubernetesEmulator):
    """kmock's emulator, plus the one call kmock 0.8 cannot parse: GET
    /api/v1/namespaces (it takes "namespaces" for the start of a namespaced path and
    answers 500), which kopf makes to list and watch the namespaces it serves."""

    namespaces: tuple[str, ...] = ()

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        if raw_request.method == "GET" and raw_request.path == NAMESPACES_PATH:
            return await self._serve_namespaces(raw_request)
        response: aiohttp.web.StreamResponse = await super().__call__(raw_request)
        return response

    async def _serve_namespaces(self, raw_request: aiohttp.web.BaseRequest
                                ) -> aiohttp.web.StreamResponse:
        items = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
                 for name in self.namespaces]
        if raw_request.query.get("watch") not in ("true", "1"):
            return aiohttp.web.json_response({
                "apiVersion": "v1", "kind": "NamespaceList",
                "metadata": {"resourceVersion": "1"}, "items": items})
        stream = aiohttp.web.StreamResponse()
        await stream.prepare(raw_request)
        for item in items:
            await stream.write(json.dumps({"type": "ADDED", "object": item}).encode() + b"\n")
        # The namespaces never change here: hold the stream until the client leaves.
        while raw_request.transport is not None and not raw_request.transport.is_closing():
            await asyncio.sleep(0.5)
        return stream


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
            self._emulator = _Emulator()
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

    def declare(self, resource: str, info: kmock.ResourceInfo) -> None:
        async def declare() -> None:
            self.emulator.resources[resource] = info

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
