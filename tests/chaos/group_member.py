"""One member of the chaos consumer group, as its own process (``group_workload.py``
starts it, stops it, or SIGKILLs it to simulate a crash).

It consumes as an application committing after processing would: ``subscribe()``
with ``enable_auto_commit=False``; after each ``poll()`` it "processes" the records
(reports them) and then commits the next offsets synchronously; when partitions are
revoked it commits what it processed of them first.

Everything it does is reported on stdout, one JSON object a line, flushed at once
(so that what a SIGKILL interrupts is exactly what was not reported), with
``time.monotonic()`` times (CLOCK_MONOTONIC: the same clock as the harness's):

    {"e": "assigned", "t", "since", "gen", "parts", "committed", "announced"}
    {"e": "reads", "t", "p", "r": [[offset, value], ...]}
    {"e": "commit", "id", "t", "gen", "offsets": {partition: offset}}
    {"e": "committed", "id", "t", "ok", "error"}
    {"e": "revoked" | "lost", "t", "parts"}
    {"e": "error", "t", "error"} / {"e": "closed", "t"}

A line ``stop`` on stdin (or its end, or SIGTERM) makes it close the consumer
(LeaveGroup) and exit.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
import time
from types import FrameType
from typing import Any

from strand import Consumer, TopicPartition


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {str(error)[:200]}"


class Member:
    def __init__(self, args: argparse.Namespace) -> None:
        self.topic = args.topic
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._commits = 0
        self.owned: set[int] = set()
        self.processed: dict[int, int] = {}  # partition -> next offset, this ownership
        self.poll_started = time.monotonic()
        self.consumer = Consumer(
            args.bootstrap, group_id=args.group, client_id=args.name,
            enable_auto_commit=False, auto_offset_reset="earliest",
            session_timeout_ms=args.session_timeout_ms,
            heartbeat_interval_ms=args.heartbeat_interval_ms,
            max_poll_interval_ms=args.max_poll_interval_ms,
            request_timeout_ms=args.request_timeout_ms, fetch_max_wait_ms=300,
            retry_backoff_ms=100, partition_assignment_strategy=tuple(args.assignor))

    def emit(self, event: str, **fields: Any) -> None:
        line = json.dumps({"e": event, "t": time.monotonic(), **fields})
        with self._lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def generation(self) -> int:
        group = getattr(self.consumer, "_group", None)  # no public accessor in the SDK
        return int(getattr(getattr(group, "coordinator", None), "generation", -1))

    # -- the rebalance listener -----------------------------------------------------------

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        mine = sorted(tp.partition for tp in partitions)
        self.commit({p: self.processed[p] for p in mine if p in self.processed})
        self._drop(mine, "revoked")

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        self._drop(sorted(tp.partition for tp in partitions), "lost")

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        self._announce(sorted(tp.partition for tp in partitions), announced=True)

    def _announce(self, parts: list[int], announced: bool) -> None:
        committed: dict[str, int | None] = {}
        for p in parts:
            try:  # diagnostics only: the SDK fetched the offsets it starts from itself
                committed[str(p)] = self.consumer.committed(TopicPartition(self.topic, p))
            except Exception:
                committed[str(p)] = -1
        self.owned |= set(parts)
        for p in parts:
            self.processed.pop(p, None)
        self.emit("assigned", since=self.poll_started, gen=self.generation(), parts=parts,
                  committed=committed, announced=announced)

    def _drop(self, parts: list[int], how: str) -> None:
        for p in parts:
            self.owned.discard(p)
            self.processed.pop(p, None)
        self.emit(how, parts=parts)

    # -- consuming ------------------------------------------------------------------------

    def commit(self, offsets: dict[int, int]) -> None:
        if not offsets:
            return
        self._commits += 1
        number = self._commits
        self.emit("commit", id=number, gen=self.generation(),
                  offsets={str(p): o for p, o in offsets.items()})
        try:
            self.consumer.commit({TopicPartition(self.topic, p): o for p, o in offsets.items()})
        except Exception as exc:
            self.emit("committed", id=number, ok=False, error=_describe(exc))
        else:
            self.emit("committed", id=number, ok=True, error="")

    def run(self) -> None:
        self.consumer.subscribe([self.topic], listener=self)
        while not self.stop.is_set():
            self.poll_started = time.monotonic()
            try:
                batches = self.consumer.poll(timeout_ms=300)
            except Exception as exc:  # the SDK said something went wrong: poll again
                self.emit("error", error=_describe(exc))
                self.stop.wait(0.3)
                continue
            progress: dict[int, int] = {}
            for tp, records in sorted(batches.items()):
                if not records:
                    continue
                if tp.partition not in self.owned:  # records without an assignment
                    self._announce([tp.partition], announced=False)
                self.emit("reads", p=tp.partition, r=[
                    [r.offset, "<null>" if r.value is None else r.value.decode("utf-8", "replace")]
                    for r in records])
                progress[tp.partition] = records[-1].offset + 1
            self.processed.update(progress)
            self.commit(progress)  # after processing: synchronously
        try:
            self.consumer.close()  # leaves the group
        except Exception as exc:
            self.emit("error", error=f"close: {_describe(exc)}")
        self.emit("closed")


_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class _WithExtras(logging.Formatter):
    """The SDK logs its details as ``extra`` fields: show them."""

    def format(self, record: logging.LogRecord) -> str:
        extras = {k: v for k, v in vars(record).items() if k not in _STANDARD}
        line = super().format(record)
        return f"{line} {extras}" if extras else line


def _watch_stdin(stop: threading.Event) -> None:
    for line in sys.stdin:
        if line.strip() == "stop":
            break
    stop.set()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos.group_member")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--tag", default="", help="the chaos run (for orphan checks)")
    parser.add_argument("--assignor", action="append", default=None)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--heartbeat-interval-ms", type=int, default=500)
    parser.add_argument("--max-poll-interval-ms", type=int, default=30_000)
    parser.add_argument("--request-timeout-ms", type=int, default=30_000)
    args = parser.parse_args(argv)
    args.assignor = args.assignor or ["range"]
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_WithExtras(f"%(asctime)s {args.name} %(levelname)s %(name)s "
                                     "%(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    member = Member(args)

    def terminate(signum: int, frame: FrameType | None) -> None:
        member.stop.set()

    signal.signal(signal.SIGTERM, terminate)
    threading.Thread(target=_watch_stdin, args=(member.stop,), daemon=True).start()
    member.run()


if __name__ == "__main__":
    main()
