"""The mirror demo (``make mirror-demo``): two local Strand clusters, the mirror job
copying a topic from one to the other while it is written, then the audit job's
report on the copy.

1. Starts cluster ``east`` and cluster ``west`` (strand.launcher: etcd, a controller,
   a storage node, a gateway and a transaction coordinator each) in a temporary
   folder, removed at the end unless ``--keep``.
2. Creates topic ``orders`` (``--partitions`` partitions) on east.
3. Starts the mirror, ``spark-on-k8s/jobs/mirror.py``, as a process of its own (as
   spark-submit or the Spark operator would run it, in local mode here), copying
   ``orders`` to ``east.orders`` on west.
4. Once it runs (it has created the copy's topic), produces ``--records`` keyed
   records with a header to ``orders`` in bursts, which the mirror copies micro-batch
   by micro-batch, then waits until the mirror's offset map on west covers all of
   them (written in the same transactions as the copies: they are visible then).
5. Stops the mirror (SIGTERM: it ends cleanly, its offsets in its checkpoint).
6. Runs the audit, ``spark-on-k8s/jobs/audit.py``, which compares both sides per
   partition and time bucket and writes its report (Markdown, PNG plot, JSON) to
   ``--report-dir``; the Markdown is printed here too.

Exits 0 when every step worked and the audit found the copy clean, 1 otherwise.

    python spark-on-k8s/demo/mirror_demo.py [--records 6000] [--report-dir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from strand import Admin, NewTopic, Producer
from strand.launcher import Boot, Cluster, ClusterSpec, deferred_signals, interrupt_on_signals
from strand.mirror.translate import read_offset_map

JOBS = Path(__file__).resolve().parents[1] / "jobs"
SOURCE, TARGET, TOPIC = "east", "west", "orders"
BURSTS = 10
STOP_TIMEOUT_S = 60.0


class DemoError(Exception):
    """A step of the demo failed; the message says which and where to look."""


def say(text: str) -> None:
    print(f"[mirror-demo {time.strftime('%H:%M:%S')}] {text}", flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--records", type=int, default=6000, help="records produced to east")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--report-dir", type=Path,
                        help="where the audit writes its report (default: a new temporary "
                             "folder, kept)")
    parser.add_argument("--dir", type=Path, help="the clusters' folder (default: a temp dir)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the clusters' folder (data, logs, checkpoint)")
    parser.add_argument("--master", default="local[2]", help="the jobs' Spark master")
    parser.add_argument("--copy-timeout", type=float, default=120.0,
                        help="s the mirror may take to start, and to copy everything "
                             "once produced")
    args = parser.parse_args(argv)
    if args.records < args.partitions or args.partitions < 1:
        parser.error("--partitions must be >= 1 and --records >= --partitions")
    return args


def start_cluster(directory: Path, name: str) -> Cluster:
    say(f"starting cluster {name!r}: etcd, a controller, a storage node, a gateway and a "
        f"transaction coordinator (logs in {directory / name / 'logs'})")
    cluster = Cluster(ClusterSpec(directory / name, name=name, txn_coordinators=1,
                                  etcd_fsync=False, boot=Boot.ONE_BY_ONE,
                                  healthy_timeout=30)).start()
    say(f"cluster {name!r} is up, gateway at {cluster.bootstrap}")
    return cluster


def spark_env() -> dict[str, str]:
    return {**os.environ, "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")}


def cluster_arguments(east: Cluster, west: Cluster) -> list[str]:
    return ["--source-bootstrap", east.bootstrap, "--source-cluster", SOURCE,
            "--target-bootstrap", west.bootstrap, "--target-cluster", TARGET,
            "--topics", TOPIC]


def log_tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def wait_for_mirror(west: Cluster, timeout_s: float, alive: Callable[[], None]) -> None:
    """Until the mirror has started its query: it creates the target topic first."""
    target = f"{SOURCE}.{TOPIC}"
    deadline = time.monotonic() + timeout_s
    with Admin(west.bootstrap) as admin:
        while target not in admin.list_topics():
            alive()
            if time.monotonic() > deadline:
                raise DemoError(f"the mirror did not create {target} on {TARGET} within "
                                f"{timeout_s} s")
            time.sleep(0.5)
    say(f"the mirror is running: it created {target} on {TARGET} with {SOURCE}'s "
        "partition count")


def produce(bootstrap: str, records: int, partitions: int, west: Cluster,
            alive: Callable[[], None]) -> None:
    """``records`` records in BURSTS bursts half a second apart, keys spread over the
    partitions; ``alive`` raises if the mirror died meanwhile."""
    per_burst = -(-records // BURSTS)
    sent = 0
    with Producer(bootstrap, acks="all", enable_idempotence=True) as producer:
        while sent < records:
            for i in range(sent, min(records, sent + per_burst)):
                producer.send(TOPIC, key=f"customer-{i % 97}".encode(),
                              value=f'{{"order": {i}, "amount": {i % 500}}}'.encode(),
                              headers=[("origin", b"mirror-demo")], partition=i % partitions)
            producer.flush()
            sent = min(records, sent + per_burst)
            say(f"produced {sent:,}/{records:,} records to {SOURCE}/{TOPIC}; the mirror "
                f"has committed {copied(west):,} of them to {TARGET}")
            alive()
            time.sleep(0.5)


def copied(west: Cluster) -> int:
    """Source records the mirror's committed offset map covers."""
    entries = read_offset_map(west.bootstrap, SOURCE)
    return sum(max(e.source_end for e in found) for (topic, _), found in entries.items()
               if topic == TOPIC)


