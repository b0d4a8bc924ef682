"""``strand-service rack-from-node``: the storage pod's init step. It reads the pod's
Node from the Kubernetes API with the pod's service account and writes the node's
zone label to a file, which the storage node reads as its rack (``--rack-file``).

The API is reached with the official Kubernetes client (``kubernetes``): its in-cluster
discovery (KUBERNETES_SERVICE_HOST/PORT, the service account's CA), TLS and Status
errors. This module maps its failures to what to fix. Any failure exits non-zero; the
kubelet then retries the init container."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import urllib3.exceptions
from kubernetes.client import ApiClient, Configuration, CoreV1Api, V1Node
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.incluster_config import (
    SERVICE_HOST_ENV_NAME,
    SERVICE_PORT_ENV_NAME,
    InClusterConfigLoader,
)

from strand.service.logs import setup_logging

log = logging.getLogger("strand.rack_from_node")

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
ZONE_LABEL = "topology.kubernetes.io/zone"
RBAC_NEEDED = ('RBAC `get` on `nodes` (apiGroups [""]): a ClusterRole bound to the pod\'s '
               "service account by a ClusterRoleBinding, since nodes are not namespaced")
USER_AGENT = "strand-service rack-from-node"  # names the caller in the API's audit log


class RackLookupError(Exception):
    """Why the node's zone could not be read or written; the message says what to fix."""


@dataclass(frozen=True)
class RackFromNode:
    node: str
    output: Path
    label: str
    api_server: str | None  # None: in-cluster (KUBERNETES_SERVICE_HOST/PORT)
    token_file: Path
    ca_file: Path | None  # None: the system's trust store (with --api-server)
    timeout_s: float


def api_configuration(settings: RackFromNode, env: Mapping[str, str]) -> Configuration:
    """The client's configuration: the API's URL, the CA to trust, the bearer token."""
    token = read_token(settings.token_file)
    if settings.api_server is not None:
        if settings.ca_file is not None and not settings.ca_file.is_file():
            raise RackLookupError(f"the CA file {settings.ca_file} does not exist: pass "
                                  "--ca-file with the API server's CA")
        configuration = Configuration(
            host=settings.api_server,
            ssl_ca_cert=None if settings.ca_file is None else str(settings.ca_file))
    else:
        configuration = in_cluster_configuration(settings, env)
    # The token as read_token read it: the in-cluster loader keeps a trailing newline
    # (as `kubectl create token > file` writes one), which is no valid header value.
    configuration.api_key = {"BearerToken": token}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    # One attempt, so a failure comes within --timeout; the kubelet retries the init
    # container (with back-off) when it fails.
    configuration.retries = 0
    return configuration


def in_cluster_configuration(settings: RackFromNode, env: Mapping[str, str]) -> Configuration:
    """The API as every in-cluster client finds it (the client's InClusterConfigLoader):
    KUBERNETES_SERVICE_HOST/PORT, which Kubernetes sets in every pod, and the service
    account's CA."""
    if not env.get(SERVICE_HOST_ENV_NAME) or not env.get(SERVICE_PORT_ENV_NAME):
        raise RackLookupError(
            f"{SERVICE_HOST_ENV_NAME}/{SERVICE_PORT_ENV_NAME} are not set, so this is not "
            "running in a Kubernetes pod: pass --api-server URL")
    ca_file = settings.ca_file or SERVICE_ACCOUNT_DIR / "ca.crt"
    configuration = Configuration()
    loader = InClusterConfigLoader(
        token_filename=str(settings.token_file), cert_filename=str(ca_file),
        try_refresh_token=False, environ=env)
    try:
        loader.load_and_set(configuration)
    except (ConfigException, OSError) as exc:
        raise RackLookupError(
            f"cannot use the pod's service account (token {settings.token_file}, CA "
            f"{ca_file}): {str(exc).rstrip('.')}: mount the pod's service account token and CA "
            "(automountServiceAccountToken) or pass --token-file and --ca-file") from exc
    return configuration


def read_token(path: Path) -> str:
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise RackLookupError(
            f"cannot read the service account token {path} ({exc.strerror}): mount the "
            "pod's service account token (automountServiceAccountToken) or pass "
            "--token-file") from exc
    if not token:
        raise RackLookupError(f"the service account token file {path} is empty")
    return token


def fetch_node(configuration: Configuration, node: str, timeout_s: float) -> V1Node:
    """GET /api/v1/nodes/NODE, one attempt of at most ``timeout_s`` seconds."""
    server = configuration.host
    with ApiClient(configuration) as api_client:
        api_client.user_agent = USER_AGENT
        try:
            found = CoreV1Api(api_client).read_node(node, _request_timeout=timeout_s)
        except ApiException as exc:
            raise _api_error(exc, node, server) from exc
        except urllib3.exceptions.HTTPError as exc:
            raise _unreachable(exc, server, configuration.ssl_ca_cert) from exc
        except ValueError as exc:  # not JSON, or JSON that is no Node (pydantic's error)
            raise RackLookupError(f"the Kubernetes API at {server} answered for node "
                                  f"{node!r} with no Node object: {exc}") from exc
    if found.kind not in (None, "Node"):
        raise RackLookupError(f"the Kubernetes API at {server} answered for node {node!r} "
                              f"with a {found.kind}, not a Node")
    return found


