"""kmock's Kubernetes emulator as spark-submit needs it: spark-submit creates the
driver pod, then server-side-applies the driver's Service, ConfigMap and (Spark 4)
NetworkPolicy (PATCH with ``application/apply-patch+yaml``), which creates them on a
real API server; kmock 0.8 answers 404 for a PATCH of a missing object, so this
emulator creates it first."""

from __future__ import annotations

import re
from typing import Any, Self

import aiohttp.web
import kmock
import yaml

from tests.k8s.chart.api_server import EmulatedApiServer

APPLY_PATCH = "application/apply-patch+yaml"
# /api/v1/namespaces/NS/PLURAL/NAME or /apis/GROUP/VERSION/namespaces/NS/PLURAL/NAME
_OBJECT = re.compile(r"^/(api/v1|apis/[^/]+/[^/]+)/namespaces/([^/]+)/([^/]+)/([^/]+)$")
# What spark-submit creates: resource (as kmock names it) -> kind.
SPARK_SUBMIT_RESOURCES = {"v1/pods": "Pod", "v1/services": "Service",
                          "v1/configmaps": "ConfigMap",
                          "networking.k8s.io/v1/networkpolicies": "NetworkPolicy"}


class _ApplyingEmulator(kmock.KubernetesEmulator):
    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        match = _OBJECT.match(raw_request.path)
        if raw_request.method == "PATCH" and raw_request.content_type == APPLY_PATCH and match:
            api, namespace, plural, name = match.groups()
            body: dict[str, Any] = yaml.safe_load(await raw_request.read())
            key = (f"{api.removeprefix('api/').removeprefix('apis/')}/{plural}", namespace, name)
            if key not in self.objects:
                self.objects[key] = body
            return aiohttp.web.json_response(body)
        response: aiohttp.web.StreamResponse = await super().__call__(raw_request)
        return response


class SparkSubmitApiServer(EmulatedApiServer):
    """An emulated API server spark-submit can submit a driver to."""

    def __enter__(self) -> Self:
        self._thread.start()

        async def start() -> None:
            self._emulator = _ApplyingEmulator()
            await self._emulator.__aenter__()
            self._server = kmock.Server(self._emulator)
            await self._server.__aenter__()

        self._run(start())
        for resource, kind in SPARK_SUBMIT_RESOURCES.items():
            self.declare(resource, kmock.ResourceInfo(
                kind=kind, singular=kind.lower(), namespaced=True,
                verbs={"get", "list", "watch", "create", "patch", "update", "delete"}))
        return self

    def objects(self, plural: str, namespace: str, api: str = "api/v1") -> list[dict[str, Any]]:
        """The objects of a resource in a namespace, as a client would list them."""
        listing = self.request("GET", f"/{api}/namespaces/{namespace}/{plural}")
        items: list[dict[str, Any]] = listing["items"]
        return sorted(items, key=lambda item: str(item["metadata"]["name"]))
