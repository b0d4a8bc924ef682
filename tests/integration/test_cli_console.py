"""The console tools through the real command, against a real cluster: what they
wait for, formats, headers and timestamps, failures as they happen, defaults, broker
and config listings, and a clean stop on SIGTERM (issue 11: 8, 10, 11, 12, 13, 16)."""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import grpc
import pytest

from strand import Admin, NewTopic, Producer
from strand.launcher import REPO
from strand.records.reader import iter_record_batches
from strand.v1 import common_pb2 as pb
from strand.v1 import gateway_pb2_grpc
from tests.support.cluster import SdkCluster


def strand(cluster: SdkCluster | None, *args: str, stdin: str | None = None,
           env: dict[str, str] | None = None, timeout: float = 60
           ) -> subprocess.CompletedProcess[str]:
    address = ("--bootstrap", cluster.bootstrap) if cluster is not None else ()
    return subprocess.run([sys.executable, "-m", "strand.cli.main", *address, *args],
                          cwd=REPO, input=stdin, capture_output=True, text=True,
                          timeout=timeout, env=env, check=False)


def popen(cluster: SdkCluster, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "strand.cli.main", "--bootstrap",
                             cluster.bootstrap, *args], cwd=REPO, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def lines_of(stream: IO[str]) -> queue.Queue[str | None]:
    """The stream's lines as they come, read by a thread (a test can wait with a
    limit); None after the last."""
    found: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in stream:
            found.put(line)
        found.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return found


def create(cluster: SdkCluster, name: str, partitions: int = 1) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ------------------------------------------------------------------ 8: silent hangs

def test_group_consume_of_a_missing_topic_says_so_and_honours_idle_timeout(
        group_cluster: SdkCluster) -> None:
    start = time.monotonic()
    done = strand(group_cluster, "consume", "nosuchtopic", "--group", "zz",
                  "--idle-timeout-ms", "2000", timeout=30)
    elapsed = time.monotonic() - start
    assert done.returncode == 1, done.stderr
    assert "waiting for topic nosuchtopic to exist" in done.stderr
    assert "UNKNOWN_TOPIC_OR_PARTITION" in done.stderr and "nosuchtopic" in done.stderr
    assert elapsed < 8, elapsed  # 2 s of waiting plus start-up, not forever


def test_group_consume_waits_for_a_topic_created_meanwhile(group_cluster: SdkCluster) -> None:
    consumer = popen(group_cluster, "consume", "latecomer", "--group", "late",
                     "--idle-timeout-ms", "15000")
    try:
        errors = lines_of(consumer.stderr)  # type: ignore[arg-type]
        assert "waiting for topic latecomer" in (errors.get(timeout=20) or "")
        create(group_cluster, "latecomer")
        with Producer(group_cluster.bootstrap) as producer:
            producer.send("latecomer", b"hello").result()
        printed = lines_of(consumer.stdout)  # type: ignore[arg-type]
        assert printed.get(timeout=20) == "hello\n"
        consumer.send_signal(signal.SIGTERM)
        assert consumer.wait(30) == 0
    finally:
        consumer.kill()


def test_produce_to_a_missing_topic_says_so_within_max_block_ms(
        group_cluster: SdkCluster) -> None:
    start = time.monotonic()
    done = strand(group_cluster, "produce", "nosuchtopic", "--max-block-ms", "2000",
                  stdin="x\n", timeout=30)
    assert done.returncode == 1, done.stderr
    assert "waiting for topic nosuchtopic to exist" in done.stderr
    assert "UNKNOWN_TOPIC_OR_PARTITION: topic 'nosuchtopic' does not exist" in done.stderr
    assert time.monotonic() - start < 8


def test_a_wrong_bootstrap_fails_fast_naming_the_address() -> None:
    address = f"127.0.0.1:{free_port()}"
    start = time.monotonic()
    done = strand(None, "--bootstrap", address, "produce", "events", stdin="x\n", timeout=30)
    assert done.returncode == 1
    assert f"cannot reach the gateway at {address} (from --bootstrap), retrying" in done.stderr
    assert (f"cannot connect to the gateway at {address} (from --bootstrap)" in done.stderr
            and "strand dev up" in done.stderr), done.stderr
    assert time.monotonic() - start < 15  # the 10 s connection budget, not max.block.ms
    listed = strand(None, "--bootstrap", address, "topic", "list")
    assert f"cannot connect to the gateway at {address}" in listed.stderr
    assert "UNKNOWN_SERVER_ERROR" not in listed.stderr


