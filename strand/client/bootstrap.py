"""Which gateway a client talks to.

The address is resolved once, when a client is created, from the first of:

1. the ``bootstrap`` argument (``"host:port"``);
2. the ``STRAND_BOOTSTRAP`` environment variable (``"host:port"``);
3. the local development cluster's description, ``cluster.json`` in its directory,
   which ``strand dev up`` writes and ``strand dev down`` removes. The directory is
   ``$STRAND_DEV_DIR`` when set, else the one the last ``strand dev up`` remembered
   (``--dir``; the file ``$XDG_STATE_HOME/strand/current``, by default
   ``~/.local/state/strand/current``, names it until ``strand dev down``), else
   ``~/.strand/dev``. It is a JSON object; the SDK needs only its
   ``"gateway"`` member (``"host:port"`` of a gateway) and ignores the others, which
   belong to the CLI (the etcd endpoint, the cluster name, storage node addresses,
   process ids)::

       {"gateway": "127.0.0.1:7070", "etcd": "127.0.0.1:2379", "cluster": "local",
        "storage": ["127.0.0.1:9092"], "pids": {"gateway": 1234}}

Otherwise :class:`BootstrapError` says how to start a dev cluster or pass an address.

A comma-separated list (``"h1:p1,h2:p2"``, what Kafka users are used to) is
accepted: gateways are stateless and interchangeable, so the client uses the first
one. Put several gateways behind one address (a Kubernetes Service, a load
balancer) for failover.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from strand.errors import ErrorCode, StrandError

__all__ = [
    "DEFAULT_DEV_DIR",
    "ENV_BOOTSTRAP",
    "ENV_DEV_DIR",
    "BootstrapError",
    "dev_cluster_file",
    "dev_directory",
    "dev_pointer_file",
    "parse_address",
    "resolve_bootstrap",
]

ENV_BOOTSTRAP = "STRAND_BOOTSTRAP"
ENV_DEV_DIR = "STRAND_DEV_DIR"
DEFAULT_DEV_DIR = Path("~/.strand/dev")
CLUSTER_FILE = "cluster.json"


class BootstrapError(StrandError):
    """No gateway address could be found, or the one given is malformed: the client's
    configuration is invalid (INVALID_CONFIG; Kafka raises a ConfigException)."""

    code = ErrorCode.INVALID_CONFIG


def dev_pointer_file(env: Mapping[str, str] | None = None) -> Path:
    """Where ``strand dev up`` remembers its directory for the commands that follow
    (the XDG base directory spec's state home; a relative one is ignored, as the
    spec asks)."""
    env = os.environ if env is None else env
    state = env.get("XDG_STATE_HOME", "")
    home = Path(state) if Path(state).is_absolute() else Path("~/.local/state").expanduser()
    return home / "strand" / "current"


def dev_directory(env: Mapping[str, str] | None = None) -> Path:
    """The local development cluster's directory: ``$STRAND_DEV_DIR``, else the one
    ``strand dev up`` remembered, else ``~/.strand/dev``."""
    env = os.environ if env is None else env
    if env.get(ENV_DEV_DIR):
        return Path(env[ENV_DEV_DIR]).expanduser()
    try:
        remembered = dev_pointer_file(env).read_text().strip()
    except OSError:  # none remembered (or unreadable): the default
        remembered = ""
    return Path(remembered or DEFAULT_DEV_DIR).expanduser()


def dev_cluster_file(env: Mapping[str, str] | None = None) -> Path:
    """Where ``strand dev up`` describes the local development cluster."""
    return dev_directory(env) / CLUSTER_FILE


def parse_address(address: str) -> tuple[str, int]:
    """``"host:port"`` or ``"[v6]:port"`` → (host, port); BootstrapError if malformed."""
    text = address.strip()
    host, sep, port_text = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise BootstrapError(
            f"bad gateway address {address!r}: expected host:port, e.g. 127.0.0.1:7070")
    return host, int(port_text)


def _first(addresses: str, source: str) -> str:
    candidates = [a.strip() for a in addresses.split(",") if a.strip()]
    if not candidates:
        raise BootstrapError(f"{source} is empty: expected host:port of a Strand gateway")
    parse_address(candidates[0])
    return candidates[0]


def resolve_bootstrap(bootstrap: str | None = None,
                      env: Mapping[str, str] | None = None) -> str:
    """The ``host:port`` of the gateway to use (see the module docstring for the order)."""
    env = os.environ if env is None else env
    if bootstrap is not None:
        if not isinstance(bootstrap, str):
            raise TypeError(f"bootstrap must be a 'host:port' string, not {type(bootstrap)!r}")
        return _first(bootstrap, "the bootstrap argument")
    from_env = env.get(ENV_BOOTSTRAP)
    if from_env:
        return _first(from_env, f"${ENV_BOOTSTRAP}")
    path = dev_cluster_file(env)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise BootstrapError(
            "no Strand gateway address: pass one (e.g. Producer('127.0.0.1:7070')), set "
            f"${ENV_BOOTSTRAP}=host:port, or start a local dev cluster with `strand dev up` "
            f"(which writes {path})") from None
    except OSError as exc:
        raise BootstrapError(f"cannot read the dev cluster file {path}: {exc}") from exc
    try:
        described = json.loads(text)
    except ValueError as exc:
        raise BootstrapError(f"the dev cluster file {path} is not valid JSON: {exc}") from exc
    gateway = described.get("gateway") if isinstance(described, dict) else None
    if not isinstance(gateway, str) or not gateway.strip():
        raise BootstrapError(
            f"the dev cluster file {path} has no \"gateway\": \"host:port\" member; "
            "restart the dev cluster with `strand dev up`")
    return _first(gateway, f"\"gateway\" in {path}")
