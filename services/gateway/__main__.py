"""Entry point: ``python -m services.gateway`` (flags or STRAND_* environment)."""

from __future__ import annotations

import argparse
import os

from services.gateway.access import SecuritySettings
from services.gateway.kafka.framing import DEFAULT_MAX_REQUEST_BYTES
from services.gateway.kafka.listener import KafkaListenerSettings
from services.gateway.server import (
    ENTRIES_FLAG,
    MAX_PARTITION_ENTRIES,
    GatewayProcess,
    GatewaySettings,
)
from strand.security.principal import Principal
from strand.security.sessions import DEFAULT_LIFETIME_S
from strand.security.tls import ServiceTls
from strand.service.entry import etcd_endpoints, etcd_tls, new_parser, run_service, service_tls

_TRUE = ("1", "true", "yes", "on")


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def _add_security_arguments(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    group = parser.add_argument_group(
        "authentication and ACLs", "who may call, and what each principal may do "
        "(docs/security.md)")
    group.add_argument("--require-authentication", action="store_true",
                       default=_flag("STRAND_REQUIRE_AUTHENTICATION"),
                       help="refuse callers with neither a SCRAM-SHA-512 session nor a "
                            "client certificate (default: they are User:ANONYMOUS)")
    group.add_argument("--authorizer", choices=("none", "acl"),
                       default=env("STRAND_AUTHORIZER", "none"),
                       help="acl: enforce the ACLs stored in etcd, deny by default "
                            "(default none: every caller may do everything)")
    group.add_argument("--super-users", default=env("STRAND_SUPER_USERS", ""),
                       metavar="User:NAME;...",
                       help="principals the ACLs do not apply to, ';'-separated")
    group.add_argument("--allow-everyone-if-no-acl-found", action="store_true",
                       default=_flag("STRAND_ALLOW_EVERYONE_IF_NO_ACL_FOUND"),
                       help="allow what no ACL mentions (default: deny)")
    group.add_argument("--session-lifetime", type=float,
                       default=float(env("STRAND_SESSION_LIFETIME", str(DEFAULT_LIFETIME_S))),
                       metavar="SECONDS",
                       help="how long a SCRAM session lasts before the client "
                            "authenticates again")


def _security(parser: argparse.ArgumentParser, args: argparse.Namespace) -> SecuritySettings:
    super_users = tuple(u.strip() for u in args.super_users.split(";") if u.strip())
    for user in super_users:
        try:
            Principal.parse(user)
        except ValueError as exc:
            parser.error(f"--super-users: {exc}")
    if args.session_lifetime <= 0:
        parser.error("--session-lifetime must be positive")
    if super_users and args.authorizer == "none":
        parser.error("--super-users needs --authorizer acl")
    return SecuritySettings(
        authentication_required=args.require_authentication,
        authorizer=args.authorizer == "acl", super_users=super_users,
        allow_everyone_if_no_acl_found=args.allow_everyone_if_no_acl_found,
        session_lifetime_s=args.session_lifetime)


def _add_kafka_arguments(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    group = parser.add_argument_group(
        "Kafka protocol", "a listener speaking Kafka's own protocol, for unchanged Kafka "
        "clients and tools (docs/kafka.md)")
    group.add_argument("--kafka-listen", default=env("STRAND_KAFKA_LISTEN", ""),
                       metavar="HOST:PORT",
                       help="serve Kafka's protocol here (default: off; e.g. 0.0.0.0:9093)")
    group.add_argument("--kafka-advertise", default=env("STRAND_KAFKA_ADVERTISE", ""),
                       metavar="HOST:PORT",
                       help="the address Kafka clients are told to connect to: every "
                            "gateway's, e.g. the Service in front of them (default: "
                            "--kafka-listen, unless that binds every interface)")
    group.add_argument("--kafka-max-request-bytes", type=int,
                       default=int(env("STRAND_KAFKA_MAX_REQUEST_BYTES",
                                       str(DEFAULT_MAX_REQUEST_BYTES))),
                       help="the largest Kafka request accepted; a larger one closes its "
                            "connection (Kafka's socket.request.max.bytes)")


def _kafka(parser: argparse.ArgumentParser, args: argparse.Namespace,
           tls: ServiceTls | None) -> KafkaListenerSettings | None:
    """The Kafka listener's settings; with the gateway's TLS it serves TLS too (its
    certificate, CA and client certificate check: docs/kafka.md)."""
    if not args.kafka_listen:
        if args.kafka_advertise:
            parser.error("--kafka-advertise needs --kafka-listen")
        return None
    try:
        return KafkaListenerSettings(args.kafka_listen,
                                     args.kafka_advertise or args.kafka_listen,
                                     args.kafka_max_request_bytes,
                                     tls=tls.server if tls is not None else None,
                                     service_names=tls.service_names if tls is not None
                                     else ())
    except ValueError as exc:
        hint = ("" if args.kafka_advertise else
                " (--kafka-listen binds every interface: set --kafka-advertise)")
        parser.error(f"{exc}{hint}")


def parse_args(argv: list[str] | None = None) -> GatewaySettings:
    parser = new_parser("strand-gateway", __doc__, "127.0.0.1:9092", advertise_for=None)
    parser.add_argument(
        ENTRIES_FLAG[0], type=int, dest="max_partition_entries",
        default=int(os.environ.get(ENTRIES_FLAG[1], str(MAX_PARTITION_ENTRIES))),
        help="partition entries one Produce, Fetch or ListOffsets request may hold")
    _add_security_arguments(parser)
    _add_kafka_arguments(parser)
    args = parser.parse_args(argv)
    if args.max_partition_entries < 1:
        parser.error(f"{ENTRIES_FLAG[0]} must be at least 1")
    tls = service_tls(parser, args)
    return GatewaySettings(
        etcd_endpoints=etcd_endpoints(args.etcd),
        cluster=args.cluster, listen=args.listen, metrics_port=args.metrics_port,
        tls=tls, etcd_tls=etcd_tls(parser, args),
        max_partition_entries=args.max_partition_entries, security=_security(parser, args),
        kafka=_kafka(parser, args, tls))


def main(argv: list[str] | None = None) -> None:
    run_service("gateway", argv, parse_args, GatewayProcess)


if __name__ == "__main__":
    main()
