"""The chart's rendered workloads as local pods: each container's command, args and
environment taken exactly as rendered, with only what the cluster itself would
provide filled in — the pod's name, IP and node (downward API), the kubelet's
``$(VAR)`` expansion, the volumes (temporary directories; a Secret's holding its
keys as files, from the chart's Secrets or those the test gives as the cluster's),
and the cluster's DNS:
every Service and StatefulSet pod name in an argument or a variable becomes
127.0.0.1 and a free port, every pod's own ports free ports of its own.

An address the chart names that is no Service or pod of the chart fails here, as it
would fail to resolve in a cluster; a wrong flag or variable fails in the service.
"""

from __future__ import annotations

import base64
import re
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from strand.launcher import free_port, port_open
from strand.launcher.probes import healthy

LOCALHOST = "127.0.0.1"
Manifest = dict[str, Any]

# host:port inside an argument or a value (a URL's too).
_ADDRESS = re.compile(r"(?<![\w.-])([A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?):(\d{1,5})(?![\d])")
# A flag naming a port of the process itself (--metrics-port=9100, --health-port 8080).
_PORT_FLAG = re.compile(r"^(--[a-z-]+-port)(?:=(\d+))?$")
# Kubernetes' expansion of $(VAR) in command, args and env values; $$ escapes.
_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


class ChartAddressError(AssertionError):
    """The chart names an address no Service or pod of the chart serves."""


class UndefinedVariableError(AssertionError):
    """An argument refers to a variable the container does not define (Kubernetes
    would pass ``$(NAME)`` through literally)."""


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' $(VAR) expansion: defined variables replaced, $$ -> $, the rest kept."""
    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env[name] if name in env else match.group(0)

    return _REFERENCE.sub(replace, text)


@dataclass
class LocalPod:
    """One pod of a rendered workload, placed on a (fake) node, with local ports."""

    name: str
    component: str
    namespace: str
    spec: dict[str, Any]
    node: str
    directory: Path  # its volumes: directory/<volume name>
    labels: dict[str, str]
    ports: dict[int, int] = field(default_factory=dict)  # container port -> local port
    uid: str = field(default_factory=lambda: str(uuid.uuid4()))

    def containers(self, init: bool = False) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.spec.get("initContainers" if init else "containers",
                                                    [])
        return found

    def port_number(self, container: Mapping[str, Any], port: int | str) -> int:
        """A probe's or Service's port (a number or a container port's name)."""
        if isinstance(port, int):
            return port
        for candidate in container.get("ports", []):
            if candidate.get("name") == port:
                return int(candidate["containerPort"])
        raise ChartAddressError(f"{self.name}: no container port named {port!r}")

    def volume(self, name: str) -> Path:
        path = self.directory / name
        path.mkdir(parents=True, exist_ok=True)
        return path


@dataclass(frozen=True)
class LocalContainer:
    """What to run for one container: argv and environment, rewritten for 127.0.0.1."""

    pod: LocalPod
    name: str
    argv: list[str]
    env: dict[str, str]
    readiness: Callable[[], bool] | None


