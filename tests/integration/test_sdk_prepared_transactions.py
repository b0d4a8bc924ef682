"""Two-phase commit through the SDK (Kafka's KIP-939 shape): a producer prepares its
transaction (``Producer.prepare_transaction()``: flushed, left open, ``close()`` does not
abort it) and another client decides it (``Admin.complete_transaction()``). The Spark
sink's exactly-once staging (strand_spark) is built on these two calls."""

from __future__ import annotations

import pytest

from strand import Admin, PreparedTransaction, Producer, TopicPartition
from strand.errors import InvalidTxnStateError, ProducerFencedError
from tests.integration.test_sdk_transactions import read, topics
from tests.support.cluster import SdkCluster, unique


@pytest.fixture(scope="module")
def cluster(txn_cluster: SdkCluster) -> SdkCluster:
    return txn_cluster


def prepared_producer(cluster: SdkCluster, partitions: list[TopicPartition], tag: str,
                      transactional_id: str | None = None) -> PreparedTransaction:
    """Write one record to each partition in a transaction, prepare it, close."""
    with Producer(cluster.bootstrap, transactional_id=transactional_id or unique("prep"),
                  linger_ms=0) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        for tp in partitions:
            producer.send(tp.topic, value=f"{tag}-{tp.partition}".encode(),
                          partition=tp.partition)
        prepared = producer.prepare_transaction()
        with pytest.raises(InvalidTxnStateError, match="prepared"):
            producer.send(partitions[0].topic, value=b"late", partition=0)
    assert prepared is not None
    return prepared


def test_another_client_commits_a_prepared_transaction(cluster: SdkCluster) -> None:
    partitions = topics(cluster, "prep-commit")
    prepared = prepared_producer(cluster, partitions, "c")
    # Closed without an abort: written, invisible until decided.
    assert len(read(cluster, "read_uncommitted", partitions, expect=3)) == 3
    assert read(cluster, "read_committed", partitions, settle_s=1.0) == []
    with Admin(cluster.bootstrap) as admin:
        admin.complete_transaction(prepared, commit=True)
        admin.complete_transaction(prepared, commit=True)  # a repeat changes nothing
        with pytest.raises(InvalidTxnStateError, match="already committed"):
            admin.complete_transaction(prepared, commit=False)
    assert sorted(read(cluster, "read_committed", partitions, expect=3)) == sorted(
        f"c-{tp.partition}" for tp in partitions)


def test_another_client_aborts_a_prepared_transaction(cluster: SdkCluster) -> None:
    partitions = topics(cluster, "prep-abort")
    prepared = prepared_producer(cluster, partitions, "a")
    with Admin(cluster.bootstrap) as admin:
        admin.complete_transaction(prepared, commit=False)
    # Then a committed one after it: the LSO moved past the aborted records.
    with Producer(cluster.bootstrap, transactional_id=unique("after")) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(partitions[0].topic, value=b"after", partition=partitions[0].partition)
        producer.commit_transaction()
    assert read(cluster, "read_committed", partitions, expect=1) == ["after"]


def test_a_new_instance_fences_a_prepared_transaction(cluster: SdkCluster) -> None:
    partitions = topics(cluster, "prep-fence")
    transactional_id = unique("prep-fence")
    prepared = prepared_producer(cluster, partitions, "z", transactional_id)
    with Producer(cluster.bootstrap, transactional_id=transactional_id) as newer:
        newer.init_transactions()  # aborts the prepared transaction
    with Admin(cluster.bootstrap) as admin, pytest.raises(
            (ProducerFencedError, InvalidTxnStateError)):
        admin.complete_transaction(prepared, commit=True)
    assert read(cluster, "read_committed", partitions, settle_s=1.0) == []


def test_an_empty_transaction_prepares_to_nothing(cluster: SdkCluster) -> None:
    with Producer(cluster.bootstrap, transactional_id=unique("prep-empty")) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        assert producer.prepare_transaction() is None
    with Admin(cluster.bootstrap) as admin, pytest.raises(TypeError, match="Prepared"):
        admin.complete_transaction(("id", 1, 0), commit=True)  # type: ignore[arg-type]
