"""The controller's metrics under Kafka's ``KafkaController`` names: whether this
controller is the active one (``ActiveControllerCount``: summed over the
controllers, exactly 1 in a healthy cluster) and, from the active one only (so a sum
counts the cluster once), the partitions without a live leader
(``OfflinePartitionsCount``), all partitions and topics (``GlobalPartitionCount``,
``GlobalTopicCount``) and the registered storage nodes (``ActiveBrokerCount``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from strand.cluster.cache import MetadataCache

__all__ = ["ControllerMetrics", "offline_partitions"]


def offline_partitions(cache: MetadataCache) -> int:
    """Partitions with no leader, or a leader that is not registered (gone)."""
    brokers = cache.brokers
    return sum(1 for record in list(cache.partitions.values())
               if record.leader < 0 or record.leader not in brokers)


class ControllerMetrics:
    def __init__(self, source: metrics.Meter, cache: MetadataCache,
                 is_active: Callable[[], bool]) -> None:
        self.cache = cache
        self.is_active = is_active
        gauges: dict[str, tuple[str, Callable[[], int]]] = {
            "active_controller_count": ("1 on the active controller, else 0",
                                        lambda: 1),
            "offline_partitions_count": ("partitions without a live leader",
                                         lambda: offline_partitions(self.cache)),
            "global_partition_count": ("partitions in the cluster",
                                       lambda: len(self.cache.partitions)),
            "global_topic_count": ("topics in the cluster", lambda: len(self.cache.topics)),
            "active_broker_count": ("registered storage nodes",
                                    lambda: len(self.cache.brokers)),
        }
        for name, (description, value) in gauges.items():
            source.create_observable_gauge(f"strand.controller.{name}",
                                           callbacks=[self._observer(value)],
                                           description=description)

    def _observer(self, value: Callable[[], int]
                  ) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            # A standby reports 0 for everything: only the active controller counts.
            return [Observation(value() if self.is_active() else 0)]
        return observe