class LocalCluster:
    """The pods of a rendering, their addresses, and their containers made local."""

    def __init__(self, manifests: Sequence[Manifest], directory: Path,
                 node_of: Callable[[str, int], str],
                 binaries: Mapping[str, str],
                 secrets: Mapping[str, Mapping[str, bytes]] = {}) -> None:
        """``node_of(component, index)`` names the node a pod runs on; ``binaries``
        maps an image's command (e.g. ``strand-service``) to the local executable;
        ``secrets`` are the Secrets the cluster holds beside the chart's (name ->
        key -> bytes), e.g. what cert-manager issued."""
        self.binaries = dict(binaries)
        self.secrets = {m["metadata"]["name"]: {k: base64.b64decode(v)
                                                for k, v in m.get("data", {}).items()}
                        for m in manifests if m["kind"] == "Secret"}
        self.secrets.update({name: dict(data) for name, data in secrets.items()})
        self.pods: list[LocalPod] = []
        self.addresses: dict[tuple[str, int], int] = {}  # (DNS name, port) -> local port
        self._taken: set[int] = set()
        # Pods of a StatefulSet have DNS names only under a headless governing Service.
        self._headless = {m["metadata"]["name"] for m in manifests
                          if m["kind"] == "Service" and m["spec"].get("clusterIP") == "None"}
        for workload in manifests:
            if workload["kind"] in ("StatefulSet", "Deployment"):
                self._add_workload(workload, directory, node_of)
            elif workload["kind"] == "Job":  # one pod, run once
                self._add_pod(f"{workload['metadata']['name']}-{uuid.uuid4().hex[:5]}",
                              workload, workload["spec"]["template"]["spec"], directory,
                              node_of, 0)
            elif workload["kind"] == "Pod":
                self._add_pod(workload["metadata"]["name"], workload, workload["spec"],
                              directory, node_of, 0)
        for service in (m for m in manifests if m["kind"] == "Service"):
            self._add_service(service)

    # -------------------------------------------------------------------- building

    def _add_workload(self, workload: Manifest, directory: Path,
                      node_of: Callable[[str, int], str]) -> None:
        name = workload["metadata"]["name"]
        spec = workload["spec"]["template"]["spec"]
        for index in range(int(workload["spec"]["replicas"])):
            # StatefulSet pods are NAME-ORDINAL; a Deployment's get a random suffix.
            pod_name = (f"{name}-{index}" if workload["kind"] == "StatefulSet"
                        else f"{name}-{uuid.uuid4().hex[:5]}")
            pod = self._add_pod(pod_name, workload, spec, directory, node_of, index)
            if workload["kind"] == "StatefulSet":
                namespace = workload["metadata"]["namespace"]
                governing = workload["spec"]["serviceName"]
                if governing not in self._headless:
                    raise ChartAddressError(f"StatefulSet {name}: its serviceName {governing!r} "
                                            f"is no headless Service of the chart")
                for host in _dns_names(f"{pod_name}.{governing}", namespace):
                    for port, local in pod.ports.items():
                        self.addresses[(host, port)] = local

    def _add_pod(self, name: str, workload: Manifest, spec: dict[str, Any], directory: Path,
                 node_of: Callable[[str, int], str], index: int) -> LocalPod:
        labels = workload["metadata"].get("labels", {})
        component = labels.get("app.kubernetes.io/component", labels.get("app.kubernetes.io/name"))
        if component is None:
            raise AssertionError(f"{workload['kind']} {workload['metadata']['name']} has no "
                                 f"app.kubernetes.io/component or name label")
        metadata = (workload["metadata"] if workload["kind"] == "Pod"
                    else workload["spec"]["template"]["metadata"])
        pod = LocalPod(name=name, component=component,
                       namespace=workload["metadata"]["namespace"], spec=spec,
                       node=node_of(component, index), directory=directory / name,
                       labels=dict(metadata.get("labels", {})))
        for container in pod.containers():
            for port in container.get("ports", []):
                pod.ports[int(port["containerPort"])] = self._free_port()
        self._mount_secrets(pod)
        self.pods.append(pod)
        return pod

    def _mount_secrets(self, pod: LocalPod) -> None:
        """A Secret volume as the kubelet mounts it: each key (or each of ``items``,
        at its path) a file, with the volume's mode. A Secret the cluster does not
        hold fails here, as the pod would never start."""
        for volume in pod.spec.get("volumes", []):
            if "secret" not in volume:
                continue
            source = volume["secret"]
            name = source["secretName"]
            if name not in self.secrets:
                raise AssertionError(f"{pod.name}: volume {volume['name']} mounts Secret "
                                     f"{name}, which the cluster does not hold (known: "
                                     f"{sorted(self.secrets)})")
            data = self.secrets[name]
            items = source.get("items") or [{"key": k, "path": k} for k in data]
            for item in items:
                if item["key"] not in data:
                    raise AssertionError(f"{pod.name}: Secret {name} has no key "
                                         f"{item['key']!r} (it has {sorted(data)})")
                path = pod.volume(volume["name"]) / item["path"]
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data[item["key"]])
                path.chmod(int(item.get("mode", source.get("defaultMode", 0o644))))

    def _free_port(self) -> int:
        """A free port not handed out before (free_port alone may repeat one)."""
        while (port := free_port()) in self._taken:
            pass
        self._taken.add(port)
        return port

    def _add_service(self, service: Manifest) -> None:
        selector = service["spec"].get("selector", {})
        backends = [p for p in self.pods
                    if selector and selector.items() <= p.labels.items()]
        if not backends:
            return
        pod = backends[0]  # a local process per port: the first backend answers
        container = pod.containers()[0]
        for host in _dns_names(service["metadata"]["name"], service["metadata"]["namespace"]):
            for port in service["spec"]["ports"]:
                target = pod.port_number(container, port.get("targetPort", port["port"]))
                if target in pod.ports:
                    self.addresses.setdefault((host, int(port["port"])), pod.ports[target])

    # ------------------------------------------------------------------ containers

    def container(self, pod: LocalPod, container: Mapping[str, Any],
                  extra_env: Mapping[str, str] = {}) -> LocalContainer:
        """The container's argv and environment as the kubelet would give them, with
        addresses, ports and volume paths made local."""
        env = self._environment(pod, container)
        mounts = {m["mountPath"]: pod.volume(m["name"])
                  for m in container.get("volumeMounts", [])}

        def local(text: str) -> str:
            expanded = expand(text, env)
            undefined = _REFERENCE.search(expanded.replace("$$", ""))
            if undefined:
                raise UndefinedVariableError(
                    f"{pod.name}/{container['name']}: {text!r} refers to {undefined.group(0)}, "
                    f"which the container does not define (it has {sorted(env)})")
            return self._localize(pod, _remount(expanded, mounts))

        command = [expand(part, env) for part in container["command"]]
        if command[0] not in self.binaries:
            raise AssertionError(f"{pod.name}/{container['name']}: no local binary for "
                                 f"{command[0]!r} (known: {sorted(self.binaries)})")
        command[0] = self.binaries[command[0]]
        args = self._localize_port_flags(pod, [local(a) for a in container.get("args", [])])
        local_env = {k: local(v) for k, v in env.items()}
        return LocalContainer(pod, container["name"], [*command, *args],
                              {**local_env, **extra_env}, self._readiness(pod, container))

    def _environment(self, pod: LocalPod, container: Mapping[str, Any]) -> dict[str, str]:
        # What the kubelet sets, then the container's variables in order (a value may
        # refer to the ones before it).
        env = {"HOSTNAME": pod.name}
        fields = {"metadata.name": pod.name, "metadata.namespace": pod.namespace,
                  "metadata.uid": pod.uid, "status.podIP": LOCALHOST,
                  "spec.nodeName": pod.node,
                  "spec.serviceAccountName": pod.spec.get("serviceAccountName", "default")}
        for variable in container.get("env", []):
            if "value" in variable:
                env[variable["name"]] = expand(str(variable["value"]), env)
            elif "fieldRef" in variable.get("valueFrom", {}):
                path = variable["valueFrom"]["fieldRef"]["fieldPath"]
                if path not in fields:
                    raise AssertionError(f"{pod.name}: downward-API field {path!r} "
                                         f"is not emulated by this test")
                env[variable["name"]] = fields[path]
            else:
                raise AssertionError(f"{pod.name}: variable {variable['name']} comes from "
                                     f"{variable.get('valueFrom')}, which this test cannot fill")
        return env

    def _localize(self, pod: LocalPod, text: str) -> str:
        def replace(match: re.Match[str]) -> str:
            host, port = match.group(1), int(match.group(2))
            if host in ("0.0.0.0", LOCALHOST):  # the pod's own address (listen, POD_IP)
                if port not in pod.ports:
                    raise ChartAddressError(f"{pod.name}: {host}:{port} is no port the "
                                            f"pod declares ({sorted(pod.ports)})")
                return f"{LOCALHOST}:{pod.ports[port]}"
            if (host, port) in self.addresses:
                return f"{LOCALHOST}:{self.addresses[(host, port)]}"
            raise ChartAddressError(
                f"{pod.name}: {host}:{port} is no Service or pod address of the chart "
                f"(known: {sorted({h for h, _ in self.addresses if h.count('.') >= 3})})")

        return _ADDRESS.sub(replace, text)

    def _localize_port_flags(self, pod: LocalPod, args: list[str]) -> list[str]:
        result: list[str] = []
        for arg in args:
            previous = _PORT_FLAG.match(result[-1]) if result else None
            flag = _PORT_FLAG.match(arg)
            if flag and flag.group(2) is not None:
                arg = f"{flag.group(1)}={self._own_port(pod, int(flag.group(2)))}"
            elif previous and previous.group(2) is None and arg.isdigit():
                arg = str(self._own_port(pod, int(arg)))
            result.append(arg)
        return result

    def _own_port(self, pod: LocalPod, port: int) -> int:
        if port not in pod.ports:
            raise ChartAddressError(f"{pod.name}: a flag names port {port}, which the pod "
                                    f"does not declare ({sorted(pod.ports)})")
        return pod.ports[port]

    def _readiness(self, pod: LocalPod,
                   container: Mapping[str, Any]) -> Callable[[], bool] | None:
        probe = container.get("readinessProbe")
        if probe is None:
            return None
        return probe_check(probe, lambda port: pod.ports[pod.port_number(container, port)])

    def of_component(self, component: str) -> list[LocalPod]:
        return [p for p in self.pods if p.component == component]


