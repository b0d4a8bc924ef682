"""Kafka's topic admin APIs on the gateway's Kafka listener: CreateTopics, DeleteTopics,
CreatePartitions, and DescribeCluster.

Topic changes become the gateway servicer's own calls (ACLs per topic, validation and
the change itself by the active controller apply unchanged); what Kafka checks in the
request itself (a topic named twice, counts and an explicit assignment together, a
null config value) is answered here, per topic, as Kafka's brokers do. CreateTopics'
-1 counts are the broker defaults (:mod:`services.gateway.kafka.config_entries`).
DescribeCluster lists the one logical broker every gateway presents itself as
(:mod:`services.gateway.kafka.brokers`), which is also the controller.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from services.gateway.kafka.call import CallRefused, Handler, KafkaCall
from services.gateway.kafka.config_entries import (
    DEFAULT_NUM_PARTITIONS,
    DEFAULT_REPLICATION_FACTOR,
    DescribedConfig,
    default_text,
    topic_config,
)
from services.gateway.kafka.messages import build, kafka_error, milliseconds, topic_uuid
from services.gateway.kafka.replies import NO_THROTTLE, ask, module_of
from strand.errors import ErrorCode
from strand.log.config import TOPIC_CONFIG
from strand.security.acl import CLUSTER_RESOURCE_NAME, Operation, ResourceType
from strand.v1 import common_pb2 as pb

__all__ = ["HANDLERS", "VERSIONS", "Refusal", "await_visible", "config_entries", "creatable",
           "created_configs"]

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS, DESCRIBE_CLUSTER = 19, 20, 37, 60
BROKERS_ENDPOINT = 1  # DescribeCluster's endpoint_type: brokers (2: controllers)
NO_OPERATIONS = -(2**31)
# How long a topic change waits at most to be visible in this gateway's metadata (as
# Kafka's brokers answer once the change has reached them, within the request's
# timeout), so the client's next Metadata sees it.
VISIBLE_WAIT_S = 10.0  # Kafka's "authorized operations not asked for"
# Kafka's AclOperation codes of the cluster's operations (KIP-430's bit field).
_CLUSTER_OPERATIONS = {Operation.CREATE: 5, Operation.ALTER: 7, Operation.DESCRIBE: 8,
                       Operation.CLUSTER_ACTION: 9, Operation.DESCRIBE_CONFIGS: 10,
                       Operation.ALTER_CONFIGS: 11, Operation.IDEMPOTENT_WRITE: 12}


@dataclass(frozen=True, slots=True)
class Refusal:
    """A topic answered here, before the servicer: Kafka's code and why."""

    code: ErrorCode
    message: str


async def await_visible(call: KafkaCall, request_timeout: datetime.timedelta,
                        check: Callable[[], bool]) -> bool:
    """Wait until ``check()`` holds of this gateway's metadata cache, up to the
    request's timeout (none: 0 or less) and :data:`VISIBLE_WAIT_S`."""
    cache = call.servicer.cache
    loop = asyncio.get_running_loop()
    deadline = loop.time() + min(request_timeout.total_seconds(), VISIBLE_WAIT_S)
    while not check():
        remaining = deadline - loop.time()
        if remaining <= 0:
            return False
        await cache.wait_changed(min(remaining, 0.5))
    return True


def _twice(names: Sequence[str]) -> set[str]:
    return {name for name in names if names.count(name) > 1}


def _twice_refusal(name: str, what: str) -> Refusal:
    return Refusal(ErrorCode.INVALID_REQUEST,
                   f"topic {name!r} appears more than once in this {what} request: "
                   "name each topic once")


def _results_by_name(answer: Any) -> dict[str, pb.TopicResult]:
    return {result.name: result for result in answer.topics}


def _refused_all(names: Sequence[str], response: Callable[..., Any]
                 ) -> Callable[[CallRefused], Any]:
    return lambda exc: response(topics=[pb.TopicResult(
        name=name, error_code=exc.code.name, error_message=exc.message) for name in names])


# -- CreateTopics ------------------------------------------------------------------------------