def _unreachable(exc: urllib3.exceptions.HTTPError, server: str,
                 ca_file: str | None) -> RackLookupError:
    # With no retries urllib3 still wraps the failure in MaxRetryError: its reason says it.
    reason = exc.reason if isinstance(exc, urllib3.exceptions.MaxRetryError) else exc
    hint = (f"is {ca_file or 'the system trust store'} the API server's CA?"
            if isinstance(reason, urllib3.exceptions.SSLError) else
            "check --api-server (or KUBERNETES_SERVICE_HOST/PORT) and that network "
            "policies let the pod reach the API server")
    return RackLookupError(f"cannot reach the Kubernetes API at {server} ({reason}): {hint}")


def _api_error(exc: ApiException, node: str, server: str) -> RackLookupError:
    detail = _status_message(exc)
    if exc.status == 404:
        return RackLookupError(
            f"node {node!r} not found (the Kubernetes API at {server} answered 404: "
            f"{detail}): pass the pod's spec.nodeName (downward API) as --node")
    if exc.status == 403:
        return RackLookupError(
            f"the pod's service account may not read node {node!r} (403 Forbidden: "
            f"{detail}): it needs {RBAC_NEEDED}")
    if exc.status == 401:
        return RackLookupError(
            f"the Kubernetes API rejected the service account token (401 Unauthorized: "
            f"{detail}): is the token file the pod's current, mounted token?")
    if not exc.status:  # the client's own failures (TLS, an unsupported content type)
        return RackLookupError(f"reading node {node!r} from the Kubernetes API at {server}: "
                               f"{detail}")
    return RackLookupError(f"reading node {node!r}: the Kubernetes API at {server} answered "
                           f"{exc.status} {exc.reason}: {detail}")


def _status_message(exc: ApiException) -> str:
    """The message of the Kubernetes Status object an error carries, else its body."""
    body = exc.body if isinstance(exc.body, str) else ""
    try:
        status = json.loads(body)
    except ValueError:
        return body[:200] or str(exc.reason)
    if isinstance(status, dict) and isinstance(status.get("message"), str):
        return str(status["message"])
    return str(status)[:200]


def zone_of(node: V1Node, label: str) -> str:
    """The node's value of ``label``, "" when it has none (the client's model has
    checked that label values are strings)."""
    labels = (node.metadata.labels if node.metadata is not None else None) or {}
    return labels.get(label, "")


def write_atomically(path: Path, text: str) -> None:
    """Readers see the old file or the whole new one, never a part of it."""
    if not path.parent.is_dir():
        raise RackLookupError(f"cannot write {path}: the directory {path.parent} does not "
                              "exist (mount the volume the storage container reads)")
    try:
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent,
                                         prefix=f".{path.name}.", delete=False) as tmp:
            tmp.write(text)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.chmod(tmp.name, 0o644)
        os.replace(tmp.name, path)
    except OSError as exc:
        raise RackLookupError(f"cannot write {path}: {exc.strerror or exc}") from exc


def parse_args(argv: list[str] | None = None) -> RackFromNode:
    parser = argparse.ArgumentParser(
        prog="strand-service rack-from-node",
        description="Write the zone label of a Kubernetes node (the storage node's rack) "
                    "to a file; the file is empty when the node has no such label.")
    parser.add_argument("--node", required=True,
                        help="the node's name (the pod's spec.nodeName)")
    parser.add_argument("--output", type=Path, required=True,
                        help="file to write the label's value to (replaced atomically)")
    parser.add_argument("--label", default=ZONE_LABEL, help="the node label naming the rack")
    parser.add_argument("--api-server", help="Kubernetes API URL (default: in-cluster, from "
                                             "KUBERNETES_SERVICE_HOST/PORT)")
    parser.add_argument("--token-file", type=Path, default=SERVICE_ACCOUNT_DIR / "token",
                        help="bearer token (default: the pod's service account token)")
    parser.add_argument("--ca-file", type=Path, help="CA of the API server's certificate "
                        "(default: the service account's ca.crt when it exists)")
    parser.add_argument("--timeout", type=float, default=10.0,
                        help="seconds the API call may take")
    args = parser.parse_args(argv)
    if not args.node.strip():
        parser.error("--node must not be empty")
    if not args.label.strip():
        parser.error("--label must not be empty")
    if args.timeout <= 0:
        parser.error("--timeout must be positive")
    if args.api_server is not None and not args.api_server.startswith(("https://", "http://")):
        parser.error(f"--api-server must be an https:// (or http://) URL, not "
                     f"{args.api_server!r}")
    default_ca = SERVICE_ACCOUNT_DIR / "ca.crt"
    return RackFromNode(node=args.node, output=args.output, label=args.label,
                        api_server=args.api_server, token_file=args.token_file,
                        ca_file=args.ca_file or (default_ca if default_ca.is_file() else None),
                        timeout_s=args.timeout)


def run(settings: RackFromNode, env: Mapping[str, str]) -> str:
    """Read the node's zone and write it; returns the rack ("" for none)."""
    configuration = api_configuration(settings, env)
    rack = zone_of(fetch_node(configuration, settings.node, settings.timeout_s), settings.label)
    write_atomically(settings.output, rack)
    return rack


def main(argv: list[str] | None = None) -> None:
    setup_logging("rack-from-node", os.environ.get("STRAND_LOG_LEVEL", "INFO"))
    settings = parse_args(argv)
    try:
        rack = run(settings, os.environ)
    except RackLookupError as exc:
        log.error("cannot set the rack from the node's zone: %s", exc,
                  extra={"node": settings.node, "label": settings.label})
        sys.exit(1)
    log.info("rack written", extra={"node": settings.node, "label": settings.label,
                                     "rack": rack or None, "output": str(settings.output)})


if __name__ == "__main__":
    main()
