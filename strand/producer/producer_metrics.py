"""The producer's own metrics, under the names of Kafka's producer metrics
(``record-send-total``, ``record-error-total``, ``record-retry-total``): records
delivered, failed for good and sent again, by ``client_id`` and topic.

They go through the OpenTelemetry API: an application that sets up OpenTelemetry
(a meter provider with a Prometheus or OTLP exporter) before it creates the producer
gets them (:func:`producer_metrics`); otherwise there are none, at no cost.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from strand.version import VERSION

if TYPE_CHECKING:
    from opentelemetry import metrics

    from strand.producer.producer_batch import ProducerBatch

__all__ = ["ProducerMetrics", "producer_metrics"]


def producer_metrics(client_id: str) -> ProducerMetrics | None:
    """The producer's metrics if the application uses OpenTelemetry, else None
    (nothing imported: the CLI's start-up time)."""
    if "opentelemetry.metrics" not in sys.modules:
        return None
    return ProducerMetrics(client_id)


class ProducerMetrics:
    def __init__(self, client_id: str, source: metrics.Meter | None = None) -> None:
        if source is None:
            from opentelemetry import metrics

            source = metrics.get_meter("strand.client", VERSION)
        self.client_id = client_id
        self.records_sent = source.create_counter(
            "strand.producer.record_send", unit="{record}",
            description="records the cluster acknowledged (record-send-total)")
        self.record_errors = source.create_counter(
            "strand.producer.record_error", unit="{record}",
            description="records that failed for good (record-error-total)")
        self.record_retries = source.create_counter(
            "strand.producer.record_retry", unit="{record}",
            description="records sent again after a retriable failure (record-retry-total)")

    def _attributes(self, batch: ProducerBatch) -> dict[str, str]:
        return {"client_id": self.client_id, "topic": batch.topic}

    def batch_done(self, batch: ProducerBatch) -> None:
        counter = self.records_sent if batch.error is None else self.record_errors
        counter.add(batch.record_count, self._attributes(batch))

    def batch_retried(self, batch: ProducerBatch) -> None:
        self.record_retries.add(batch.record_count, self._attributes(batch))
