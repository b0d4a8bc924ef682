"""The Kafka listener's producer-id and transaction APIs translate every served
version both ways: each request becomes the servicer's protobuf call, each answer
(or refusal) a response that encodes as that version's schema."""

from __future__ import annotations

import datetime
import io
from typing import Any

import pytest
from kio.index import load_payload_module
from kio.schema.errors import ErrorCode as KafkaError
from kio.serial import entity_writer
from kio.static.constants import EntityType

from services.gateway.kafka import transactions as txn
from services.gateway.kafka.call import CallRefused, KafkaCall, KafkaContext
from services.gateway.kafka.messages import build
from services.gateway.kafka.replies import pb_code
from strand.errors import ErrorCode
from strand.v1 import groups_pb2 as pb_groups
from strand.v1 import transactions_pb2 as pb

pytestmark = pytest.mark.asyncio

TIMEOUT = datetime.timedelta(seconds=60)


class TransactionsServicer:
    """Answers the transaction calls as a coordinator would, recording what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, Any]] = []
        self.refuse: CallRefused | None = None

    async def _answer(self, method: str, request: Any, answer: Any) -> Any:
        self.asked.append((method, request))
        if self.refuse is not None:
            raise self.refuse
        return answer

    async def InitProducerId(self, request: Any, context: Any) -> Any:
        return await self._answer("InitProducerId", request, pb.InitProducerIdResponse(
            producer_id=1000, producer_epoch=(request.producer_epoch + 1
                                              if request.HasField("producer_epoch") else 0)))

    async def AddPartitionsToTxn(self, request: Any, context: Any) -> Any:
        # The coordinator names the partitions it refused; "missing" does not exist.
        return await self._answer("AddPartitionsToTxn", request, pb.AddPartitionsToTxnResponse(
            results=[pb.TxnPartitionResult(
                topic=t.topic, partition=p,
                error_code=(pb_code(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                            if t.topic == "missing" else pb_code(ErrorCode.NONE)))
                for t in request.topics for p in t.partitions]))

    async def AddOffsetsToTxn(self, request: Any, context: Any) -> Any:
        return await self._answer("AddOffsetsToTxn", request, pb.AddOffsetsToTxnResponse())

    async def EndTxn(self, request: Any, context: Any) -> Any:
        return await self._answer("EndTxn", request, pb.EndTxnResponse(
            producer_id=request.producer_id, producer_epoch=request.producer_epoch + 1))

    async def TxnOffsetCommit(self, request: Any, context: Any) -> Any:
        return await self._answer("TxnOffsetCommit", request, pb_groups.OffsetCommitResponse(
            partitions=[pb_groups.OffsetCommitPartitionResponse(topic=p.topic,
                                                                partition=p.partition)
                        for p in request.partitions]))

    async def DescribeTransactions(self, request: Any, context: Any) -> Any:
        return await self._answer("DescribeTransactions", request,
                                  pb.DescribeTransactionsResponse(
                                      transactional_id=request.transactional_id,
                                      transaction_state="Ongoing", transaction_timeout_ms=60_000,
                                      transaction_start_time_ms=1_700_000_000_000,
                                      producer_id=1000, producer_epoch=2,
                                      topics=[pb.TxnTopic(topic="t", partitions=[0, 1])]))

    async def ListTransactions(self, request: Any, context: Any) -> Any:
        return await self._answer("ListTransactions", request, pb.ListTransactionsResponse(
            transactions=[pb.ListedTransaction(transactional_id="x", producer_id=1000,
                                               transaction_state="Ongoing")]))


def _call(servicer: TransactionsServicer, api_key: int, version: int) -> KafkaCall:
    return KafkaCall(api_key=api_key, api_version=version, correlation_id=1,
                     client_id="client", servicer=servicer,  # type: ignore[arg-type]
                     context=KafkaContext("ipv4:127.0.0.1:5000"),
                     advertised_host="gw.example", advertised_port=9092)


def _request(api_key: int, version: int, class_name: str, /, **values: Any) -> Any:
    return build(load_payload_module(api_key, version, EntityType.request), class_name,
                 **values)


def _requests(api_key: int, version: int) -> Any:
    ids = {"transactional_id": "x", "producer_id": 1000, "producer_epoch": 2}
    if api_key == txn.INIT_PRODUCER_ID:
        return _request(api_key, version, "InitProducerIdRequest", transactional_id="x",
                        transaction_timeout=TIMEOUT, producer_id=-1, producer_epoch=-1)
    if api_key == txn.ADD_PARTITIONS_TO_TXN:
        topics = tuple(_request(api_key, version, "AddPartitionsToTxnTopic", name=name,
                                partitions=(0, 1)) for name in ("t", "missing"))
        if version < 4:
            return _request(api_key, version, "AddPartitionsToTxnRequest",
                            v3_and_below_transactional_id="x", v3_and_below_producer_id=1000,
                            v3_and_below_producer_epoch=2, v3_and_below_topics=topics)
        batch = tuple(_request(api_key, version, "AddPartitionsToTxnTransaction",
                               transactional_id=tid, producer_id=1000, producer_epoch=2,
                               verify_only=True, topics=topics) for tid in ("x", "y"))
        return _request(api_key, version, "AddPartitionsToTxnRequest", transactions=batch)
    if api_key == txn.ADD_OFFSETS_TO_TXN:
        return _request(api_key, version, "AddOffsetsToTxnRequest", **ids, group_id="g")
    if api_key == txn.END_TXN:
        return _request(api_key, version, "EndTxnRequest", **ids, committed=True)
    if api_key == txn.TXN_OFFSET_COMMIT:
        part = _request(api_key, version, "TxnOffsetCommitRequestPartition", partition_index=0,
                        committed_offset=9, committed_leader_epoch=-1, committed_metadata="m")
        topic = _request(api_key, version, "TxnOffsetCommitRequestTopic", name="t",
                         partitions=(part,))
        return _request(api_key, version, "TxnOffsetCommitRequest", **ids, group_id="g",
                        generation_id=4, member_id="member", group_instance_id=None,
                        topics=(topic,))
    if api_key == txn.DESCRIBE_TRANSACTIONS:
        return _request(api_key, version, "DescribeTransactionsRequest",
                        transactional_ids=("x", "y"))
    assert api_key == txn.LIST_TRANSACTIONS
    return _request(api_key, version, "ListTransactionsRequest", state_filters=("Ongoing",),
                    producer_id_filters=(), duration_filter=5_000)


SERVED = [(key, version) for key, (low, high) in txn.VERSIONS.items()
          for version in range(low, high + 1)]


@pytest.mark.parametrize(("api_key", "version"), SERVED, ids=[f"{k}-v{v}" for k, v in SERVED])
@pytest.mark.parametrize("refused", [False, True], ids=["answered", "refused"])
async def test_every_served_version_translates_and_encodes(api_key: int, version: int,
                                                           refused: bool) -> None:
    servicer = TransactionsServicer()
    if refused:
        servicer.refuse = CallRefused(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "no")
    response = await txn.HANDLERS[api_key](_requests(api_key, version),
                                           _call(servicer, api_key, version))
    assert (type(response).__api_key__, type(response).__version__) == (api_key, version)
    entity_writer(type(response))(io.BytesIO(), response)


async def test_init_producer_id_names_the_epoch_to_bump_only_when_given() -> None:
    servicer = TransactionsServicer()
    fresh = await txn.init_producer_id(_requests(txn.INIT_PRODUCER_ID, 4),
                                       _call(servicer, txn.INIT_PRODUCER_ID, 4))
    assert (fresh.producer_id, fresh.producer_epoch) == (1000, 0)
    assert not servicer.asked[0][1].HasField("producer_id")
    assert servicer.asked[0][1].transaction_timeout_ms == 60_000
    bump = _request(txn.INIT_PRODUCER_ID, 4, "InitProducerIdRequest", transactional_id=None,
                    transaction_timeout=TIMEOUT, producer_id=1000, producer_epoch=3)
    bumped = await txn.init_producer_id(bump, _call(servicer, txn.INIT_PRODUCER_ID, 4))
    assert bumped.producer_epoch == 4
    assert servicer.asked[1][1].transactional_id == ""  # idempotent: no transactional id
    servicer.refuse = CallRefused(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "no")
    refused = await txn.init_producer_id(bump, _call(servicer, txn.INIT_PRODUCER_ID, 4))
    assert refused.error_code is KafkaError.transactional_id_authorization_failed
    assert (refused.producer_id, refused.producer_epoch) == (-1, -1)


async def test_add_partitions_answers_each_partition() -> None:
    servicer = TransactionsServicer()
    response = await txn.add_partitions_to_txn(_requests(txn.ADD_PARTITIONS_TO_TXN, 3),
                                               _call(servicer, txn.ADD_PARTITIONS_TO_TXN, 3))
    codes = {(t.name, p.partition_index): p.partition_error_code
             for t in response.results_by_topic_v3_and_below for p in t.results_by_partition}
    assert codes == {("t", 0): KafkaError.none, ("t", 1): KafkaError.none,
                     ("missing", 0): KafkaError.unknown_topic_or_partition,
                     ("missing", 1): KafkaError.unknown_topic_or_partition}
    batched = await txn.add_partitions_to_txn(_requests(txn.ADD_PARTITIONS_TO_TXN, 4),
                                              _call(servicer, txn.ADD_PARTITIONS_TO_TXN, 4))
    assert [r.transactional_id for r in batched.results_by_transaction] == ["x", "y"]
    assert all(request.verify_only for _, request in servicer.asked[1:])


async def test_end_txn_v5_tells_the_next_epoch() -> None:
    servicer = TransactionsServicer()
    response = await txn.end_txn(_requests(txn.END_TXN, 5), _call(servicer, txn.END_TXN, 5))
    assert (response.producer_id, response.producer_epoch) == (1000, 3)
    assert servicer.asked[0][1].committed


async def test_txn_offset_commit_carries_the_members_generation() -> None:
    servicer = TransactionsServicer()
    response = await txn.txn_offset_commit(_requests(txn.TXN_OFFSET_COMMIT, 3),
                                           _call(servicer, txn.TXN_OFFSET_COMMIT, 3))
    assert response.topics[0].partitions[0].error_code is KafkaError.none
    asked = servicer.asked[0][1]
    assert (asked.member_id, asked.generation_id, asked.group_id) == ("member", 4, "g")
    assert (asked.partitions[0].offset, asked.partitions[0].metadata) == (9, "m")
    old = await txn.txn_offset_commit(_requests(txn.TXN_OFFSET_COMMIT, 0),
                                      _call(servicer, txn.TXN_OFFSET_COMMIT, 0))
    assert old.topics[0].partitions[0].error_code is KafkaError.none
    assert (servicer.asked[1][1].member_id, servicer.asked[1][1].generation_id) == ("", -1)


async def test_describe_and_list_transactions() -> None:
    servicer = TransactionsServicer()
    described = await txn.describe_transactions(
        _requests(txn.DESCRIBE_TRANSACTIONS, 0), _call(servicer, txn.DESCRIBE_TRANSACTIONS, 0))
    state = described.transaction_states[0]
    assert (state.transaction_state, state.producer_epoch) == ("Ongoing", 2)
    assert state.transaction_start_time == datetime.datetime(2023, 11, 14, 22, 13, 20,
                                                             tzinfo=datetime.UTC)
    assert state.topics[0].partitions == (0, 1)
    listed = await txn.list_transactions(_requests(txn.LIST_TRANSACTIONS, 1),
                                         _call(servicer, txn.LIST_TRANSACTIONS, 1))
    assert [t.transactional_id for t in listed.transaction_states] == ["x"]
    asked = servicer.asked[-1][1]
    assert (list(asked.state_filters), asked.duration_filter_ms) == (["Ongoing"], 5_000)
