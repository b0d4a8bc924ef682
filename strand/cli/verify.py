"""``strand verify produce|consume`` (Kafka's VerifiableProducer and VerifiableConsumer):
check a cluster and a client's settings end to end. ``produce`` writes sequence-numbered
records and keeps which ones the cluster acknowledged; ``consume`` reads them back and
reports the acknowledged records it did not find (lost), the ones it read twice
(duplicated), the ones a partition holds out of order, and the end-to-end latency.

::

    strand verify produce events --records 100000 --acked-file acked.txt
    strand verify consume events --run-id <the id produce printed> --acked-file acked.txt

``consume`` exits with status 1 when it finds a lost or out-of-order record.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import click

from strand.cli.common import bootstrap, err, friendly_errors, security
from strand.cli.produce import ACKS, IDEMPOTENCE_HELP, check_idempotence, parse_acks
from strand.cli.verify_check import Tally, percentile

if TYPE_CHECKING:
    from strand.consumer.records import ConsumerRecord

RUN_HEADER = "strand-verify"
SENT_HEADER = "strand-verify-sent-ms"


@click.group()
def verify() -> None:
    """Check a cluster end to end: sequence-numbered records written, then read back."""


def _show(result: dict[str, object], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(result))
        return
    for key, value in result.items():
        click.echo(f"{key}: {value}")


@verify.command(name="produce")
@click.argument("topic")
@click.option("--records", type=click.IntRange(1), required=True)
@click.option("--acks", type=ACKS, default="all", show_default=True)
@click.option("--idempotence/--no-idempotence", "idempotence", default=None,
              help=IDEMPOTENCE_HELP)
@click.option("--throughput", type=click.IntRange(0), default=0,
              help="records per second at most (default 0: as fast as possible)")
@click.option("--value-size", type=click.IntRange(16), default=100, show_default=True)
@click.option("--run-id", default=None, help="names this run's records (default: random)")
@click.option("--acked-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="write the acknowledged sequence numbers here, one per line")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly_errors
def verify_produce(ctx: click.Context, topic: str, records: int, acks: str,
                   idempotence: bool | None, throughput: int, value_size: int,
                   run_id: str | None, acked_file: Path | None, as_json: bool) -> None:
    """Write RECORDS sequence-numbered records to TOPIC; report what was acknowledged."""
    from strand.producer import Producer

    check_idempotence(idempotence, acks)
    run = run_id or uuid.uuid4().hex[:12]
    acked: list[int] = []
    failures: dict[str, int] = {}
    latencies: list[float] = []
    start = time.monotonic()
    with Producer(bootstrap(ctx), **security(ctx), acks=parse_acks(acks),
                  enable_idempotence=idempotence) as producer:
        for seq in range(records):
            if throughput:
                ahead = start + seq / throughput - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
            sent = time.monotonic()

            def done(metadata: object, error: BaseException | None, seq: int = seq,
                     sent: float = sent) -> None:
                if error is None:
                    acked.append(seq)
                    latencies.append((time.monotonic() - sent) * 1000)
                else:
                    name = type(error).__name__
                    failures[name] = failures.get(name, 0) + 1

            value = f"{run}:{seq}:".encode().ljust(value_size, b".")
            producer.send(topic, value=value, key=str(seq).encode(), headers=[
                (RUN_HEADER, run.encode()), (SENT_HEADER, str(time.time_ns() // 1_000_000)
                                             .encode())], on_delivery=done)
        producer.flush()
    seconds = time.monotonic() - start
    if acked_file is not None:
        acked_file.write_text("".join(f"{seq}\n" for seq in sorted(acked)))
    latencies.sort()
    _show({"run_id": run, "topic": topic, "sent": records, "acknowledged": len(acked),
           "failed": sum(failures.values()), "failures": failures, "acks": acks,
           "seconds": round(seconds, 3),
           "ack_latency_ms": {"p50": percentile(latencies, 0.5),
                              "p99": percentile(latencies, 0.99),
                              "max": latencies[-1] if latencies else 0.0}}, as_json)
    if not as_json:
        err.print(f"now: strand verify consume {topic} --run-id {run}"
                  + (f" --acked-file {acked_file}" if acked_file else f" --expect {records}"))


@verify.command(name="consume")
@click.argument("topic")
@click.option("--run-id", required=True, help="the run to check (``verify produce`` printed it)")
@click.option("--acked-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="the acknowledged sequence numbers ``verify produce`` wrote")
@click.option("--expect", type=click.IntRange(0), default=None,
              help="instead of --acked-file: sequence numbers 0 to N-1 were acknowledged")
@click.option("--isolation-level", type=click.Choice(["read_uncommitted", "read_committed"]),
              default="read_uncommitted", show_default=True)
@click.option("--timeout-ms", type=click.IntRange(1), default=60_000, show_default=True,
              help="give up reading after this long")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly_errors
def verify_consume(ctx: click.Context, topic: str, run_id: str, acked_file: Path | None,
                   expect: int | None, isolation_level: str, timeout_ms: int,
                   as_json: bool) -> None:
    """Read TOPIC from the beginning to its end and check the run's records."""
    from strand.client.structs import TopicPartition
    from strand.consumer import Consumer

    if (acked_file is None) == (expect is None):
        raise click.UsageError("give --acked-file or --expect (not both)")
    acked = (range(expect) if expect is not None else
             [int(line) for line in acked_file.read_text().split()] if acked_file else [])
    tally = Tally()
    run = run_id.encode()
    level: Literal["read_uncommitted", "read_committed"] = (
        "read_committed" if isolation_level == "read_committed" else "read_uncommitted")
    with Consumer(bootstrap(ctx), **security(ctx), isolation_level=level,
                  enable_auto_commit=False) as consumer:
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for(topic)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        end = consumer.end_offsets(partitions)
        deadline = time.monotonic() + timeout_ms / 1000
        while any(consumer.position(tp) < end[tp] for tp in partitions):
            if time.monotonic() > deadline:
                raise click.ClickException(
                    f"not at the end of {topic} within {timeout_ms} ms: "
                    + ", ".join(f"{tp.partition}: {consumer.position(tp)}/{end[tp]}"
                                for tp in partitions))
            for tp, batch in consumer.poll(timeout_ms=500).items():
                for record in batch:
                    _count(tally, tp.partition, record, run)
    result = tally.report(acked)
    result = {"run_id": run_id, "topic": topic, **result}
    _show(result, as_json)
    if result["lost"] or result["out_of_order"]:
        ctx.exit(1)


def _count(tally: Tally, partition: int, record: ConsumerRecord, run: bytes) -> None:
    headers = dict(record.headers or ())
    if headers.get(RUN_HEADER) != run:
        return
    sequence = int((record.value or b"").split(b":")[1])
    sent = headers.get(SENT_HEADER)
    latency = time.time() * 1000 - int(sent) if sent else None
    tally.add(partition, sequence, latency)
