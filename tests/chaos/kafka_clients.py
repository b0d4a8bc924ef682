"""What the confluent-kafka workloads share: librdkafka's log and error wording."""

from __future__ import annotations

import logging

from confluent_kafka import KafkaError

# librdkafka's own logs (with debug=eos, its idempotence and transaction state
# machines: producer ids, epoch bumps and why): to logs/kafka-clients.log of the run
# while the workloads run (kafka_workload.KafkaWorkloads).
CLIENT_LOG = logging.getLogger("tests.chaos.kafka_clients")
CLIENT_LOG.propagate = False
CLIENT_LOG.setLevel(logging.DEBUG)


def describe(error: KafkaError | BaseException) -> str:
    if isinstance(error, KafkaError):
        return f"KafkaError {error.name()}: {error.str()[:200]}"
    return f"{type(error).__name__}: {str(error)[:200]}"
