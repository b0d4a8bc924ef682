"""`strand dev up|status|down` through the real command: a cluster of real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from strand.launcher import REPO, wait_until
from tests.support.cluster import user_env


def strand(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "strand.cli.main", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120, env=env, check=False)


def test_dev_up_status_down(tmp_path: Path) -> None:
    directory = tmp_path / "dev"
    env = user_env(tmp_path / "home", STRAND_DEV_DIR=str(directory))
    started = strand("dev", "up", "--storage-nodes", "3", env=env)
    assert started.returncode == 0, started.stderr
    try:
        cluster = json.loads((directory / "cluster.json").read_text())
        assert cluster["gateway"].startswith("127.0.0.1:")
        assert cluster["kafka"].startswith("127.0.0.1:")  # Kafka clients' bootstrap
        assert f"Kafka clients' bootstrap {cluster['kafka']}" in " ".join(
            started.stderr.split())
        status = strand("dev", "status", "--json", env=env)
        assert status.returncode == 0, status.stderr
        processes = json.loads(status.stdout)["processes"]
        roles = sorted(p["role"] for p in processes)
        assert roles == ["controller", "controller", "etcd", "gateway", "groups",
                         "storage", "storage", "storage", "transactions"]
        assert all(p["running"] and p["serving"] for p in processes), processes
        assert all(Path(p["log"]).parent == directory / "logs" for p in processes)
        again = strand("dev", "up", env=env)
        assert again.returncode != 0 and "already running" in again.stderr
        check_topic_produce_consume_bench(env)
        check_groups(env)
    finally:
        stopped = strand("dev", "down", env=env)
    assert stopped.returncode == 0, stopped.stderr
    assert "stopped 9 processes" in stopped.stderr
    assert not (directory / "cluster.json").exists()
    for process in processes:
        pid = int(process["pid"])
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(
            f"/proc/{pid}/stat").read_text().split()[2]
    empty = strand("dev", "status", "--json", env=env)
    assert json.loads(empty.stdout)["processes"] == []


def check_topic_produce_consume_bench(env: dict[str, str]) -> None:
    """The console tools against the dev cluster, found without any address."""
    created = strand("topic", "create", "demo", "--partitions", "3", "--replication-factor",
                     "1", "--config", "retention.ms=3600000", env=env)
    assert created.returncode == 0, created.stderr
    duplicate = strand("topic", "create", "demo", env=env)
    assert duplicate.returncode == 1 and "TOPIC_ALREADY_EXISTS" in duplicate.stderr
    listed = strand("topic", "list", "--json", env=env)
    assert json.loads(listed.stdout) == ["demo"]
    described = json.loads(strand("topic", "describe", "demo", "--json", env=env).stdout)
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    overrides = {c["name"]: c["value"] for c in described["configs"]
                 if c["source"] == "override"}
    assert overrides == {"retention.ms": "3600000"}
    lines = "".join(f"key{i % 4}:value-{i}\n" for i in range(30))
    produced = subprocess.run([sys.executable, "-m", "strand.cli.main", "produce", "demo",
                               "--key-separator", ":"], input=lines, cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=60, check=False)
    assert produced.returncode == 0, produced.stderr
    consumed = strand("consume", "demo", "--from-beginning", "--print-key", "--print-offset",
                      env=env)
    assert consumed.returncode == 0, consumed.stderr
    rows = [line.split("\t") for line in consumed.stdout.splitlines()]
    assert sorted(row[2] for row in rows) == sorted(f"value-{i}" for i in range(30))
    by_key: dict[str, set[str]] = {}
    for position, key, _ in rows:
        by_key.setdefault(key, set()).add(position.split(":")[0])
    assert all(len(partitions) == 1 for partitions in by_key.values())  # one key, one partition
    limited = strand("consume", "demo", "--from-beginning", "--max-messages", "5", env=env)
    assert len(limited.stdout.splitlines()) == 5
    bench = strand("bench", "produce", "demo", "--records", "2000", "--record-size", "100",
                   "--json", env=env)
    assert bench.returncode == 0, bench.stderr
    result = json.loads(bench.stdout)
    assert result["records"] == 2000 and result["records_per_s"] > 0
    assert set(result["latency_ms"]) == {"p50", "p99", "p999"}
    read = strand("bench", "consume", "demo", "--records", "2030", "--json", env=env)
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout)["records"] >= 2030
    bad = strand("topic", "create", "bad name", env=env)
    assert bad.returncode == 1 and "INVALID_TOPIC_EXCEPTION" in bad.stderr
    # --list needs no --partition (all of the topic's); a move does, and says so.
    listed = strand("topic", "reassign", "demo", "--list", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "no reassignment in progress for topic demo" in listed.stderr
    unnamed = strand("topic", "reassign", "demo", "--replicas", "1", env=env)
    assert unnamed.returncode == 2 and "--partition" in unnamed.stderr
    deleted = strand("topic", "delete", "demo", env=env)
    assert deleted.returncode == 0, deleted.stderr
    assert json.loads(strand("topic", "list", "--json", env=env).stdout) == []


def check_groups(env: dict[str, str]) -> None:
    """``consume --group`` commits as it goes; ``group describe`` shows the lag;
    ``reset-offsets`` and ``delete`` work on an empty group."""
    created = strand("topic", "create", "shared", "--partitions", "3", env=env)
    assert created.returncode == 0, created.stderr
    produced = subprocess.run([sys.executable, "-m", "strand.cli.main", "produce", "shared"],
                              input="".join(f"line-{i}\n" for i in range(30)), cwd=REPO,
                              env=env, capture_output=True, text=True, timeout=60, check=False)
    assert produced.returncode == 0, produced.stderr

    def group_read(*extra: str) -> int:
        done = strand("consume", "shared", "--group", "readers", "--idle-timeout-ms", "6000",
                      *extra, env=env)
        assert done.returncode == 0, done.stderr
        return len(done.stdout.splitlines())

    assert group_read("--from-beginning") == 30
    described = json.loads(strand("group", "describe", "readers", "--json", env=env).stdout)
    assert described["state"] == "Empty" and described["members"] == 0
    assert sum(p["committed"] for p in described["partitions"]) == 30
    assert all(p["lag"] == 0 for p in described["partitions"])
    assert group_read() == 0  # resumes at the commits: nothing again
    reset = strand("group", "reset-offsets", "readers", "--topic", "shared", "--to-earliest",
                   env=env)
    assert reset.returncode == 0, reset.stderr
    assert group_read() == 30  # committed offset 0 is a position, not "nothing committed"
    listed = json.loads(strand("group", "list", "--json", env=env).stdout)
    assert {"group": "readers", "state": "Empty"} in listed
    assert strand("group", "delete", "readers", env=env).returncode == 0
    missing = strand("group", "delete", "readers", env=env)
    assert missing.returncode == 1 and "GROUP_ID_NOT_FOUND" in missing.stderr


def test_dev_dir_is_remembered_and_a_dead_process_restarted(tmp_path: Path) -> None:
    """``dev up --dir D`` is found by the commands that follow (no STRAND_DEV_DIR)
    until ``dev down``; a killed process shows as stopped, with the command that
    restarts it, and ``dev restart`` brings it back into service."""
    home, directory = tmp_path / "home", tmp_path / "somewhere" / "dev"
    pointer = home / ".local" / "state" / "strand" / "current"
    env = user_env(home)
    started = strand("dev", "up", "--dir", str(directory), "--storage-nodes", "2", env=env)
    assert started.returncode == 0, started.stderr
    count = -1  # the cluster's processes, as status lists them
    try:
        assert pointer.read_text().strip() == str(directory.resolve())

        def processes() -> dict[str, dict[str, object]]:
            status = strand("dev", "status", "--json", env=env)
            assert status.returncode == 0, status.stderr
            found = json.loads(status.stdout)
            assert found["directory"] == str(directory.resolve())
            return {str(p["id"]): p for p in found["processes"]}

        listed = processes()
        assert all(p["serving"] for p in listed.values())
        count = len(listed)
        # STRAND_DEV_DIR still wins over what was remembered.
        other = strand("dev", "status", "--json", env={**env, "STRAND_DEV_DIR": str(tmp_path)})
        assert json.loads(other.stdout) == {"directory": str(tmp_path), "processes": []}
        # The SDK finds it too: topic admin, produce, consume with no address.
        created = strand("topic", "create", "t", "--partitions", "2", "--replication-factor",
                         "2", env=env)
        assert created.returncode == 0, created.stderr

        victim = processes()["storage-2"]
        os.kill(int(str(victim["pid"])), signal.SIGKILL)
        wait_until(lambda: not processes()["storage-2"]["running"], 10, "storage-2 to die")
        shown = strand("dev", "status", env=env)
        assert shown.returncode == 0, shown.stderr
        assert "stopped" in shown.stdout
        assert "strand dev restart storage-2" in " ".join(shown.stderr.split())

        restarted = strand("dev", "restart", "storage-2", env=env)
        assert restarted.returncode == 0, restarted.stderr
        after = processes()
        assert after["storage-2"]["serving"] and after["storage-2"]["pid"] != victim["pid"]
        assert all(p["serving"] for p in after.values()), after

        def both_in_sync() -> bool:
            described = json.loads(strand("topic", "describe", "t", "--json", env=env).stdout)
            return all(sorted(p["isr"]) == [1, 2] for p in described["partitions"])

        wait_until(both_in_sync, 60, "storage-2 back in every ISR")
        produced = subprocess.run([sys.executable, "-m", "strand.cli.main", "produce", "t",
                                   "--acks", "all"], input="".join(f"v{i}\n" for i in range(20)),
                                  cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
                                  check=False)
        assert produced.returncode == 0, produced.stderr
        consumed = strand("consume", "t", "--from-beginning", env=env)
        assert sorted(consumed.stdout.split()) == sorted(f"v{i}" for i in range(20))

        # A running process is stopped first; an unknown one is named with the known ones.
        gateway = strand("dev", "restart", "gateway", env=env)
        assert gateway.returncode == 0, gateway.stderr
        assert "stopping gateway" in gateway.stderr
        unknown = strand("dev", "restart", "storage-9", env=env)
        assert unknown.returncode == 1 and "storage-2" in unknown.stderr
    finally:
        stopped = strand("dev", "down", env=env)  # no --dir: the remembered one
        leftover = strand("dev", "down", "--dir", str(directory), env=env)  # if it was not
    assert stopped.returncode == 0, stopped.stderr
    assert f"stopped {count} processes" in stopped.stderr
    assert "no dev cluster running" in leftover.stderr
    assert not pointer.exists()
