"""Entry point: ``python -m services.controller`` (flags or STRAND_* environment)."""

from __future__ import annotations

import argparse
import os

from services.controller.limits import PARTITIONS_FLAG, TOPICS_FLAG, RequestLimits
from services.controller.security_admin import BootstrapUser
from services.controller.server import ControllerProcess, ControllerSettings, new_controller_id
from strand.service.entry import (
    etcd_endpoints,
    etcd_tls,
    new_parser,
    read_password_file,
    run_service,
    service_tls,
)


def parse_args(argv: list[str] | None = None) -> ControllerSettings:
    env = os.environ.get
    parser = new_parser("strand-controller", __doc__, "127.0.0.1:9093")
    parser.add_argument("--id", default=env("STRAND_CONTROLLER_ID") or new_controller_id())
    parser.add_argument("--lease-ttl", type=int, default=int(env("STRAND_LEASE_TTL", "5")),
                        help="seconds without a keepalive before a standby takes over")
    parser.add_argument("--preferred-leader-interval", type=float,
                        default=float(env("STRAND_PREFERRED_LEADER_INTERVAL", "30")),
                        help="seconds between restorations of preferred leaders")
    defaults = RequestLimits()
    parser.add_argument(PARTITIONS_FLAG[0], type=int, dest="max_partitions",
                        default=int(env(PARTITIONS_FLAG[1], str(defaults.max_partitions))),
                        help="partitions one admin request may create or reassign")
    parser.add_argument(TOPICS_FLAG[0], type=int, dest="max_topics",
                        default=int(env(TOPICS_FLAG[1], str(defaults.max_topics))),
                        help="topics one admin request may name")
    parser.add_argument("--bootstrap-user", default=env("STRAND_BOOTSTRAP_USER"),
                        metavar="NAME",
                        help="a SCRAM user the active controller creates if it is missing "
                             "(the first super user of a cluster that requires "
                             "authentication); its password is read from "
                             "--bootstrap-password-file")
    parser.add_argument("--bootstrap-password-file",
                        default=env("STRAND_BOOTSTRAP_PASSWORD_FILE"), metavar="PATH")
    args = parser.parse_args(argv)
    if args.preferred_leader_interval <= 0:
        parser.error("--preferred-leader-interval must be positive")
    if args.max_partitions < 1 or args.max_topics < 1:
        parser.error(f"{PARTITIONS_FLAG[0]} and {TOPICS_FLAG[0]} must be at least 1")
    return ControllerSettings(
        etcd_endpoints=etcd_endpoints(args.etcd),
        cluster=args.cluster, listen=args.listen, advertise=args.advertise or args.listen,
        controller_id=args.id, lease_ttl=args.lease_ttl, metrics_port=args.metrics_port,
        tls=service_tls(parser, args), etcd_tls=etcd_tls(parser, args),
        preferred_leader_interval_s=args.preferred_leader_interval,
        limits=RequestLimits(args.max_partitions, args.max_topics),
        bootstrap_user=_bootstrap_user(parser, args),
    )


def _bootstrap_user(parser: argparse.ArgumentParser,
                    args: argparse.Namespace) -> BootstrapUser | None:
    if not args.bootstrap_user and not args.bootstrap_password_file:
        return None
    if not (args.bootstrap_user and args.bootstrap_password_file):
        parser.error("--bootstrap-user and --bootstrap-password-file go together")
    return BootstrapUser(args.bootstrap_user, read_password_file(
        parser, args.bootstrap_password_file, "--bootstrap-password-file"))


def main(argv: list[str] | None = None) -> None:
    run_service("controller", argv, parse_args, ControllerProcess)


if __name__ == "__main__":
    main()
