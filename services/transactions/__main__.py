"""Entry point: ``python -m services.transactions`` (flags or STRAND_* environment)."""

from __future__ import annotations

import os
import uuid

from services.transactions.coordinator import (
    DEFAULT_ABORT_INTERVAL_MS,
    DEFAULT_EXPIRATION_INTERVAL_MS,
)
from services.transactions.server import (
    DEFAULT_TXN_SHARDS,
    TransactionsProcess,
    TransactionsSettings,
)
from services.transactions.txn_requests import DEFAULT_MAX_TIMEOUT_MS
from services.transactions.txn_store import DEFAULT_ID_EXPIRATION_MS
from strand.service.entry import (
    add_gateway_user_arguments,
    etcd_endpoints,
    etcd_tls,
    gateway_user,
    new_parser,
    run_service,
    service_tls,
)


def parse_args(argv: list[str] | None = None) -> TransactionsSettings:
    env = os.environ.get

    def number(name: str, default: int) -> int:
        return int(env(name, str(default)))

    parser = new_parser("strand-transactions", __doc__, "127.0.0.1:9095",
                        advertise_for="the gateways")
    parser.add_argument("--id", default=env("STRAND_COORDINATOR_ID")
                        or f"txns-{uuid.uuid4().hex[:8]}")
    parser.add_argument("--bootstrap", default=env("STRAND_BOOTSTRAP"),
                        help="a gateway: where __transaction_state is read and written "
                             "(required)")
    parser.add_argument("--shards", type=int,
                        default=number("STRAND_TXN_SHARDS", DEFAULT_TXN_SHARDS),
                        help="partitions of __transaction_state when this creates it "
                             "(transaction.state.log.num.partitions)")
    parser.add_argument("--lease-ttl", type=int, default=number("STRAND_LEASE_TTL", 5))
    parser.add_argument("--max-timeout-ms", type=int,
                        default=number("STRAND_TXN_MAX_TIMEOUT_MS", DEFAULT_MAX_TIMEOUT_MS),
                        help="transaction.max.timeout.ms: the longest timeout a producer "
                             "may ask for")
    parser.add_argument("--abort-interval-ms", type=int,
                        default=number("STRAND_TXN_ABORT_INTERVAL_MS", DEFAULT_ABORT_INTERVAL_MS),
                        help="how often timed-out transactions are looked for and aborted")
    parser.add_argument("--id-expiration-ms", type=int,
                        default=number("STRAND_TXN_ID_EXPIRATION_MS", DEFAULT_ID_EXPIRATION_MS),
                        help="transactional.id.expiration.ms (default 7 days)")
    parser.add_argument("--expiration-interval-ms", type=int,
                        default=number("STRAND_TXN_EXPIRATION_INTERVAL_MS",
                                       DEFAULT_EXPIRATION_INTERVAL_MS),
                        help="how often expired transactional ids are removed")
    add_gateway_user_arguments(parser)
    args = parser.parse_args(argv)
    if not args.bootstrap:
        parser.error("--bootstrap (or STRAND_BOOTSTRAP) must name a gateway")
    if min(args.shards, args.lease_ttl, args.max_timeout_ms, args.abort_interval_ms,
           args.id_expiration_ms, args.expiration_interval_ms) < 1:
        parser.error("--shards, --lease-ttl and every -ms flag must be positive")
    return TransactionsSettings(
        etcd_endpoints=etcd_endpoints(args.etcd), cluster=args.cluster, listen=args.listen,
        advertise=args.advertise or args.listen, instance_id=args.id,
        bootstrap=args.bootstrap, shards=args.shards, lease_ttl=args.lease_ttl,
        max_timeout_ms=args.max_timeout_ms, abort_interval_ms=args.abort_interval_ms,
        id_expiration_ms=args.id_expiration_ms,
        expiration_interval_ms=args.expiration_interval_ms, metrics_port=args.metrics_port,
        tls=service_tls(parser, args), etcd_tls=etcd_tls(parser, args),
        gateway_user=gateway_user(parser, args))


def main(argv: list[str] | None = None) -> None:
    run_service("transactions", argv, parse_args, TransactionsProcess)


if __name__ == "__main__":
    main()
