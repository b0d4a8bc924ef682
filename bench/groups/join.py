"""Join latency: ``--members`` consumers released at once into a fresh group; the time
until every member is in the same generation (``Consumer.group_metadata()``), the
partitions of the join topic each assigned exactly once, the state held for
``--settle-s`` and confirmed by the coordinator (``Admin().describe_group``). A
cooperative rebalance's first generation never passes: it leaves the revoked
partitions unassigned until the follow-up round."""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench_support import err

from strand import Admin, Consumer, StrandError, TopicPartition

from .cluster import BenchCluster, default_assignors

JOIN_TOPIC = "join-bench"
POLL_MS = 50  # the join rounds' poll timeout: how soon a member reports a new state


@dataclass
class View:
    """What one member last reported: its partitions and generation."""

    partitions: frozenset[int]
    generation: int  # -1 before its first join
    at: float  # time.monotonic() of the report


def _view(consumer: Consumer) -> View:
    return View(frozenset(tp.partition for tp in consumer.assignment()),
                consumer.group_metadata().generation_id, time.monotonic())


class Member:
    """One group member in its own thread: subscribe, then poll until told to stop;
    reports its view after every poll and from the rebalance listener."""

    def __init__(self, index: int, consumer: Consumer, topic: str, go: threading.Barrier,
                 report: Callable[[int, View], None]) -> None:
        self.index = index
        self.consumer = consumer
        self.topic = topic
        self.go = go
        self.report = report
        self.stop = threading.Event()
        self.error: str | None = None
        self.thread = threading.Thread(target=self.run, daemon=True, name=f"member-{index}")

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        self.report(self.index, _view(self.consumer))

    def run(self) -> None:
        try:
            self.go.wait()
            self.consumer.subscribe([self.topic], listener=self)
            while not self.stop.is_set():
                self.consumer.poll(timeout_ms=POLL_MS)
                self.report(self.index, _view(self.consumer))
        except threading.BrokenBarrierError:
            pass
        except Exception as exc:  # reported with the round
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            try:
                self.consumer.close()
            except Exception as exc:
                self.error = self.error or f"close: {type(exc).__name__}: {exc}"


def _exact(views: list[View], partitions: int) -> bool:
    """Every partition in exactly one member's assignment."""
    union: set[int] = set()
    total = 0
    for view in views:
        union |= view.partitions
        total += len(view.partitions)
    return total == partitions and union == set(range(partitions))


def join_round(bootstrap: str, topic: str, partitions: int, members: int,
               assignors: tuple[str, ...] | None, args: argparse.Namespace) -> dict[str, Any]:
    group = f"join-{uuid.uuid4().hex[:12]}"
    options: dict[str, Any] = {"heartbeat_interval_ms": args.heartbeat_ms,
                               "session_timeout_ms": args.session_ms}
    if assignors is not None:
        options["partition_assignment_strategy"] = assignors
    lock = threading.Lock()
    views: dict[int, View] = {}
    generations_seen: set[int] = set()

    def report(index: int, view: View) -> None:
        with lock:  # keep the time of the last change, not of the last report
            old = views.get(index)
            if old is None or (old.partitions, old.generation) != (
                    view.partitions, view.generation):
                views[index] = view
            generations_seen.add(view.generation)

    go = threading.Barrier(members + 1)
    crew = [Member(i, Consumer(bootstrap, group_id=group, client_id=f"join-{i}", **options),
                   topic, go, report) for i in range(members)]
    for member in crew:
        member.thread.start()
    result: dict[str, Any] = {"group": group}
    try:
        go.wait(30)
        start = time.monotonic()
        deadline = start + args.round_timeout
        first_cover: float | None = None
        first_assigned: float | None = None
        stable_since: float | None = None
        stable_generation = -1
        describe_note = protocol = ""
        while True:
            now = time.monotonic()
            if now > deadline:
                raise TimeoutError(f"group {group}: partitions not all assigned within "
                                   f"{args.round_timeout} s ({describe_note or 'no stable state'})")
            errors = [m.error for m in crew if m.error]
            if errors:
                raise RuntimeError(f"group {group}: a member failed: {errors[0]}")
            with lock:
                current = list(views.values())
            if first_assigned is None and any(v.partitions for v in current):
                first_assigned = min(v.at for v in current if v.partitions)
            if first_cover is None and _exact(current, partitions):
                first_cover = max(v.at for v in current)
            generation = current[0].generation if current else -1
            done = (len(current) == members and generation >= 0
                    and all(v.generation == generation for v in current)
                    and _exact(current, partitions))
            if not done:
                stable_since = None
            elif stable_since is None or generation != stable_generation:
                stable_since, stable_generation = max(v.at for v in current), generation
            elif now - stable_since >= args.settle_s:
                describe_note, protocol = _confirm(bootstrap, group, generation, current)
                if not describe_note:
                    break
            time.sleep(0.02)
        assert stable_since is not None and first_cover is not None
        result.update({
            "seconds": round(stable_since - start, 3),
            "first_full_cover_s": round(first_cover - start, 3),
            "first_assignment_s": round((first_assigned or stable_since) - start, 3),
            "generation": stable_generation,
            "generations_reported": len(generations_seen - {-1}),
            "protocol": protocol,
            "partitions_per_member": sorted(len(v.partitions) for v in current),
        })
    finally:
        go.abort()
        for member in crew:
            member.stop.set()
        for member in crew:
            member.thread.join(30)
        stuck = [m.index for m in crew if m.thread.is_alive()]
        if stuck:
            result["stuck_members"] = stuck
            for member in crew:
                if member.thread.is_alive():
                    member.consumer.close()
    return result