def creatable(topic: Any) -> pb.CreatableTopic | Refusal:
    """The servicer's topic of a Kafka CreatableTopic, or why Kafka refuses it."""
    if topic.assignments and (topic.num_partitions != -1 or topic.replication_factor != -1):
        return Refusal(ErrorCode.INVALID_REQUEST, (
            f"topic {topic.name!r}: both replica assignments and num_partitions/"
            "replication_factor were given; with assignments set both counts to -1"))
    nulls = [config.name for config in topic.configs if config.value is None]
    if nulls:
        return Refusal(ErrorCode.INVALID_CONFIG, (
            f"topic {topic.name!r}: null values for configs {', '.join(nulls)}: give a "
            "value or leave the config out"))
    partitions = DEFAULT_NUM_PARTITIONS if topic.num_partitions == -1 else topic.num_partitions
    factor = (DEFAULT_REPLICATION_FACTOR if topic.replication_factor == -1
              else topic.replication_factor)
    if topic.assignments:
        partitions = factor = 0  # the assignment decides both
    return pb.CreatableTopic(
        name=topic.name, num_partitions=partitions, replication_factor=factor,
        configs={config.name: config.value for config in topic.configs},
        assignments=[pb.ReplicaAssignment(partition=a.partition_index,
                                          replicas=list(a.broker_ids))
                     for a in topic.assignments])


def created_configs(configs: dict[str, str]) -> list[DescribedConfig]:
    """The configs a topic created with ``configs`` has (CreateTopics v5+ answers them)."""
    return [topic_config(name, configs[name], False) if name in configs
            else topic_config(name, default_text(key), True)
            for name, key in sorted(TOPIC_CONFIG.items())]


async def create_topics(request: Any, call: KafkaCall) -> Any:
    twice = _twice([topic.name for topic in request.topics])
    planned: dict[str, pb.CreatableTopic | Refusal] = {
        topic.name: (_twice_refusal(topic.name, "CreateTopics") if topic.name in twice
                     else creatable(topic)) for topic in request.topics}
    sent = [topic for topic in planned.values() if isinstance(topic, pb.CreatableTopic)]
    answered: dict[str, pb.TopicResult] = {}
    if sent:
        answered = _results_by_name(await ask(
            call.servicer.CreateTopics, pb.CreateTopicsRequest(
                topics=sent, timeout_ms=milliseconds(request.timeout),
                validate_only=request.validate_only), call,
            _refused_all([t.name for t in sent], pb.CreateTopicsResponse)))
    created = [name for name, result in answered.items() if not result.error_code]
    if created and not request.validate_only:
        await await_visible(call, request.timeout,
                            lambda: all(name in call.servicer.cache.topics for name in created))
    module = module_of(request)
    results = []
    for name, plan in planned.items():
        if isinstance(plan, Refusal):
            results.append(_created(module, name, plan.code, plan.message, None, call))
            continue
        result = answered.get(name)
        if result is None:
            results.append(_created(module, name, ErrorCode.UNKNOWN_SERVER_ERROR,
                                    "no answer for the topic", None, call))
            continue
        results.append(_created(module, name, result.error_code,
                                result.error_message or None, (plan, result), call))
    return build(module, "CreateTopicsResponse", throttle_time=NO_THROTTLE,
                 topics=tuple(results))


def _created(module: ModuleType, name: str, code: int, message: str | None,
             done: tuple[pb.CreatableTopic, pb.TopicResult] | None, call: KafkaCall) -> Any:
    """One topic's CreatableTopicResult; v5+ carries the new topic's counts and configs
    (when the caller may describe its configs, as Kafka's)."""
    values: dict[str, Any] = {"name": name, "error_code": kafka_error(code),
                              "error_message": message, "topic_id": topic_uuid(""),
                              "num_partitions": -1, "replication_factor": -1,
                              "configs": None}
    if done is not None and code == ErrorCode.NONE:
        topic, result = done
        values["topic_id"] = topic_uuid(result.topic_id)
        values["num_partitions"] = len(topic.assignments) or topic.num_partitions
        values["replication_factor"] = (len(topic.assignments[0].replicas) if topic.assignments
                                        else topic.replication_factor)
        refused = call.servicer.access.refusal(Operation.DESCRIBE_CONFIGS,
                                               ResourceType.TOPIC, name)
        if refused is not None:
            values["topic_config_error_code"] = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        else:
            values["configs"] = config_entries(module, dict(topic.configs))
    return build(module, "CreatableTopicResult", **values)


