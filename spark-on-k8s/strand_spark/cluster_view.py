"""What the driver asks the cluster when it plans a read: the partitions a
subscription matches and their offsets (earliest, latest for the isolation level,
by timestamp). One SDK Consumer, never in a group."""

from __future__ import annotations

from types import TracebackType

from strand import Admin, Consumer, TopicPartition
from strand.errors import UnknownTopicOrPartitionError
from strand_spark.offsets import EARLIEST, LATEST, OffsetSpec, PartitionOffsets, TimestampSpec
from strand_spark.options import OptionError, ReadOptions

# How long planning waits for the cluster per call.
PLAN_TIMEOUT_MS = 30_000


class ClusterView:
    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self.consumer = Consumer(options.bootstrap, **options.consumer_settings())

    def close(self) -> None:
        self.consumer.close()

    def __enter__(self) -> ClusterView:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def partitions(self, required: bool) -> list[TopicPartition]:
        """The partitions the subscription matches now. ``required`` (a batch query):
        a named topic or assigned partition that does not exist is an error."""
        sub = self.options.subscription
        if sub.assign is not None:
            wanted = [TopicPartition(t, p) for t, ps in sub.assign.items() for p in ps]
            topics = sorted(sub.assign)
        elif sub.pattern is not None:
            with Admin(self.options.bootstrap) as admin:
                topics = sorted(t for t in admin.list_topics() if sub.matches(t))
            wanted = []
        else:
            topics = list(sub.topics)
            wanted = []
        found: list[TopicPartition] = []
        for topic in topics:
            try:
                partitions = self.consumer.partitions_for(topic, PLAN_TIMEOUT_MS)
            except UnknownTopicOrPartitionError:
                partitions = []
            if not partitions and required:
                raise OptionError(f"topic {topic!r} does not exist on "
                                  f"{self.options.bootstrap} ({sub.describe()})")
            found.extend(TopicPartition(topic, p) for p in partitions)
        if sub.assign is not None:
            missing = sorted(set(wanted) - set(found))
            if missing and required:
                raise OptionError(f"assigned partitions {[str(tp) for tp in missing]} do "
                                  f"not exist on {self.options.bootstrap}")
            return sorted(tp for tp in wanted if tp in set(found))
        return sorted(found)

    def earliest(self, partitions: list[TopicPartition]) -> PartitionOffsets:
        got = self.consumer.beginning_offsets(partitions, PLAN_TIMEOUT_MS) if partitions \
            else {}
        return {(tp.topic, tp.partition): offset for tp, offset in got.items()}

    def latest(self, partitions: list[TopicPartition]) -> PartitionOffsets:
        """The end of what a reader of this isolation level may read (the last stable
        offset for read_committed)."""
        got = self.consumer.end_offsets(partitions, PLAN_TIMEOUT_MS) if partitions else {}
        return {(tp.topic, tp.partition): offset for tp, offset in got.items()}

    def resolve(self, spec: OffsetSpec | TimestampSpec, partitions: list[TopicPartition],
                option: str) -> PartitionOffsets:
        """Concrete offsets for ``partitions`` from an option's value; a partition the
        JSON does not name takes ``latest`` for an ending offset and ``earliest``
        otherwise, as Spark's Kafka source."""
        earliest = self.earliest(partitions)
        latest = self.latest(partitions)
        if isinstance(spec, TimestampSpec):
            return self._by_timestamp(spec, partitions, earliest, latest, option)
        if spec == "earliest":
            return earliest
        if spec == "latest":
            return latest
        named = {(t, p) for t, ps in spec.items() for p in ps}
        unknown = named - set(earliest)
        if unknown:
            raise OptionError(f"option {option} names partitions that are not read: "
                              f"{sorted(f'{t}-{p}' for t, p in unknown)}")
        default = latest if option == "endingOffsets" else earliest
        out = dict(default)
        for topic, partitions_of in spec.items():
            for partition, offset in partitions_of.items():
                tp = (topic, partition)
                out[tp] = earliest[tp] if offset == EARLIEST else \
                    latest[tp] if offset == LATEST else offset
        return out

    def _by_timestamp(self, spec: TimestampSpec, partitions: list[TopicPartition],
                      earliest: PartitionOffsets, latest: PartitionOffsets,
                      option: str) -> PartitionOffsets:
        asked = {TopicPartition(t, p): ms for t, ps in spec.timestamps.items()
                 for p, ms in ps.items()}
        unknown = set(asked) - set(partitions)
        if unknown:
            raise OptionError(f"option {option} names partitions that are not read: "
                              f"{sorted(str(tp) for tp in unknown)}")
        found = self.consumer.offsets_for_times(asked, PLAN_TIMEOUT_MS) if asked else {}
        out = dict(earliest)
        for tp, offset in found.items():
            key = (tp.topic, tp.partition)
            if offset is None:
                if self.options.timestamp_strategy == "error":
                    raise OptionError(
                        f"option {option}: {tp} has no record at or after {asked[tp]} ms; "
                        "set startingOffsetsByTimestampStrategy=latest to start at its end")
                offset = latest[key]
            out[key] = offset
        return out
