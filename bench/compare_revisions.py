"""End-to-end SDK throughput of two git revisions, measured in one run.

Each revision is checked out in a temporary worktree and measured with its own code:
its `strand dev up` cluster (etcd, controllers, 3 storage nodes, gateway, group
coordinator), then its own `strand bench` commands, for each record size
(``--record-sizes``) and each setup (``--setups``, ``acks{1,all}-rf{N}``):

* ``produce-<setup>-<size>B``: ``strand bench produce`` with that acks to a topic of
  12 partitions and replication factor N (``min.insync.replicas=2`` when N >= 2, the
  README's example);
* ``consume-<size>B``: ``strand bench consume`` of what the last setup wrote.

The default (``acks1-rf3,acksall-rf3``, 1 KiB) is the README's topic. Rounds alternate
the revisions (base, head, base, head, …), each round on a fresh cluster, so that a
slow minute of a noisy machine hurts both. The JSON on stdout has every round and, per
benchmark, the median records/s of each revision and head/base.

    python bench/compare_revisions.py --base HEAD~3 --head HEAD --rounds 3 --json
    python bench/compare_revisions.py --base main --setups acks1-rf1,acksall-rf3 \
        --record-sizes 1024,100 --rounds 5 --json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def parse_setup(text: str) -> tuple[str, str, int]:
    """``acks1-rf3`` -> (name, acks, replication factor)."""
    acks, _, rf = text.strip().partition("-")
    if acks not in ("acks0", "acks1", "acksall") or not rf.startswith("rf") \
            or not rf[2:].isdigit() or int(rf[2:]) < 1:
        raise argparse.ArgumentTypeError(f"setup {text!r} is not acks{{0,1,all}}-rf<N>")
    return text.strip(), acks[4:], int(rf[2:])


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], check=True,
                          capture_output=True, text=True).stdout.strip()


class Revision:
    """A revision checked out in a worktree, run with its own code."""

    def __init__(self, rev: str, root: Path) -> None:
        self.rev = rev
        self.commit = _git("rev-parse", "--short", rev)
        self.tree = root / self.commit
        if not self.tree.exists():
            _git("worktree", "add", "--detach", str(self.tree), self.commit)

    def strand(self, dev_dir: Path, *args: str, timeout: float = 600) -> str:
        env = {**os.environ, "PYTHONPATH": str(self.tree), "STRAND_DEV_DIR": str(dev_dir)}
        env.pop("STRAND_BOOTSTRAP", None)
        done = subprocess.run([sys.executable, "-m", "strand.cli.main", *args], cwd=self.tree,
                              env=env, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"{self.commit}: strand {' '.join(args)} failed:\n"
                               f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        return done.stdout

    def remove(self) -> None:
        _git("worktree", "remove", "--force", str(self.tree))


def measure(revision: Revision, work: Path, records: int, record_sizes: list[int],
            setups: list[tuple[str, str, int]], log: list[str]) -> dict[str, float]:
    dev_dir = Path(tempfile.mkdtemp(prefix=f"dev-{revision.commit}-", dir=work))
    revision.strand(dev_dir, "dev", "up")
    created: dict[str, int] = {}  # topic -> records written to it
    try:
        results: dict[str, float] = {}
        for size in record_sizes:
            topic = ""
            for name, acks, rf in setups:
                topic = f"bench-rf{rf}-{size}"
                if topic not in created:
                    config = ["--config", "min.insync.replicas=2"] if rf >= 2 else []
                    revision.strand(dev_dir, "topic", "create", topic, "--partitions", "12",
                                    "--replication-factor", str(rf), *config)
                    created[topic] = 0
                out = revision.strand(dev_dir, "bench", "produce", topic, "--records",
                                      str(records), "--record-size", str(size),
                                      "--acks", acks, "--json")
                created[topic] += records
                results[f"produce-{name}-{size}B"] = float(
                    json.loads(out.strip().splitlines()[-1])["records_per_s"])
            out = revision.strand(dev_dir, "bench", "consume", topic, "--records",
                                  str(created[topic]), "--json")
            results[f"consume-{size}B"] = float(
                json.loads(out.strip().splitlines()[-1])["records_per_s"])
        log.append(f"{revision.commit}: " + ", ".join(f"{k} {v:,.0f}/s"
                                                      for k, v in results.items()))
        return results
    finally:
        revision.strand(dev_dir, "dev", "down")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the revision to compare against")
    parser.add_argument("--head", default="HEAD")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--record-sizes", default="1024",
                        help="comma-separated record sizes in bytes (default 1024)")
    parser.add_argument("--setups", default="acks1-rf3,acksall-rf3",
                        help="comma-separated acks{0,1,all}-rf<N> "
                             "(default acks1-rf3,acksall-rf3)")
    parser.add_argument("--json", action="store_true", help="JSON on stdout (else a table)")
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.record_sizes.split(",")]
    setups = [parse_setup(setup) for setup in args.setups.split(",")]
    log: list[str] = []
    with tempfile.TemporaryDirectory(prefix="strand-compare-") as tmp:
        work = Path(tmp)
        base, head = Revision(args.base, work), Revision(args.head, work)
        rounds: list[dict[str, object]] = []
        measured: dict[str, list[dict[str, float]]] = {base.commit: [], head.commit: []}
        try:
            for i in range(args.rounds):
                for revision in (base, head):
                    result = measure(revision, work, args.records, sizes, setups, log)
                    measured[revision.commit].append(result)
                    rounds.append({"round": i, "revision": revision.commit, **result})
                    print(log[-1], file=sys.stderr, flush=True)
        finally:
            for revision in {base.commit: base, head.commit: head}.values():
                revision.remove()
    summary = {}
    for name in measured[head.commit][0] if measured[head.commit] else ():
        medians = {commit: statistics.median(r[name] for r in results)
                   for commit, results in measured.items()}
        summary[name] = {"base_records_per_s": medians[base.commit],
                         "head_records_per_s": medians[head.commit],
                         "head_over_base": round(medians[head.commit] / medians[base.commit], 3)}
    report = {"base": base.commit, "head": head.commit, "records": args.records,
              "record_sizes": sizes, "setups": [setup[0] for setup in setups],
              "rounds": rounds, "median": summary}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for name, row in summary.items():
            print(f"{name:16} base {row['base_records_per_s']:>10,.0f}/s  "
                  f"head {row['head_records_per_s']:>10,.0f}/s  x{row['head_over_base']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
