"""Entry point: ``python -m services.gateway`` (flags or STRAND_* environment)."""

from __future__ import annotations

import os

from services.gateway.server import (
    ENTRIES_FLAG,
    MAX_PARTITION_ENTRIES,
    GatewayProcess,
    GatewaySettings,
)
from strand.service.entry import etcd_endpoints, etcd_tls, new_parser, run_service, service_tls


def parse_args(argv: list[str] | None = None) -> GatewaySettings:
    parser = new_parser("strand-gateway", __doc__, "127.0.0.1:9092", advertise_for=None)
    parser.add_argument(
        ENTRIES_FLAG[0], type=int, dest="max_partition_entries",
        default=int(os.environ.get(ENTRIES_FLAG[1], str(MAX_PARTITION_ENTRIES))),
        help="partition entries one Produce, Fetch or ListOffsets request may hold")
    args = parser.parse_args(argv)
    if args.max_partition_entries < 1:
        parser.error(f"{ENTRIES_FLAG[0]} must be at least 1")
    return GatewaySettings(
        etcd_endpoints=etcd_endpoints(args.etcd),
        cluster=args.cluster, listen=args.listen, metrics_port=args.metrics_port,
        tls=service_tls(parser, args), etcd_tls=etcd_tls(parser, args),
        max_partition_entries=args.max_partition_entries)


def main(argv: list[str] | None = None) -> None:
    run_service("gateway", argv, parse_args, GatewayProcess)


if __name__ == "__main__":
    main()
