"""What every service's ``python -m services.<name>`` shares: the flags every
service takes (etcd, cluster, listen address, metrics port, each with its
``STRAND_*`` variable) and the run: logging, telemetry, SIGTERM/SIGINT to stop."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar

from strand.client.sasl import SaslCredentials
from strand.security.scram import MECHANISM
from strand.security.tls import ClientTls, ServiceTls, TlsError
from strand.service.logs import setup_logging
from strand.service.telemetry import add_metrics_port_argument, setup_telemetry


class ServiceSettings(Protocol):
    @property
    def metrics_port(self) -> int: ...


class ServiceProcess(Protocol):
    async def run(self) -> None: ...

    def stop(self) -> None: ...


Settings = TypeVar("Settings", bound=ServiceSettings)


def new_parser(prog: str, description: str | None, listen: str,
               advertise_for: str | None = "other processes") -> argparse.ArgumentParser:
    """A parser with the common flags; ``listen`` is the service's default address.
    ``advertise_for`` names who uses ``--advertise`` (None: the service has none)."""
    env = os.environ.get
    parser = argparse.ArgumentParser(prog=prog, description=description)
    add_metrics_port_argument(parser)
    parser.add_argument("--etcd", default=env("STRAND_ETCD", "127.0.0.1:2379"),
                        help="comma-separated etcd endpoints host:port")
    parser.add_argument("--cluster", default=env("STRAND_CLUSTER", "local"))
    parser.add_argument("--listen", default=env("STRAND_LISTEN", listen))
    if advertise_for is not None:
        parser.add_argument("--advertise", default=env("STRAND_ADVERTISE"),
                            help=f"address {advertise_for} use to reach this one "
                                 "(default: --listen)")
    tls = parser.add_argument_group(
        "TLS", "the listener serves TLS with --tls-cert and --tls-key, and the calls to "
        "the other services use TLS, verified with --tls-ca, presenting this certificate "
        "(files are followed: a rotated certificate is served without a restart)")
    tls.add_argument("--tls-cert", default=env("STRAND_TLS_CERT"), metavar="PEM",
                     help="this service's certificate chain, leaf first")
    tls.add_argument("--tls-key", default=env("STRAND_TLS_KEY"), metavar="PEM",
                     help="its private key")
    tls.add_argument("--tls-ca", default=env("STRAND_TLS_CA"), metavar="PEM",
                     help="the CA bundle other services' (and, with --tls-client-auth "
                          "required, clients') certificates chain to")
    tls.add_argument("--tls-client-auth", choices=("none", "required"),
                     default=env("STRAND_TLS_CLIENT_AUTH", "none"),
                     help="required: mutual TLS, a client without a certificate of the "
                          "CA is refused (default none)")
    tls.add_argument("--tls-service-names", default=env("STRAND_TLS_SERVICE_NAMES", ""),
                     metavar="GLOB,...",
                     help="with --tls-client-auth required: the storage nodes, controllers "
                          "and coordinators serve only callers whose certificate's name (CN "
                          "or SAN) matches one of these patterns, i.e. the services; "
                          "clients go through the gateway (default: any certificate)")
    tls.add_argument("--tls-health-port", type=int,
                     default=int(env("STRAND_TLS_HEALTH_PORT", "0")), metavar="PORT",
                     help="also serve the health service alone, in plaintext, on this port "
                          "of the listen address, for probes that cannot speak TLS (the "
                          "kubelet's gRPC probe); 0: none (default)")
    etcd_tls = parser.add_argument_group(
        "etcd TLS", "the etcd client uses TLS with --etcd-tls-ca, presenting --etcd-tls-cert "
        "when etcd asks for client certificates")
    etcd_tls.add_argument("--etcd-tls-ca", default=env("STRAND_ETCD_TLS_CA"), metavar="PEM",
                          help="the CA bundle etcd's certificate chains to")
    etcd_tls.add_argument("--etcd-tls-cert", default=env("STRAND_ETCD_TLS_CERT"),
                          metavar="PEM", help="a client certificate for etcd")
    etcd_tls.add_argument("--etcd-tls-key", default=env("STRAND_ETCD_TLS_KEY"),
                          metavar="PEM", help="its private key")
    return parser


def etcd_tls(parser: argparse.ArgumentParser, args: argparse.Namespace
             ) -> ClientTls | None:
    """The etcd client's TLS from the --etcd-tls-* flags (None: plaintext)."""
    if not (args.etcd_tls_ca or args.etcd_tls_cert or args.etcd_tls_key):
        return None
    if not args.etcd_tls_ca:
        parser.error("--etcd-tls-cert and --etcd-tls-key need --etcd-tls-ca")
    try:
        return ClientTls.from_settings("SSL", args.etcd_tls_ca, args.etcd_tls_cert,
                                       args.etcd_tls_key)
    except TlsError as exc:
        parser.error(f"etcd TLS: {exc}")


