"""What every service's ``python -m services.<name>`` shares: the flags every
service takes (etcd, cluster, listen address, metrics port, each with its
``STRAND_*`` variable) and the run: logging, telemetry, SIGTERM/SIGINT to stop."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from collections.abc import Callable
from typing import Protocol, TypeVar

from strand.service.logs import setup_logging
from strand.service.telemetry import add_metrics_port_argument, setup_telemetry


class ServiceSettings(Protocol):
    @property
    def metrics_port(self) -> int: ...


class ServiceProcess(Protocol):
    async def run(self) -> None: ...

    def stop(self) -> None: ...


Settings = TypeVar("Settings", bound=ServiceSettings)


def new_parser(prog: str, description: str | None, listen: str,
               advertise_for: str | None = "other processes") -> argparse.ArgumentParser:
    """A parser with the common flags; ``listen`` is the service's default address.
    ``advertise_for`` names who uses ``--advertise`` (None: the service has none)."""
    env = os.environ.get
    parser = argparse.ArgumentParser(prog=prog, description=description)
    add_metrics_port_argument(parser)
    parser.add_argument("--etcd", default=env("STRAND_ETCD", "127.0.0.1:2379"),
                        help="comma-separated etcd endpoints host:port")
    parser.add_argument("--cluster", default=env("STRAND_CLUSTER", "local"))
    parser.add_argument("--listen", default=env("STRAND_LISTEN", listen))
    if advertise_for is not None:
        parser.add_argument("--advertise", default=env("STRAND_ADVERTISE"),
                            help=f"address {advertise_for} use to reach this one "
                                 "(default: --listen)")
    return parser


def etcd_endpoints(text: str) -> list[str]:
    return [e.strip() for e in text.split(",") if e.strip()]


def run_service(name: str, argv: list[str] | None,
                parse_args: Callable[[list[str] | None], Settings],
                process: Callable[[Settings], ServiceProcess]) -> None:
    """Parse the flags, set up logs and telemetry, run until SIGTERM or SIGINT."""
    setup_logging(name, os.environ.get("STRAND_LOG_LEVEL", "INFO"))
    settings = parse_args(argv)
    setup_telemetry(name, metrics_port=settings.metrics_port)
    asyncio.run(_serve(process(settings)))


async def _serve(process: ServiceProcess) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, process.stop)
    await process.run()
