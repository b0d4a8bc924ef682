"""Entry point: ``python -m services.gateway`` (flags or STRAND_* environment)."""

from __future__ import annotations

from services.gateway.server import GatewayProcess, GatewaySettings
from strand.service.entry import etcd_endpoints, new_parser, run_service


def parse_args(argv: list[str] | None = None) -> GatewaySettings:
    parser = new_parser("strand-gateway", __doc__, "127.0.0.1:9092", advertise_for=None)
    args = parser.parse_args(argv)
    return GatewaySettings(
        etcd_endpoints=etcd_endpoints(args.etcd),
        cluster=args.cluster, listen=args.listen, metrics_port=args.metrics_port)


def main(argv: list[str] | None = None) -> None:
    run_service("gateway", argv, parse_args, GatewayProcess)


if __name__ == "__main__":
    main()