def service_tls(parser: argparse.ArgumentParser, args: argparse.Namespace
                ) -> ServiceTls | None:
    """The service's TLS from its flags (None: plaintext); a setting that cannot work
    stops it with exit code 2 and the reason."""
    if not (args.tls_cert or args.tls_key):
        if (args.tls_ca or args.tls_client_auth != "none" or args.tls_service_names
                or args.tls_health_port):
            parser.error("--tls-ca, --tls-client-auth, --tls-service-names and "
                         "--tls-health-port need --tls-cert and --tls-key")
        return None
    if not (args.tls_cert and args.tls_key):
        parser.error("--tls-cert and --tls-key go together")
    if not 0 <= args.tls_health_port <= 65535:
        parser.error("--tls-health-port must be a port number (0: none)")
    try:
        return ServiceTls.from_files(
            Path(args.tls_cert), Path(args.tls_key),
            Path(args.tls_ca) if args.tls_ca else None, args.tls_client_auth == "required",
            tuple(p.strip() for p in args.tls_service_names.split(",") if p.strip()),
            args.tls_health_port)
    except TlsError as exc:
        parser.error(str(exc))


def read_password_file(parser: argparse.ArgumentParser, path: str, flag: str) -> str:
    """The password a file holds (its first line); exit code 2 naming ``flag`` when it
    cannot be read or is empty."""
    try:
        with open(path, encoding="utf-8") as lines:
            password = lines.readline().rstrip("\r\n")
    except OSError as exc:
        parser.error(f"{flag}: cannot read the password: {exc}")
    if not password:
        parser.error(f"{flag}: {path} holds no password")
    return password


def add_gateway_user_arguments(parser: argparse.ArgumentParser) -> None:
    """A coordinator's SCRAM user at its gateway, where authentication is required and
    the coordinator has no service certificate to present."""
    env = os.environ.get
    parser.add_argument("--gateway-user", default=env("STRAND_GATEWAY_USER"), metavar="NAME",
                        help="authenticate to the gateway as this SCRAM-SHA-512 user (a "
                             "super user there), its password in --gateway-password-file")
    parser.add_argument("--gateway-password-file", default=env("STRAND_GATEWAY_PASSWORD_FILE"),
                        metavar="PATH")


def gateway_user(parser: argparse.ArgumentParser,
                 args: argparse.Namespace) -> SaslCredentials | None:
    if not args.gateway_user and not args.gateway_password_file:
        return None
    if not (args.gateway_user and args.gateway_password_file):
        parser.error("--gateway-user and --gateway-password-file go together")
    return SaslCredentials(MECHANISM, args.gateway_user, read_password_file(
        parser, args.gateway_password_file, "--gateway-password-file"))


def etcd_endpoints(text: str) -> list[str]:
    return [e.strip() for e in text.split(",") if e.strip()]


def run_service(name: str, argv: list[str] | None,
                parse_args: Callable[[list[str] | None], Settings],
                process: Callable[[Settings], ServiceProcess]) -> None:
    """Parse the flags, set up logs and telemetry, run until SIGTERM or SIGINT."""
    setup_logging(name, os.environ.get("STRAND_LOG_LEVEL", "INFO"))
    settings = parse_args(argv)
    setup_telemetry(name, metrics_port=settings.metrics_port)
    asyncio.run(_serve(process(settings)))


async def _serve(process: ServiceProcess) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, process.stop)
    await process.run()
