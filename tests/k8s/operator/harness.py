"""The operator's end-to-end harness: kopf running the operator's own handlers
in-process against kmock's Kubernetes emulator, and helpers to act as a user
(create, patch and delete Topics and StrandUsers, put Secrets, over the emulator's
HTTP API) and to wait for what the operator did (the resources' status and Events,
the Secrets it wrote)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import itertools
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiohttp.web
import jsonschema
import kmock
import kopf
import yaml

from strand_operator.config import OperatorConfig
from strand_operator.handlers import build_registry, operator_settings
from strand_operator.strand_gateway import StrandGateway
from strand_operator.topic_spec import CLUSTER_LABEL, GROUP, PLURAL, VERSION
from strand_operator.user_spec import PLURAL as USER_PLURAL

T = TypeVar("T")
CRD = Path(__file__).resolve().parents[3] / "k8s" / "crds" / "topics.strand.io.yaml"
USER_CRD = CRD.with_name("strandusers.strand.io.yaml")
NAMESPACE = "apps"
NAMESPACE_WATCH_S = 2.0
TOPICS = f"{GROUP}/{VERSION}/{PLURAL}"
USERS = f"{GROUP}/{VERSION}/{USER_PLURAL}"
SECRETS = "v1/secrets"
_created = itertools.count()
_generated = itertools.count()
_versions = itertools.count(1)
_uids = itertools.count(1)


class TopicEmulator(kmock.KubernetesEmulator):
    """kmock's emulator with two behaviours of the real API server that kopf relies on
    and kmock 0.8 lacks:

    * every write gives the object a new metadata.resourceVersion, and a JSON-patch
      whose ``test`` of it fails is refused with 422: kopf adds and removes its
      finalizer that way, and without the check a stale patch (removing a finalizer
      another patch already removed) fails with a 500 over and over;
    * objects created with only ``generateName`` (kopf's Events) get a name; kmock
      would store them all under no name, and every Event after the first would
      conflict with it;
    * it lists and watches namespaces (the watched ones): kmock 0.8 cannot parse
      ``/api/v1/namespaces`` (it takes "namespaces" for the start of a namespaced
      path) and answers 500, and kopf lists and watches namespaces at startup.
    """

    namespaces: tuple[str, ...] = (NAMESPACE,)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.status_writes: Counter[str] = Counter()  # status patches, by object name

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        if raw_request.path.rstrip("/") != "/api/v1/namespaces":
            return await super().__call__(raw_request)
        items = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
                 for n in self.namespaces]
        if raw_request.query.get("watch") != "true":
            return aiohttp.web.json_response({"apiVersion": "v1", "kind": "NamespaceList",
                                              "metadata": {"resourceVersion": "1"},
                                              "items": items})
        # Nothing ever changes: an empty stream, ended after the client's own timeout
        # (a few seconds at most) so that the server can always shut down.
        response = aiohttp.web.StreamResponse()
        await response.prepare(raw_request)
        timeout = float(raw_request.query.get("timeoutSeconds") or NAMESPACE_WATCH_S)
        await asyncio.sleep(min(timeout, NAMESPACE_WATCH_S))
        return response

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
            if request.subresource == "status":
                self.status_writes[request.name] += 1
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


def declare_resources(emulator: kmock.KubernetesEmulator, users: bool = True) -> None:
    """What kopf discovers and watches: Topics and StrandUsers (with a status
    subresource; ``users`` False: a cluster without the StrandUser CRD), Events,
    namespaces and CRDs (kopf does not start watching without the last two); and
    Secrets, which the operator writes for StrandUsers."""
    emulator.resources[TOPICS] = kmock.ResourceInfo(
        kind="Topic", singular="topic", namespaced=True, shortnames={"st"},
        subresources={"status"},
        verbs={"get", "list", "watch", "create", "patch", "update", "delete"})
    if users:
        emulator.resources[USERS] = kmock.ResourceInfo(
            kind="StrandUser", singular="stranduser", namespaced=True, shortnames={"su"},
            subresources={"status"},
            verbs={"get", "list", "watch", "create", "patch", "update", "delete"})
    emulator.resources[SECRETS] = kmock.ResourceInfo(
        kind="Secret", singular="secret", namespaced=True,
        verbs={"get", "list", "create", "patch", "update", "delete"})
    emulator.resources["v1/events"] = kmock.ResourceInfo(
        kind="Event", singular="event", namespaced=True, verbs={"create", "list"})
    emulator.resources["v1/namespaces"] = kmock.ResourceInfo(
        kind="Namespace", singular="namespace", namespaced=False, verbs={"list", "watch"})
    emulator.resources["apiextensions.k8s.io/v1/customresourcedefinitions"] = (
        kmock.ResourceInfo(kind="CustomResourceDefinition", singular="customresourcedefinition",
                           namespaced=False, verbs={"get", "list", "watch"}))


@dataclass
class Operator:
    """The running operator and the emulator it talks to."""

    emulator: kmock.KubernetesEmulator
    config: OperatorConfig

    # ------------------------------------------------------------ acting as a user

    def _path(self, name: str = "", plural: str = PLURAL) -> str:
        base = f"/apis/{GROUP}/{VERSION}/namespaces/{NAMESPACE}/{plural}"
        return f"{base}/{name}" if name else base

    async def _create(self, kind: str, plural: str, name: str, spec: Mapping[str, Any],
                      annotations: Mapping[str, str] | None, cluster: str | None) -> None:
        """Create a resource as the API server would store it (creation time, generation)."""
        created = datetime.datetime.now(datetime.UTC) + datetime.timedelta(
            seconds=next(_created))  # strictly increasing: ages decide conflicts
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind,
                "metadata": {"name": name, "namespace": NAMESPACE, "generation": 1,
                             "uid": f"uid-{name}-{next(_uids)}",
                             "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
                             "labels": {CLUSTER_LABEL: cluster or self.config.cluster},
                             "annotations": dict(annotations or {})},
                "spec": dict(spec)}
        response = await self.emulator.post(self._path(plural=plural), json=body)
        assert response.status < 300, await response.text()

    async def _patch(self, plural: str, current: Mapping[str, Any], spec: Mapping[str, Any] | None,
                     annotations: Mapping[str, str | None] | None) -> None:
        """Merge-patch a resource; a spec change bumps metadata.generation as Kubernetes does."""
        metadata: dict[str, Any] = {}
        if spec is not None:
            metadata["generation"] = int(current["metadata"].get("generation", 1)) + 1
        if annotations is not None:
            metadata["annotations"] = dict(annotations)
        patch: dict[str, Any] = {"metadata": metadata}
        if spec is not None:
            patch["spec"] = dict(spec)
        response = await self.emulator.patch(
            self._path(current["metadata"]["name"], plural), json=patch,
            headers={"Content-Type": "application/merge-patch+json"})
        assert response.status < 300, await response.text()

    async def create_topic(self, name: str, spec: Mapping[str, Any],
                           annotations: Mapping[str, str] | None = None,
                           cluster: str | None = None) -> None:
        await self._create("Topic", PLURAL, name, spec, annotations, cluster)

    async def patch_topic(self, name: str, spec: Mapping[str, Any] | None = None,
                          annotations: Mapping[str, str | None] | None = None) -> None:
        await self._patch(PLURAL, self.topic(name), spec, annotations)

    async def delete_topic(self, name: str) -> None:
        response = await self.emulator.delete(self._path(name))
        assert response.status < 300, await response.text()

    async def create_user(self, name: str, spec: Mapping[str, Any]) -> None:
        await self._create("StrandUser", USER_PLURAL, name, spec, None, None)

    async def patch_user(self, name: str, spec: Mapping[str, Any]) -> None:
        await self._patch(USER_PLURAL, self.user(name), spec, None)

    async def delete_user(self, name: str) -> None:
        response = await self.emulator.delete(self._path(name, USER_PLURAL))
        assert response.status < 300, await response.text()

    async def put_secret(self, name: str, data: Mapping[str, str]) -> None:
        """Create a Secret of ``data`` (plain text, stored base64 as the API server does)."""
        body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": name, "namespace": NAMESPACE},
                "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}
        response = await self.emulator.post(f"/api/v1/namespaces/{NAMESPACE}/secrets",
                                            json=body)
        assert response.status < 300, await response.text()

    # ------------------------------------------------------------ what the operator did

    def _stored(self, resource: str, name: str) -> dict[str, Any] | None:
        # Not `key in objects`: kmock 0.8's __contains__ does not parse "group/v/plural".
        try:
            stored = self.emulator.objects[resource, NAMESPACE, name]
        except KeyError:
            return None
        return None if stored.deleted else dict(stored.raw)

    def exists(self, name: str) -> bool:
        return self._stored(TOPICS, name) is not None

    def topic(self, name: str) -> dict[str, Any]:
        raw: dict[str, Any] = dict(self.emulator.objects[TOPICS, NAMESPACE, name].raw)
        return raw

    def statuses(self, name: str) -> list[dict[str, Any]]:
        """Every status the Topic has had, oldest first (the emulator keeps versions)."""
        history = self.emulator.objects[TOPICS, NAMESPACE, name].history
        return [dict(v.raw.get("status") or {}) for v in history if v is not None]

    def ready(self, name: str) -> dict[str, Any]:
        """The Topic's Ready condition ({} before the operator set one)."""
        return _ready(self.topic(name))

    def user_exists(self, name: str) -> bool:
        return self._stored(USERS, name) is not None

    def user(self, name: str) -> dict[str, Any]:
        raw: dict[str, Any] = dict(self.emulator.objects[USERS, NAMESPACE, name].raw)
        return raw

    def user_ready(self, name: str) -> dict[str, Any]:
        """The StrandUser's Ready condition ({} before the operator set one)."""
        return _ready(self.user(name))

    def secret(self, name: str) -> dict[str, Any] | None:
        """The Secret ``name`` (None when there is none), its data decoded."""
        stored = self._stored(SECRETS, name)
        if stored is None:
            return None
        stored["data"] = {k: base64.b64decode(v).decode()
                          for k, v in (stored.get("data") or {}).items()}
        return stored

    def events(self, name: str, kind: str = "Topic") -> list[dict[str, Any]]:
        """The Events recorded about the ``kind`` ``name``, oldest first."""
        out = []
        for (resource, _, _), obj in self.emulator.objects.items():
            if resource.plural != "events" or obj.deleted:
                continue
            event = dict(obj.raw)
            involved = event.get("involvedObject") or {}
            if involved.get("kind") == kind and involved.get("name") == name:
                out.append(event)
        return out

    def reasons(self, name: str) -> list[str]:
        return [e.get("reason", "") for e in self.events(name)]


def _ready(resource: Mapping[str, Any]) -> dict[str, Any]:
    conditions = (resource.get("status") or {}).get("conditions") or []
    return next((dict(c) for c in conditions if c.get("type") == "Ready"), {})


def check_against_the_crd(topic: Mapping[str, Any], crd: Path = CRD) -> None:
    """Validate a Topic (or a StrandUser, with its ``crd``), status included, against
    the CRD's schema: a field the schema does not have would be pruned by a real API
    server."""
    (version,) = yaml.safe_load(crd.read_text())["spec"]["versions"]
    schema = version["schema"]["openAPIV3Schema"]

    def closed(node: Any) -> Any:  # structural schemas drop unknown fields: refuse them
        if isinstance(node, dict):
            node = {k: closed(v) for k, v in node.items()}
            if "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
                node.setdefault("additionalProperties", False)
        return node

    status_schema = closed(schema["properties"]["status"])
    jsonschema.Draft7Validator(schema).validate(dict(topic))
    jsonschema.Draft7Validator(status_schema).validate(dict(topic.get("status") or {}))


async def eventually(check: Callable[[], T], timeout: float = 30.0, what: str = "") -> T:
    """Poll ``check`` until it returns a truthy value (and return it) or fail."""
    deadline = asyncio.get_running_loop().time() + timeout
    last: object = None
    while True:
        try:
            value = check()
        except (AssertionError, KeyError) as exc:
            last = exc
        else:
            if value:
                return value
            last = value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or check}: "
                                 f"last saw {last!r}")
        await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def running_operator(emulator: kmock.KubernetesEmulator, config: OperatorConfig,
                           user_crd: bool = True) -> AsyncIterator[Operator]:
    """kopf running the operator's registry against ``emulator`` until the block ends
    (``user_crd`` False: the StrandUser CRD is not installed)."""
    declare_resources(emulator, users=user_crd)
    gateway = StrandGateway(config.bootstrap, config.request_timeout_s, config.security)
    registry = build_registry(config, gateway)

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(server=str(emulator.url).rstrip("/"), insecure=True)

    settings = operator_settings(config)
    settings.watching.server_timeout = 10  # the emulator's streams end only on cancel
    # kopf gets a thread and an event loop of its own: on stopping, it cancels every
    # task of its loop that it did not find there when it started, which in the
    # test's loop would include pytest-asyncio's fixture teardown.
    stop, ready = threading.Event(), threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(kopf.operator(
                registry=registry, settings=settings, standalone=True, clusterwide=False,
                namespaces=list(config.namespaces), stop_flag=stop, ready_flag=ready))
        except BaseException as exc:  # reported by the test, not lost in the thread
            failure.append(exc)
            ready.set()

    thread = threading.Thread(target=run, name="kopf-operator", daemon=True)
    thread.start()
    assert await asyncio.to_thread(ready.wait, 30), "the operator did not start in 30 s"
    if failure:
        raise failure[0]
    try:
        yield Operator(emulator, config)
    finally:
        stop.set()
        await asyncio.to_thread(thread.join, 30)
        gateway.close()
        assert not thread.is_alive(), "the operator did not stop in 30 s"
        if failure:
            raise failure[0]
