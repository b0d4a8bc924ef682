"""Entry point: ``python -m services.groups`` (flags or STRAND_* environment)."""

from __future__ import annotations

import os
import uuid

from services.groups.coordinator import DEFAULT_RETENTION_CHECK_INTERVAL_MS
from services.groups.lag import DEFAULT_LAG_INTERVAL_S
from services.groups.offset_store import DEFAULT_RETENTION_MS
from services.groups.server import GroupsProcess, GroupsSettings
from strand.coordination.shards import DEFAULT_SHARDS
from strand.service.entry import (
    add_gateway_user_arguments,
    etcd_endpoints,
    etcd_tls,
    gateway_user,
    new_parser,
    run_service,
    service_tls,
)


def parse_args(argv: list[str] | None = None) -> GroupsSettings:
    env = os.environ.get
    parser = new_parser("strand-groups", __doc__, "127.0.0.1:9094", advertise_for="the gateways")
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
    parser.add_argument("--lag-interval-s", type=float,
                        default=float(env("STRAND_LAG_INTERVAL_S",
                                          str(DEFAULT_LAG_INTERVAL_S))),
                        help="how often the consumer lag of the groups this coordinator "
                             "owns is measured for its metrics (strand_consumergroup_lag; "
                             "default 15 s)")
    add_gateway_user_arguments(parser)
    args = parser.parse_args(argv)
    if not args.bootstrap:
        parser.error("--bootstrap (or STRAND_BOOTSTRAP) must name a gateway")
    if args.shards < 1 or args.lease_ttl < 1 or args.initial_rebalance_delay_ms < 0:
        parser.error("--shards and --lease-ttl must be positive, the delay not negative")
    if args.lag_interval_s <= 0:
        parser.error("--lag-interval-s must be positive")
    if args.offsets_retention_ms < 1 or args.offsets_retention_check_interval_ms < 1:
        parser.error("--offsets-retention-ms and --offsets-retention-check-interval-ms "
                     "must be positive")
    return GroupsSettings(
        etcd_endpoints=etcd_endpoints(args.etcd),
        cluster=args.cluster, listen=args.listen, advertise=args.advertise or args.listen,
        instance_id=args.id, bootstrap=args.bootstrap, shards=args.shards,
        lease_ttl=args.lease_ttl, initial_rebalance_delay_ms=args.initial_rebalance_delay_ms,
        offsets_retention_ms=args.offsets_retention_ms,
        offsets_retention_check_interval_ms=args.offsets_retention_check_interval_ms,
        metrics_port=args.metrics_port, lag_interval_s=args.lag_interval_s,
        tls=service_tls(parser, args), etcd_tls=etcd_tls(parser, args),
        gateway_user=gateway_user(parser, args))


def main(argv: list[str] | None = None) -> None:
    run_service("groups", argv, parse_args, GroupsProcess)


if __name__ == "__main__":
    main()
