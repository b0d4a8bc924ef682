"""Entry point: ``python -m services.groups`` (flags or STRAND_* environment)."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import uuid

from services.groups.coordinator import DEFAULT_RETENTION_CHECK_INTERVAL_MS
from services.groups.offset_store import DEFAULT_RETENTION_MS
from services.groups.server import GroupsProcess, GroupsSettings
from strand.coordination.shards import DEFAULT_SHARDS
from strand.service.logs import setup_logging
from strand.service.telemetry import add_metrics_port_argument, setup_telemetry


def parse_args(argv: list[str] | None = None) -> GroupsSettings:
    env = os.environ.get
    parser = argparse.ArgumentParser(prog="strand-groups", description=__doc__)
    add_metrics_port_argument(parser)
    parser.add_argument("--etcd", default=env("STRAND_ETCD", "127.0.0.1:2379"),
                        help="comma-separated etcd endpoints host:port")
    parser.add_argument("--cluster", default=env("STRAND_CLUSTER", "local"))
    parser.add_argument("--listen", default=env("STRAND_LISTEN", "127.0.0.1:9094"))
    parser.add_argument("--advertise", default=env("STRAND_ADVERTISE"),
                        help="address the gateways use to reach this one (default: --listen)")
    parser.add_argument("--id", default=env("STRAND_COORDINATOR_ID")
                        or f"groups-{uuid.uuid4().hex[:8]}")
    parser.add_argument("--bootstrap", default=env("STRAND_BOOTSTRAP"),
                        help="a gateway: where __consumer_offsets is read and written (required)")
    parser.add_argument("--shards", type=int, default=int(env("STRAND_GROUP_SHARDS",
                                                                str(DEFAULT_SHARDS))),
                        help="partitions of __consumer_offsets when this creates it")
    parser.add_argument("--lease-ttl", type=int, default=int(env("STRAND_LEASE_TTL", "5")))
    parser.add_argument("--initial-rebalance-delay-ms", type=int,
                        default=int(env("STRAND_INITIAL_REBALANCE_DELAY_MS", "3000")),
                        help="group.initial.rebalance.delay.ms")
    parser.add_argument("--offsets-retention-ms", type=int,
                        default=int(env("STRAND_OFFSETS_RETENTION_MS",
                                        str(DEFAULT_RETENTION_MS))),
                        help="offsets.retention.minutes, in ms: how long an empty group's "
                             "committed offsets are kept (default 7 days)")
    parser.add_argument("--offsets-retention-check-interval-ms", type=int,
                        default=int(env("STRAND_OFFSETS_RETENTION_CHECK_INTERVAL_MS",
                                        str(DEFAULT_RETENTION_CHECK_INTERVAL_MS))),
                        help="offsets.retention.check.interval.ms (default 10 minutes)")
    args = parser.parse_args(argv)
    if not args.bootstrap:
        parser.error("--bootstrap (or STRAND_BOOTSTRAP) must name a gateway")
    if args.shards < 1 or args.lease_ttl < 1 or args.initial_rebalance_delay_ms < 0:
        parser.error("--shards and --lease-ttl must be positive, the delay not negative")
    if args.offsets_retention_ms < 1 or args.offsets_retention_check_interval_ms < 1:
        parser.error("--offsets-retention-ms and --offsets-retention-check-interval-ms "
                     "must be positive")
    return GroupsSettings(
        etcd_endpoints=[e.strip() for e in args.etcd.split(",") if e.strip()],
        cluster=args.cluster, listen=args.listen, advertise=args.advertise or args.listen,
        instance_id=args.id, bootstrap=args.bootstrap, shards=args.shards,
        lease_ttl=args.lease_ttl, initial_rebalance_delay_ms=args.initial_rebalance_delay_ms,
        offsets_retention_ms=args.offsets_retention_ms,
        offsets_retention_check_interval_ms=args.offsets_retention_check_interval_ms,
        metrics_port=args.metrics_port)


async def _main(settings: GroupsSettings) -> None:
    process = GroupsProcess(settings)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, process.stop)
    await process.run()


def main(argv: list[str] | None = None) -> None:
    setup_logging("groups", os.environ.get("STRAND_LOG_LEVEL", "INFO"))
    settings = parse_args(argv)
    setup_telemetry("groups", metrics_port=settings.metrics_port)
    asyncio.run(_main(settings))


if __name__ == "__main__":
    main()