def wait_for_copy(west: Cluster, records: int, timeout_s: float,
                  alive: Callable[[], None]) -> None:
    deadline = time.monotonic() + timeout_s
    last = -1
    while True:
        alive()
        done = copied(west)
        if done != last:
            say(f"the mirror has committed {done:,}/{records:,} records to "
                f"{TARGET}/{SOURCE}.{TOPIC}")
            last = done
        if done >= records:
            return
        if time.monotonic() > deadline:
            raise DemoError(f"the mirror copied {done} of {records} records in {timeout_s} s")
        time.sleep(1.0)


def stop_mirror(process: subprocess.Popen[bytes], log: Path) -> None:
    say("stopping the mirror (SIGTERM: it finishes its micro-batch and exits)")
    process.send_signal(signal.SIGTERM)
    try:
        code = process.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise DemoError(f"the mirror did not stop within {STOP_TIMEOUT_S} s; killed. Its "
                        f"log: {log}") from None
    if code != 0:
        raise DemoError(f"the mirror exited with {code}; its log ends:\n{log_tail(log)}")
    say("the mirror stopped cleanly (exit 0)")


def run_mirror_and_produce(args: argparse.Namespace, directory: Path, east: Cluster,
                           west: Cluster) -> None:
    log = directory / "mirror.log"
    command = [sys.executable, str(JOBS / "mirror.py"), *cluster_arguments(east, west),
               "--checkpoint", str(directory / "mirror-checkpoint"),
               "--trigger-seconds", "1", "--master", args.master]
    say(f"starting the mirror {SOURCE} -> {TARGET} (jobs/mirror.py, log in {log})")
    with log.open("wb") as out:
        process = subprocess.Popen(command, env=spark_env(), stdout=out,
                                   stderr=subprocess.STDOUT)

        def alive() -> None:
            if process.poll() is not None:
                raise DemoError(f"the mirror exited with {process.returncode}; its log "
                                f"ends:\n{log_tail(log)}")

        try:
            say("waiting for the mirror to start (a JVM and a Spark session: some seconds)")
            wait_for_mirror(west, args.copy_timeout, alive)
            produce(east.bootstrap, args.records, args.partitions, west, alive)
            say("waiting for the mirror to copy the rest")
            wait_for_copy(west, args.records, args.copy_timeout, alive)
        finally:
            if process.poll() is None:
                stop_mirror(process, log)


def run_audit(args: argparse.Namespace, east: Cluster, west: Cluster, report_dir: Path
              ) -> None:
    say(f"running the audit (jobs/audit.py): {SOURCE}/{TOPIC} against "
        f"{TARGET}/{SOURCE}.{TOPIC}, 1-minute buckets")
    command = [sys.executable, str(JOBS / "audit.py"), *cluster_arguments(east, west),
               "--bucket-minutes", "1", "--report-dir", str(report_dir),
               "--master", args.master]
    result = subprocess.run(command, env=spark_env(), capture_output=True, timeout=300,
                            check=False)
    markdown = report_dir / "latest.md"
    if result.returncode not in (0, 1) or not markdown.exists():
        tail = "\n".join(result.stderr.decode(errors="replace").splitlines()[-25:])
        raise DemoError(f"the audit failed (exit {result.returncode}):\n{tail}")
    print(markdown.read_text(), flush=True)
    say(f"the audit's report: {markdown}, plot {report_dir / 'latest.png'}, summary "
        f"{report_dir / 'latest.json'}")
    if result.returncode == 1:
        raise DemoError("the audit found loss or duplication (exit 1): see the report")
    say("the audit found the copy clean: every record once, none missing (exit 0)")


def demo(args: argparse.Namespace, directory: Path, report_dir: Path,
         started: list[Cluster]) -> None:
    east = start_cluster(directory, SOURCE)
    started.append(east)
    west = start_cluster(directory, TARGET)
    started.append(west)
    with Admin(east.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, args.partitions, 1)])
    say(f"created topic {TOPIC!r} on {SOURCE} with {args.partitions} partitions")
    run_mirror_and_produce(args, directory, east, west)
    run_audit(args, east, west, report_dir)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    directory = args.dir or Path(tempfile.mkdtemp(prefix="strand-mirror-demo-"))
    directory.mkdir(parents=True, exist_ok=True)
    report_dir = args.report_dir or Path(tempfile.mkdtemp(prefix="strand-mirror-report-"))
    report_dir.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    started: list[Cluster] = []
    interrupt_on_signals()
    code = 1
    try:
        demo(args, directory, report_dir, started)
        code = 0
    except DemoError as exc:
        say(f"FAILED: {exc}")
    except KeyboardInterrupt:
        say("interrupted")
        code = 130
    finally:
        with deferred_signals():
            for cluster in reversed(started):
                say(f"stopping cluster {cluster.name!r}")
                cluster.stop()
            if args.keep or code != 0:
                say(f"the clusters' folder is kept: {directory}")
            else:
                shutil.rmtree(directory, ignore_errors=True)
    say(f"{'done' if code == 0 else 'failed'} in {time.monotonic() - began:.0f} s")
    return code


if __name__ == "__main__":
    sys.exit(main())