# ------------------------------------------------------------------ 13: bootstrap errors

def test_bootstrap_errors_speak_to_a_cli_user(tmp_path: Path) -> None:
    bad = strand(None, "--bootstrap", "x", "topic", "list")
    assert bad.returncode == 1
    assert "invalid --bootstrap 'x': expected HOST:PORT" in bad.stderr
    env = {**os.environ, "STRAND_BOOTSTRAP": "nohost"}
    from_env = strand(None, "topic", "list", env=env)
    assert "invalid $STRAND_BOOTSTRAP 'nohost': expected HOST:PORT" in from_env.stderr
    env = {k: v for k, v in os.environ.items() if k != "STRAND_BOOTSTRAP"}
    env["STRAND_DEV_DIR"] = str(tmp_path / "none")
    missing = strand(None, "topic", "list", env=env)
    assert missing.returncode == 1
    assert "pass --bootstrap HOST:PORT" in missing.stderr and "strand dev up" in missing.stderr
    for text in (bad.stderr, from_env.stderr, missing.stderr):
        assert "UNKNOWN_SERVER_ERROR" not in text and "Producer(" not in text


def test_sdk_bootstrap_and_transport_errors_have_their_codes() -> None:
    from strand import BootstrapError, TransportError
    from strand.errors import ErrorCode

    with pytest.raises(BootstrapError) as bad:
        Admin("x")
    assert bad.value.code == ErrorCode.INVALID_CONFIG
    with Admin(f"127.0.0.1:{free_port()}", request_timeout_ms=1000) as admin, \
            pytest.raises(TransportError) as down:
        admin.list_topics()
    assert down.value.code == ErrorCode.NETWORK_EXCEPTION and down.value.retriable


# ------------------------------------------------------------------ 10: formats

def test_headers_timestamps_and_null_keys_round_trip(group_cluster: SdkCluster) -> None:
    create(group_cluster, "formats")
    lines = ("1700000000001\tcolor=red\tNULL\tfirst\n"
             "1700000000002\t\tnull\tsecond\n"
             "\tcolor=blue,size=\tk3\tthird\tvalue\n")
    produced = strand(group_cluster, "produce", "formats", "--line-format", "%T\\t%h\\t%k\\t%s",
                      "--null-literal", "NULL", "--header", "src=cli", stdin=lines)
    assert produced.returncode == 0, produced.stderr
    fmt = "%t|%p|%o|%T|%h|%k|%K|%s|%S\\n"
    consumed = strand(group_cluster, "consume", "formats", "--from-beginning", "--format", fmt)
    assert consumed.returncode == 0, consumed.stderr
    rows = [line.split("|") for line in consumed.stdout.splitlines()]
    assert [r[:3] for r in rows] == [["formats", "0", "0"], ["formats", "0", "1"],
                                     ["formats", "0", "2"]]
    assert [r[3] for r in rows[:2]] == ["1700000000001", "1700000000002"]
    assert abs(int(rows[2][3]) - time.time() * 1000) < 120_000  # empty %T: now
    assert [r[4] for r in rows] == ["src=cli,color=red", "src=cli", "src=cli,color=blue,size="]
    # A null key prints as nothing with length -1; the 4-byte key "null" is itself.
    assert [(r[5], r[6]) for r in rows] == [("", "-1"), ("null", "4"), ("k3", "2")]
    assert [(r[7], r[8]) for r in rows] == [("first", "5"), ("second", "6"),
                                            ("third\tvalue", "11")]
    keyed = strand(group_cluster, "consume", "formats", "--from-beginning", "--print-key",
                   "--null-literal", "<null>")
    assert keyed.stdout.splitlines()[:2] == ["<null>\tfirst", "null\tsecond"]
    bad = strand(group_cluster, "consume", "formats", "--format", "%q")
    assert bad.returncode == 2 and "unknown token %q" in bad.stderr


