"""Where a hosted partition lives under the data directory, and which incarnation of
its topic the directory holds.

``<data-dir>/<topic>-<partition>/`` holds the partition log (docs/architecture.md §4) plus
``partition.metadata``, Kafka's record of the topic id. A topic deleted and created
again under the same name gets a new id, so a directory left from the old topic is
recognised as stale rather than served as the new topic's data.
"""

from __future__ import annotations

import re
from pathlib import Path

from strand.log.files import atomic_write

PARTITION_METADATA_FILE = "partition.metadata"
_LEGAL_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")


def is_safe_topic_name(name: str) -> bool:
    """Kafka's topic name rule; anything else could escape the data directory."""
    return bool(_LEGAL_TOPIC.fullmatch(name)) and name not in (".", "..")


def partition_dir(data_dir: Path, topic: str, partition: int) -> Path:
    if not is_safe_topic_name(topic) or partition < 0:
        raise ValueError(f"not a servable partition: {topic!r}/{partition}")
    return data_dir / f"{topic}-{partition}"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a directory name, or None if it is not a partition's."""
    topic, dash, number = name.rpartition("-")
    if not dash or not number.isdigit() or not is_safe_topic_name(topic):
        return None
    return topic, int(number)


def read_topic_id(directory: Path) -> str | None:
    """The topic id recorded in ``directory``, or None if there is none (yet)."""
    try:
        text = (directory / PARTITION_METADATA_FILE).read_text()
    except FileNotFoundError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "topic_id":
            return value.strip() or None
    return None


def write_topic_id(directory: Path, topic_id: str) -> None:
    atomic_write(directory / PARTITION_METADATA_FILE,
                 f"version: 0\ntopic_id: {topic_id}\n".encode())
