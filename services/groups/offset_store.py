"""The committed offsets of the groups of one shard, in memory, rebuilt from and
written to ``__consumer_offsets`` (:mod:`services.groups.records`).

Pure: it turns commits into the records to write, applies records once they are
written (or read back while loading a shard), answers fetches, and says which
offsets have expired. Retention (``offsets.retention.minutes``, KIP-211): offsets of
a group with members never expire; once the group is empty they expire
``retention_ms`` after the later of their commit and the moment it became empty.
Offsets of a topic that no longer exists under the id they were committed for are
dead (:mod:`services.groups.topics`): fetches skip them, :meth:`OffsetStore.orphaned`
names them for removal. Transactional offsets wait in :attr:`OffsetStore.pending`
(:mod:`services.groups.txn_offsets`) until their transaction ends; they do not
expire, and keep the partition's committed offset from expiring meanwhile (as
Kafka).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from services.groups.records import (
    GroupKey,
    GroupValue,
    Key,
    OffsetKey,
    OffsetValue,
    TxnOffsetKey,
    TxnOffsetValue,
    Value,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from services.groups.txn_offsets import PendingOffsets
from strand.coordination.shard_log import Record
from strand.errors import InvalidRequestError, OffsetMetadataTooLargeError

__all__ = ["DEFAULT_RETENTION_MS", "MAX_METADATA_BYTES", "OffsetMetadataTooLargeError",
           "OffsetStore", "Record", "validate_offset"]

DEFAULT_RETENTION_MS = 7 * 24 * 60 * 60 * 1000  # Kafka's offsets.retention.minutes: 7 days
MAX_METADATA_BYTES = 4096  # Kafka's offset.metadata.max.bytes

TopicPartition = tuple[str, int]
# Is the offset committed for this partition still the live topic's? (see topics.py)
Live = Callable[[TopicPartition, OffsetValue], bool]


def validate_offset(tp: TopicPartition, value: OffsetValue) -> None:
    """Raise the typed error of an offset no commit may store."""
    topic, partition = tp
    if not topic or partition < 0 or value.offset < 0:
        raise InvalidRequestError(
            f"cannot commit offset {value.offset} for {topic!r}-{partition}")
    if len(value.metadata.encode()) > MAX_METADATA_BYTES:
        raise OffsetMetadataTooLargeError(
            f"offset metadata of {topic}-{partition} is over {MAX_METADATA_BYTES} bytes")


class OffsetStore:
    def __init__(self) -> None:
        self._offsets: dict[str, dict[TopicPartition, OffsetValue]] = {}
        self._groups: dict[str, GroupValue] = {}
        self._empty_since: dict[str, int] = {}
        self.pending = PendingOffsets()

    # -- loading and applying -----------------------------------------------------------------

    def apply(self, key: Key, value: Value | None) -> None:
        """A record of the shard was written (or read back): update the state."""
        if isinstance(key, TxnOffsetKey):
            assert value is None or isinstance(value, TxnOffsetValue)
            self.pending.apply(key, value)
            return
        if isinstance(key, OffsetKey):
            offsets = self._offsets.setdefault(key.group, {})
            tp = (key.topic, key.partition)
            if value is None:
                offsets.pop(tp, None)
                if not offsets:
                    del self._offsets[key.group]
            else:
                assert isinstance(value, OffsetValue)
                offsets[tp] = value
            return
        if value is None:
            self._groups.pop(key.group, None)
        else:
            assert isinstance(value, GroupValue)
            self._groups[key.group] = value

    def apply_written(self, records: Iterable[Record]) -> None:
        """Apply records this store made (commit, delete, expiry) once they are written."""
        for record in records:
            key = decode_key(record.key)
            self.apply(key, decode_value(key, record.value))

    # -- commits and fetches ------------------------------------------------------------------

    def commit(self, group: str, offsets: Mapping[TopicPartition, OffsetValue]) -> list[Record]:
        """The records that commit ``offsets`` (validated; nothing is applied yet)."""
        records = []
        for (topic, partition), value in sorted(offsets.items()):
            validate_offset((topic, partition), value)
            key = OffsetKey(group, topic, partition)
            records.append(Record(encode_key(key), encode_value(value)))
        return records

    def stage_txn(self, group: str, producer_id: int, producer_epoch: int,
                  offsets: Mapping[TopicPartition, OffsetValue]) -> list[Record]:
        """The records of a TxnOffsetCommit (validated; nothing applied yet)."""
        for tp, value in offsets.items():
            validate_offset(tp, value)
        return self.pending.stage(group, producer_id, producer_epoch, offsets)

    def fetch(self, group: str, partitions: Iterable[TopicPartition] | None = None,
              live: Live | None = None) -> dict[TopicPartition, OffsetValue]:
        """Committed offsets of ``group`` (all of them when ``partitions`` is None),
        only the ``live`` ones when that is given."""
        offsets = self._offsets.get(group, {})
        wanted = offsets if partitions is None else [tp for tp in partitions if tp in offsets]
        return {tp: offsets[tp] for tp in wanted if live is None or live(tp, offsets[tp])}

    def group_metadata(self, group: str) -> GroupValue | None:
        return self._groups.get(group)

    def groups(self) -> set[str]:
        return set(self._offsets) | set(self._groups) | self.pending.groups()

    # -- deletion and retention ---------------------------------------------------------------

    def delete_group(self, group: str) -> list[Record]:
        """Tombstones for every record of ``group``."""
        records = [Record(encode_key(OffsetKey(group, t, p)), None)
                   for t, p in sorted(self._offsets.get(group, {}))]
        if group in self._groups:
            records.append(Record(encode_key(GroupKey(group)), None))
        return records

    def orphaned(self, live: Live) -> list[Record]:
        """Tombstones for every offset, of any group, that is not ``live`` (its topic
        was deleted, perhaps re-created under a new id)."""
        return [Record(encode_key(OffsetKey(group, topic, partition)), None)
                for group, offsets in sorted(self._offsets.items())
                for (topic, partition), value in sorted(offsets.items())
                if not live((topic, partition), value)]

    def mark_empty(self, group: str, now_ms: int) -> None:
        self._empty_since.setdefault(group, now_ms)

    def mark_active(self, group: str) -> None:
        self._empty_since.pop(group, None)

    def expired(self, now_ms: int, retention_ms: int,
                is_empty: Callable[[str], bool]) -> list[Record]:
        """Tombstones for the offsets that have outlived their retention, and for the
        metadata of empty groups left without offsets (Kafka's Empty -> Dead)."""
        records = []
        for group in sorted(self.groups()):
            if not is_empty(group):
                continue
            offsets = self._offsets.get(group, {})
            empty_since = self._empty_since.get(group, 0)
            kept = len(offsets)
            in_txn = self.pending.partitions(group)
            for (topic, partition), value in sorted(offsets.items()):
                if (topic, partition) in in_txn:
                    continue  # a transaction will replace it: not expired meanwhile
                if value.expire_ms >= 0:
                    due = value.expire_ms
                else:
                    due = max(value.commit_ms, empty_since) + retention_ms
                if due <= now_ms:
                    records.append(Record(encode_key(OffsetKey(group, topic, partition)),
                                          None))
                    kept -= 1
            if not kept and not in_txn and group in self._groups:
                records.append(Record(encode_key(GroupKey(group)), None))
        return records