def test_produce_reports_a_failure_as_it_happens(group_cluster: SdkCluster) -> None:
    create(group_cluster, "failing")
    producer = popen(group_cluster, "produce", "failing", "--partition", "5",
                     "--max-block-ms", "3000")
    try:
        errors = lines_of(producer.stderr)  # type: ignore[arg-type]
        assert producer.stdin is not None
        producer.stdin.write("first\n")
        producer.stdin.flush()
        # Reported while the input is still open, with its line number.
        report = errors.get(timeout=20) or ""
        assert report.startswith("line 1: not sent: UNKNOWN_TOPIC_OR_PARTITION"), report
        producer.stdin.write("second\n")
        producer.stdin.close()
        assert producer.wait(30) == 1
        rest = "".join(errors.get(timeout=5) or "" for _ in range(2))
        assert "line 2: not sent" in rest and "2 of 2 records not sent" in rest
    finally:
        producer.kill()


# ------------------------------------------------------------------ 11: defaults

def test_one_rule_for_defaults(group_cluster: SdkCluster) -> None:
    create(group_cluster, "existing", partitions=2)
    with Producer(group_cluster.bootstrap) as producer:
        assert "acks=-1" in repr(producer)  # acks=all, as Kafka's producer since 3.0
        for i in range(5):
            producer.send("existing", f"old-{i}".encode())
    assert "[default: all]" in strand(None, "produce", "--help").stdout
    latest = strand(group_cluster, "consume", "existing", "--group", "late-readers",
                    "--auto-offset-reset", "latest", "--idle-timeout-ms", "4000")
    assert latest.returncode == 0 and latest.stdout == ""
    # A new group reads what is there already (the SDK's earliest), as the README says.
    first = strand(group_cluster, "consume", "existing", "--group", "readers",
                   "--idle-timeout-ms", "4000")
    assert first.returncode == 0, first.stderr
    assert sorted(first.stdout.splitlines()) == [f"old-{i}" for i in range(5)]
    contradiction = strand(group_cluster, "consume", "existing", "--group", "g",
                           "--from-beginning", "--auto-offset-reset", "latest")
    assert contradiction.returncode == 2


def producer_ids(cluster: SdkCluster, topic: str) -> list[int]:
    """The producer id of each batch of ``topic``'s partition 0 (-1: none)."""
    with grpc.insecure_channel(cluster.bootstrap) as channel:
        response = gateway_pb2_grpc.GatewayStub(channel).Fetch(pb.FetchRequest(
            max_wait_ms=0, max_bytes=1 << 20, topics=[pb.TopicFetchData(
                topic=topic, partitions=[pb.PartitionFetchData(
                    partition=0, fetch_offset=0, partition_max_bytes=1 << 20,
                    current_leader_epoch=-1)])]), timeout=10)
    answer = response.topics[0].partitions[0]
    assert answer.error_code == 0, answer.error_message
    return [b.header.producer_id for b in iter_record_batches(answer.records)]


def test_produce_is_idempotent_unless_told_otherwise(group_cluster: SdkCluster) -> None:
    """Default: every batch carries a producer id (the idempotent producer, as Kafka
    >= 3.0); --no-idempotence: none; --idempotence with --acks 1: a usage error."""
    create(group_cluster, "idempotent")
    default = strand(group_cluster, "produce", "idempotent", stdin="a\n")
    assert default.returncode == 0, default.stderr
    plain = strand(group_cluster, "produce", "idempotent", "--no-idempotence", stdin="b\n")
    assert plain.returncode == 0, plain.stderr
    ids = producer_ids(group_cluster, "idempotent")
    assert len(ids) == 2 and ids[0] >= 0 and ids[1] == -1
    conflict = strand(group_cluster, "produce", "idempotent", "--idempotence", "--acks", "1",
                      stdin="c\n")
    assert conflict.returncode == 2 and "--idempotence needs --acks all" in conflict.stderr
    bench = strand(group_cluster, "bench", "produce", "idempotent", "--records", "10",
                   "--no-idempotence", "--json")
    assert bench.returncode == 0 and json.loads(bench.stdout)["idempotent"] is False


