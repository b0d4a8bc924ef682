"""One chaos run: start the cluster, run the workload, inject and heal faults, read
everything back, compare the replicas' files, check, report.

The run, in order:

1. start the cluster; create the topic (RF 3, ``min.insync.replicas=2``);
2. start writers, readers and the consumer group's members (group_workload.py); let
   them run ``quiet`` seconds;
3. until ``duration`` (or ``injections``) is used up: inject the next fault of the
   rotating mix, hold it, heal it, wait until the cluster is healthy again (every
   process up and registered, a controller, a live leader per partition, a
   coordinator owning the group's shard), compare
   the replicas' files, wait ``quiet`` seconds;
4. stop the writers (they flush; what never completes is ambiguous), wait for the
   cluster (and, bounded, for full ISRs), stop the readers and close the group's
   members, read every partition back up to its high watermark, compare the
   replicas' files once more;
5. check the history (``checker.check``), print the table, stop every process.
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from strand import Admin, Consumer, NewTopic, TopicPartition
from tests.support.waiting import wait_until

from .checker import Report, check, compare_replicas
from .exactly_once import ExactlyOnceSettings, ExactlyOnceWorkloads, save_txn_history
from .faults import KINDS, Faults, schedule
from .group_workload import GroupSettings, GroupWorkload
from .harness import ChaosCluster
from .history import OK, FaultEvent, History, Read, ReplicaResult, Send
from .kafka_workload import KafkaSettings, KafkaWorkloads
from .workload import ProducerSettings, RewindReader, TailReader, Writer, read_back


@dataclass
class ChaosConfig:
    duration: float = 600.0  # seconds of fault injection; 0: no limit (see injections)
    faults: list[str] = field(default_factory=lambda: list(KINDS))
    seed: int = 0
    injections: int = 0  # stop after this many; 0: no limit (see duration)
    lease_ttl: int = 3  # seconds, for storage nodes and controllers
    partitions: int = 3
    replication_factor: int = 3
    min_insync_replicas: int = 2
    writers: int = 2
    rate: float = 100.0  # records per second per writer
    idempotence: bool = True  # the writers' enable_idempotence (then duplicates fail)
    tail_readers: int = 2
    quiet: float = 3.0  # seconds before the first fault and after each recovery
    recovery_timeout: float = 30.0
    cut_mode: str = "blackhole"
    topic: str = "chaos"
    group: GroupSettings = field(default_factory=GroupSettings)  # members=0: no group
    exactly_once: ExactlyOnceSettings = field(default_factory=ExactlyOnceSettings)
    # confluent-kafka writers and readers through the gateway's Kafka listener.
    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    # Of the leader faults, the share aimed at the group's __consumer_offsets leader.
    offsets_share: float = 0.34
    workdir: Path | None = None  # default: a new temporary directory
    keep: bool = False  # keep the work directory even when the run passed

    def describe(self) -> dict[str, Any]:
        out = asdict(self)
        out["workdir"] = str(self.workdir) if self.workdir else None
        return out


@dataclass
class RunResult:
    config: ChaosConfig
    history: History
    report: Report
    workdir: Path
    cluster_name: str
    leftover_pids: list[int]
    workload_errors: list[str]


def run(config: ChaosConfig, log: Callable[[str], None] = print) -> RunResult:
    if config.duration <= 0 and config.injections <= 0:
        raise ValueError("give a duration or a number of injections (or both)")
    unknown = set(config.faults) - set(KINDS)
    if unknown:
        raise ValueError(f"unknown faults {sorted(unknown)}; known: {', '.join(KINDS)}")
    workdir = config.workdir or Path(tempfile.mkdtemp(prefix="strand-chaos-"))
    name = f"chaos-{uuid.uuid4().hex[:8]}"  # also marks our processes for pgrep
    cluster = ChaosCluster(workdir, name, config.lease_ttl, config.cut_mode)
    rng = random.Random(config.seed)
    t0 = time.monotonic()

    def say(message: str) -> None:
        log(f"[{time.monotonic() - t0:7.1f}s] {message}")

    history = History(config.topic, config.partitions, t0, idempotent=config.idempotence)
    errors: list[str] = []
    try:
        say(f"starting the cluster in {workdir} (cluster {name}, lease TTL "
            f"{config.lease_ttl}s, cut mode {config.cut_mode})")
        cluster.start()
        _create_topic(cluster.bootstrap, config)
        _run_workload(cluster, config, history, rng, say, errors)
    finally:
        say("stopping the cluster")
        cluster.stop()
    leftovers = cluster.alive_pids()
    report = check(history)
    report.info["workload_errors"] = errors
    report.info["leftover_pids"] = leftovers
    if not (report.failed or report.unavailable or errors or leftovers or config.keep):
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        _save_group_history(history, workdir / "group-history.json")
        save_txn_history(history, workdir / "txn-history.json")
    return RunResult(config, history, report, workdir, name, leftovers, errors)


def _save_group_history(history: History, path: Path) -> None:
    """The group's ownerships (with the first and last offset and the number of their
    reads), commits and members, and the faults, times from the start of the run: to
    study a kept run."""
    def shifted(item: Any) -> dict[str, Any]:
        return {k: round(v - history.t_start, 3) if k.startswith("t_") and v >= 0 else v
                for k, v in asdict(item).items()}

    periods = {(o.session, o.partition) for o in history.ownerships}
    reads: dict[tuple[str, int], list[int]] = {}
    for read in history.reads:
        if (read.session, read.partition) in periods:
            reads.setdefault((read.session, read.partition), []).append(read.offset)
    path.write_text(json.dumps({
        "faults": [shifted(f) for f in history.faults],
        "members": history.members,
        "ownerships": [shifted(o) | {"reads": [offsets[0], offsets[-1], len(offsets)] if (
            offsets := reads.get((o.session, o.partition))) else []}
            for o in history.ownerships],
        "commits": [shifted(c) for c in history.commits],
        "errors": history.group_errors}, indent=1))


def _create_topic(bootstrap: str, config: ChaosConfig) -> None:
    with Admin(bootstrap, request_timeout_ms=10_000) as admin:
        admin.create_topics([NewTopic(
            config.topic, config.partitions, config.replication_factor,
            config={"min.insync.replicas": str(config.min_insync_replicas)})])


def _run_workload(cluster: ChaosCluster, config: ChaosConfig, history: History,
                  rng: random.Random, say: Callable[[str], None], errors: list[str]) -> None:
    stop_writers, stop_readers = threading.Event(), threading.Event()
    sends: list[Send] = history.sends
    reads: list[Read] = history.reads
    settings = ProducerSettings(enable_idempotence=config.idempotence)
    writers = [Writer(f"w{i}", cluster.bootstrap, config.topic, config.partitions, config.rate,
                      sends, stop_writers, settings) for i in range(config.writers)]
    exactly_once = ExactlyOnceWorkloads(cluster, config.exactly_once, history,
                                        random.Random(rng.random()), errors, say)
    exactly_once.create_topics(config.replication_factor, config.min_insync_replicas)
    readers: list[threading.Thread] = [
        TailReader(f"tail{i}", cluster.bootstrap, config.topic, config.partitions, reads,
                   history.reader_errors, stop_readers) for i in range(config.tail_readers)]
    readers.append(RewindReader("rewind", cluster.bootstrap, config.topic, config.partitions,
                                reads, history.reader_errors, stop_readers,
                                random.Random(rng.random())))
    kafka = KafkaWorkloads(cluster, config.topic, config.partitions, config.kafka, history,
                           stop_writers, stop_readers,
                           random.Random(f"kafka-{config.seed}"),  # the faults' rng untouched
                           exactly_once.txn_topics, config.exactly_once.txn)
    group = (GroupWorkload(cluster, config.topic, config.group, history,
                           random.Random(rng.random()), errors, say)
             if config.group.members > 0 else None)
    for thread in [*writers, *readers, *([group] if group else [])]:
        thread.start()
    exactly_once.start()
    kafka.start()
    try:
        _inject_faults(cluster, config, history, rng, say)
    except BaseException:  # interrupted or broken: no read-back, just stop (the
        stop_writers.set()  # threads are daemons; run() stops the cluster)
        stop_readers.set()
        exactly_once.abort()
        kafka.close()
        if group is not None:
            group.abort()
        raise
    say("stopping the writers (they flush what they hold)")
    stop_writers.set()
    for writer in writers:
        writer.join(60)
        if writer.error is not None:
            errors.append(f"{writer.name}: {writer.error!r}")
    kafka.join_writers(errors)
    exactly_once.stop_writing()
    history.final_recovered, history.final_crashed = _recover(
        cluster, config, say, "after the run")
    exactly_once.drain()
    stop_readers.set()
    if group is not None:
        say("closing the group's members")
        group.stop()
    for reader in readers:
        reader.join(30)
    kafka.join_readers()
    say("reading every partition back")
    history.final_complete, history.final_hw = read_back(
        cluster.bootstrap, config.topic, config.partitions, reads, timeout=60, log=say)
    say(f"read back {sorted(history.final_complete)} to high watermarks {history.final_hw}")
    if kafka.writers or kafka.readers:
        say("reading every partition back through confluent-kafka")
    kafka.read_back(timeout=60, log=say)
    if history.kafka_read_back:
        say(f"read back {sorted(history.kafka_final_complete)} to high watermarks "
            f"{history.kafka_final_hw} (confluent-kafka)")
    exactly_once.read_back(timeout=60)
    _check_replicas(cluster, config, history, say, final=True)
    history.t_end = time.monotonic()


def _inject_faults(cluster: ChaosCluster, config: ChaosConfig, history: History,
                   rng: random.Random, say: Callable[[str], None]) -> None:
    faults = Faults(cluster, config.topic, config.partitions, rng,
                    config.offsets_share if config.group.members > 0 else 0.0)
    time.sleep(config.quiet)
    deadline = time.monotonic() + config.duration if config.duration > 0 else float("inf")
    pending: list[str] = []
    while time.monotonic() < deadline and (
            config.injections <= 0 or len(history.faults) < config.injections):
        if not pending:
            pending = schedule(config.faults, rng)
        kind = pending.pop(0)
        late = _revive(cluster, say, "since the last recovery")
        if late and history.faults:  # charged to the fault it followed
            history.faults[-1].recovered = False
            history.faults[-1].crashed += late
            _recover(cluster, config, say, "after reviving them")
        injected = faults.inject(kind)
        event = FaultEvent(kind, injected.target, time.monotonic(), note=injected.note)
        history.faults.append(event)
        say(f"inject {kind} on {injected.target} ({injected.note}); holding "
            f"{injected.hold:g}s")
        time.sleep(injected.hold)
        try:
            faults.heal(injected)
        except Exception as exc:  # e.g. a restarted node never became healthy
            say(f"healing {kind} on {injected.target} failed: {exc}")
            event.note += f"; heal failed: {str(exc)[:200]}"
        event.t_healed = time.monotonic()
        event.recovered, event.crashed = _recover(cluster, config, say, f"after {kind}")
        event.t_recovered = time.monotonic()
        during = sum(1 for send in history.sends if send.outcome == OK
                     and event.t_inject <= send.t_done < event.t_healed)
        say(f"healed {kind} on {injected.target} ({during} records acknowledged while it "
            f"lasted); {'recovered' if event.recovered else 'NOT recovered'} in "
            f"{event.t_recovered - event.t_healed:.1f}s")
        _check_replicas(cluster, config, history, say, final=False)
        time.sleep(config.quiet)


def _revive(cluster: ChaosCluster, say: Callable[[str], None], when: str) -> list[str]:
    """Restart the processes that exited on their own (every fault's victim has
    been restarted or continued by the time this runs); returns "name (exit N)"."""
    crashed = []
    for name, status in cluster.exited().items():
        crashed.append(f"{name} (exit {status})")
        say(f"{name} exited on its own (status {status}) {when}; restarting it")
        try:
            cluster.restart(name)
        except Exception as exc:  # tried again on the next turn
            say(f"restarting {name} failed: {exc}")
    return crashed


def _recover(cluster: ChaosCluster, config: ChaosConfig, say: Callable[[str], None],
             when: str) -> tuple[bool, list[str]]:
    """Wait until the cluster is healthy and stays so for a lease TTL and a second
    (a process that lost its lease during the fault acts on it within that time). A
    process that exited on its own is a finding: it is recorded, then restarted so
    that the rest of the run still means something. Returns (recovered by itself
    within the timeout, the processes that exited)."""
    settle = config.lease_ttl + 1.0
    deadline = time.monotonic() + config.recovery_timeout + settle
    crashed: list[str] = []
    stable_since: float | None = None
    while time.monotonic() < deadline:
        revived = _revive(cluster, say, when)
        crashed += revived
        now = time.monotonic()
        if not revived and cluster.healthy(config.topic, config.partitions):
            stable_since = now if stable_since is None else stable_since
            if now - stable_since >= settle:
                return not crashed, crashed
        else:
            stable_since = None
        time.sleep(0.2)
    problems = cluster.problems(config.topic, config.partitions)
    say(f"the cluster did not recover within {config.recovery_timeout:g}s {when}: "
        f"{'; '.join(problems) or 'not stable'}")
    return False, crashed


def _check_replicas(cluster: ChaosCluster, config: ChaosConfig, history: History,
                    say: Callable[[str], None], final: bool) -> None:
    """Compare every partition's replicas' files below the high watermark. A follower
    may still be catching up right after a heal: wait (bounded) for full ISRs, and
    look again once, two seconds later, before counting a mismatch."""
    try:
        wait_until(lambda: cluster.healthy(config.topic, config.partitions, full_isr=True),
                   config.recovery_timeout if final else 10, "full in-sync replica sets", 0.2)
    except TimeoutError:
        problems = cluster.problems(config.topic, config.partitions, full_isr=True)
        say(f"comparing the replicas before the cluster is whole: {'; '.join(problems)}")
    results = _compare_all(cluster, config, final)
    if any(not r.identical for r in results):
        time.sleep(2)
        results = _compare_all(cluster, config, final)
    history.replicas.extend(results)
    for result in results:
        if not result.identical:
            say(f"replicas of {config.topic}-{result.partition} differ below hw "
                f"{result.hw}: {result.detail}")


def _compare_all(cluster: ChaosCluster, config: ChaosConfig, final: bool) -> list[ReplicaResult]:
    states = cluster.partitions(config.topic)
    tps = [TopicPartition(config.topic, p) for p in range(config.partitions)]
    try:
        with Consumer(cluster.bootstrap, request_timeout_ms=5_000) as consumer:
            hws = consumer.end_offsets(tps, timeout_ms=10_000)
    except Exception:
        hws = {}
    results = []
    now = time.monotonic()
    for tp in tps:
        state = states.get(tp.partition)
        if state is None or tp not in hws:
            results.append(ReplicaResult(tp.partition, -1, -1, False,
                                         "no leader or high watermark to compare against",
                                         now, final))
            continue
        logs = {node: cluster.replica_log(node, config.topic, tp.partition)
                for node in state.replicas}
        results.append(compare_replicas(tp.partition, hws[tp], state.leader, logs, now, final))
    return results