def config_entries(module: ModuleType, configs: dict[str, str]) -> tuple[Any, ...] | None:
    """A created topic's configs as ``module``'s CreatableTopicConfigs (None: the
    version, below 5, has none)."""
    if not hasattr(module, "CreatableTopicConfigs"):
        return None
    return tuple(build(module, "CreatableTopicConfigs", name=c.name, value=c.value,
                       read_only=c.read_only, config_source=int(c.source),
                       is_sensitive=c.sensitive) for c in created_configs(configs))


# -- DeleteTopics ------------------------------------------------------------------------------

def _names_to_delete(request: Any, call: KafkaCall) -> list[tuple[str, Any, Refusal | None]]:
    """(name, topic id, refusal) per topic of the request: v6 names topics by name or by
    id (resolved here from the metadata cache), earlier versions by name."""
    if hasattr(request, "topic_names"):
        return [(name, None, None) for name in request.topic_names]
    by_id = {record.topic_id: name for name, record in call.servicer.cache.topics.items()}
    out: list[tuple[str, Any, Refusal | None]] = []
    for state in request.topics:
        given_id = state.topic_id if state.topic_id is not None and state.topic_id.int else None
        if state.name is not None and given_id is not None:
            out.append((state.name, given_id, Refusal(
                ErrorCode.INVALID_REQUEST, "name a topic by its name or by its id, not both")))
        elif state.name is not None:
            out.append((state.name, None, None))
        elif given_id is None:
            out.append(("", None, Refusal(ErrorCode.INVALID_REQUEST,
                                          "a topic to delete needs a name or an id")))
        elif str(given_id) not in by_id:
            out.append(("", given_id, Refusal(ErrorCode.UNKNOWN_TOPIC_ID,
                                              f"no topic has the id {given_id}")))
        else:
            out.append((by_id[str(given_id)], given_id, None))
    return out


async def delete_topics(request: Any, call: KafkaCall) -> Any:
    entries = _names_to_delete(request, call)
    twice = _twice([name for name, _, refusal in entries if refusal is None])
    entries = [(name, topic_id, _twice_refusal(name, "DeleteTopics") if name in twice
                else refusal) for name, topic_id, refusal in entries]
    sent = [name for name, _, refusal in entries if refusal is None]
    known = {name: record.topic_id for name, record in call.servicer.cache.topics.items()
             if name in sent}
    answered: dict[str, pb.TopicResult] = {}
    if sent:
        answered = _results_by_name(await ask(
            call.servicer.DeleteTopics, pb.DeleteTopicsRequest(
                topics=sent, timeout_ms=milliseconds(request.timeout)), call,
            _refused_all(sent, pb.DeleteTopicsResponse)))
    deleted = [name for name, result in answered.items() if not result.error_code]
    if deleted:
        await await_visible(call, request.timeout,
                            lambda: not any(name in call.servicer.cache.topics
                                            for name in deleted))
    module = module_of(request)
    # From v6 a topic may be named by id: its result's name is then null. Before, the
    # name is not nullable, and a topic named "" (refused) is answered under "".
    by_id = not hasattr(request, "topic_names")
    results = []
    for name, topic_id, refusal in entries:
        if refusal is not None:
            code, message = int(refusal.code), refusal.message
        elif name in answered:
            code, message = answered[name].error_code, answered[name].error_message
        else:
            code, message = int(ErrorCode.UNKNOWN_SERVER_ERROR), "no answer for the topic"
        results.append(build(
            module, "DeletableTopicResult", name=(name or None) if by_id else name,
            topic_id=topic_id or topic_uuid(known.get(name, "")), error_code=kafka_error(code),
            error_message=message or None))
    return build(module, "DeleteTopicsResponse", throttle_time=NO_THROTTLE,
                 responses=tuple(results))


