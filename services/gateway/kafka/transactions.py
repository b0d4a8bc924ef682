"""Kafka's producer-id and transaction APIs on the gateway's Kafka listener:
InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
DescribeTransactions and ListTransactions.

Each becomes the gateway servicer's own call (ACLs, routing to the transactional id's
coordinator shard) and its answer the response of the version the client sent.
AddPartitionsToTxn is served in the client form (v0-v3) and the batched broker form
(v4: several transactions, ``verify_only``), each transaction asked in turn.
EndTxn v5 (KIP-890 part 2) carries the producer id and epoch of the id's next
transaction, which Strand's coordinator answers on every EndTxn. A client sending an
older EndTxn keeps its epoch from one transaction to the next (transaction version 1):
its end asks the coordinator to keep the epoch too.
"""

from __future__ import annotations

import asyncio
import datetime
from types import ModuleType
from typing import Any

from services.gateway.kafka.call import CallRefused, Handler, KafkaCall
from services.gateway.kafka.messages import build, kafka_error, milliseconds, timedelta_ms
from services.gateway.kafka.offsets import commit_partitions, commit_refused, commit_response
from services.gateway.kafka.replies import NO_THROTTLE, ask, module_of, pb_code, strand_code
from strand.errors import ErrorCode
from strand.v1 import groups_pb2 as pb_groups
from strand.v1 import transactions_pb2 as pb

__all__ = ["HANDLERS", "VERSIONS"]

INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN = 22, 24, 25, 26
TXN_OFFSET_COMMIT, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 28, 65, 66
NO_PRODUCER_ID, NO_PRODUCER_EPOCH = -1, -1
NO_DURATION_FILTER = -1


def _timestamp(ms: int) -> datetime.datetime:
    """A kio timestamp (``datetime_i64``) of epoch milliseconds (-1: none)."""
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


# -- InitProducerId ------------------------------------------------------------------------------

async def init_producer_id(request: Any, call: KafkaCall) -> Any:
    timeout_ms = milliseconds(request.transaction_timeout)
    if not request.transactional_id:
        # An idempotent producer has no transactions to time out: its clients send -1
        # (librdkafka), which Kafka ignores.
        timeout_ms = max(timeout_ms, 0)
    pb_request = pb.InitProducerIdRequest(transactional_id=request.transactional_id or "",
                                          transaction_timeout_ms=timeout_ms)
    producer_id = getattr(request, "producer_id", NO_PRODUCER_ID)
    epoch = getattr(request, "producer_epoch", NO_PRODUCER_EPOCH)
    if producer_id != NO_PRODUCER_ID or epoch != NO_PRODUCER_EPOCH:
        # KIP-360: the producer names the id and epoch it has, to be bumped.
        pb_request.producer_id = producer_id
        pb_request.producer_epoch = epoch
    answer = await ask(call.servicer.InitProducerId, pb_request, call, lambda exc:
                       pb.InitProducerIdResponse(error_code=pb_code(exc.code),
                                                 error_message=exc.message,
                                                 producer_id=-1, producer_epoch=-1))
    ok = strand_code(answer.error_code) is ErrorCode.NONE
    return build(module_of(request), "InitProducerIdResponse", throttle_time=NO_THROTTLE,
                 error_code=kafka_error(answer.error_code),
                 producer_id=answer.producer_id if ok else NO_PRODUCER_ID,
                 producer_epoch=answer.producer_epoch if ok else NO_PRODUCER_EPOCH)


# -- AddPartitionsToTxn --------------------------------------------------------------------------

