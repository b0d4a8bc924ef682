"""``python -m strand_operator``: the command line, its environment fallbacks, and
kopf run in-process (standalone: one replica, no peering objects)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

import kopf

from strand_operator.config import OperatorConfig
from strand_operator.handlers import build_registry, operator_settings
from strand_operator.strand_gateway import StrandGateway

__all__ = ["login", "main", "parse_args", "run"]


def _parser() -> argparse.ArgumentParser:
    env = os.environ
    parser = argparse.ArgumentParser(
        prog="python -m strand_operator",
        description="Strand's operator: keeps Strand topics as Topic resources say, and "
                    "users (credentials, ACLs, quotas) as StrandUser resources say.")
    parser.add_argument("--bootstrap", default=env.get("STRAND_BOOTSTRAP"),
                        help="a Strand gateway, HOST:PORT (env STRAND_BOOTSTRAP)")
    parser.add_argument("--namespace", dest="namespaces", action="append",
                        help="a namespace to watch, repeatable (env STRAND_OPERATOR_NAMESPACES,"
                             " a comma-separated list)")
    parser.add_argument("--cluster", default=env.get("STRAND_CLUSTER"),
                        help="manage the Topics labelled strand.io/cluster=NAME "
                             "(env STRAND_CLUSTER)")
    parser.add_argument("--health-port", type=int,
                        default=_int_env("STRAND_OPERATOR_HEALTH_PORT"),
                        help="serve kopf's liveness probe at http://0.0.0.0:PORT/healthz "
                             "(env STRAND_OPERATOR_HEALTH_PORT)")
    parser.add_argument("--resync-interval", type=float, default=60.0,
                        help="seconds between drift checks of each Topic (default 60)")
    parser.add_argument("--tls-ca", default=env.get("STRAND_TLS_CA"), metavar="PEM",
                        help="TLS to the gateway, verified with this CA bundle "
                             "(env STRAND_TLS_CA)")
    parser.add_argument("--tls-cert", default=env.get("STRAND_TLS_CERT"), metavar="PEM",
                        help="the operator's certificate, for mutual TLS (env STRAND_TLS_CERT)")
    parser.add_argument("--tls-key", default=env.get("STRAND_TLS_KEY"), metavar="PEM",
                        help="its private key (env STRAND_TLS_KEY)")
    parser.add_argument("--user", default=env.get("STRAND_USER") or None, metavar="NAME",
                        help="authenticate to the gateway as this SCRAM-SHA-512 user, a super "
                             "user when the cluster enforces ACLs (env STRAND_USER)")
    parser.add_argument("--password-file", default=env.get("STRAND_PASSWORD_FILE") or None,
                        metavar="PATH",
                        help="a file whose first line is --user's password, e.g. a mounted "
                             "Secret (env STRAND_PASSWORD_FILE; read once, at start)")
    return parser


def _password(path: str | None) -> str | None:
    """The first line of ``path``, as the strand CLI's --password-file reads it."""
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as lines:
            return lines.readline().rstrip("\r\n") or None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read --password-file {path}: {exc}") from None


def _int_env(name: str) -> int | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        sys.exit(f"error: {name} must be a port number, got {raw!r}")


def parse_args(argv: Sequence[str] | None = None) -> OperatorConfig:
    parser = _parser()
    args = parser.parse_args(argv)
    namespaces = args.namespaces or [
        n.strip() for n in os.environ.get("STRAND_OPERATOR_NAMESPACES", "").split(",")
        if n.strip()]
    missing = [flag for flag, value in (("--bootstrap", args.bootstrap),
                                        ("--namespace", namespaces),
                                        ("--cluster", args.cluster)) if not value]
    if missing:
        parser.error(f"missing {', '.join(missing)} (or their environment variables)")
    try:
        return OperatorConfig(bootstrap=args.bootstrap, namespaces=tuple(namespaces),
                              cluster=args.cluster, health_port=args.health_port,
                              resync_interval=args.resync_interval, tls_ca=args.tls_ca,
                              tls_cert=args.tls_cert, tls_key=args.tls_key, user=args.user,
                              password=_password(args.password_file))
    except ValueError as exc:
        parser.error(str(exc))


def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """The pod's service account in a cluster, else the kubeconfig (KUBECONFIG or
    ~/.kube/config). kopf falls back to these only for its default registry; the
    operator builds its own, so it says so."""
    return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)


def run(config: OperatorConfig) -> None:
    """Run the operator until it is signalled to stop."""
    kopf.configure(log_format=kopf.LogFormat.JSON)
    gateway = StrandGateway(config.bootstrap, config.request_timeout_s, config.security)
    registry = build_registry(config, gateway)
    kopf.on.login(registry=registry)(login)
    liveness = (f"http://0.0.0.0:{config.health_port}/healthz"
                if config.health_port is not None else None)
    kopf.run(registry=registry, settings=operator_settings(config),
             standalone=True, clusterwide=False, namespaces=list(config.namespaces),
             liveness_endpoint=liveness)


def main(argv: Sequence[str] | None = None) -> None:
    run(parse_args(argv))