# ------------------------------------------------------------------ 12: brokers, configs

def test_broker_list_and_describe_configs(group_cluster: SdkCluster) -> None:
    listed = strand(group_cluster, "broker", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    brokers = json.loads(listed.stdout)["brokers"]
    node = group_cluster.process("storage-1")
    assert [(b["id"], b["address"], b["state"]) for b in brokers] == [
        (1, node.address, "alive")]
    assert brokers[0]["rack"] and brokers[0]["replicas"] >= brokers[0]["leaders"] >= 0
    table = strand(group_cluster, "broker", "list")
    assert node.address in table.stdout and "rack" in table.stdout

    created = strand(group_cluster, "topic", "create", "configured", "--config",
                     "retention.ms=3600000")
    assert created.returncode == 0, created.stderr
    described = json.loads(strand(group_cluster, "topic", "describe", "configured",
                                  "--json").stdout)
    sources = {c["name"]: (c["value"], c["source"]) for c in described["configs"]}
    assert sources["retention.ms"] == ("3600000", "override")
    assert sources["cleanup.policy"] == ("delete", "default")
    text = strand(group_cluster, "topic", "describe", "configured").stdout
    assert "{" not in text  # a table of configs, not a Python dict in the title
    assert any("retention.ms" in line and "3600000" in line and "override" in line
               for line in text.splitlines())
    only = json.loads(strand(group_cluster, "config", "describe", "topic", "configured",
                             "--overrides", "--json").stdout)
    assert only["configs"] == [{"name": "retention.ms", "value": "3600000",
                                "source": "override"}]
    every = strand(group_cluster, "config", "describe", "topic", "configured")
    assert "segment.bytes" in every.stdout and "default" in every.stdout


# ------------------------------------------------------------------ 16: SIGTERM

def test_sigterm_commits_what_was_printed_and_leaves(group_cluster: SdkCluster) -> None:
    """The first member is stopped mid-stream (blocked on a full pipe); the second
    gets exactly the records the first did not print: none twice, none lost."""
    create(group_cluster, "stream", partitions=2)
    values = [f"record-{i:05d}-" + "x" * 48 for i in range(6000)]  # far more than a pipe holds
    with Producer(group_cluster.bootstrap, linger_ms=20) as producer:
        for value in values:
            producer.send("stream", value.encode())
    first = popen(group_cluster, "consume", "stream", "--group", "stoppers",
                  "--from-beginning")
    try:
        stream = lines_of(first.stdout)  # type: ignore[arg-type]
        printed = [stream.get(timeout=30) for _ in range(500)]
        first.send_signal(signal.SIGTERM)
        while (line := stream.get(timeout=60)) is not None:
            printed.append(line)
        assert first.wait(30) == 0
        assert first.stderr is not None and "Traceback" not in first.stderr.read()
    finally:
        first.kill()
    assert len(printed) < len(values), "stopped too late to show anything"
    second = strand(group_cluster, "consume", "stream", "--group", "stoppers",
                    "--idle-timeout-ms", "5000")
    assert second.returncode == 0, second.stderr
    got_first = [(line or "").rstrip("\n") for line in printed]
    got_second = second.stdout.splitlines()
    assert not set(got_first) & set(got_second), "re-delivered after SIGTERM"
    assert sorted(got_first + got_second) == values


def test_max_messages_commits_only_what_was_printed(group_cluster: SdkCluster) -> None:
    """A poll returns more records than --max-messages lets print: the rest are not
    committed, so the group's next member gets them."""
    create(group_cluster, "capped")
    with Producer(group_cluster.bootstrap) as producer:
        for i in range(10):
            producer.send("capped", f"v{i}".encode())
    first = strand(group_cluster, "consume", "capped", "--group", "capped-readers",
                   "--max-messages", "3")
    assert first.stdout.splitlines() == ["v0", "v1", "v2"], first.stderr
    rest = strand(group_cluster, "consume", "capped", "--group", "capped-readers",
                  "--idle-timeout-ms", "4000")
    assert rest.stdout.splitlines() == [f"v{i}" for i in range(3, 10)], rest.stderr
