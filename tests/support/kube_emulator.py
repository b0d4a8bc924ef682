"""kmock's Kubernetes emulator, with what kopf relies on and kmock 0.8 lacks, and the
resources a Topic operator discovers. Shared by the operator's end-to-end tests
(kopf in-process) and the chart's process test (the rendered operator and the
storage pods' init containers as processes)."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import aiohttp.web
import kmock

__all__ = ["NAMESPACE_WATCH_S", "TOPICS", "KubeEmulator", "declare_topic_resources"]

TOPICS = "strand.io/v1/topics"  # the CRD k8s/crds/topics.strand.io.yaml: group/version/plural
NAMESPACE_WATCH_S = 2.0  # how long a namespace watch is held open (nothing ever changes)
_generated = itertools.count()
_versions = itertools.count(1)


class KubeEmulator(kmock.KubernetesEmulator):
    """kmock's emulator with three behaviours of the real API server that kopf relies
    on and kmock 0.8 lacks:

    * every write gives the object a new metadata.resourceVersion, and a JSON-patch
      whose ``test`` of it fails is refused with 422: kopf adds and removes its
      finalizer that way, and without the check a stale patch (removing a finalizer
      another patch already removed) fails with a 500 over and over;
    * objects created with only ``generateName`` (kopf's Events) get a name; kmock
      would store them all under no name, and every Event after the first would
      conflict with it;
    * it lists and watches ``namespaces``: kmock 0.8 cannot parse
      ``/api/v1/namespaces`` (it takes "namespaces" for the start of a namespaced
      path) and answers 500, and kopf lists and watches namespaces at startup.
    """

    namespaces: tuple[str, ...] = ()

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        if raw_request.method != "GET" or raw_request.path.rstrip("/") != "/api/v1/namespaces":
            response: aiohttp.web.StreamResponse = await super().__call__(raw_request)
            return response
        items = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
                 for n in self.namespaces]
        if raw_request.query.get("watch") not in ("true", "1"):
            return aiohttp.web.json_response({"apiVersion": "v1", "kind": "NamespaceList",
                                              "metadata": {"resourceVersion": "1"},
                                              "items": items})
        # Nothing ever changes: an empty stream, ended after the client's own timeout
        # (a few seconds at most) so that the server can always shut down.
        stream = aiohttp.web.StreamResponse()
        await stream.prepare(raw_request)
        timeout = float(raw_request.query.get("timeoutSeconds") or NAMESPACE_WATCH_S)
        await asyncio.sleep(min(timeout, NAMESPACE_WATCH_S))
        return stream

    async def _handle(self, request: kmock.Request) -> Any:
        data = request.data
        if request.action == kmock.action.CREATE and isinstance(data, dict):
            metadata = data.setdefault("metadata", {})
            if not metadata.get("name") and metadata.get("generateName"):
                metadata["name"] = f"{metadata['generateName']}{next(_generated):06d}"
            metadata["resourceVersion"] = str(next(_versions))
        elif (request.action == kmock.action.UPDATE and request.resource is not None
              and request.name is not None):
            self._check_version(request, self.objects, request.resource, request.name)
            version = str(next(_versions))
            if isinstance(data, dict):
                data.setdefault("metadata", {})["resourceVersion"] = version
            elif isinstance(data, list):
                data.append({"op": "add", "path": "/metadata/resourceVersion", "value": version})
        return await super()._handle(request)

    @staticmethod
    def _check_version(request: kmock.Request, objects: kmock.ObjectsArray,
                       resource: kmock.resource, name: str) -> None:
        tests = [op for op in request.data if isinstance(op, dict) and op.get("op") == "test"
                 and op.get("path") == "/metadata/resourceVersion"] if isinstance(
                     request.data, list) else []
        if not tests:
            return
        try:
            current = objects[resource, request.namespace, name]
        except KeyError:
            return  # kmock answers 404 itself
        stored = (current.get("metadata") or {}).get("resourceVersion")
        if any(op.get("value") != stored for op in tests):
            raise kmock.KubernetesError(status=422, reason="Invalid",
                                        message="the object has been modified")


def declare_topic_resources(emulator: kmock.KubernetesEmulator) -> None:
    """What kopf discovers and watches: Topics (with a status subresource), Events,
    namespaces and CRDs (kopf does not start watching without the last two)."""
    emulator.resources[TOPICS] = kmock.ResourceInfo(
        kind="Topic", singular="topic", namespaced=True, shortnames={"st"},
        subresources={"status"},
        verbs={"get", "list", "watch", "create", "patch", "update", "delete"})
    emulator.resources["v1/events"] = kmock.ResourceInfo(
        kind="Event", singular="event", namespaced=True, verbs={"create", "list"})
    emulator.resources["v1/namespaces"] = kmock.ResourceInfo(
        kind="Namespace", singular="namespace", namespaced=False, verbs={"list", "watch"})
    emulator.resources["apiextensions.k8s.io/v1/customresourcedefinitions"] = (
        kmock.ResourceInfo(kind="CustomResourceDefinition", singular="customresourcedefinition",
                           namespaced=False, verbs={"get", "list", "watch"}))
