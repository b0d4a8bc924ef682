"""The summary of a chaos run: one row per fault kind, counts per property (rich)."""

from __future__ import annotations

from pathlib import Path
from typing import IO, TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from strand.launcher import service_logs

from .faults import KINDS

if TYPE_CHECKING:
    from .checker import Row
    from .runner import RunResult

COLUMNS = ("injections", "acked", "kafka acked", "lost", "divergence", "order", "phantom",
           "ambiguous",
           "replicas identical", "recovered", "group reads", "owner changes", "re-read",
           "skipped", "dup", "txns", "aborted reads", "torn", "past LSO", "txns lost",
           "pipe dup", "pipe missing")


def _cells(row: Row) -> list[str]:
    def bad(n: int) -> str:
        return f"[bold red]{n}[/]" if n else "0"

    replicas = (f"{row.replicas_identical}/{row.replica_checks}" if row.replica_checks
                else "-")
    if row.replica_mismatches:
        replicas = f"[bold red]{replicas}[/]"
    recovered = f"{row.recovered}/{row.injections}" if row.injections else "-"
    if row.recovered < row.injections:
        recovered = f"[bold red]{recovered}[/]"
    return [str(row.injections), str(row.acked), str(row.kafka_acked), bad(row.lost),
            bad(row.divergence),
            bad(row.order), bad(row.phantom), str(row.ambiguous), replicas, recovered,
            str(row.group_reads), str(row.owner_changes), bad(row.reread), bad(row.skipped),
            bad(row.duplicate), str(row.txns_committed), bad(row.aborted_read), bad(row.torn),
            bad(row.past_lso), bad(row.txn_lost), bad(row.pipeline_dup),
            bad(row.pipeline_missing)]


def build_table(result: RunResult) -> Table:
    config, report = result.config, result.report
    title = (f"Strand chaos: {len(result.history.faults)} faults in a "
             f"{report.info['elapsed_s']:g}s run (seed {config.seed}), lease TTL "
             f"{config.lease_ttl}s, "
             f"RF {config.replication_factor}, min.insync.replicas "
             f"{config.min_insync_replicas}, acks=all, cut mode {config.cut_mode}")
    table = Table(title=title, title_justify="left")
    table.add_column("fault", min_width=max(map(len, KINDS)), no_wrap=True)
    for column in COLUMNS:
        table.add_column(column, justify="right")
    for row in report.rows:
        table.add_row(row.fault, *_cells(row))
    table.add_section()
    table.add_row("[bold]total[/]", *_cells(report.total))
    return table


