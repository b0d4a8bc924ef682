"""The kopf side of the operator: which Topics it watches, the handlers that run a
reconciliation (reconciler.py) on every change and on a timer, the finalizer's
deletion, and kopf's settings; the StrandUsers' handlers (user_handlers.py) join the
same registry. Everything else is plain code without kopf."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import kopf

from strand.errors import StrandError
from strand_operator.config import OperatorConfig
from strand_operator.conflicts import Claim
from strand_operator.reconciler import TopicEvent, TopicResource, delete_topic, reconcile
from strand_operator.strand_gateway import StrandGateway
from strand_operator.topic_spec import (
    CLUSTER_LABEL,
    GROUP,
    PLURAL,
    VERSION,
    is_managed,
    is_paused,
    topic_name,
)
from strand_operator.user_handlers import register_user_handlers

__all__ = ["FINALIZER", "build_registry", "operator_settings"]

# kopf's finalizer and annotations are per operator, so StrandUsers carry them too
# (the names predate StrandUsers; renaming them would strand existing Topics).
FINALIZER = "strand.io/topic-operator"
# kopf's own bookkeeping goes into annotations with this prefix: the CRDs' status
# schemas are structural and would prune anything kopf wrote there.
KOPF_PREFIX = "topics.strand.io"
RESOURCE = (GROUP, VERSION, PLURAL)


def operator_settings(config: OperatorConfig) -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    settings.peering.standalone = True
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=KOPF_PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=KOPF_PREFIX, key="last-handled-configuration")
    settings.posting.level = logging.INFO
    # A failed deletion is retried this often (kopf's default is a minute).
    settings.execution.default_backoff = retry_delay(config)
    return settings


def _resource(name: str, namespace: str | None, spec: Mapping[str, Any],
              meta: Mapping[str, Any], status: Mapping[str, Any]) -> TopicResource:
    generation = meta.get("generation")
    return TopicResource(namespace=namespace or "", name=name, spec=dict(spec),
                         annotations=dict(meta.get("annotations") or {}),
                         status=dict(status),
                         generation=generation if isinstance(generation, int) else None)


def _record(body: kopf.Body, events: list[TopicEvent]) -> None:
    for event in events:
        kopf.event(body, type=event.type, reason=event.reason, message=event.message)


def _claims(kwargs: Mapping[str, Any], topic: str) -> list[Claim]:
    """The claims on ``topic`` from the index kopf passes as ``topic_claims``."""
    index: kopf.Index[str, Claim] = kwargs["topic_claims"]
    return list(index.get(topic, []))


def build_registry(config: OperatorConfig, gateway: StrandGateway) -> kopf.OperatorRegistry:
    """A registry with the operator's handlers for the Topics and StrandUsers of
    ``config.cluster``."""
    registry = kopf.OperatorRegistry()
    labels = {CLUSTER_LABEL: config.cluster}
    # Change handlers and the drift timer of one Topic must not interleave.
    # Both by uid: a Topic deleted and created again under its name is another object.
    locks: dict[str, asyncio.Lock] = {}
    # The status each Topic was last given: the body a handler sees may predate it
    # (the patch comes back through the watch a moment later).
    written: dict[str, dict[str, Any]] = {}

    @kopf.index(*RESOURCE, registry=registry, labels=labels, id="topic_claims")
    def topic_claims(name: str, namespace: str | None, spec: kopf.Spec, meta: kopf.Meta,
                     annotations: kopf.Annotations, **_: Any) -> dict[str, Claim] | None:
        """Which Strand topic each managed Topic names, for conflicts between them."""
        if not is_managed(annotations):
            return None
        topic = topic_name(name, spec)
        created = meta.get("creationTimestamp") or ""
        return {topic: Claim(str(created), namespace or "", name, topic)}

    async def reconcile_topic(body: kopf.Body, name: str, namespace: str | None,
                              spec: kopf.Spec, meta: kopf.Meta, status: kopf.Status,
                              patch: kopf.Patch, uid: str, **kwargs: Any) -> None:
        key = uid
        async with locks.setdefault(key, asyncio.Lock()):
            # Read inside the lock: a timer's body is live, so a pass that waited sees
            # what the pass before it saw and did.
            last = written.get(key, {})
            resource = _resource(name, namespace, spec, meta, {**status, **last})
            done = last.get("observedGeneration")
            if (resource.generation is not None and isinstance(done, int)
                    and resource.generation < done):
                return  # an older spec than the one already reconciled
            outcome = await reconcile(resource, gateway, _claims(kwargs, resource.topic))
            written[key] = {**last, **outcome.status}
        patch.status.update(outcome.status)
        _record(body, outcome.events)

    def managed(annotations: kopf.Annotations, **_: Any) -> bool:
        return is_managed(annotations)

    def deletes_topic(annotations: kopf.Annotations, **_: Any) -> bool:
        return is_managed(annotations) and not is_paused(annotations)

    for when, decorate in (("resume", kopf.on.resume), ("create", kopf.on.create),
                           ("update", kopf.on.update)):
        decorate(*RESOURCE, registry=registry, labels=labels,
                 id=f"reconcile-on-{when}")(reconcile_topic)
    # Timers, like deletion handlers, make kopf hold its finalizer on the Topics they
    # match: so neither matches an unmanaged Topic, and kopf drops the finalizer there.
    kopf.timer(*RESOURCE, registry=registry, labels=labels, when=managed, id="drift-check",
               interval=config.resync_interval,
               initial_delay=config.resync_interval)(reconcile_topic)

    @kopf.on.delete(*RESOURCE, registry=registry, labels=labels, when=deletes_topic,
                    id="delete-topic")
    async def delete(body: kopf.Body, name: str, namespace: str | None, spec: kopf.Spec,
                     meta: kopf.Meta, status: kopf.Status, uid: str, **kwargs: Any) -> None:
        resource = _resource(name, namespace, spec, meta, status)
        async with locks.setdefault(uid, asyncio.Lock()):
            try:
                events = await delete_topic(resource, gateway,
                                            _claims(kwargs, resource.topic))
            except StrandError as exc:
                kopf.warn(body, reason="ClusterError",
                          message=f"cannot delete topic {resource.topic!r}: {exc}")
                raise kopf.TemporaryError(f"cannot delete topic {resource.topic!r}: {exc}",
                                          delay=retry_delay(config)) from exc
        locks.pop(uid, None)
        written.pop(uid, None)
        _record(body, events)

    @kopf.on.event(*RESOURCE, registry=registry, labels=labels, id="forget-deleted")
    def forget(type: str | None, uid: str, **_: Any) -> None:
        """Drop what is kept about a Topic once it is gone (with or without finalizer)."""
        if type == "DELETED":
            locks.pop(uid, None)
            written.pop(uid, None)

    register_user_handlers(registry, config, gateway, operator_settings(config),
                           retry_delay(config))

    @kopf.on.cleanup(registry=registry)
    def close(**_: Any) -> None:
        gateway.close()

    return registry


def retry_delay(config: OperatorConfig) -> float:
    """How soon a failed deletion is retried."""
    return min(config.resync_interval, 10.0)
