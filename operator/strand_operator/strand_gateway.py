"""Strand as the operator reaches it: the SDK's Admin, its blocking calls run off the
event loop (kopf's handlers are coroutines sharing one loop). Topics; and for
StrandUsers, SCRAM credentials, ACLs and client quotas (which need a super user when
the cluster enforces ACLs)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from strand.admin import Admin, NewTopic
from strand.cluster.placement import Broker
from strand.errors import ResourceNotFoundError, UnknownTopicOrPartitionError
from strand.security.acl import AclBinding, AclBindingFilter
from strand.security.quota_fields import FilterComponent
from strand.security.quotas import USER, QuotaEntity
from strand.security.settings import ClientTlsSettings
from strand_operator.observed import ObservedTopic

__all__ = ["StrandGateway"]

T = TypeVar("T")


class StrandGateway:
    """Async admin calls to one Strand cluster through its gateway(s)."""

    def __init__(self, bootstrap: str, request_timeout_s: float = 30.0,
                 tls: ClientTlsSettings | None = None) -> None:
        self.bootstrap = bootstrap
        self._timeout_ms = request_timeout_s * 1000
        self._tls = tls or ClientTlsSettings()
        self._admin: Admin | None = None

    def _client(self) -> Admin:
        if self._admin is None:  # opened lazily: the operator starts before Strand may
            self._admin = Admin(self.bootstrap, request_timeout_ms=self._timeout_ms,
                                client_id="strand-topic-operator", **self._tls)
        return self._admin

    async def _run(self, call: Callable[[Admin], T]) -> T:
        return await asyncio.to_thread(lambda: call(self._client()))

    async def brokers(self) -> list[Broker]:
        """The live storage nodes with their racks, as placement takes them."""
        cluster = await self._run(Admin.describe_cluster)
        return [Broker(b.node_id, b.rack) for b in cluster.brokers]

    async def observe(self, name: str) -> ObservedTopic | None:
        """The topic as Strand has it, or None when it does not exist."""
        return await self._run(functools.partial(_observe, name=name))

    async def create(self, name: str, assignment: Mapping[int, Sequence[int]],
                     config: Mapping[str, str]) -> None:
        topic = NewTopic(name, config=dict(config), replica_assignment=assignment)
        await self._run(lambda admin: admin.create_topics([topic]))

    async def alter_configs(self, name: str, set_: Mapping[str, str],
                            delete: Sequence[str]) -> None:
        await self._run(lambda admin: admin.alter_configs(name, set=set_, delete=delete))

    async def add_partitions(self, name: str, total: int,
                             assignments: Sequence[Sequence[int]]) -> None:
        await self._run(lambda admin: admin.create_partitions(name, total,
                                                              assignments=assignments))

    async def reassign(self, name: str, targets: Mapping[int, Sequence[int]]) -> None:
        await self._run(lambda admin: admin.alter_partition_reassignments(
            {(name, p): list(r) for p, r in targets.items()}))

    async def delete(self, name: str) -> bool:
        """Delete the topic; False when it did not exist."""
        try:
            await self._run(lambda admin: admin.delete_topics([name]))
        except UnknownTopicOrPartitionError:
            return False
        return True

    # ---------------------------------------------------------------- users

    async def scram_user_exists(self, name: str) -> bool:
        try:
            users = await self._run(lambda admin: admin.describe_scram_users([name]))
        except ResourceNotFoundError:
            return False
        return any(user.name == name for user in users)

    async def upsert_scram_user(self, name: str, password: str) -> None:
        """Create the credential or change its password (the user's sessions end)."""
        await self._run(lambda admin: admin.upsert_scram_user(name, password))

    async def delete_scram_user(self, name: str) -> bool:
        """Remove the credential; False when there was none."""
        try:
            await self._run(lambda admin: admin.delete_scram_user(name))
        except ResourceNotFoundError:
            return False
        return True

    async def acls_of(self, principal: str) -> list[AclBinding]:
        """Every binding whose entry is exactly ``principal`` (not ``User:*``)."""
        return await self._run(lambda admin: admin.describe_acls(
            AclBindingFilter(principal=principal)))

    async def create_acls(self, bindings: Sequence[AclBinding]) -> None:
        await self._run(lambda admin: admin.create_acls(bindings))

    async def delete_acls(self, bindings: Sequence[AclBinding]) -> None:
        """Delete exactly these bindings: one filter naming every field of each."""
        filters = [AclBindingFilter(
            b.pattern.resource_type, b.pattern.name, b.pattern.pattern_type,
            b.entry.principal, b.entry.host, b.entry.operation, b.entry.permission)
            for b in bindings]
        await self._run(lambda admin: admin.delete_acls(filters))

    async def user_quotas(self, name: str) -> dict[str, float]:
        """The quotas set on user ``name`` alone (not with a client id)."""
        entity = QuotaEntity(user=name)
        found = await self._run(lambda admin: admin.describe_client_quotas(
            [FilterComponent(USER, "EXACT", name)], strict=True))
        return next((dict(values) for e, values in found if e == entity), {})

    async def alter_user_quotas(self, name: str, set_: Mapping[str, float],
                                remove: Sequence[str]) -> None:
        await self._run(lambda admin: admin.alter_client_quotas(
            QuotaEntity(user=name), set=dict(set_), remove=remove))

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None


def _observe(admin: Admin, name: str) -> ObservedTopic | None:
    try:
        (description,) = admin.describe_topics([name])
        configs = admin.describe_configs(name)
    except UnknownTopicOrPartitionError:
        return None
    moving = {r.partition: r for r in admin.list_partition_reassignments([name])
              if r.topic == name}
    assignment: dict[int, tuple[int, ...]] = {}
    for partition in description.partitions:
        replicas = partition.replicas
        if partition.partition in moving:
            replicas = tuple(r for r in replicas
                             if r not in moving[partition.partition].removing)
        assignment[partition.partition] = replicas
    return ObservedTopic(
        name=name, topic_id=description.topic_id, assignment=assignment,
        leaders={p.partition: p.leader for p in description.partitions},
        config={k: v.value for k, v in configs.items() if not v.is_default},
        reassigning=frozenset(moving))
