"""``strand produce`` (kafka-console-producer) and ``strand consume`` (kafka-console-consumer)."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

import click

from strand.cli.common import bootstrap, err, friendly_errors
from strand.client.structs import TopicPartition

if TYPE_CHECKING:  # the clients (and gRPC) are imported by the commands that use them
    from strand.producer import RecordFuture

ACKS = click.Choice(["0", "1", "all", "-1"])


def parse_acks(value: str) -> int | str:
    return "all" if value in ("all", "-1") else int(value)


@click.command()
@click.argument("topic")
@click.option("--key-separator", default=None, metavar="SEP",
              help="split each line at the first SEP into key and value")
@click.option("--acks", type=ACKS, default="1", show_default=True)
@click.option("--compression", type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]),
              default="none", show_default=True)
@click.option("--partition", type=int, default=None, help="send every line to this partition")
@click.pass_context
@friendly_errors
def produce(ctx: click.Context, topic: str, key_separator: str | None, acks: str,
            compression: str, partition: int | None) -> None:
    """Send each line of standard input as a record of TOPIC."""
    from strand.producer import Producer

    futures: list[RecordFuture] = []
    with Producer(bootstrap(ctx), acks=parse_acks(acks),
                  compression_type=None if compression == "none" else compression) as producer:
        for line in sys.stdin.buffer:
            line = line.rstrip(b"\r\n")
            key = None
            if key_separator is not None:
                raw_key, sep, value = line.partition(key_separator.encode())
                if not sep:
                    raise click.ClickException(
                        f"line {len(futures) + 1} has no key separator {key_separator!r}")
                key, line = raw_key, value
            futures.append(producer.send(topic, value=line, key=key, partition=partition))
        producer.flush()
    failed = [f.exception() for f in futures if f.exception() is not None]
    if failed:
        raise click.ClickException(f"{len(failed)} of {len(futures)} records failed: "
                                   f"{failed[0]}")
    err.print(f"sent {len(futures)} records to {topic}")


@click.command()
@click.argument("topic")
@click.option("--from-beginning", is_flag=True, help="start at the earliest offset")
@click.option("--partition", type=int, default=None, help="only this partition")
@click.option("--offset", type=int, default=None, help="start here (needs --partition)")
@click.option("--max-messages", type=click.IntRange(1), default=None)
@click.option("--follow", is_flag=True, help="keep waiting for new records")
@click.option("--print-key", is_flag=True)
@click.option("--print-offset", is_flag=True)
@click.option("--timeout-ms", type=int, default=10_000, show_default=True,
              help="without --follow: give up when nothing arrives for this long")
@click.option("--group", "group_id", default=None,
              help="consume as a member of this consumer group, committing as it goes")
@click.option("--idle-timeout-ms", type=click.IntRange(1), default=None,
              help="with --group: exit after this long without a new record")
@click.pass_context
@friendly_errors
def consume(ctx: click.Context, topic: str, from_beginning: bool, partition: int | None,
            offset: int | None, max_messages: int | None, follow: bool, print_key: bool,
            print_offset: bool, timeout_ms: int, group_id: str | None,
            idle_timeout_ms: int | None) -> None:
    """Print the records of TOPIC, one value per line."""
    from strand.consumer import Consumer

    if offset is not None and partition is None:
        raise click.UsageError("--offset needs --partition")
    if group_id is not None:
        if partition is not None or offset is not None:
            raise click.UsageError("--group shares the partitions: no --partition/--offset")
        _consume_in_group(ctx, topic, group_id, from_beginning, max_messages, print_key,
                          print_offset, idle_timeout_ms)
        return
    out = sys.stdout.buffer
    with Consumer(bootstrap(ctx)) as consumer:
        partitions = consumer.partitions_for(topic)
        tps = [TopicPartition(topic, p) for p in partitions
               if partition is None or p == partition]
        if not tps:
            raise click.ClickException(f"topic {topic} has no partition {partition}")
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        if offset is not None:
            consumer.seek(tps[0], offset)
        elif from_beginning:
            consumer.seek_to_beginning(*tps)
        else:
            consumer.seek_to_end(*tps)
        seen = 0
        last_record = time.monotonic()
        while True:
            batches = consumer.poll(timeout_ms=500)
            seen, done = _write_all(out, batches, print_key, print_offset, seen, max_messages)
            if done:
                return
            if batches:
                last_record = time.monotonic()
            if not follow:
                caught_up = all(consumer.position(tp) >= ends[tp] for tp in tps)
                idle = (time.monotonic() - last_record) * 1000 > timeout_ms
                if caught_up or idle:
                    return


def _write_all(out: Any, batches: dict[Any, list[Any]], print_key: bool, print_offset: bool,
               seen: int, max_messages: int | None) -> tuple[int, bool]:
    """Write the polled records and flush; (records written so far, whether
    ``max_messages`` is reached: then the rest of ``batches`` is left unwritten)."""
    for records in batches.values():
        for record in records:
            _write(out, record, print_key, print_offset)
            seen += 1
            if max_messages is not None and seen >= max_messages:
                out.flush()
                return seen, True
    out.flush()
    return seen, False


def _write(out: Any, record: Any, print_key: bool, print_offset: bool) -> None:
    fields = []
    if print_offset:
        fields.append(f"{record.partition}:{record.offset}".encode())
    if print_key:
        fields.append(record.key if record.key is not None else b"null")
    fields.append(record.value if record.value is not None else b"null")
    out.write(b"\t".join(fields) + b"\n")


def _consume_in_group(ctx: click.Context, topic: str, group_id: str, from_beginning: bool,
                      max_messages: int | None, print_key: bool, print_offset: bool,
                      idle_timeout_ms: int | None) -> None:
    """Kafka's console consumer with --group: committed offsets first, else earliest
    (--from-beginning) or latest; commits as it goes and once more when it stops."""
    from strand.consumer import Consumer

    out = sys.stdout.buffer
    seen = 0
    with Consumer(bootstrap(ctx), group_id=group_id,
                  auto_offset_reset="earliest" if from_beginning else "latest",
                  auto_commit_interval_ms=1000) as consumer:
        consumer.subscribe([topic])
        last_record = time.monotonic()
        assigned = False
        while True:
            batches = consumer.poll(timeout_ms=500)
            seen, done = _write_all(out, batches, print_key, print_offset, seen, max_messages)
            if done:
                return
            if batches:
                last_record = time.monotonic()
            if not assigned:
                # Idle time counts from the first assignment (joining takes a while).
                assigned = bool(consumer.assignment())
                last_record = time.monotonic()
            elif idle_timeout_ms is not None and \
                    (time.monotonic() - last_record) * 1000 > idle_timeout_ms:
                return
