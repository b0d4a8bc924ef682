"""``strand produce`` (kafka-console-producer) and ``strand consume`` (kafka-console-consumer).

Defaults, the same as the SDK's: ``acks=all`` (Kafka's producer default since 3.0)
and, for a group with no committed offset, the earliest offset. Records are written
and read in the format language of :mod:`strand.cli.formats`.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, BinaryIO, Literal, cast

import click

from strand.cli.common import await_topic, bootstrap, err, friendly_errors, security
from strand.cli.formats import InputFormat, OutputFormat, parse_header_option
from strand.cli.input_lines import input_lines
from strand.cli.stopping import Stopper
from strand.client.structs import TopicPartition
from strand.errors import StrandError

if TYPE_CHECKING:  # decoding (cramjam) loads with the consumer
    from strand.consumer.records import ConsumerRecord
    from strand.producer import Producer

ACKS = click.Choice(["0", "1", "all", "-1"])
FORMAT_HELP = ("tokens: %t topic, %p partition, %o offset, %T timestamp (ms), %k key, "
               "%K key length, %s value, %S value length, %h headers (k=v,k2=v2), %% a "
               "percent sign; escapes \\n \\t \\r \\0 \\\\")


IDEMPOTENCE_HELP = ("the idempotent producer: a retried batch is written once, in order "
                    "(needs --acks all and a transaction coordinator); default: on, off "
                    "with --acks 0 or 1")


def parse_acks(value: str) -> int | str:
    return "all" if value in ("all", "-1") else int(value)


def check_idempotence(idempotence: bool | None, acks: str) -> None:
    """--idempotence asked for with acks it cannot work with (the SDK's ValueError)."""
    if idempotence and parse_acks(acks) != "all":
        raise click.UsageError(f"--idempotence needs --acks all (not {acks}): change "
                               "--acks, or give --no-idempotence")


class _Failures:
    """Counts failed records and reports each on stderr at once, with its line
    (delivery callbacks run on the producer's sender thread)."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def report(self, line: int, error: BaseException) -> None:
        what = f"{error.code.name}: {error}" if isinstance(error, StrandError) else str(error)
        with self._lock:
            self.count += 1
            err.print(f"line {line}: not sent: {what}", markup=False)

    def callback(self, line: int) -> Any:
        def done(metadata: object, error: BaseException | None) -> None:
            if error is not None:
                self.report(line, error)
        return done


@click.command()
@click.argument("topic")
@click.option("--key-separator", default=None, metavar="SEP",
              help="split each line at the first SEP into key and value (same as "
                   "--line-format '%k<SEP>%s')")
@click.option("--line-format", default=None, metavar="FORMAT",
              help="how to split each line into fields, e.g. '%T\\t%h\\t%k\\t%s'; reads %p "
                   "%T %k %s %h of consume's --format")
@click.option("--header", "headers", multiple=True, metavar="KEY=VALUE",
              help="a header for every record, repeatable")
@click.option("--null-literal", default=None, metavar="TEXT",
              help="with --line-format/--key-separator: a key, value or header value equal "
                   "to TEXT is null")
@click.option("--acks", type=ACKS, default="all", show_default=True)
@click.option("--idempotence/--no-idempotence", default=None,
              help=IDEMPOTENCE_HELP)
@click.option("--compression", type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]),
              default="none", show_default=True)
@click.option("--partition", type=click.IntRange(0), default=None,
              help="send every line to this partition")
@click.option("--max-block-ms", type=click.IntRange(1), default=60_000, show_default=True,
              help="how long to wait for the topic's metadata (and buffer space)")
@click.option("--transactional-id", default=None, metavar="ID",
              help="send the input as transactions of this transactional id: all of it as "
                   "one, committed at the end (or every --transaction-records lines); an "
                   "error or Ctrl-C aborts the open one. read_committed consumers see whole "
                   "transactions only")
@click.option("--transaction-records", type=click.IntRange(1), default=None, metavar="N",
              help="with --transactional-id: commit every N lines")
@click.option("--transaction-timeout-ms", type=click.IntRange(1, 900_000), default=60_000,
              show_default=True,
              help="with --transactional-id: the coordinator aborts a transaction open "
                   "longer than this")
@click.pass_context
@friendly_errors
def produce(ctx: click.Context, topic: str, key_separator: str | None,
            line_format: str | None, headers: tuple[str, ...], null_literal: str | None,
            acks: str, idempotence: bool | None, compression: str, partition: int | None,
            max_block_ms: int, transactional_id: str | None,
            transaction_records: int | None, transaction_timeout_ms: int) -> None:
    """Send each line of standard input as a record of TOPIC. A record that fails is
    reported on stderr at once with its line number; the exit status is then 1."""
    from strand.producer import Producer

    if transactional_id is None and transaction_records is not None:
        raise click.UsageError("--transaction-records needs --transactional-id")
    if transactional_id == "":
        raise click.BadParameter("must not be empty", param_hint="--transactional-id")
    if transactional_id is not None and acks not in ("all", "-1"):
        raise click.UsageError("--transactional-id needs --acks all")

    if key_separator is not None and line_format is not None:
        raise click.UsageError("give --key-separator or --line-format, not both")
    if key_separator == "":
        raise click.BadParameter("must not be empty", param_hint="--key-separator")
    text = line_format if line_format is not None else (
        None if key_separator is None else "%k" + key_separator.replace("\\", "\\\\")
        .replace("%", "%%") + "%s")
    try:
        reader = None if text is None else InputFormat(text, null_literal)
        static: list[tuple[str, bytes | None]] = [parse_header_option(h) for h in headers]
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    check_idempotence(idempotence, acks)
    # Ctrl-C delivers what was read (or aborts the open transaction), even when this
    # process was started with SIGINT ignored (a shell's background job does that).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    await_topic(ctx, topic, max_block_ms, "--max-block-ms")
    failures = _Failures()

    def send(producer: Producer, line: bytes, number: int) -> None:
        if reader is None:
            producer.send(topic, value=line, headers=static, partition=partition,
                          on_delivery=failures.callback(number))
            return
        fields = reader.parse(line)
        producer.send(topic, value=fields.value, key=fields.key,
                      headers=static + fields.headers,
                      partition=partition if fields.partition is None else fields.partition,
                      timestamp_ms=fields.timestamp_ms, on_delivery=failures.callback(number))

    settings: dict[str, Any] = {
        "acks": parse_acks(acks), "max_block_ms": max_block_ms,
        "enable_idempotence": idempotence,
        "compression_type": None if compression == "none" else compression}
    if transactional_id is not None:
        with Producer(bootstrap(ctx), **security(ctx), transactional_id=transactional_id,
                      transaction_timeout_ms=transaction_timeout_ms, **settings) as producer:
            _produce_transactions(ctx, producer, topic, send, failures, transaction_records)
        return
    lines = 0
    interrupted = False
    with Producer(bootstrap(ctx), **security(ctx), **settings) as producer:
        try:
            for raw in input_lines():
                lines += 1
                try:
                    send(producer, raw.rstrip(b"\r\n"), lines)
                except (StrandError, ValueError, TypeError) as exc:
                    failures.report(lines, exc)
        except KeyboardInterrupt:  # Ctrl-C: deliver what was read, then stop
            interrupted = True
        producer.flush()
    sent = lines - failures.count
    if failures.count:
        raise click.ClickException(f"{failures.count} of {lines} records not sent to {topic} "
                                   f"(each reported above); {sent} sent")
    err.print(f"sent {sent} records to {topic}")
    if interrupted:
        ctx.exit(130)


def _produce_transactions(ctx: click.Context, producer: Producer, topic: str,
                          send: Callable[[Producer, bytes, int], None], failures: _Failures,
                          per_transaction: int | None) -> None:
    """``strand produce --transactional-id``: the input in transactions (all of it, or
    every ``per_transaction`` lines); the first error or Ctrl-C aborts the open one
    and stops (committed ones stay committed)."""
    from strand.errors import ProducerFencedError

    producer.init_transactions()
    lines = committed = transactions = open_lines = 0
    try:
        for raw in input_lines():
            if open_lines == 0:
                producer.begin_transaction()
            lines += 1
            open_lines += 1
            try:
                send(producer, raw.rstrip(b"\r\n"), lines)
            except (StrandError, ValueError, TypeError) as exc:
                failures.report(lines, exc)
                raise
            if per_transaction is not None and open_lines >= per_transaction:
                producer.commit_transaction()
                committed, transactions, open_lines = committed + open_lines, transactions + 1, 0
        if open_lines:
            producer.commit_transaction()
            committed, transactions, open_lines = committed + open_lines, transactions + 1, 0
    except (KeyboardInterrupt, StrandError, ValueError, TypeError) as exc:
        if isinstance(exc, ProducerFencedError):
            raise click.ClickException(
                f"{exc}; committed {committed} records in {transactions} transactions "
                "before") from None
        if open_lines:
            producer.abort_transaction()
        why = "interrupted" if isinstance(exc, KeyboardInterrupt) else f"failed: {exc}"
        message = (f"{why}: aborted the open transaction ({open_lines} records); committed "
                   f"{committed} records to {topic} in {transactions} transactions")
        if isinstance(exc, KeyboardInterrupt):
            err.print(message, markup=False)
            ctx.exit(130)
        raise click.ClickException(message) from None
    err.print(f"sent {committed} records to {topic} in {transactions} transactions")


def _output_format(fmt: str | None, print_key: bool, print_offset: bool,
                   null_literal: str) -> OutputFormat:
    if fmt is not None and (print_key or print_offset):
        raise click.UsageError("--format says what to print: leave out --print-key and "
                               "--print-offset")
    if fmt is None:
        fmt = ("%p:%o\\t" if print_offset else "") + ("%k\\t" if print_key else "") + "%s\\n"
    try:
        return OutputFormat(fmt, null_literal)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--format") from None


@click.command()
@click.argument("topic")
@click.option("--from-beginning", is_flag=True,
              help="start at the earliest offset (with --group: where nothing is committed, "
                   "which is the default there)")
@click.option("--auto-offset-reset", type=click.Choice(["earliest", "latest"]), default=None,
              help="with --group: where a partition with no committed offset starts "
                   "[default: earliest, as the SDK]")
@click.option("--partition", type=click.IntRange(0), default=None, help="only this partition")
@click.option("--offset", type=click.IntRange(0), default=None,
              help="start here (needs --partition)")
@click.option("--max-messages", type=click.IntRange(1), default=None)
@click.option("--follow", is_flag=True, help="keep waiting for new records")
@click.option("--format", "fmt", default=None, metavar="FORMAT",
              help=f"how to print each record (default '%s\\n'); {FORMAT_HELP}")
@click.option("--print-key", is_flag=True, help="same as --format '%k\\t%s\\n'")
@click.option("--print-offset", is_flag=True, help="same as --format '%p:%o\\t%s\\n'")
@click.option("--null-literal", default="", metavar="TEXT",
              help="print a null key, value or header value as TEXT [default: nothing]")
@click.option("--timeout-ms", type=int, default=10_000, show_default=True,
              help="without --follow: give up when nothing arrives for this long")
@click.option("--group", "group_id", default=None,
              help="consume as a member of this consumer group, committing what it printed")
@click.option("--idle-timeout-ms", type=click.IntRange(1), default=None,
              help="with --group: exit after this long without a new record (counted from "
                   "the start, also while waiting for the topic or the group)")
@click.option("--isolation-level", type=click.Choice(["read_uncommitted", "read_committed"]),
              default="read_uncommitted", show_default=True,
              help="read_committed: only records of committed transactions, up to the last "
                   "stable offset")
@click.pass_context
@friendly_errors
def consume(ctx: click.Context, topic: str, from_beginning: bool,
            auto_offset_reset: str | None, partition: int | None, offset: int | None,
            max_messages: int | None, follow: bool, fmt: str | None, print_key: bool,
            print_offset: bool, null_literal: str, timeout_ms: int, group_id: str | None,
            idle_timeout_ms: int | None, isolation_level: str) -> None:
    """Print the records of TOPIC, one value per line. SIGTERM or Ctrl-C stops it
    cleanly (a group member commits what it printed and leaves the group), with
    exit status 0 or 130."""
    from strand.consumer import Consumer
    from strand.consumer.errors import WakeupError

    if offset is not None and partition is None:
        raise click.UsageError("--offset needs --partition")
    output = _output_format(fmt, print_key, print_offset, null_literal)
    isolation = cast(Literal["read_uncommitted", "read_committed"], isolation_level)
    if group_id is not None:
        if partition is not None or offset is not None:
            raise click.UsageError("--group shares the partitions: no --partition/--offset")
        if from_beginning and auto_offset_reset == "latest":
            raise click.UsageError("--from-beginning contradicts --auto-offset-reset latest")
        reset = cast(Literal["earliest", "latest"], auto_offset_reset or "earliest")
        _consume_in_group(ctx, topic, group_id, reset, max_messages, output, idle_timeout_ms,
                          isolation)
        return
    if auto_offset_reset is not None:
        raise click.UsageError("--auto-offset-reset is for --group (else: --from-beginning)")
    await_topic(ctx, topic, None if follow else timeout_ms, "--timeout-ms")
    out = sys.stdout.buffer
    with Consumer(bootstrap(ctx), **security(ctx), isolation_level=isolation) as consumer, \
            Stopper(consumer) as stopper:
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
        while not stopper.reason:
            try:
                batches = consumer.poll(timeout_ms=500)
            except WakeupError:
                break
            written, _ = _write_all(out, output, batches,
                                    None if max_messages is None else max_messages - seen)
            seen += written
            if max_messages is not None and seen >= max_messages:
                break
            if batches:
                last_record = time.monotonic()
            if not follow:
                caught_up = all(consumer.position(tp) >= ends[tp] for tp in tps)
                idle = (time.monotonic() - last_record) * 1000 > timeout_ms
                if caught_up or idle:
                    break
    stopper.exit(ctx)


def _write_all(out: BinaryIO, output: OutputFormat,
               batches: dict[TopicPartition, list[ConsumerRecord]],
               budget: int | None) -> tuple[int, dict[TopicPartition, int]]:
    """Write the polled records (at most ``budget``) and flush: (records written, the
    first offset left unwritten of each partition)."""
    written = 0
    unwritten: dict[TopicPartition, int] = {}
    for tp, records in batches.items():
        for record in records:
            if budget is not None and written >= budget:
                unwritten[tp] = record.offset
                break
            out.write(output.render(record))
            written += 1
    out.flush()
    return written, unwritten


def _consume_in_group(ctx: click.Context, topic: str, group_id: str,
                      reset: Literal["earliest", "latest"],
                      max_messages: int | None, output: OutputFormat,
                      idle_timeout_ms: int | None,
                      isolation: Literal["read_uncommitted", "read_committed"]) -> None:
    """Kafka's console consumer with --group: committed offsets first, else ``reset``.
    What is committed is exactly what was printed: every poll's records are written
    before stopping, and records left unwritten (--max-messages) are sought back to
    before the final commit."""
    from strand.consumer import Consumer
    from strand.consumer.errors import WakeupError

    started = time.monotonic()
    await_topic(ctx, topic, idle_timeout_ms, "--idle-timeout-ms")
    out = sys.stdout.buffer
    seen = 0
    with Consumer(bootstrap(ctx), **security(ctx), group_id=group_id, auto_offset_reset=reset,
                  auto_commit_interval_ms=1000, isolation_level=isolation) as consumer:
        with Stopper(consumer, idle_timeout_ms, started) as stopper:
            consumer.subscribe([topic])
            while not stopper.reason:
                try:
                    batches = consumer.poll(timeout_ms=500)
                except WakeupError:
                    break
                try:
                    written, unwritten = _write_all(
                        out, output, batches,
                        None if max_messages is None else max_messages - seen)
                except BrokenPipeError:  # the reader went away: this poll counts as unread
                    unwritten = {tp: records[0].offset for tp, records in batches.items()}
                    stopper.stop("broken pipe")
                    written = 0
                seen += written
                if batches:
                    stopper.activity()
                for tp, first in unwritten.items():
                    consumer.seek(tp, first)  # the final commit stops before them
                if max_messages is not None and seen >= max_messages:
                    break
        if stopper.reason == "idle":
            err.print(f"no new record for --idle-timeout-ms={idle_timeout_ms}: stopping "
                      f"after {seen} records")
    # Leaving the with block closed the consumer: it committed the positions (just
    # past what was printed) and left the group at once.
    stopper.exit(ctx)
