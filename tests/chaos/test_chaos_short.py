"""The short chaos run of ``make test``: every fault once against a real cluster.

It proves the harness works end to end (the cluster starts, each fault is really
injected and healed, the workload writes and reads, the consumer group reads,
commits and changes owners — members closed and crashed —, the final read-back and
the replica comparison run, the report is complete) and leaves no process behind.
The leader faults all aim at the leader of the group's __consumer_offsets partition
here (which leads a partition of the chaos topic too), kill-coordinator at the
owner of the group's shard, kill-transaction-coordinator at the owner of a live
transactional id's shard. The exactly-once workloads run too: idempotent writers,
transactional producers (committed, aborted and fenced transactions over 2 topics)
followed by a read_committed reader, and the consume-transform-produce pipeline.
So do Kafka's own clients, confluent-kafka through the gateway's Kafka listener: an
idempotent writer, a read_committed tail reader and a second read-back of the chaos
topic, a transactional producer (committed, aborted and fenced transactions) and a
read_committed reader of the transactional topics, under the same checks.

And that Strand passes: nothing acknowledged lost, no divergence, no order
violation, no phantom, identical replicas, no group owner starting below or above
the committed offset, no duplicate, no aborted or torn read, none past the LSO, no
committed transaction lost, exactly one pipeline output per input, and the cluster
recovering from every fault by itself.
``STRAND_CHAOS_STRICT=0`` turns that last test off (to study a failing run's report
without the assertion). The checker's own tests (test_checker.py) always run.
"""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path

import pytest

from strand.launcher import command_line

from .exactly_once import PIPELINE_OUTPUT, TXN_TOPICS, ExactlyOnceSettings
from .faults import KINDS
from .group_workload import GroupSettings
from .history import CLOSED, COMMITTED, CRASHED, FINAL_SESSION, KAFKA_TAIL, KAFKA_TXN_PREFIX
from .kafka_workload import KafkaSettings
from .runner import ChaosConfig, RunResult, run
from .summary import print_summary
from .txn_workload import TxnSettings

STRICT = os.environ.get("STRAND_CHAOS_STRICT", "1") != "0"

# Every exactly-once workload at a fraction of the long run's load (2 cores run the
# cluster and every workload): 3 transactions/s per producer instead of 5, one in
# ten fenced (a few in the short run), and 10 pipeline inputs/s instead of 20 — still
# hundreds of transactions and pipeline records, far above what the tests require.
SHORT_EXACTLY_ONCE = ExactlyOnceSettings(pipeline_rate=10.0,
                                         txn=TxnSettings(rate=3.0, fence_share=0.1))

# One idempotent confluent-kafka writer and one read_committed tail reader through the
# gateway's Kafka listener, and the second read-back through it.
SHORT_KAFKA = KafkaSettings(writers=1, rate=30.0, tail_readers=1)


def _ours(pattern: str, markers: list[str]) -> list[str]:
    """Processes whose command line matches ``pattern`` and names this run (read from
    /proc: a bare Debian has no pgrep)."""
    mine = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        command = " ".join(command_line(int(entry.name)))  # empty: it ended meanwhile
        if re.search(pattern, command) and any(marker in command for marker in markers):
            mine.append(f"{entry.name}: {command[:200]}")
    return mine


