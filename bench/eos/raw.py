"""A transactional producer made of raw gateway calls (InitProducerId,
AddPartitionsToTxn, transactional Produce, EndTxn, DescribeTransactions), as a
client makes them: no SDK in between, so the EndTxn RPC can be timed alone and
transactional data written without the SDK's transactional API."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import grpc

from strand.errors import ErrorCode, error_for
from strand.records import BatchBuilder
from strand.v1 import common_pb2, gateway_pb2_grpc
from strand.v1 import transactions_pb2 as txn_pb

CALL_TIMEOUT_S = 30.0
# Worth a retry: leadership moving, a partition's ISR short for a moment, the
# previous transaction's markers still being written.
_RETRIABLE = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
              ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
              ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT,
              ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
              ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR}


def _check(code: int, message: str, what: str) -> None:
    if code != ErrorCode.NONE:
        raise error_for(code, f"{what}: {message}")


def _retry(call: Callable[[], tuple[int, str, Any]], what: str,
           deadline_s: float = 60.0) -> Any:
    """Call ``call()`` (an answer's error code, message and the answer) until the
    code is not retriable; then return the answer, or raise the typed error of a
    lasting code (or of the last one at the deadline)."""
    deadline = time.monotonic() + deadline_s
    while True:
        code, message, answer = call()
        if code == ErrorCode.NONE:
            return answer
        if ErrorCode(code) not in _RETRIABLE or time.monotonic() > deadline:
            _check(code, message, what)
        time.sleep(0.02)


def _answer(answer: Any) -> tuple[int, str, Any]:
    return answer.error_code, answer.error_message, answer


class RawTxnProducer:
    """One transactional id's producer over the gateway's raw RPCs."""

    def __init__(self, bootstrap: str, transactional_id: str,
                 timeout_ms: int = 60_000) -> None:
        self.transactional_id = transactional_id
        self.channel = grpc.insecure_channel(bootstrap)
        self.stub = gateway_pb2_grpc.GatewayStub(self.channel)
        answer = _retry(lambda: _answer(self.stub.InitProducerId(
            txn_pb.InitProducerIdRequest(transactional_id=transactional_id,
                                         transaction_timeout_ms=timeout_ms),
            timeout=CALL_TIMEOUT_S)), f"InitProducerId({transactional_id})")
        self.producer_id: int = answer.producer_id
        self.epoch: int = answer.producer_epoch
        self.sequences: dict[tuple[str, int], int] = {}

    def add_partitions(self, topic: str, partitions: Sequence[int]) -> None:
        """AddPartitionsToTxn; retried while the previous transaction completes
        (CONCURRENT_TRANSACTIONS)."""
        def call() -> tuple[int, str, Any]:
            answer = self.stub.AddPartitionsToTxn(
                txn_pb.AddPartitionsToTxnRequest(
                    transactional_id=self.transactional_id, producer_id=self.producer_id,
                    producer_epoch=self.epoch,
                    topics=[txn_pb.TxnTopic(topic=topic, partitions=list(partitions))]),
                timeout=CALL_TIMEOUT_S)
            if answer.error_code == ErrorCode.NONE:  # the first failed partition's error
                for result in answer.results:
                    if result.error_code != ErrorCode.NONE:
                        return (result.error_code,
                                f"partition {result.topic}-{result.partition}", answer)
            return _answer(answer)

        _retry(call, f"AddPartitionsToTxn({self.transactional_id}, {topic})")

    def produce(self, topic: str, values: dict[int, Iterable[bytes]]) -> None:
        """One acks=all transactional Produce: a batch of ``values[p]`` for each
        partition p (each batch's sequence follows the partition's last one)."""
        batches: dict[int, bytes] = {}
        for partition, records in values.items():
            builder = BatchBuilder(producer_id=self.producer_id, producer_epoch=self.epoch,
                                   base_sequence=self.sequences.get((topic, partition), 0),
                                   transactional=True)
            count = 0
            for value in records:
                builder.append(value)
                count += 1
            batches[partition] = builder.build()
            self.sequences[(topic, partition)] = self.sequences.get((topic, partition), 0) + count
        pending = dict(batches)
        deadline = time.monotonic() + 60
        while pending:
            response = self.stub.Produce(common_pb2.ProduceRequest(
                acks=-1, timeout_ms=10_000, transactional_id=self.transactional_id,
                topics=[common_pb2.TopicProduceData(topic=topic, partitions=[
                    common_pb2.PartitionProduceData(partition=p, records=data)
                    for p, data in pending.items()])]), timeout=CALL_TIMEOUT_S)
            for answer in response.topics[0].partitions:
                code = answer.error_code
                if code == ErrorCode.NONE or code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                    pending.pop(answer.partition, None)
                elif ErrorCode(code) not in _RETRIABLE or time.monotonic() > deadline:
                    _check(code, answer.error_message, f"Produce to {topic}-{answer.partition}")
            if pending:
                time.sleep(0.02)

    def plain_produce(self, topic: str, partition: int, value: bytes) -> float:
        """A one-record acks=all Produce outside any transaction (no producer id):
        the time of one replicated write, the yardstick of EndTxn's; in seconds."""
        builder = BatchBuilder()
        builder.append(value)
        request = common_pb2.ProduceRequest(acks=-1, timeout_ms=10_000, topics=[
            common_pb2.TopicProduceData(topic=topic, partitions=[
                common_pb2.PartitionProduceData(partition=partition, records=builder.build())])])
        start = time.perf_counter()
        response = self.stub.Produce(request, timeout=CALL_TIMEOUT_S)
        took = time.perf_counter() - start
        answer = response.topics[0].partitions[0]
        _check(answer.error_code, answer.error_message, f"Produce to {topic}-{partition}")
        return took

    def end(self, commit: bool) -> float:
        """EndTxn; returns how long the RPC took, in seconds (it answers once the
        Prepare* record is written; the markers follow in the background)."""
        request = txn_pb.EndTxnRequest(transactional_id=self.transactional_id,
                                       producer_id=self.producer_id,
                                       producer_epoch=self.epoch, committed=commit)
        start = time.perf_counter()
        answer = self.stub.EndTxn(request, timeout=CALL_TIMEOUT_S)
        took = time.perf_counter() - start
        _check(answer.error_code, answer.error_message, f"EndTxn({self.transactional_id})")
        # Every end moves the id to its next epoch (or producer id): the next
        # transaction writes under it, each partition from sequence 0.
        self.producer_id, self.epoch = answer.producer_id, answer.producer_epoch
        self.sequences.clear()
        return took

    def state(self) -> str:
        answer = self.stub.DescribeTransactions(txn_pb.DescribeTransactionsRequest(
            transactional_id=self.transactional_id), timeout=CALL_TIMEOUT_S)
        _check(answer.error_code, answer.error_message,
               f"DescribeTransactions({self.transactional_id})")
        state: str = answer.transaction_state
        return state

    def wait_complete(self, timeout_s: float = 60.0) -> None:
        """Until the transaction ended last is Complete* (its markers written)."""
        deadline = time.monotonic() + timeout_s
        while not self.state().startswith("Complete"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"transaction {self.transactional_id} not complete "
                                   f"within {timeout_s} s (state {self.state()})")
            time.sleep(0.001)

    def close(self) -> None:
        self.channel.close()
