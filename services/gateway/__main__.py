"""Entry point: ``python -m services.gateway`` (flags or STRAND_* environment)."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal

from services.gateway.server import GatewayProcess, GatewaySettings
from strand.service.logs import setup_logging
from strand.service.telemetry import add_metrics_port_argument, setup_telemetry


def parse_args(argv: list[str] | None = None) -> GatewaySettings:
    env = os.environ.get
    parser = argparse.ArgumentParser(prog="strand-gateway", description=__doc__)
    add_metrics_port_argument(parser)
    parser.add_argument("--etcd", default=env("STRAND_ETCD", "127.0.0.1:2379"),
                        help="comma-separated etcd endpoints host:port")
    parser.add_argument("--cluster", default=env("STRAND_CLUSTER", "local"))
    parser.add_argument("--listen", default=env("STRAND_LISTEN", "127.0.0.1:9092"))
    args = parser.parse_args(argv)
    return GatewaySettings(
        etcd_endpoints=[e.strip() for e in args.etcd.split(",") if e.strip()],
        cluster=args.cluster, listen=args.listen, metrics_port=args.metrics_port)


async def _main(settings: GatewaySettings) -> None:
    process = GatewayProcess(settings)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, process.stop)
    await process.run()


def main(argv: list[str] | None = None) -> None:
    setup_logging("gateway", os.environ.get("STRAND_LOG_LEVEL", "INFO"))
    settings = parse_args(argv)
    setup_telemetry("gateway", metrics_port=settings.metrics_port)
    asyncio.run(_main(settings))


if __name__ == "__main__":
    main()
