"""Entry point: ``python -m services.controller`` (flags or STRAND_* environment)."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal

from services.controller.server import ControllerProcess, ControllerSettings, new_controller_id
from strand.service.logs import setup_logging
from strand.service.telemetry import add_metrics_port_argument, setup_telemetry


def parse_args(argv: list[str] | None = None) -> ControllerSettings:
    env = os.environ.get
    parser = argparse.ArgumentParser(prog="strand-controller", description=__doc__)
    add_metrics_port_argument(parser)
    parser.add_argument("--etcd", default=env("STRAND_ETCD", "127.0.0.1:2379"),
                        help="comma-separated etcd endpoints host:port")
    parser.add_argument("--cluster", default=env("STRAND_CLUSTER", "local"))
    parser.add_argument("--listen", default=env("STRAND_LISTEN", "127.0.0.1:9093"))
    parser.add_argument("--advertise", default=env("STRAND_ADVERTISE"),
                        help="address other processes use to reach this one (default: --listen)")
    parser.add_argument("--id", default=env("STRAND_CONTROLLER_ID") or new_controller_id())
    parser.add_argument("--lease-ttl", type=int, default=int(env("STRAND_LEASE_TTL", "5")),
                        help="seconds without a keepalive before a standby takes over")
    parser.add_argument("--preferred-leader-interval", type=float,
                        default=float(env("STRAND_PREFERRED_LEADER_INTERVAL", "30")),
                        help="seconds between restorations of preferred leaders")
    args = parser.parse_args(argv)
    if args.preferred_leader_interval <= 0:
        parser.error("--preferred-leader-interval must be positive")
    return ControllerSettings(
        etcd_endpoints=[e.strip() for e in args.etcd.split(",") if e.strip()],
        cluster=args.cluster, listen=args.listen, advertise=args.advertise or args.listen,
        controller_id=args.id, lease_ttl=args.lease_ttl, metrics_port=args.metrics_port,
        preferred_leader_interval_s=args.preferred_leader_interval,
    )


async def _main(settings: ControllerSettings) -> None:
    process = ControllerProcess(settings)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, process.stop)
    await process.run()


def main(argv: list[str] | None = None) -> None:
    setup_logging("controller", os.environ.get("STRAND_LOG_LEVEL", "INFO"))
    settings = parse_args(argv)
    setup_telemetry("controller", metrics_port=settings.metrics_port)
    asyncio.run(_main(settings))


if __name__ == "__main__":
    main()
