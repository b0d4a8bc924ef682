from __future__ import annotations

import pytest

from strand.errors import InvalidConfigError
from strand.log import TOPIC_CONFIG, LogConfig, validate_topic_config
from strand.records import TimestampType


def test_defaults_match_kafka() -> None:
    config = LogConfig.from_properties({})
    assert config.segment_bytes == 1 << 30
    assert config.retention_ms == 7 * 24 * 3600 * 1000
    assert config.cleanup_policy == ("delete",)
    assert config.max_message_bytes == 1048588
    assert config.producer_id_expiration_ms == 86_400_000
    assert config == LogConfig()


def test_typed_parsing() -> None:
    config = LogConfig.from_properties({
        "segment.bytes": "1048576",
        "cleanup.policy": "compact,delete",
        "min.cleanable.dirty.ratio": "0.25",
        "message.timestamp.type": "logappendtime",
        "unclean.leader.election.enable": "true",
        "producer.id.expiration.ms": "60000",
    })
    assert config.producer_id_expiration_ms == 60_000
    assert config.segment_bytes == 1048576
    assert config.compact and config.delete
    assert config.min_cleanable_dirty_ratio == 0.25
    assert config.message_timestamp_type == TimestampType.LOG_APPEND_TIME
    assert validate_topic_config({"unclean.leader.election.enable": "true"}) == {
        "unclean.leader.election.enable": True}


@pytest.mark.parametrize(
    ("properties", "fragment"),
    [
        ({"no.such.key": "1"}, "unknown topic config"),
        ({"segment.bytes": "ten"}, "segment.bytes"),
        ({"segment.bytes": "10"}, ">= 14"),
        ({"segment.bytes": str(1 << 31)}, "<="),
        ({"retention.ms": "-2"}, ">= -1"),
        ({"min.cleanable.dirty.ratio": "1.5"}, "<= 1"),
        ({"cleanup.policy": "shred"}, "unknown shred"),
        ({"cleanup.policy": ""}, "at least one"),
        ({"message.timestamp.type": "Whenever"}, "CreateTime, LogAppendTime"),
        ({"unclean.leader.election.enable": "yes"}, "true or false"),
        ({"compression.type": "lz4"}, "producer"),
        ({"min.insync.replicas": "0"}, ">= 1"),
        ({"producer.id.expiration.ms": "0"}, "producer.id.expiration.ms: must be an integer "
                                             "(int) >= 1"),
        ({"producer.id.expiration.ms": str(1 << 31)}, "<= 2147483647"),
        ({"segment.bytes": True}, "segment.bytes"),
        # issue 11: which config, what value, what is expected; no Python internals
        ({"retention.ms": "abc"}, "invalid value 'abc' for configuration retention.ms: "
                                  "expected an integer (long) >= -1"),
        ({"min.cleanable.dirty.ratio": "nan"}, "expected a number (double) >= 0 and <= 1"),
        ({"max.message.bytes": "0"}, "max.message.bytes: must be an integer (int) >= 68"),
        ({"max.message.bytes": "67"}, ">= 68"),
        ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
         "min.compaction.lag.ms (10) must not be greater than max.compaction.lag.ms (5)"),
    ],
)
def test_bad_values_are_named_in_the_error(properties: dict[str, object], fragment: str) -> None:
    with pytest.raises(InvalidConfigError) as refused:
        LogConfig.from_properties(properties)
    assert fragment in str(refused.value)
    assert "literal" not in str(refused.value)  # Python's int() message leaked before


def test_every_numeric_key_has_a_range() -> None:
    """An out-of-range value is refused for every key, not only for some."""
    numeric = [k for k in TOPIC_CONFIG.values() if k.kind in ("int", "long", "double")]
    assert numeric
    for key in numeric:
        assert key.minimum is not None and key.maximum is not None, key.name
        with pytest.raises(InvalidConfigError, match="must be"):
            key.parse(key.minimum - 1)


def test_a_batch_of_max_message_bytes_fits_one_record() -> None:
    from strand.records.builder import BatchBuilder

    smallest = TOPIC_CONFIG["max.message.bytes"].minimum
    builder = BatchBuilder()
    builder.append(None, timestamp=0)
    assert len(builder.build()) == smallest


def test_every_key_default_parses_as_itself() -> None:
    for key in TOPIC_CONFIG.values():
        raw = ",".join(key.default) if isinstance(key.default, tuple) else key.default
        assert key.parse(raw) == key.default
