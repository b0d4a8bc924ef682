"""Kafka's config APIs on the gateway's Kafka listener: DescribeConfigs, AlterConfigs
(legacy, whole-set) and IncrementalAlterConfigs.

Topics are described and altered through the gateway servicer's own DescribeConfigs
and AlterConfigs (ACLs, validation by the controller apply unchanged); the broker
resource is this gateway's one logical broker and is read-only (Strand's configs are
per topic: :mod:`services.gateway.kafka.config_entries`). Other resource types (groups,
broker loggers, client metrics) are answered INVALID_REQUEST, naming what is served.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from services.gateway.kafka.call import CallRefused, Handler, KafkaCall
from services.gateway.kafka.config_entries import (
    ConfigSource,
    DescribedConfig,
    ResourceKind,
    alteration,
    broker_configs,
    selected,
    topic_config,
)
from services.gateway.kafka.messages import build, kafka_error
from services.gateway.kafka.replies import NO_THROTTLE, ask, module_of
from strand.errors import ErrorCode, StrandError
from strand.security.acl import CLUSTER_RESOURCE_NAME, Operation, ResourceType
from strand.v1 import common_pb2 as pb

__all__ = ["HANDLERS", "VERSIONS"]

DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 44

Op = pb.AlterConfigsRequest.Op


@dataclass(frozen=True, slots=True)
class Outcome:
    """One resource's answer: its error (NONE: fine) and, when described, its configs."""

    code: int = ErrorCode.NONE  # Kafka's code (Strand's are the same numbers)
    message: str | None = None
    configs: tuple[DescribedConfig, ...] = ()


def _unserved(resource_type: int) -> Outcome:
    return Outcome(ErrorCode.INVALID_REQUEST, (
        f"resource type {resource_type} is not served by Strand: topics "
        f"({int(ResourceKind.TOPIC)}) and the broker ({int(ResourceKind.BROKER)}) are"))


def _broker_refusal(name: str, call: KafkaCall, operation: Operation) -> Outcome | None:
    """Why the broker resource ``name`` is refused (None: it may be described)."""
    if name not in ("", str(call.broker_id)):
        return Outcome(ErrorCode.INVALID_REQUEST, (
            f"broker {name!r} is not this broker: Kafka clients see one broker, id "
            f"{call.broker_id} (or name '' for the cluster-wide defaults)"))
    refused = call.servicer.access.refusal(operation, ResourceType.CLUSTER,
                                           CLUSTER_RESOURCE_NAME)
    if refused is not None:
        return Outcome(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, str(refused))
    return None


async def _topic_configs(names: Iterable[str], call: KafkaCall
                         ) -> dict[str, pb.DescribeConfigsResponse.Topic]:
    """The servicer's DescribeConfigs answer per topic (a refusal of the whole call
    answers each topic with its code)."""
    unique = list(dict.fromkeys(names))
    if not unique:
        return {}

    def refused(exc: CallRefused) -> pb.DescribeConfigsResponse:
        return pb.DescribeConfigsResponse(topics=[pb.DescribeConfigsResponse.Topic(
            name=name, error_code=exc.code.name, error_message=exc.message)
            for name in unique])

    answer = await ask(call.servicer.DescribeConfigs,
                       pb.DescribeConfigsRequest(topics=unique), call, refused)
    return {topic.name: topic for topic in answer.topics}


def _described(topic: pb.DescribeConfigsResponse.Topic | None, name: str) -> Outcome:
    if topic is None:
        return Outcome(ErrorCode.UNKNOWN_SERVER_ERROR, f"no answer for topic {name!r}")
    if topic.error_code:
        return Outcome(topic.error_code, topic.error_message)
    return Outcome(configs=tuple(topic_config(e.key, e.value, e.is_default)
                                 for e in topic.configs))


def _entry(module: ModuleType, entry: DescribedConfig, synonyms: bool,
           documented: bool) -> Any:
    return build(
        module, "DescribeConfigsResourceResult", name=entry.name, value=entry.value,
        read_only=entry.read_only, config_source=int(entry.source),
        is_sensitive=entry.sensitive, config_type=int(entry.config_type),
        documentation=entry.documentation if documented else None,
        synonyms=tuple(build(module, "DescribeConfigsSynonym", name=s.name, value=s.value,
                             source=int(s.source)) for s in entry.synonyms) if synonyms else ())