async def _add_partitions(call: KafkaCall, transactional_id: str, producer_id: int,
                          epoch: int, topics: tuple[Any, ...], verify_only: bool
                          ) -> dict[tuple[str, int], ErrorCode]:
    """Each partition's answer to adding (verifying) ``topics`` to the transaction."""
    answer = await ask(call.servicer.AddPartitionsToTxn, pb.AddPartitionsToTxnRequest(
        transactional_id=transactional_id, producer_id=producer_id, producer_epoch=epoch,
        topics=[pb.TxnTopic(topic=t.name, partitions=list(t.partitions)) for t in topics],
        verify_only=verify_only), call, lambda exc: pb.AddPartitionsToTxnResponse(
            error_code=pb_code(exc.code), error_message=exc.message))
    answered = {(r.topic, r.partition): strand_code(r.error_code) for r in answer.results}
    whole = strand_code(answer.error_code)
    return {(t.name, p): answered.get((t.name, p), whole) for t in topics for p in t.partitions}


def _topic_results(module: ModuleType, codes: dict[tuple[str, int], ErrorCode]
                   ) -> tuple[Any, ...]:
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), code in codes.items():
        by_topic.setdefault(topic, []).append(build(
            module, "AddPartitionsToTxnPartitionResult", partition_index=partition,
            partition_error_code=kafka_error(code)))
    return tuple(build(module, "AddPartitionsToTxnTopicResult", name=name,
                       results_by_partition=tuple(parts)) for name, parts in by_topic.items())


async def add_partitions_to_txn(request: Any, call: KafkaCall) -> Any:
    module = module_of(request)
    if request.__version__ < 4:
        codes = await _add_partitions(
            call, request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch, request.v3_and_below_topics, False)
        return build(module, "AddPartitionsToTxnResponse", throttle_time=NO_THROTTLE,
                     results_by_topic_v3_and_below=_topic_results(module, codes))
    answers = [await _add_partitions(call, txn.transactional_id, txn.producer_id,
                                     txn.producer_epoch, txn.topics, txn.verify_only)
               for txn in request.transactions]
    return build(module, "AddPartitionsToTxnResponse", throttle_time=NO_THROTTLE,
                 error_code=kafka_error(ErrorCode.NONE), results_by_transaction=tuple(
        build(module, "AddPartitionsToTxnResult", transactional_id=txn.transactional_id,
              topic_results=_topic_results(module, codes))
        for txn, codes in zip(request.transactions, answers, strict=True)))


# -- AddOffsetsToTxn, EndTxn, TxnOffsetCommit ----------------------------------------------------

async def add_offsets_to_txn(request: Any, call: KafkaCall) -> Any:
    answer = await ask(call.servicer.AddOffsetsToTxn, pb.AddOffsetsToTxnRequest(
        transactional_id=request.transactional_id, producer_id=request.producer_id,
        producer_epoch=request.producer_epoch, group_id=request.group_id), call,
        lambda exc: pb.AddOffsetsToTxnResponse(error_code=pb_code(exc.code),
                                               error_message=exc.message))
    return build(module_of(request), "AddOffsetsToTxnResponse", throttle_time=NO_THROTTLE,
                 error_code=kafka_error(answer.error_code))


_EPOCH_PER_TRANSACTION = 5  # EndTxn v5: transaction version 2, an epoch per transaction


async def end_txn(request: Any, call: KafkaCall) -> Any:
    answer = await ask(call.servicer.EndTxn, pb.EndTxnRequest(
        transactional_id=request.transactional_id, producer_id=request.producer_id,
        producer_epoch=request.producer_epoch, committed=request.committed,
        keep_epoch=type(request).__version__ < _EPOCH_PER_TRANSACTION), call,
        lambda exc: pb.EndTxnResponse(error_code=pb_code(exc.code), error_message=exc.message,
                                      producer_id=-1, producer_epoch=-1))
    ok = strand_code(answer.error_code) is ErrorCode.NONE
    return build(module_of(request), "EndTxnResponse", throttle_time=NO_THROTTLE,
                 error_code=kafka_error(answer.error_code),
                 producer_id=answer.producer_id if ok else NO_PRODUCER_ID,
                 producer_epoch=answer.producer_epoch if ok else NO_PRODUCER_EPOCH)