@pytest.fixture(scope="module")
def short_run(tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    config = ChaosConfig(duration=0, injections=len(KINDS), faults=list(KINDS), seed=4,
                         lease_ttl=2, quiet=1.5, rate=60, recovery_timeout=20,
                         workdir=tmp_path_factory.mktemp("chaos"), keep=True,
                         offsets_share=1.0,
                         group=GroupSettings(members=3, churn=4, crash_share=0.4,
                                             session_timeout_ms=4000,
                                             heartbeat_interval_ms=400),
                         exactly_once=SHORT_EXACTLY_ONCE, kafka=SHORT_KAFKA)
    lines: list[str] = []
    result = run(config, log=lines.append)
    print("\n".join(lines))  # shown by pytest when a test fails
    print(json.dumps({key: result.report.info.get(key)  # the workloads' counts
                      for key in ("transactions", "pipeline", "kafka")}, default=str))
    return result


@pytest.mark.chaos
@pytest.mark.slow
def test_every_fault_was_injected_and_healed(short_run: RunResult) -> None:
    faults = short_run.history.faults
    assert sorted(f.kind for f in faults) == sorted(KINDS)
    for fault in faults:
        assert fault.t_inject < fault.t_healed <= fault.t_recovered, fault
        assert fault.target
    by_kind = {f.kind: f for f in faults}
    assert by_kind["kill-coordinator"].target.startswith("groups-")
    assert "owner of the group's shard" in by_kind["kill-coordinator"].note
    assert by_kind["kill-transaction-coordinator"].target.startswith("txns-")
    assert "of __transaction_state" in by_kind["kill-transaction-coordinator"].note
    assert by_kind["pause-coordinator"].target.startswith(("groups-", "txns-"))
    assert "owner of" in by_kind["pause-coordinator"].note
    assert "__consumer_offsets" in by_kind["kill-leader"].note


@pytest.mark.chaos
@pytest.mark.slow
def test_the_workload_wrote_read_and_read_back(short_run: RunResult) -> None:
    history, report = short_run.history, short_run.report
    assert not short_run.workload_errors
    assert report.total.acked > 500
    assert len({r.session for r in history.reads}) >= 3  # tails, rewinds, the final read
    assert history.final_hw and set(history.final_hw) <= set(range(history.partitions))
    assert report.info["final_records"] > 0
    # A replica comparison after every heal and after the run, for each partition.
    assert report.total.replica_checks == (len(KINDS) + 1) * history.partitions


@pytest.mark.chaos
@pytest.mark.slow
def test_the_group_consumed_committed_and_changed_owners(short_run: RunResult) -> None:
    history, report = short_run.history, short_run.report
    group = report.info["group"]
    assert report.total.group_reads > 500
    assert report.total.owner_changes >= 3
    assert group["ownerships_checked"] >= 6
    assert group["commits"].get("ok", 0) > 20
    ended = set(history.members.values())
    assert {CLOSED, CRASHED} <= ended, history.members  # replaced both ways
    assert report.info["final_records"] > 0
    assert group["final_records_read_by_group"] > 0


@pytest.mark.chaos
@pytest.mark.slow
def test_the_exactly_once_workloads_ran(short_run: RunResult) -> None:
    history, report = short_run.history, short_run.report
    assert history.idempotent
    outcomes = report.info["transactions"]["outcomes"]
    assert outcomes.get("commit->committed", 0) > 20, outcomes
    assert outcomes.get("abort->aborted", 0) > 3, outcomes
    assert outcomes.get("fence->fenced", 0) >= 1, outcomes
    assert report.info["transactions"]["with_lso"] > 100  # live reads checked against it
    assert report.info["transactions"]["final_records"] > 0
    assert {len({r.topic for r in t.records}) for t in history.txns
            if t.txn_id.startswith("chaos-tx-")} == {2}
    assert min(len({(r.topic, r.partition) for r in t.records}) for t in history.txns
               if t.txn_id.startswith("chaos-tx-")) >= 3
    pipeline = report.info["pipeline"]
    assert pipeline["inputs_acked"] > 100 and pipeline["outputs"] > 100, pipeline
    # Every checker had something to check: the read_committed reader followed every
    # transactional topic and the pipeline's output live and read them all back.
    live = {r.topic for r in history.txn_reads if r.session != FINAL_SESSION}
    assert {*TXN_TOPICS, PIPELINE_OUTPUT} <= live, live
    assert {t for t, _ in history.txn_final_complete} == {*TXN_TOPICS, PIPELINE_OUTPUT}


@pytest.mark.chaos
@pytest.mark.slow
def test_the_kafka_workloads_ran(short_run: RunResult) -> None:
    """confluent-kafka wrote through the gateway's Kafka listener, read live and read
    everything back; the two protocols read each other's records."""
    history, report = short_run.history, short_run.report
    kafka = report.info["kafka"]
    assert kafka["writers"] == ["k0"]
    assert kafka["acked"] > 300, kafka
    assert report.total.kafka_acked == kafka["acked"]
    assert history.kafka_read_back and kafka["final_unreadable_partitions"] == []
    assert kafka["final_records"] == report.info["final_records"] > kafka["acked"]
    assert kafka["final_hw"] == report.info["final_hw"]
    live = [r.value for r in history.reads if r.session.startswith(KAFKA_TAIL)]
    assert kafka["live_reads"] == len(live) > 500
    assert any(v.startswith("w") for v in live)  # the SDK writers' records
    sdk_final = {r.value for r in history.reads if r.session == FINAL_SESSION}
    assert any(v.startswith("k0:") for v in sdk_final)  # the SDK reads Kafka's batches
    # Transactions through librdkafka (EndTxn < v5: one instance, epoch kept), read
    # by both read_committed readers and read back.
    outcomes = kafka["transactions"]
    assert outcomes.get("commit->committed", 0) > 5 and outcomes.get("abort->aborted", 0) >= 1, \
        outcomes
    assert kafka["committed_reads"] > 0
    kafka_values = {r.value for t in history.txns if t.txn_id.startswith(KAFKA_TXN_PREFIX)
                    and t.outcome == COMMITTED for r in t.records}
    final_txn_values = {r.value for r in history.txn_reads if r.session == FINAL_SESSION}
    assert kafka_values & final_txn_values  # (all of them: txns lost, in the strict test)


@pytest.mark.chaos
@pytest.mark.slow
def test_the_report_is_complete(short_run: RunResult) -> None:
    report = short_run.report
    names = [row.fault for row in report.rows]
    assert set(KINDS) <= set(names)
    out = io.StringIO()
    print_summary(short_run, out)
    table = out.getvalue()
    for kind in KINDS:
        assert kind in table
    for column in ("kafka acked", "lost", "divergence", "order", "phantom", "ambiguous",
                   "identical", "group reads", "owner changes", "re-read", "skipped", "dup",
                   "aborted reads", "torn", "past LSO", "txns lost", "pipe dup", "pipe missing"):
        assert column in table
    data = json.loads(json.dumps(report.to_json()))
    assert data["rows"][-1]["fault"] == "total"
    assert {"lost", "divergence", "order", "phantom", "ambiguous", "replica_mismatches",
            "recovered", "group_reads", "owner_changes", "reread", "skipped", "duplicate",
            "aborted_read", "torn", "past_lso", "txn_lost", "pipeline_dup",
            "pipeline_missing", "kafka_acked"} <= set(data["rows"][-1])
    assert {"group", "transactions", "pipeline", "kafka"} <= set(data["info"])
    assert "kafka (confluent-kafka" in table


@pytest.mark.chaos
@pytest.mark.slow
def test_no_process_is_left_behind(short_run: RunResult) -> None:
    assert short_run.leftover_pids == []
    markers = [short_run.cluster_name, str(short_run.workdir)]
    assert _ours(r"services\.(storage|gateway|controller|groups|transactions)", markers) == []
    assert _ours(r"(^|/)etcd ", markers) == []
    assert _ours(r"tests\.chaos\.(proxy|group_member)", markers) == []


@pytest.mark.chaos
@pytest.mark.slow
@pytest.mark.skipif(not STRICT, reason="STRAND_CHAOS_STRICT=0: the report only")
def test_strand_passes_every_check(short_run: RunResult) -> None:
    report = short_run.report
    out = io.StringIO()
    print_summary(short_run, out)
    assert not report.failed, out.getvalue()
    assert not report.unavailable, out.getvalue()
    assert report.info["kafka"]["fatal"] == [], out.getvalue()  # the idempotent producer
    # never gave up
