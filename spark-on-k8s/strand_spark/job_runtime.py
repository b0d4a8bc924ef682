"""What both jobs (mirror, audit) do around their work: the Spark session, structured
logs, and stopping cleanly on SIGTERM (Kubernetes stopping the pod) or SIGINT."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import TYPE_CHECKING

from strand_spark.job_arguments import DEFAULT_MASTER

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def spark_session(app: str, master: str | None) -> tuple[SparkSession, bool]:
    """The active session, or a new one (and whether it is new), with the ``strand``
    data source registered. Under spark-submit (PySpark's gateway port is set) the
    master is spark-submit's unless ``master`` is given; run by python, it is
    ``master`` or local[2]. Timestamps are UTC whatever the host's zone."""
    from pyspark.sql import SparkSession

    from strand_spark import register

    session = SparkSession.getActiveSession()
    created = session is None
    if session is None:
        builder = SparkSession.builder.appName(app) \
            .config("spark.sql.session.timeZone", "UTC")
        if master is not None or "PYSPARK_GATEWAY_PORT" not in os.environ:
            builder = builder.master(master or DEFAULT_MASTER)
        session = builder.getOrCreate()
    register(session)
    return session, created


@contextlib.contextmanager
def job_logging(job: str) -> Iterator[None]:
    """Structured (JSON) logs on standard error while the job runs; py4j's chatter
    about its connections is left out. The former logging set-up is back afterwards."""
    from strand.service.logs import setup_logging

    root, py4j = logging.getLogger(), logging.getLogger("py4j")
    handlers, level, py4j_level = root.handlers[:], root.level, py4j.level
    setup_logging(job)
    py4j.setLevel(logging.WARNING)
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        py4j.setLevel(py4j_level)


@contextlib.contextmanager
def stop_on_signals(stop: threading.Event, job: str,
                    signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT)
                    ) -> Iterator[None]:
    """Within the block, SIGTERM or SIGINT set ``stop``: the job finishes what it is
    doing and ends. The former handlers are back afterwards."""
    def handler(number: int, frame: FrameType | None) -> None:
        log.info(f"{job}: stopping", extra={"signal": signal.Signals(number).name})
        stop.set()

    former = {number: signal.signal(number, handler) for number in signals}
    try:
        yield
    finally:
        for number, previous in former.items():
            signal.signal(number, previous)
