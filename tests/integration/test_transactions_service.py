"""The transaction coordinator service in a real cluster (etcd, a controller, two
storage nodes, a gateway, a group coordinator and a transaction coordinator),
called through the gateway as a client would: producer ids, epochs and fencing,
EndTxn (markers written to the partitions' leaders, then Complete*), the state
surviving a SIGKILL of the coordinator, timeouts, bad input, List/Describe.
Records and markers seen by consumers: test_transactions_e2e.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from strand import Admin, NewTopic
from strand.errors import ErrorCode
from strand.v1 import gateway_pb2_grpc
from strand.v1 import transactions_pb2 as pb
from tests.support.cluster import SdkCluster, start_sdk_cluster
from tests.support.waiting import wait_until

TOPIC = "txn-orders"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SdkCluster]:
    cluster = start_sdk_cluster(tmp_path_factory.mktemp("txns"), nodes=2, name="txns",
                                coordinators=1, txn_coordinators=1)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, 3, 2)])
    yield cluster
    cluster.stop()


class Gateway:
    def __init__(self, address: str) -> None:
        self.channel = grpc.insecure_channel(address)
        self.stub = gateway_pb2_grpc.GatewayStub(self.channel)

    def call(self, method: str, request: Any) -> Any:
        return getattr(self.stub, method)(request, timeout=30)

    def init(self, tid: str = "", timeout_ms: int = 60_000, **expected: int) -> Any:
        return self.call("InitProducerId", pb.InitProducerIdRequest(
            transactional_id=tid, transaction_timeout_ms=timeout_ms, **expected))

    def init_ok(self, tid: str, timeout_ms: int = 60_000) -> tuple[int, int]:
        answer = self.init(tid, timeout_ms)
        assert answer.error_code == ErrorCode.NONE, answer
        return answer.producer_id, answer.producer_epoch

    def add(self, tid: str, pid: int, epoch: int, partitions: list[int],
            topic: str = TOPIC) -> Any:
        return self.call("AddPartitionsToTxn", pb.AddPartitionsToTxnRequest(
            transactional_id=tid, producer_id=pid, producer_epoch=epoch,
            topics=[pb.TxnTopic(topic=topic, partitions=partitions)]))

    def end(self, tid: str, pid: int, epoch: int, commit: bool) -> Any:
        return self.call("EndTxn", pb.EndTxnRequest(transactional_id=tid, producer_id=pid,
                                                    producer_epoch=epoch, committed=commit))

    def describe(self, tid: str) -> Any:
        return self.call("DescribeTransactions",
                         pb.DescribeTransactionsRequest(transactional_id=tid))


@pytest.fixture
def gateway(cluster: SdkCluster) -> Iterator[Gateway]:
    gw = Gateway(cluster.bootstrap)
    yield gw
    gw.channel.close()


def code(answer: Any) -> ErrorCode:
    return ErrorCode(answer.error_code)


def test_idempotent_producers_get_distinct_ids(gateway: Gateway) -> None:
    answers = [gateway.init() for _ in range(20)]
    assert all(code(a) == ErrorCode.NONE and a.producer_epoch == 0 for a in answers), answers
    assert len({a.producer_id for a in answers}) == 20


def test_a_new_instance_bumps_the_epoch_and_fences_the_old_one(gateway: Gateway) -> None:
    pid, epoch = gateway.init_ok("fence-me")
    again_pid, again_epoch = gateway.init_ok("fence-me")
    assert (again_pid, again_epoch) == (pid, epoch + 1)
    assert code(gateway.add("fence-me", pid, epoch, [0])) == ErrorCode.PRODUCER_FENCED
    assert code(gateway.end("fence-me", pid, epoch, True)) == ErrorCode.PRODUCER_FENCED
    # The current instance works; the old one could not add anything meanwhile.
    added = gateway.add("fence-me", pid, again_epoch, [0, 1])
    assert code(added) == ErrorCode.NONE, added
    assert [code(r) for r in added.results] == [ErrorCode.NONE, ErrorCode.NONE]
    described = gateway.describe("fence-me")
    assert described.transaction_state == "Ongoing"
    assert (described.producer_id, described.producer_epoch) == (pid, again_epoch)
    assert [(t.topic, list(t.partitions)) for t in described.topics] == [(TOPIC, [0, 1])]
    # KIP-360: the current instance re-initialising with its id and epoch is not fenced;
    # its open transaction is aborted first (CONCURRENT_TRANSACTIONS while that runs).
    retried = gateway.init("fence-me", producer_id=pid, producer_epoch=again_epoch)
    assert code(retried) == ErrorCode.CONCURRENT_TRANSACTIONS, retried


def test_end_txn_abort_completes_and_survives_a_coordinator_kill(cluster: SdkCluster,
                                                                  gateway: Gateway) -> None:
    pid, epoch = gateway.init_ok("to-abort")
    assert code(gateway.add("to-abort", pid, epoch, [0, 2])) == ErrorCode.NONE
    ended = gateway.end("to-abort", pid, epoch, False)
    assert code(ended) == ErrorCode.NONE, ended
    # The end moves the id to its next epoch: the answer names it.
    assert (ended.producer_id, ended.producer_epoch) == (pid, epoch + 1)
    wait_until(lambda: gateway.describe("to-abort").transaction_state == "CompleteAbort", 30,
               "the ABORT markers to be written and the abort completed")
    assert code(gateway.end("to-abort", pid, epoch, True)) == ErrorCode.INVALID_TXN_STATE
    open_pid, open_epoch = gateway.init_ok("stays-open")
    assert code(gateway.add("stays-open", open_pid, open_epoch, [1])) == ErrorCode.NONE

    old = cluster.txn_coordinators[0]
    old.kill()  # SIGKILL: nothing flushed, nothing handed over
    cluster.txn_coordinators[0] = cluster.txn_coordinator(1).start()
    cluster.wait_coordinators_settled()
    aborted = gateway.describe("to-abort")
    assert code(aborted) == ErrorCode.NONE, aborted
    assert aborted.transaction_state == "CompleteAbort"
    assert (aborted.producer_id, aborted.producer_epoch) == (pid, epoch + 1)
    still = gateway.describe("stays-open")
    assert still.transaction_state == "Ongoing"
    assert [(t.topic, list(t.partitions)) for t in still.topics] == [(TOPIC, [1])]
    # Nothing left to finish: a new instance of the id gets the next epoch at once.
    assert gateway.init_ok("to-abort") == (pid, epoch + 2)


def test_a_timed_out_transaction_is_aborted_with_an_epoch_bump(gateway: Gateway) -> None:
    pid, epoch = gateway.init_ok("slow", timeout_ms=1000)
    assert code(gateway.add("slow", pid, epoch, [0])) == ErrorCode.NONE
    wait_until(lambda: gateway.describe("slow").transaction_state == "CompleteAbort", 30,
               "the coordinator to abort the timed-out transaction")
    described = gateway.describe("slow")
    assert (described.producer_id, described.producer_epoch) == (pid, epoch + 1)
    assert code(gateway.end("slow", pid, epoch, True)) == ErrorCode.PRODUCER_FENCED
    assert code(gateway.add("slow", pid, epoch, [1])) == ErrorCode.PRODUCER_FENCED


def test_bad_input_gets_a_typed_error_and_changes_nothing(gateway: Gateway) -> None:
    empty = gateway.call("EndTxn", pb.EndTxnRequest(transactional_id="", producer_id=1))
    assert code(empty) == ErrorCode.INVALID_REQUEST and empty.error_message
    too_long = gateway.init("x" * 40_000)
    assert code(too_long) == ErrorCode.INVALID_REQUEST and "40000 bytes" in too_long.error_message
    for timeout in (0, -5, 900_001):
        answer = gateway.init("timeouts", timeout_ms=timeout)
        assert code(answer) == ErrorCode.INVALID_TRANSACTION_TIMEOUT, (timeout, answer)
    assert code(gateway.describe("timeouts")) == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    pid, epoch = gateway.init_ok("nothing-open")
    committed = gateway.end("nothing-open", pid, epoch, True)
    assert code(committed) == ErrorCode.INVALID_TXN_STATE, committed
    assert "no transaction is open" in committed.error_message
    unknown = gateway.add("nothing-open", pid, epoch, [0], topic="no-such-topic")
    assert code(unknown) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, unknown
    assert code(gateway.add("nothing-open", pid + 1, epoch, [0])) \
        == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert gateway.describe("nothing-open").transaction_state == "Empty"


def test_list_and_describe(gateway: Gateway) -> None:
    pid, epoch = gateway.init_ok("listed-open")
    assert code(gateway.add("listed-open", pid, epoch, [2])) == ErrorCode.NONE
    gateway.init_ok("listed-empty")
    everything = gateway.call("ListTransactions", pb.ListTransactionsRequest())
    assert code(everything) == ErrorCode.NONE, everything
    states = {t.transactional_id: t.transaction_state for t in everything.transactions}
    assert states["listed-open"] == "Ongoing" and states["listed-empty"] == "Empty"
    assert sorted(everything.listed_shards) == [0, 1, 2, 3]
    ongoing = gateway.call("ListTransactions", pb.ListTransactionsRequest(
        state_filters=["Ongoing", "Bogus"], producer_id_filters=[pid]))
    assert [t.transactional_id for t in ongoing.transactions] == ["listed-open"]
    assert list(ongoing.unknown_state_filters) == ["Bogus"]
    assert code(gateway.describe("never-seen")) == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
