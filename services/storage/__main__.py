"""Entry point: ``python -m services.storage`` (flags or STRAND_* environment)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from services.storage.server import StorageProcess, StorageSettings, split_host_port
from strand.service.entry import etcd_endpoints, etcd_tls, new_parser, run_service, service_tls


def parse_args(argv: list[str] | None = None) -> StorageSettings:
    env = os.environ.get
    parser = new_parser("strand-storage", __doc__, "127.0.0.1:9092")
    node_id = parser.add_mutually_exclusive_group()
    node_id.add_argument("--node-id", type=int, default=env("STRAND_NODE_ID"),
                         help="this node's broker id (required unless --node-id-from-hostname)")
    node_id.add_argument("--node-id-from-hostname", action="store_true",
                         help="the broker id is the trailing -N of the host name (a "
                              "StatefulSet pod's ordinal): HOSTNAME, else the system's")
    rack = parser.add_mutually_exclusive_group()
    rack.add_argument("--rack", default=env("STRAND_RACK") or None,
                      help="failure domain (zone) for rack-aware placement")
    rack.add_argument("--rack-file", type=Path,
                      help="file holding the rack (written by `strand-service "
                           "rack-from-node`); empty: no rack")
    parser.add_argument("--data-dir", type=Path, default=env("STRAND_DATA_DIR"),
                        help="directory of the partition logs (required)")
    parser.add_argument("--lease-ttl", type=int, default=int(env("STRAND_LEASE_TTL", "5")),
                        help="seconds without a keepalive before the node counts as dead")
    parser.add_argument("--maintenance-interval", type=float,
                        default=float(env("STRAND_MAINTENANCE_INTERVAL", "5")),
                        help="seconds between retention/compaction/flush/checkpoint rounds")
    parser.add_argument("--io-threads", type=int, default=int(env("STRAND_IO_THREADS", "8")),
                        help="threads doing disk work")
    parser.add_argument("--shutdown-grace", type=float,
                        default=float(env("STRAND_SHUTDOWN_GRACE", "5")),
                        help="seconds in-flight calls get to finish on SIGTERM")
    parser.add_argument("--replica-lag-time-max-ms", type=float,
                        default=float(env("STRAND_REPLICA_LAG_TIME_MAX_MS", "10000")),
                        help="a follower not caught up for this long leaves the ISR")
    parser.add_argument("--controlled-shutdown-timeout", type=float,
                        default=float(env("STRAND_CONTROLLED_SHUTDOWN_TIMEOUT", "30")),
                        help="seconds SIGTERM waits for leaderships to move away")
    parser.add_argument("--reassignment-throttle", type=float,
                        default=float(env("STRAND_REASSIGNMENT_THROTTLE_MB", "50")),
                        help="MiB/s a node copies for replicas a reassignment adds to it")
    parser.add_argument("--scrub-rate", type=float,
                        default=float(env("STRAND_SCRUB_RATE_MB", "8")),
                        help="MiB/s the background scrub reads to verify sealed segments "
                             "(0: no scrub)")
    parser.add_argument("--scrub-interval", type=float,
                        default=float(env("STRAND_SCRUB_INTERVAL", "3600")),
                        help="seconds between the starts of two scrub passes")
    parser.add_argument("--disk-probe-interval", type=float,
                        default=float(env("STRAND_DISK_PROBE_INTERVAL", "2")),
                        help="seconds between checks whether a failed (full) disk has "
                             "recovered, while replicas are offline")
    parser.add_argument("--disk-probe-bytes", type=int,
                        default=int(env("STRAND_DISK_PROBE_BYTES", str(1 << 20))),
                        help="bytes the data directory must take before offline replicas "
                             "recover")
    parser.add_argument("--transaction-partition-verification", choices=("on", "off"),
                        default=env("STRAND_TXN_PARTITION_VERIFICATION", "on"),
                        help="KIP-890: ask the transaction coordinator before taking a "
                             "transactional batch for a partition not yet in the "
                             "producer's open transaction")
    args = parser.parse_args(argv)
    if args.node_id_from_hostname:
        try:
            args.node_id = node_id_from_hostname(env("HOSTNAME") or socket.gethostname())
        except ValueError as exc:
            parser.error(f"--node-id-from-hostname: {exc}")
    if args.node_id is None or int(args.node_id) < 0:
        parser.error("--node-id (or STRAND_NODE_ID) must be given and be >= 0")
    if args.rack_file is not None:
        try:
            args.rack = rack_from_file(args.rack_file)
        except OSError as exc:
            parser.error(f"--rack-file: cannot read {args.rack_file}: {exc.strerror or exc}")
    if args.data_dir is None:
        parser.error("--data-dir (or STRAND_DATA_DIR) must be given")
    advertise = args.advertise or args.listen
    try:
        split_host_port(advertise)
    except ValueError as exc:
        parser.error(f"--advertise: {exc}")
    if args.reassignment_throttle <= 0:
        parser.error("--reassignment-throttle must be positive")
    if args.scrub_rate < 0 or args.scrub_interval < 0:
        parser.error("--scrub-rate and --scrub-interval must not be negative")
    if (args.lease_ttl < 1 or args.io_threads < 1 or args.maintenance_interval <= 0
            or args.disk_probe_interval <= 0):
        parser.error("--lease-ttl, --io-threads, --maintenance-interval and "
                     "--disk-probe-interval must be positive")
    if args.disk_probe_bytes < 0:
        parser.error("--disk-probe-bytes must be >= 0")
    return StorageSettings(
        etcd_endpoints=etcd_endpoints(args.etcd),
        cluster=args.cluster, listen=args.listen, advertise=advertise,
        node_id=int(args.node_id), data_dir=Path(args.data_dir), rack=args.rack,
        lease_ttl=args.lease_ttl, maintenance_interval_s=args.maintenance_interval,
        io_threads=args.io_threads, shutdown_grace_s=args.shutdown_grace,
        metrics_port=args.metrics_port,
        tls=service_tls(parser, args), etcd_tls=etcd_tls(parser, args),
        replica_lag_time_max_ms=args.replica_lag_time_max_ms,
        controlled_shutdown_timeout_s=args.controlled_shutdown_timeout,
        reassignment_throttle_bytes_per_s=args.reassignment_throttle * 1024 * 1024,
        scrub_bytes_per_s=args.scrub_rate * 1024 * 1024, scrub_interval_s=args.scrub_interval,
        disk_probe_interval_s=args.disk_probe_interval, disk_probe_bytes=args.disk_probe_bytes,
        transaction_partition_verification=args.transaction_partition_verification == "on",
    )


def node_id_from_hostname(hostname: str) -> int:
    """The ordinal a StatefulSet gives its pod, the trailing ``-N`` of its host name
    (``strand-storage-2`` -> 2)."""
    name, sep, ordinal = hostname.rpartition("-")
    if not sep or not name or not ordinal.isdigit() or not ordinal.isascii():
        raise ValueError(f"host name {hostname!r} does not end in -N (a StatefulSet pod's "
                         "ordinal): pass --node-id instead")
    return int(ordinal)


def rack_from_file(path: Path) -> str | None:
    """The rack written to ``path`` (by the init step), None when the file is empty."""
    return path.read_text(encoding="utf-8").strip() or None


def main(argv: list[str] | None = None) -> None:
    run_service("storage", argv, parse_args, StorageProcess)


if __name__ == "__main__":
    main()
