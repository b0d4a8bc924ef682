"""The mirror's provenance headers: where a mirrored record came from.

Every record the mirror writes carries, beside the record's own headers:

- ``strand.mirror.path``: the clusters the record has passed through, in order,
  comma-separated, its origin first (``us-east,eu-west``). The mirror from A to B
  never copies a record whose path already holds B: that is what keeps
  active/active mirrors (A→B and B→A) from looping, whatever the topic naming
  (identity naming included), as MirrorMaker 2's name-based check cannot.
- ``strand.mirror.source``: the immediate source of this copy as
  ``<topic>/<partition>/<offset>`` on the last cluster of the path. The audit maps
  mirrored records back to source offsets with it, and the mirror's checkpoints
  translate consumer-group offsets with it.
- ``strand.mirror.time``: when the mirror wrote the copy (ms since the epoch, decimal):
  the mirror latency is this minus the source record's timestamp.

Values are UTF-8 text. A record's earlier ``strand.mirror.*`` headers are replaced on
every hop (the path grows).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

PATH_HEADER = "strand.mirror.path"
SOURCE_HEADER = "strand.mirror.source"
TIME_HEADER = "strand.mirror.time"
PREFIX = "strand.mirror."

Header = tuple[str, bytes | None]


@dataclass(frozen=True, slots=True)
class SourcePosition:
    """Where a mirrored copy was read: topic, partition and offset on the source."""

    topic: str
    partition: int
    offset: int

    def encode(self) -> bytes:
        return f"{self.topic}/{self.partition}/{self.offset}".encode()

    @classmethod
    def decode(cls, value: bytes | None) -> SourcePosition | None:
        """None when ``value`` is missing or not ``topic/partition/offset``."""
        if value is None:
            return None
        try:
            text = value.decode()
            topic, partition, offset = text.rsplit("/", 2)
            position = cls(topic, int(partition), int(offset))
        except ValueError:
            return None
        if not topic or position.partition < 0 or position.offset < 0:
            return None
        return position


def header(headers: Sequence[Header] | None, name: str) -> bytes | None:
    """The last value of header ``name`` (None when absent)."""
    found: bytes | None = None
    for key, value in headers or ():
        if key == name:
            found = value
    return found


def path_of(headers: Sequence[Header] | None) -> list[str]:
    """The clusters a record has passed through, origin first ([] if never mirrored)."""
    value = header(headers, PATH_HEADER)
    if not value:
        return []
    return [c for c in value.decode(errors="replace").split(",") if c]


def loops_back(headers: Sequence[Header] | None, target_cluster: str) -> bool:
    """Whether copying this record to ``target_cluster`` would close a cycle."""
    return target_cluster in path_of(headers)


def mirrored_headers(headers: Sequence[Header] | None, source_cluster: str,
                     source: SourcePosition, now_ms: int) -> list[Header]:
    """The headers of the copy: the record's own ones without earlier provenance, then
    the path (with ``source_cluster`` appended), the source position and the time."""
    path = path_of(headers)
    if not path or path[-1] != source_cluster:
        path.append(source_cluster)
    own = [(k, v) for k, v in headers or () if not k.startswith(PREFIX)]
    return [*own, (PATH_HEADER, ",".join(path).encode()),
            (SOURCE_HEADER, source.encode()), (TIME_HEADER, str(now_ms).encode())]


def validate_cluster_name(name: str) -> str:
    """A cluster's name in the path: non-empty, no comma, no whitespace."""
    if not name or "," in name or any(c.isspace() for c in name):
        raise ValueError(f"a cluster name must be non-empty text without commas or "
                         f"whitespace, not {name!r}")
    return name
