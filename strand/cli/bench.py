"""``strand bench produce|consume``: perf tools in the spirit of Kafka's
producer-perf-test and consumer-perf-test. ``--json`` prints one object with
records, bytes, seconds, records_per_s, mb_per_s (MB = 10^6 bytes) and, for
produce, the send-to-acknowledgement latency percentiles in milliseconds (with
``--transactional-id``: also the transactions and their commit latency)."""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING

import click

from strand.cli.common import bootstrap, err, friendly_errors, security
from strand.cli.produce import ACKS, IDEMPOTENCE_HELP, check_idempotence, parse_acks
from strand.client.structs import TopicPartition

if TYPE_CHECKING:  # the clients (and gRPC) are imported by the commands that use them
    from rich.progress import Progress

    from strand.producer import Producer


def _progress() -> Progress:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=err.console, transient=True)


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return round(sorted_values[index], 3)


def _report(result: dict[str, object], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(result))
    else:
        for key, value in result.items():
            click.echo(f"{key}: {value}")


@click.group()
def bench() -> None:
    """Measure produce and consume throughput against a cluster."""


@bench.command(name="produce")
@click.argument("topic")
@click.option("--records", type=click.IntRange(1), required=True)
@click.option("--record-size", type=click.IntRange(0), default=1024, show_default=True)
@click.option("--acks", type=ACKS, default="all", show_default=True)
@click.option("--batch-size", type=click.IntRange(1), default=262144, show_default=True)
@click.option("--linger-ms", type=click.IntRange(0), default=5, show_default=True)
@click.option("--compression", type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]),
              default="none", show_default=True)
@click.option("--idempotence/--no-idempotence", "--enable-idempotence/--disable-idempotence",
              "idempotence", default=None, help=IDEMPOTENCE_HELP)
@click.option("--transactional-id", default=None,
              help="produce in transactions of this transactional id (needs acks=all and a "
                   "transaction coordinator)")
@click.option("--transaction-records", type=click.IntRange(1), default=None,
              help="with --transactional-id: commit every N records (default: one "
                   "transaction for the whole run)")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly_errors
def bench_produce(ctx: click.Context, topic: str, records: int, record_size: int, acks: str,
                  batch_size: int, linger_ms: int, compression: str, idempotence: bool | None,
                  transactional_id: str | None, transaction_records: int | None,
                  as_json: bool) -> None:
    """Send RECORDS records of RECORD-SIZE random bytes to TOPIC as fast as possible."""
    from strand.producer import Producer

    check_idempotence(idempotence, acks)
    if transaction_records is not None and transactional_id is None:
        raise click.UsageError("--transaction-records needs --transactional-id")
    if transactional_id is not None and parse_acks(acks) != "all":
        raise click.UsageError(f"--transactional-id needs --acks all, not {acks}")
    if transactional_id is not None and idempotence is False:
        raise click.UsageError("--transactional-id needs the idempotent producer: drop "
                               "--disable-idempotence")
    per_transaction = transaction_records or records
    payload = os.urandom(record_size)
    latencies: list[float] = []
    failures: list[BaseException] = []
    commits: list[float] = []
    with Producer(bootstrap(ctx), **security(ctx), acks=parse_acks(acks), batch_size=batch_size,
                  linger_ms=linger_ms, enable_idempotence=idempotence,
                  transactional_id=transactional_id,
                  compression_type=None if compression == "none" else compression) as producer:
        idempotent = producer.idempotent
        producer.partitions_for(topic)  # metadata first: not part of the measurement
        if transactional_id is not None:
            producer.init_transactions()  # fences an older instance: not measured either
        with _progress() as progress:
            task = progress.add_task(f"producing to {topic}", total=records)
            start = time.perf_counter()
            for i in range(records):
                if transactional_id is not None and i % per_transaction == 0:
                    if i:
                        commits.append(_commit(producer))
                    producer.begin_transaction()
                sent = time.perf_counter()

                def done(metadata: object, error: BaseException | None,
                         sent: float = sent) -> None:
                    if error is not None:
                        failures.append(error)
                    else:
                        latencies.append((time.perf_counter() - sent) * 1000)

                producer.send(topic, value=payload, on_delivery=done)
                if len(latencies) % 4096 == 0:
                    progress.update(task, completed=len(latencies))
            if transactional_id is not None:
                commits.append(_commit(producer))  # flushes, then EndTxn
            else:
                producer.flush()
            seconds = time.perf_counter() - start
    if failures:
        raise click.ClickException(f"{len(failures)} records failed: {failures[0]}")
    latencies.sort()
    total_bytes = records * record_size
    result: dict[str, object] = {
        "records": records, "bytes": total_bytes, "seconds": round(seconds, 3),
        "records_per_s": round(records / seconds, 1),
        "mb_per_s": round(total_bytes / seconds / 1e6, 2),
        "latency_ms": {"p50": _percentile(latencies, 0.50),
                       "p99": _percentile(latencies, 0.99),
                       "p999": _percentile(latencies, 0.999)},
        "acks": acks, "record_size": record_size, "batch_size": batch_size,
        "linger_ms": linger_ms, "compression": compression, "idempotent": idempotent}
    if transactional_id is not None:
        commits.sort()
        result.update({"transactional_id": transactional_id,
                       "transaction_records": per_transaction, "transactions": len(commits),
                       "commit_latency_ms": {"p50": _percentile(commits, 0.50),
                                             "p99": _percentile(commits, 0.99)}})
    _report(result, as_json)


def _commit(producer: Producer) -> float:
    """commit_transaction() (a flush, then EndTxn); its time in milliseconds."""
    began = time.perf_counter()
    producer.commit_transaction()
    return (time.perf_counter() - began) * 1000


@bench.command(name="consume")
@click.argument("topic")
@click.option("--records", type=click.IntRange(1), required=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly_errors
def bench_consume(ctx: click.Context, topic: str, records: int, as_json: bool) -> None:
    """Read RECORDS records of TOPIC from the beginning as fast as possible."""
    from strand.consumer import Consumer

    consumed = total_bytes = 0
    with Consumer(bootstrap(ctx), **security(ctx)) as consumer:
        tps = [TopicPartition(topic, p) for p in consumer.partitions_for(topic)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        with _progress() as progress:
            task = progress.add_task(f"consuming {topic}", total=records)
            start = time.perf_counter()
            idle_since = time.perf_counter()
            while consumed < records:
                batch = consumer.poll(timeout_ms=1000)
                for items in batch.values():
                    for record in items:
                        consumed += 1
                        total_bytes += len(record.value or b"") + len(record.key or b"")
                    idle_since = time.perf_counter()
                progress.update(task, completed=consumed)
                if time.perf_counter() - idle_since > 10:
                    raise click.ClickException(
                        f"only {consumed} of {records} records arrived within 10 s of silence")
            seconds = time.perf_counter() - start
    _report({"records": consumed, "bytes": total_bytes, "seconds": round(seconds, 3),
             "records_per_s": round(consumed / seconds, 1),
             "mb_per_s": round(total_bytes / seconds / 1e6, 2)}, as_json)
