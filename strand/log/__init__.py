"""The partition log engine: segments, indexes, recovery, retention and compaction."""

from strand.log.config import TOPIC_CONFIG, LogConfig, validate_topic_config
from strand.log.log import AppendInfo, PartitionLog
from strand.log.segment import LogSegment

__all__ = [
    "TOPIC_CONFIG",
    "AppendInfo",
    "LogConfig",
    "LogSegment",
    "PartitionLog",
    "validate_topic_config",
]