# -- CreatePartitions --------------------------------------------------------------------------

async def create_partitions(request: Any, call: KafkaCall) -> Any:
    twice = _twice([topic.name for topic in request.topics])
    sent = [pb.CreatePartitionsRequest.Topic(
        name=topic.name, count=topic.count,
        assignments=[pb.CreatePartitionsRequest.Assignment(replicas=list(a.broker_ids))
                     for a in topic.assignments or ()])
        for topic in request.topics if topic.name not in twice]
    answered: dict[str, pb.TopicResult] = {}
    if sent:
        answered = _results_by_name(await ask(
            call.servicer.CreatePartitions, pb.CreatePartitionsRequest(
                topics=sent, timeout_ms=milliseconds(request.timeout),
                validate_only=request.validate_only), call,
            _refused_all([t.name for t in sent], pb.CreatePartitionsResponse)))
    counts = {t.name: t.count for t in sent
              if t.name in answered and not answered[t.name].error_code}
    if counts and not request.validate_only:
        await await_visible(call, request.timeout, lambda: all(
            name in call.servicer.cache.topics
            and call.servicer.cache.topics[name].partitions >= count
            for name, count in counts.items()))
    module = module_of(request)
    results = []
    for topic in request.topics:
        if topic.name in twice:
            refusal = _twice_refusal(topic.name, "CreatePartitions")
            code, message = int(refusal.code), refusal.message
        elif topic.name in answered:
            result = answered[topic.name]
            code, message = result.error_code, result.error_message
        else:
            code, message = int(ErrorCode.UNKNOWN_SERVER_ERROR), "no answer for the topic"
        results.append(build(module, "CreatePartitionsTopicResult", name=topic.name,
                             error_code=kafka_error(code), error_message=message or None))
    return build(module, "CreatePartitionsResponse", throttle_time=NO_THROTTLE,
                 results=tuple(results))


# -- DescribeCluster ---------------------------------------------------------------------------

def cluster_operations(call: KafkaCall) -> int:
    """KIP-430's bit field of the cluster operations the caller may perform."""
    access = call.servicer.access
    bits = 0
    for operation, code in _CLUSTER_OPERATIONS.items():
        if access.allowed(operation, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME):
            bits |= 1 << code
    return bits


async def describe_cluster(request: Any, call: KafkaCall) -> Any:
    module = module_of(request)
    endpoint = getattr(request, "endpoint_type", BROKERS_ENDPOINT)
    values: dict[str, Any] = {"throttle_time": NO_THROTTLE, "endpoint_type": endpoint,
                              "cluster_id": call.servicer.cache.keys.prefix.strip("/")}
    if endpoint != BROKERS_ENDPOINT:
        return build(module, "DescribeClusterResponse", **values,
                     error_code=kafka_error(ErrorCode.INVALID_REQUEST),
                     error_message=(f"endpoint type {endpoint} is not served: Strand's "
                                    f"gateways answer for brokers ({BROKERS_ENDPOINT}) only"),
                     controller_id=-1, brokers=())
    broker = build(module, "DescribeClusterBroker", broker_id=call.broker_id,
                   host=call.advertised_host, port=call.advertised_port, rack=None,
                   is_fenced=False)
    operations = (cluster_operations(call) if request.include_cluster_authorized_operations
                  else NO_OPERATIONS)
    return build(module, "DescribeClusterResponse", **values,
                 error_code=kafka_error(ErrorCode.NONE), error_message=None,
                 controller_id=call.broker_id, brokers=(broker,),
                 cluster_authorized_operations=operations)


HANDLERS: dict[int, Handler] = {
    CREATE_TOPICS: create_topics,
    DELETE_TOPICS: delete_topics,
    CREATE_PARTITIONS: create_partitions,
    DESCRIBE_CLUSTER: describe_cluster,
}
VERSIONS: dict[int, tuple[int, int]] = {
    CREATE_TOPICS: (2, 7),
    DELETE_TOPICS: (1, 6),
    CREATE_PARTITIONS: (0, 3),
    DESCRIBE_CLUSTER: (0, 2),
}