# -- DescribeConfigs ---------------------------------------------------------------------------

async def describe_configs(request: Any, call: KafkaCall) -> Any:
    topics = await _topic_configs((r.resource_name for r in request.resources
                                   if r.resource_type == ResourceKind.TOPIC), call)
    module = module_of(request)
    synonyms = bool(getattr(request, "include_synonyms", False))
    documented = bool(getattr(request, "include_documentation", False))
    results = []
    for resource in request.resources:
        if resource.resource_type == ResourceKind.TOPIC:
            outcome = _described(topics.get(resource.resource_name), resource.resource_name)
        elif resource.resource_type == ResourceKind.BROKER:
            outcome = (_broker_refusal(resource.resource_name, call, Operation.DESCRIBE_CONFIGS)
                       or Outcome(configs=tuple(broker_configs())))
        else:
            outcome = _unserved(resource.resource_type)
        entries = tuple(_entry(module, e, synonyms, documented)
                        for e in selected(outcome.configs, resource.configuration_keys))
        results.append(build(
            module, "DescribeConfigsResult", error_code=kafka_error(outcome.code),
            error_message=outcome.message, resource_type=resource.resource_type,
            resource_name=resource.resource_name, configs=entries))
    return build(module, "DescribeConfigsResponse", throttle_time=NO_THROTTLE,
                 results=tuple(results))


# -- AlterConfigs and IncrementalAlterConfigs ---------------------------------------------------

@dataclass(slots=True)
class _Alteration:
    """One resource of an alter request on its way: the ops of a topic, or its answer."""

    resource_type: int
    name: str
    ops: list[Any]
    outcome: Outcome | None = None  # set: answered without the controller


def _non_topic(resource_type: int, name: str, call: KafkaCall) -> Outcome:
    if resource_type == ResourceKind.BROKER:
        refused = _broker_refusal(name, call, Operation.ALTER_CONFIGS)
        return refused or Outcome(ErrorCode.INVALID_REQUEST, (
            "the broker's configs are read-only in Strand: configs are set per topic "
            "(alter the topic resource), the services' settings by their flags"))
    return _unserved(resource_type)


def _duplicates(resources: Sequence[Any]) -> set[tuple[int, str]]:
    seen: set[tuple[int, str]] = set()
    twice: set[tuple[int, str]] = set()
    for resource in resources:
        key = (resource.resource_type, resource.resource_name)
        (twice if key in seen else seen).add(key)
    return twice


def _plan(request: Any, call: KafkaCall) -> list[_Alteration]:
    twice = _duplicates(request.resources)
    plans = []
    for resource in request.resources:
        plan = _Alteration(resource.resource_type, resource.resource_name, [])
        if (resource.resource_type, resource.resource_name) in twice:
            plan.outcome = Outcome(ErrorCode.INVALID_REQUEST, (
                f"resource {resource.resource_name!r} (type {resource.resource_type}) "
                "appears more than once in the request: name it once"))
        elif resource.resource_type != ResourceKind.TOPIC:
            plan.outcome = _non_topic(resource.resource_type, resource.resource_name, call)
        else:
            names = [config.name for config in resource.configs]
            repeated = sorted({n for n in names if names.count(n) > 1})
            if repeated:
                plan.outcome = Outcome(ErrorCode.INVALID_REQUEST, (
                    f"topic {resource.resource_name!r}: configs named more than once: "
                    f"{', '.join(repeated)}"))
        plans.append(plan)
    return plans


async def _apply(plans: list[_Alteration], validate_only: bool, call: KafkaCall) -> None:
    """Send the topics' ops to the servicer; every plan gets its outcome."""
    pending = [plan for plan in plans if plan.outcome is None]
    if not pending:
        return
    alter = pb.AlterConfigsRequest(validate_only=validate_only, topics=[
        pb.AlterConfigsRequest.Topic(name=plan.name, ops=plan.ops) for plan in pending])

    def refused(exc: CallRefused) -> pb.AlterConfigsResponse:
        return pb.AlterConfigsResponse(topics=[pb.TopicResult(
            name=plan.name, error_code=exc.code.name, error_message=exc.message)
            for plan in pending])

    answer = await ask(call.servicer.AlterConfigs, alter, call, refused)
    results = {result.name: result for result in answer.topics}
    for plan in pending:
        result = results.get(plan.name)
        plan.outcome = (Outcome(ErrorCode.UNKNOWN_SERVER_ERROR, "no answer for the topic")
                        if result is None else Outcome(
                            result.error_code, result.error_message or None))


