"""The kopf side of StrandUsers: which ones the operator watches, the handlers that
run a reconciliation (user_reconciler.py) on every change and on a timer, and the
finalizer's deletion. A spec that cannot be carried out is reported in the status
and, from the change handlers, as kopf's permanent error (retrying cannot help; the
next edit of the spec is handled afresh)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import kopf

from strand.errors import StrandError
from strand_operator.config import OperatorConfig
from strand_operator.conflicts import UserClaim
from strand_operator.kube_secrets import KubeSecrets
from strand_operator.strand_gateway import StrandGateway
from strand_operator.topic_spec import CLUSTER_LABEL
from strand_operator.user_reconciler import (
    UserEvent,
    UserOutcome,
    UserResource,
    delete_user,
    reconcile_user,
)
from strand_operator.user_secret import SecretStoreError
from strand_operator.user_spec import GROUP, PLURAL, VERSION

__all__ = ["register_user_handlers"]

RESOURCE = (GROUP, VERSION, PLURAL)


def _resource(name: str, namespace: str | None, uid: str, spec: Mapping[str, Any],
              meta: Mapping[str, Any], status: Mapping[str, Any]) -> UserResource:
    generation = meta.get("generation")
    labels = meta.get("labels") or {}
    return UserResource(namespace=namespace or "", name=name, uid=uid,
                        cluster=str(labels.get(CLUSTER_LABEL, "")), spec=dict(spec),
                        status=dict(status),
                        generation=generation if isinstance(generation, int) else None)


def _record(body: kopf.Body, events: list[UserEvent]) -> None:
    for event in events:
        kopf.event(body, type=event.type, reason=event.reason, message=event.message)


def _claims(kwargs: Mapping[str, Any], user: str) -> list[UserClaim]:
    index: kopf.Index[str, UserClaim] = kwargs["user_claims"]
    return list(index.get(user, []))


def register_user_handlers(registry: kopf.OperatorRegistry, config: OperatorConfig,
                           gateway: StrandGateway, settings: kopf.OperatorSettings,
                           retry_delay: float) -> None:
    """Add the StrandUser handlers for ``config.cluster`` to ``registry``."""
    labels = {CLUSTER_LABEL: config.cluster}
    secrets = KubeSecrets(settings)
    reserved = {config.user} if config.user else set()  # the operator's own user
    # As for Topics: one pass at a time per StrandUser (by uid), and the status each
    # was last given (the body a handler sees may predate it).
    locks: dict[str, asyncio.Lock] = {}
    written: dict[str, dict[str, Any]] = {}

    @kopf.index(*RESOURCE, registry=registry, labels=labels, id="user_claims")
    def user_claims(name: str, namespace: str | None, meta: kopf.Meta,
                    **_: Any) -> dict[str, UserClaim]:
        """Which Strand user each StrandUser names, for conflicts between namespaces."""
        created = str(meta.get("creationTimestamp") or "")
        return {name: UserClaim(created, namespace or "", name, name)}

    async def reconcile(name: str, namespace: str | None, spec: kopf.Spec, meta: kopf.Meta,
                        status: kopf.Status, uid: str, kwargs: Mapping[str, Any]
                        ) -> UserOutcome | None:
        async with locks.setdefault(uid, asyncio.Lock()):
            last = written.get(uid, {})
            resource = _resource(name, namespace, uid, spec, meta, {**status, **last})
            done = last.get("observedGeneration")
            if (resource.generation is not None and isinstance(done, int)
                    and resource.generation < done):
                return None  # an older spec than the one already reconciled
            outcome = await reconcile_user(resource, gateway, secrets,
                                           _claims(kwargs, name), reserved)
            written[uid] = {**last, **outcome.status}
        return outcome

    async def on_change(body: kopf.Body, name: str, namespace: str | None, spec: kopf.Spec,
                        meta: kopf.Meta, status: kopf.Status, patch: kopf.Patch, uid: str,
                        **kwargs: Any) -> None:
        outcome = await reconcile(name, namespace, spec, meta, status, uid, kwargs)
        if outcome is None:
            return
        patch.status.update(outcome.status)
        _record(body, outcome.events)
        if outcome.invalid:
            (condition,) = outcome.status["conditions"]
            raise kopf.PermanentError(f"{condition['reason']}: {condition['message']}")

    async def on_timer(body: kopf.Body, name: str, namespace: str | None, spec: kopf.Spec,
                       meta: kopf.Meta, status: kopf.Status, patch: kopf.Patch, uid: str,
                       **kwargs: Any) -> None:
        outcome = await reconcile(name, namespace, spec, meta, status, uid, kwargs)
        if outcome is not None:
            patch.status.update(outcome.status)
            _record(body, outcome.events)

    for when, decorate in (("resume", kopf.on.resume), ("create", kopf.on.create),
                           ("update", kopf.on.update)):
        decorate(*RESOURCE, registry=registry, labels=labels,
                 id=f"reconcile-user-on-{when}")(on_change)
    kopf.timer(*RESOURCE, registry=registry, labels=labels, id="user-drift-check",
               interval=config.resync_interval,
               initial_delay=config.resync_interval)(on_timer)

    @kopf.on.delete(*RESOURCE, registry=registry, labels=labels, id="delete-user")
    async def delete(body: kopf.Body, name: str, namespace: str | None, spec: kopf.Spec,
                     meta: kopf.Meta, status: kopf.Status, uid: str, **kwargs: Any) -> None:
        resource = _resource(name, namespace, uid, spec, meta, status)
        async with locks.setdefault(uid, asyncio.Lock()):
            try:
                events = await delete_user(resource, gateway, secrets, _claims(kwargs, name),
                                           reserved)
            except (StrandError, SecretStoreError) as exc:
                message = f"cannot delete user {name!r}: {exc}"
                kopf.warn(body, reason="ClusterError", message=message)
                raise kopf.TemporaryError(message, delay=retry_delay) from exc
        locks.pop(uid, None)
        written.pop(uid, None)
        _record(body, events)

    @kopf.on.event(*RESOURCE, registry=registry, labels=labels, id="forget-deleted-user")
    def forget(type: str | None, uid: str, **_: Any) -> None:
        if type == "DELETED":
            locks.pop(uid, None)
            written.pop(uid, None)