def _confirm(bootstrap: str, group: str, generation: int,
             views: list[View]) -> tuple[str, str]:
    """('', the group's protocol) when the coordinator agrees: Stable, this generation,
    every member, this assignment; else (what differs, '')."""
    try:
        with Admin(bootstrap) as admin:
            described = admin.describe_group(group)
    except StrandError as exc:
        return f"describe failed: {exc}", ""
    if described.state != "Stable" or described.generation != generation:
        return f"coordinator says {described.state} generation {described.generation}", ""
    if len(described.members) != len(views):
        return f"coordinator has {len(described.members)} members", ""
    assigned = sorted(tuple(sorted(tp.partition for tp in m.partitions))
                      for m in described.members)
    if assigned != sorted(tuple(sorted(v.partitions)) for v in views):
        return "the coordinator's assignment differs from the members'", ""
    return "", described.protocol


def join_series(cluster: BenchCluster, delay_ms: int, label: str,
                assignors: tuple[str, ...] | None, args: argparse.Namespace) -> dict[str, Any]:
    cluster.start_coordinators(delay_ms)
    rounds: list[dict[str, Any]] = []
    failures: list[str] = []
    for r in range(args.rounds):
        try:
            outcome = join_round(cluster.bootstrap, JOIN_TOPIC, args.join_partitions,
                                 args.members, assignors, args)
        except (TimeoutError, RuntimeError) as exc:
            failures.append(str(exc))
            err.print(f"[red]join round {r + 1} failed: {exc}")
            continue
        rounds.append(outcome)
        err.print(f"join delay={delay_ms} ms {label}: round {r + 1}/{args.rounds} "
                  f"{outcome['seconds']:.3f} s, generation {outcome['generation']}")
        time.sleep(args.pause_s)
    times = [o["seconds"] for o in rounds]
    return {
        "initial_rebalance_delay_ms": delay_ms,
        "assignors": label,
        "strategy": list(assignors or default_assignors()),
        "protocol": sorted({o["protocol"] for o in rounds}),
        "rounds": len(rounds),
        "failed_rounds": len(failures),
        "failures": failures[:3],
        "median_s": round(statistics.median(times), 3) if times else None,
        "max_s": max(times) if times else None,
        "min_s": min(times) if times else None,
        "all_s": times,
        "first_full_cover_s": [o["first_full_cover_s"] for o in rounds],
        "generations": [o["generation"] for o in rounds],
        "generations_reported": [o["generations_reported"] for o in rounds],
        "partitions_per_member": rounds[0]["partitions_per_member"] if rounds else None,
        "stuck_members": [o["stuck_members"] for o in rounds if "stuck_members" in o],
    }