def print_summary(result: RunResult, file: IO[str]) -> None:
    console = Console(file=file, width=300)
    report, info = result.report, result.report.info
    console.print(build_table(result))
    console.print(
        f"sends {info['sends']} {info['outcomes']}; reads {info['reads']} in "
        f"{info['sessions']} consumer sessions; final read {info['final_records']} records, "
        f"high watermarks {info['final_hw']}, unreadable partitions "
        f"{info['final_unreadable_partitions']}; written twice by retries "
        f"({'idempotent' if result.history.idempotent else 'plain'} writers) "
        f"{info['duplicated_in_final']}; ambiguous sends found in the final read "
        f"{info['ambiguous_found_in_final']}")
    group = info.get("group", {})
    if group.get("members"):
        console.print(
            f"group: {group['members']} members {group['members_ended']}; "
            f"{group['ownerships']} ownerships ({group['ownerships_checked']} with reads); "
            f"commits {group['commits']} (not acknowledged: {group['commit_errors']}); "
            f"read again (at-least-once, allowed) "
            f"{group['read_again']}; final records "
            f"read by the group {group['final_records_read_by_group']}/{info['final_records']}; "
            f"ownerships without on_partitions_assigned "
            f"{group['ownerships_without_assignment']}", highlight=False)
    txns, pipeline = info.get("transactions", {}), info.get("pipeline", {})
    if txns.get("transactions"):
        console.print(
            f"transactions: {txns['transactions']} (intent->outcome {txns['outcomes']}); "
            f"read_committed reads {txns['reads']} ({txns['with_lso']} checked against "
            f"their fetch's LSO); final read {txns['final_records']} records", highlight=False)
    kafka = info.get("kafka", {})
    if kafka.get("writers") or kafka.get("live_sessions"):
        console.print(
            f"kafka (confluent-kafka, the gateway's Kafka listener): writers "
            f"{kafka['writers']} sends {kafka['sends']} {kafka['outcomes']}; live reads "
            f"{kafka['live_reads']} in {kafka['live_sessions']} sessions; final read "
            f"{kafka['final_records']} records, high watermarks {kafka['final_hw']}, "
            f"unreadable partitions {kafka['final_unreadable_partitions']}; acknowledged "
            f"without an offset {kafka['acked_without_offset']}; fatal producer errors "
            f"{len(kafka['fatal'])}; transactions (intent->outcome) {kafka['transactions']}, "
            f"read_committed reads {kafka['committed_reads']}", highlight=False)
    if pipeline.get("inputs"):
        console.print(
            f"pipeline: inputs {pipeline['inputs']} ({pipeline['inputs_acked']} acknowledged), "
            f"outputs in the final read {pipeline['outputs']}", highlight=False)
    console.print("kafka acked: of acked, through confluent-kafka | lost: acknowledged but not "
                  "read back at that offset (by the SDK's or confluent-kafka's read-back) | "
                  "divergence: an offset "
                  "yielded two values | order: a consumer's offsets went backwards | phantom: "
                  "read but never sent (or refused) | ambiguous: send timed out / not "
                  "answered (not an error) | replicas identical: partitions byte-identical on "
                  "every replica below the high watermark, after each heal ('final': after "
                  "the run) | recovered: healthy again within the timeout, no process "
                  "exiting on its own | owner changes: a partition of the group moving to "
                  "another member | re-read: a new owner started below the committed offset | "
                  "skipped: an owner started above it, or jumped over records | dup: written "
                  "twice by an idempotent producer | txns: transactions committed | aborted "
                  "reads: a read_committed reader saw an aborted or fenced transaction | "
                  "torn: saw part of a transaction | past LSO: a record at or above its "
                  "fetch's last stable offset | txns lost: a committed transaction's record "
                  "missing | pipe dup / missing: an input with two outputs / none")
    for check, examples in report.examples.items():
        console.print(f"[bold]{check}[/], first {len(examples)}:", highlight=False)
        for example in examples:
            console.print(f"  {example}", highlight=False, markup=False)
    if report.unrecovered:
        console.print("[bold red]the cluster did not recover by itself[/]:")
        for line in report.unrecovered:
            console.print(f"  {line}", highlight=False, markup=False)
    if report.replica_failures:
        console.print("[bold]replica mismatches[/]:")
        for failure in report.replica_failures:
            console.print(f"  {failure}", highlight=False, markup=False)
    if txns.get("errors"):
        console.print(f"transactional clients' errors (retried or replaced), first "
                      f"{len(txns['errors'])}:")
        for error in txns["errors"]:
            console.print(f"  {error}", highlight=False, markup=False)
    if group.get("errors"):
        console.print(f"group members' errors, first {len(group['errors'])}:")
        for error in group["errors"]:
            console.print(f"  {error}", highlight=False, markup=False)
    for what in ("fatal", "errors"):
        if kafka.get(what):
            console.print(f"confluent-kafka clients' {what} (a new producer or session "
                          f"followed), first {len(kafka[what])}:")
            for error in kafka[what]:
                console.print(f"  {error}", highlight=False, markup=False)
    if info.get("reader_errors"):
        console.print(f"consumer errors (new sessions followed), first "
                      f"{len(info['reader_errors'])}:")
        for error in info["reader_errors"]:
            console.print(f"  {error}", highlight=False, markup=False)
    if result.workload_errors:
        console.print(f"[bold red]workload errors[/]: {result.workload_errors}")
    if result.leftover_pids:
        console.print(f"[bold red]processes left running[/]: {result.leftover_pids}")
    if report.failed:
        # A run kept on a CI machine is lost with it: what the services warned about
        # last goes into the report, to start from.
        warnings = service_warnings(result.workdir / "logs")
        if warnings:
            console.print(f"the services' last warnings and errors ({len(warnings)}):")
            for line in warnings:
                console.print(f"  {line}", highlight=False, markup=False)
    if (report.failed or report.unavailable or result.workload_errors or result.leftover_pids
            or result.config.keep):
        console.print(f"logs and data kept in {result.workdir}", highlight=False)


def service_warnings(logs: Path, limit: int = 25) -> list[str]:
    """The last ``limit`` distinct warnings and errors of the services' structured logs
    (a message repeated counts once, with its last time and its count)."""
    seen: dict[tuple[str, str, str], tuple[str, int]] = {}
    for warning in service_logs.warnings(logs):
        key = (warning.service, _one_line(warning.message, 120), _one_line(warning.error, 200))
        _, count = seen.pop(key, ("", 0))
        seen[key] = (warning.time, count + 1)
    latest = sorted(seen.items(), key=lambda item: item[1][0])[-limit:]
    return [f"{ts} {service}: {msg} x{count}" + (f" ({error})" if error else "")
            for (service, msg, error), (ts, count) in latest]


def _one_line(value: str, width: int) -> str:
    return " ".join(value.split())[:width]