def _altered(request: Any, plans: list[_Alteration]) -> Any:
    module = module_of(request)
    response = ("IncrementalAlterConfigsResponse"
                if hasattr(module, "IncrementalAlterConfigsResponse") else "AlterConfigsResponse")
    results = []
    for plan in plans:
        outcome = plan.outcome or Outcome()
        results.append(build(
            module, "AlterConfigsResourceResponse", error_code=kafka_error(outcome.code),
            error_message=outcome.message, resource_type=plan.resource_type,
            resource_name=plan.name))
    return build(module, response, throttle_time=NO_THROTTLE, responses=tuple(results))


async def alter_configs(request: Any, call: KafkaCall) -> Any:
    """Legacy AlterConfigs: a topic's overrides become exactly the configs given (the
    others return to their defaults)."""
    plans = _plan(request, call)
    current = await _topic_configs((p.name for p in plans if p.outcome is None), call)
    for plan, resource in zip(plans, request.resources, strict=True):
        if plan.outcome is not None:
            continue
        described = _described(current.get(plan.name), plan.name)
        if described.code != ErrorCode.NONE:
            plan.outcome = described
            continue
        nulls = [c.name for c in resource.configs if c.value is None]
        if nulls:
            plan.outcome = Outcome(ErrorCode.INVALID_REQUEST, (
                f"topic {plan.name!r}: null values for {', '.join(nulls)}; AlterConfigs "
                "sets every config given: leave a config out to return it to its default"))
            continue
        given = {c.name for c in resource.configs}
        plan.ops = [Op(key=c.name, value=c.value, kind=Op.SET) for c in resource.configs]
        plan.ops += [Op(key=e.name, kind=Op.DELETE) for e in described.configs
                     if e.name not in given and e.source is ConfigSource.DYNAMIC_TOPIC_CONFIG]
    await _apply(plans, request.validate_only, call)
    return _altered(request, plans)


async def incremental_alter_configs(request: Any, call: KafkaCall) -> Any:
    """SET and DELETE map one to one; APPEND and SUBTRACT (list configs) start from
    the topic's current value."""
    plans = _plan(request, call)
    needs_current = [p.name for p, r in zip(plans, request.resources, strict=True)
                     if p.outcome is None and any(c.config_operation >= 2 for c in r.configs)]
    current = await _topic_configs(needs_current, call)
    for plan, resource in zip(plans, request.resources, strict=True):
        if plan.outcome is not None:
            continue
        values: dict[str, str] = {}
        if plan.name in current:
            described = _described(current[plan.name], plan.name)
            if described.code != ErrorCode.NONE:
                plan.outcome = described
                continue
            values = {e.name: e.value for e in described.configs}
        try:
            for config in resource.configs:
                to_set, value = alteration(config.name, config.config_operation, config.value,
                                           values.get(config.name))
                plan.ops.append(Op(key=config.name, value=value, kind=Op.SET) if to_set
                                else Op(key=config.name, kind=Op.DELETE))
        except StrandError as exc:
            plan.outcome = Outcome(exc.code, f"topic {plan.name!r}: {exc}")
    await _apply(plans, request.validate_only, call)
    return _altered(request, plans)


HANDLERS: dict[int, Handler] = {
    DESCRIBE_CONFIGS: describe_configs,
    ALTER_CONFIGS: alter_configs,
    INCREMENTAL_ALTER_CONFIGS: incremental_alter_configs,
}
VERSIONS: dict[int, tuple[int, int]] = {
    DESCRIBE_CONFIGS: (1, 4),
    ALTER_CONFIGS: (0, 2),
    INCREMENTAL_ALTER_CONFIGS: (0, 1),
}