def _dns_names(name: str, namespace: str, domain: str = "cluster.local") -> Iterable[str]:
    """The names a Service (or a pod under its governing Service) resolves by."""
    return (name, f"{name}.{namespace}", f"{name}.{namespace}.svc",
            f"{name}.{namespace}.svc.{domain}")


def _remount(text: str, mounts: Mapping[str, Path]) -> str:
    """Mount paths (and paths under them) to their directories, in one pass: a
    replacement is never rewritten again (the directories may lie under /tmp)."""
    if not mounts:
        return text
    paths = "|".join(re.escape(m) for m in sorted(mounts, key=len, reverse=True))
    pattern = re.compile(rf"(?<![\w/.-])({paths})(?=/|$|[^\w.-])")
    return pattern.sub(lambda match: str(mounts[match.group(1)]), text)


def probe_check(probe: Mapping[str, Any], port_of: Callable[[int | str], int]
                ) -> Callable[[], bool]:
    """A readiness probe asked the kubelet's way, on the local port: gRPC health,
    an HTTP GET (2xx/3xx), or a TCP connect."""
    if "grpc" in probe:
        address = f"{LOCALHOST}:{port_of(probe['grpc']['port'])}"
        return lambda: healthy(address)
    if "httpGet" in probe:
        url = f"http://{LOCALHOST}:{port_of(probe['httpGet']['port'])}{probe['httpGet']['path']}"
        return lambda: _http_ok(url)
    if "tcpSocket" in probe:
        port = port_of(probe["tcpSocket"]["port"])
        return lambda: port_open(port)
    raise AssertionError(f"a probe of a kind this test does not emulate: {probe}")


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return 200 <= int(response.status) < 400
    except (OSError, urllib.error.HTTPError):
        return False