async def txn_offset_commit(request: Any, call: KafkaCall) -> Any:
    pb_request = pb_groups.TxnOffsetCommitRequest(
        transactional_id=request.transactional_id, group_id=request.group_id,
        producer_id=request.producer_id, producer_epoch=request.producer_epoch,
        member_id=getattr(request, "member_id", ""),
        generation_id=getattr(request, "generation_id", -1),
        group_instance_id=getattr(request, "group_instance_id", None) or "",
        partitions=commit_partitions(request.topics))
    answer = await ask(call.servicer.TxnOffsetCommit, pb_request, call, commit_refused)
    return commit_response(request, answer)


# -- DescribeTransactions, ListTransactions ------------------------------------------------------

async def _describe_one(module: ModuleType, call: KafkaCall, transactional_id: str) -> Any:
    answer = await ask(call.servicer.DescribeTransactions, pb.DescribeTransactionsRequest(
        transactional_id=transactional_id), call, _describe_refused)
    topics = tuple(build(module, "TopicData", topic=t.topic,
                         partitions=tuple(t.partitions)) for t in answer.topics)
    return build(module, "TransactionState",
                 error_code=kafka_error(answer.error_code), transactional_id=transactional_id,
                 transaction_state=answer.transaction_state,
                 transaction_timeout=timedelta_ms(answer.transaction_timeout_ms),
                 transaction_start_time=_timestamp(answer.transaction_start_time_ms),
                 producer_id=answer.producer_id, producer_epoch=answer.producer_epoch,
                 topics=topics)


def _describe_refused(exc: CallRefused) -> pb.DescribeTransactionsResponse:
    return pb.DescribeTransactionsResponse(
        error_code=pb_code(exc.code), error_message=exc.message, transaction_start_time_ms=-1,
        producer_id=-1, producer_epoch=-1)


async def describe_transactions(request: Any, call: KafkaCall) -> Any:
    module = module_of(request)
    states = await asyncio.gather(*(_describe_one(module, call, transactional_id)
                                    for transactional_id in request.transactional_ids))
    return build(module, "DescribeTransactionsResponse", throttle_time=NO_THROTTLE,
                 transaction_states=tuple(states))


async def list_transactions(request: Any, call: KafkaCall) -> Any:
    module = module_of(request)
    pb_request = pb.ListTransactionsRequest(
        state_filters=list(request.state_filters),
        producer_id_filters=list(request.producer_id_filters))
    duration = getattr(request, "duration_filter", NO_DURATION_FILTER)
    if duration >= 0:
        pb_request.duration_filter_ms = duration
    answer = await ask(call.servicer.ListTransactions, pb_request, call, lambda exc:
                       pb.ListTransactionsResponse(error_code=pb_code(exc.code),
                                                   error_message=exc.message))
    return build(module, "ListTransactionsResponse", throttle_time=NO_THROTTLE,
                 error_code=kafka_error(answer.error_code),
                 unknown_state_filters=tuple(answer.unknown_state_filters),
                 transaction_states=tuple(build(
                     module, "TransactionState", transactional_id=t.transactional_id,
                     producer_id=t.producer_id, transaction_state=t.transaction_state)
                     for t in answer.transactions))


HANDLERS: dict[int, Handler] = {
    INIT_PRODUCER_ID: init_producer_id,
    ADD_PARTITIONS_TO_TXN: add_partitions_to_txn,
    ADD_OFFSETS_TO_TXN: add_offsets_to_txn,
    END_TXN: end_txn,
    TXN_OFFSET_COMMIT: txn_offset_commit,
    DESCRIBE_TRANSACTIONS: describe_transactions,
    LIST_TRANSACTIONS: list_transactions,
}

VERSIONS: dict[int, tuple[int, int]] = {
    INIT_PRODUCER_ID: (0, 5),
    ADD_PARTITIONS_TO_TXN: (0, 4),
    ADD_OFFSETS_TO_TXN: (0, 4),
    END_TXN: (0, 5),
    TXN_OFFSET_COMMIT: (0, 4),
    DESCRIBE_TRANSACTIONS: (0, 0),
    LIST_TRANSACTIONS: (0, 1),
}
