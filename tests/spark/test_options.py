"""The ``strand`` data source's option parsing and offset planning, alone (no JVM, no
cluster): every bad option is refused with a message naming it; offsets plan as
Spark's Kafka source plans them."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strand_spark.naming import IdentityNaming, PrefixNaming, naming_policy
from strand_spark.offsets import (
    OffsetRange,
    TimestampSpec,
    from_checkpoint,
    limit_offsets,
    ranges_between,
    split_ranges,
    to_checkpoint,
)
from strand_spark.options import OptionError, read_options, write_options
from strand_spark.provenance import (
    PATH_HEADER,
    SOURCE_HEADER,
    SourcePosition,
    loops_back,
    mirrored_headers,
    path_of,
)

BOOT = {"strand.bootstrap": "127.0.0.1:7070"}


def test_defaults_follow_sparks_kafka_source() -> None:
    batch = read_options({**BOOT, "subscribe": "a, b"}, streaming=False)
    assert batch.subscription.topics == ("a", "b")
    assert batch.starting == "earliest" and batch.ending == "latest"
    assert batch.fail_on_data_loss and batch.isolation_level == "read_uncommitted"
    assert not batch.include_headers and batch.min_partitions is None
    stream = read_options({**BOOT, "subscribePattern": "orders-.*"}, streaming=True)
    assert stream.starting == "latest"
    assert stream.subscription.matches("orders-eu") and not stream.subscription.matches("x")


def test_spark_lowercases_option_names_and_they_still_parse() -> None:
    options = read_options({"strand.bootstrap": "h:1", "subscribe": "t",
                            "startingoffsets": '{"t": {"0": 5}}', "includeheaders": "true",
                            "isolationlevel": "read_committed",
                            "maxoffsetspertrigger": "10"}, streaming=True)
    assert options.starting == {"t": {0: 5}} and options.include_headers
    assert options.isolation_level == "read_committed"
    assert options.max_offsets_per_trigger == 10


def test_client_settings_pass_through_with_their_types() -> None:
    options = read_options({**BOOT, "assign": '{"t": [1, 0]}',
                            "strand.fetch_max_wait_ms": "50",
                            "strand.check_crcs": "false"}, streaming=False)
    assert options.subscription.assign == {"t": (0, 1)}
    assert options.client == {"fetch_max_wait_ms": 50, "check_crcs": False}
    assert options.consumer_settings()["auto_offset_reset"] == "none"
    write = write_options({**BOOT, "topic": "out", "strand.linger_ms": "20",
                           "strand.compression_type": "zstd"}, streaming=False)
    assert write.client == {"linger_ms": 20.0, "compression_type": "zstd"}


@pytest.mark.parametrize(("options", "streaming", "message"), [
    ({"subscribe": "t"}, False, "strand.bootstrap is required"),
    ({**BOOT}, False, "exactly one of the options subscribe"),
    ({**BOOT, "subscribe": "a", "assign": '{"a": [0]}'}, False, "exactly one"),
    ({**BOOT, "subscribe": " , "}, False, "name at least one topic"),
    ({**BOOT, "subscribePattern": "("}, False, "not a regular expression"),
    ({**BOOT, "assign": '{"a": [-1]}'}, False, "assign="),
    ({**BOOT, "assign": "nope"}, False, "not JSON"),
    ({**BOOT, "subscribe": "a", "startingOffsets": "latest"}, False, "not allowed in a batch"),
    ({**BOOT, "subscribe": "a", "endingOffsets": "earliest"}, False, "cannot be earliest"),
    ({**BOOT, "subscribe": "a", "endingOffsets": '{"a": {"0": -2}}'}, False, "not an offset"),
    ({**BOOT, "subscribe": "a", "startingOffsets": '{"a": {"0": -3}}'}, False, "not an offset"),
    ({**BOOT, "subscribe": "a", "startingOffsets": '{"a": {"x": 1}}'}, False, "partition"),
    ({**BOOT, "subscribe": "a", "endingOffsets": "latest"}, True, "for batch queries"),
    ({**BOOT, "subscribe": "a", "maxOffsetsPerTrigger": "5"}, False, "for streaming"),
    ({**BOOT, "subscribe": "a", "maxOffsetsPerTrigger": "0"}, True, "positive integer"),
    ({**BOOT, "subscribe": "a", "minPartitions": "x"}, False, "positive integer"),
    ({**BOOT, "subscribe": "a", "isolationLevel": "dirty"}, False, "read_committed"),
    ({**BOOT, "subscribe": "a", "failOnDataLoss": "yes"}, False, "true or false"),
    ({**BOOT, "subscribe": "a", "startingOffsets": "earliest",
      "startingOffsetsByTimestamp": '{"a": {"0": 1}}'}, False, "not both"),
    ({**BOOT, "subscribe": "a", "startingOffsetsByTimestamp": '{"a": {"0": -1}}'}, False,
     "ms since the epoch"),
    ({**BOOT, "subscribe": "a", "kafka.bootstrap.servers": "h:1"}, False,
     "use strand.bootstrap"),
    ({**BOOT, "subscribe": "a", "colour": "red"}, False, "unknown option 'colour'"),
    ({**BOOT, "subscribe": "a", "strand.no_such_setting": "1"}, False,
     "no setting 'no_such_setting'"),
    ({**BOOT, "subscribe": "a", "strand.group_id": "g"}, False, "set by the data source"),
    ({**BOOT, "subscribe": "a", "strand.security_protocol": "SSL"}, False,
     "do not speak TLS yet"),
    ({**BOOT, "subscribe": "a", "strand.fetch_max_wait_ms": "soon"}, False, "expected a value"),
    ({"strand.bootstrap": "nohost", "subscribe": "a"}, False, "host:port"),
])
def test_bad_read_options_are_refused_by_name(options: dict[str, str], streaming: bool,
                                              message: str) -> None:
    with pytest.raises(OptionError, match=message):
        read_options(options, streaming)


@pytest.mark.parametrize(("options", "streaming", "message"), [
    ({**BOOT, "topic": "t"}, True, "needs a name that stays the same"),
    ({**BOOT, "topic": "t", "strand.sinkId": "a b"}, True, "letters, digits"),
    ({**BOOT, "topic": " "}, False, "must not be empty"),
    ({**BOOT, "strand.transactional_id": "x"}, False, "set by the data source"),
    ({**BOOT, "strand.transaction_timeout_ms": "-5"}, False, "positive integer"),
    ({**BOOT, "subscribe": "t"}, False, "unknown option 'subscribe'"),
])
def test_bad_write_options_are_refused_by_name(options: dict[str, str], streaming: bool,
                                               message: str) -> None:
    with pytest.raises(OptionError, match=message):
        write_options(options, streaming)


def test_timestamps_and_checkpoint_offsets_round_trip() -> None:
    options = read_options({**BOOT, "subscribe": "a",
                            "startingOffsetsByTimestamp": '{"a": {"0": 1700000000000}}'},
                           streaming=True)
    assert options.starting == TimestampSpec({"a": {0: 1700000000000}})
    offsets = {("a", 0): 5, ("a", 1): 7, ("b", 0): 0}
    assert to_checkpoint(offsets) == {"a": {"0": 5, "1": 7}, "b": {"0": 0}}
    assert from_checkpoint(to_checkpoint(offsets)) == offsets


def test_ranges_skip_empty_partitions_and_new_ones_start_at_zero() -> None:
    assert ranges_between({("a", 0): 5, ("a", 1): 9}, {("a", 0): 8, ("a", 1): 9,
                                                       ("a", 2): 3}) == [
        OffsetRange("a", 0, 5, 8), OffsetRange("a", 2, 0, 3)]


@given(st.lists(st.integers(0, 5000), min_size=1, max_size=8), st.integers(1, 40))
def test_split_ranges_cover_every_offset_once(sizes: list[int], min_partitions: int) -> None:
    ranges = [OffsetRange("t", i, 100, 100 + n) for i, n in enumerate(sizes) if n]
    parts = split_ranges(ranges, min_partitions)
    for r in ranges:
        pieces = sorted((p for p in parts if p.partition == r.partition),
                        key=lambda p: p.start)
        assert pieces[0].start == r.start and pieces[-1].end == r.end
        assert all(a.end == b.start for a, b in itertools.pairwise(pieces))
        assert all(p.size > 0 for p in pieces)
    if len(ranges) < min_partitions:
        assert len(parts) >= min(min_partitions, sum(sizes))


@given(st.dictionaries(st.integers(0, 7), st.tuples(st.integers(0, 1000),
                                                    st.integers(0, 1000)), min_size=1),
       st.integers(1, 3000))
def test_limit_never_passes_latest_and_reads_about_the_limit(
        spans: dict[int, tuple[int, int]], limit: int) -> None:
    start = {("t", p): a for p, (a, b) in spans.items()}
    latest = {("t", p): a + b for p, (a, b) in spans.items()}
    end = limit_offsets(start, latest, limit)
    waiting = sum(b for _, b in spans.values())
    taken = sum(end[tp] - start[tp] for tp in latest)
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in latest)
    if waiting <= limit:
        assert end == latest
    else:
        assert taken <= limit + len(spans)  # a partition with anything gets >= 1
        assert taken > 0


def test_provenance_headers_grow_the_path_and_refuse_cycles() -> None:
    once = mirrored_headers([("app", b"1")], "east", SourcePosition("orders", 2, 40), 123)
    assert path_of(once) == ["east"] and once[0] == ("app", b"1")
    assert SourcePosition.decode(dict(once)[SOURCE_HEADER]) == SourcePosition("orders", 2, 40)
    assert loops_back(once, "east") and not loops_back(once, "west")
    twice = mirrored_headers(once, "west", SourcePosition("east.orders", 2, 7), 456)
    assert dict(twice)[PATH_HEADER] == b"east,west"
    assert sum(1 for k, _ in twice if k == SOURCE_HEADER) == 1
    assert SourcePosition.decode(b"no-slashes") is None
    assert SourcePosition.decode(b"a/b/c") is None


def test_naming_policies() -> None:
    assert PrefixNaming().target_topic("east", "orders") == "east.orders"
    assert PrefixNaming().source_topic("east", "east.orders") == "orders"
    assert PrefixNaming().source_topic("east", "west.orders") is None
    assert IdentityNaming().target_topic("east", "orders") == "orders"
    assert isinstance(naming_policy("strand_spark.naming:IdentityNaming"), IdentityNaming)
    with pytest.raises(ValueError, match="cannot be loaded"):
        naming_policy("no.such.module:Policy")
    with pytest.raises(ValueError, match="'prefix', 'identity'"):
        naming_policy("reverse")
