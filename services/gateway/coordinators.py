"""Coordinator calls (consumer groups, transactions): forwarded to the coordinator
instance that owns the key's shard (``shards/groups/<k>``, ``shards/txns/<k>`` in
etcd, watched by the gateway's metadata cache). One :class:`ShardRouter` per kind of
coordinator, told its internal topic, its shard owners, its stub and the field of a
request that holds the key (group id, transactional id).

While a shard moves (its owner died, a new instance joined, the successor is still
loading it) the call waits for the metadata to settle and tries again, up to a
deadline; then it is answered COORDINATOR_NOT_AVAILABLE and the client retries.

ListGroups and ListTransactions ask every shard's owner for the entries of that
shard. Shards that are loading or moving are asked again until they answer or the
wait ends; an answer without some shards names them (``unavailable_shards``) and
carries an error, so a listing is never silently incomplete.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import grpc

from strand.cluster.cache import MetadataCache
from strand.cluster.model import CoordinatorRecord
from strand.coordination.owners import key_shard, shard_owner
from strand.coordination.shards import GROUP_TOPIC, TRANSACTION_TOPIC
from strand.errors import ErrorCode
from strand.v1 import common_pb2, groups_pb2_grpc, transactions_pb2_grpc
from strand.v1 import groups_pb2 as pb_groups
from strand.v1 import transactions_pb2 as pb_txn

__all__ = ["CoordinatorKind", "ShardRouter", "peer_host"]

ROUTE_WAIT_S = 15.0
LIST_RETRY_S = 0.25
CALL_TIMEOUT_S = 30.0
# Answers meaning "not here / not yet": look the owner up again.
_MOVING = frozenset(common_pb2.ErrorCode.Value(c.name) for c in (
    ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE))


def peer_host(peer: str) -> str:
    """The host of a gRPC peer (``ipv4:10.0.0.7:5123``, ``ipv6:[::1]:5123``,
    ``unix:/path``), as ``group describe`` shows a member's host."""
    kind, _, address = peer.partition(":")
    if kind in ("ipv4", "ipv6"):
        host = address.rpartition(":")[0]
        return host.strip("[]") or address
    return address or peer


class ChannelSource(Protocol):
    def get(self, address: str) -> grpc.aio.Channel: ...


@dataclass(frozen=True, slots=True)
class CoordinatorKind:
    """What routes one kind of coordinator call."""

    topic: str  # the internal topic whose partitions are the shards
    instances: Callable[[MetadataCache], Mapping[str, CoordinatorRecord]]
    stub: Callable[[grpc.aio.Channel], Any]
    key_field: str  # the request field holding the key hashed to a shard
    empty_key: ErrorCode  # the answer to a request without a key
    what: str  # "group", "transactional id": for messages
    list_method: str  # the List* call of its coordinators
    list_response: type[Any]
    items_field: str  # the repeated field of a List* answer
    item_key: str  # the key field of each listed item


GROUPS = CoordinatorKind(
    GROUP_TOPIC, lambda cache: cache.coordinators,
    groups_pb2_grpc.GroupCoordinatorStub, "group_id", ErrorCode.INVALID_GROUP_ID, "group",
    "ListGroups", pb_groups.ListGroupsResponse,
    "groups", "group_id")
TRANSACTIONS = CoordinatorKind(
    TRANSACTION_TOPIC, lambda cache: cache.txn_coordinators, transactions_pb2_grpc.TransactionsStub,
    "transactional_id", ErrorCode.INVALID_REQUEST, "transactional id",
    "ListTransactions", pb_txn.ListTransactionsResponse, "transactions", "transactional_id")


class ShardRouter:
    def __init__(self, kind: CoordinatorKind, cache: MetadataCache,
                 channels: ChannelSource) -> None:
        self.kind = kind
        self.cache = cache
        self.channels = channels

    @classmethod
    def groups(cls, cache: MetadataCache, channels: ChannelSource) -> ShardRouter:
        return cls(GROUPS, cache, channels)

    @classmethod
    def transactions(cls, cache: MetadataCache, channels: ChannelSource) -> ShardRouter:
        return cls(TRANSACTIONS, cache, channels)

    def _owner(self, key: str) -> CoordinatorRecord | None:
        if not key:
            return None
        return shard_owner(self.cache, self.kind.topic,
                           key_shard(self.cache, self.kind.topic, key))

    def _any_instance(self) -> CoordinatorRecord | None:
        """For a call any instance answers: one at random (spreads the callers; a
        retry after a failure may find another)."""
        instances = list(self.kind.instances(self.cache).values())
        return random.choice(instances) if instances else None

    async def forward(self, method: str, request: Any, response_type: type[Any],
                      timeout_s: float = CALL_TIMEOUT_S, any_instance: bool = False) -> Any:
        """Call ``method`` on the owner of the request's key (any instance of the kind
        with ``any_instance``), looking the owner up again while it moves."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ROUTE_WAIT_S
        key = getattr(request, self.kind.key_field)
        if not key and not any_instance:
            return response_type(
                error_code=common_pb2.ErrorCode.Value(self.kind.empty_key.name),
                error_message=f"the {self.kind.what} must not be empty")
        while True:
            owner = self._any_instance() if any_instance else self._owner(key)
            if owner is None:
                failure = (f"no coordinator serves {self.kind.what} {key!r} right now"
                           if not any_instance else
                           f"no coordinator of {self.kind.topic} is registered right now")
            else:
                stub = self.kind.stub(self.channels.get(owner.address))
                try:
                    response = await getattr(stub, method)(request, timeout=timeout_s)
                except grpc.aio.AioRpcError as exc:
                    failure = f"coordinator {owner.address}: {exc.code().name}"
                else:
                    if response.error_code not in _MOVING:
                        return response
                    failure = response.error_message
            remaining = deadline - loop.time()
            if remaining <= 0:
                return response_type(
                    error_code=common_pb2.ErrorCode.Value("COORDINATOR_NOT_AVAILABLE"),
                    error_message=failure)
            await self.cache.wait_changed(min(remaining, 0.5))

    async def list_all(self, request: Any, wait_s: float | None = None) -> Any:
        """Every entry, asked shard by shard of their owners (``request`` is the
        client's List* request: its filters go to every owner). Shards that are
        loading, moving or whose owner does not answer are asked again as the metadata
        changes, up to ``wait_s``; those still missing then are named in the answer,
        with COORDINATOR_LOAD_IN_PROGRESS (all loading) or COORDINATOR_NOT_AVAILABLE."""
        kind = self.kind
        wait_s = ROUTE_WAIT_S if wait_s is None else wait_s
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        response = kind.list_response()
        topic = self.cache.topics.get(kind.topic)
        if topic is None:
            return response  # no coordinator has ever run: there is nothing to list
        missing: dict[int, str] = dict.fromkeys(range(topic.partitions), "not asked yet")
        seen: set[str] = set()
        unknown: set[str] = set()
        while True:
            by_owner: dict[str, list[int]] = {}
            for shard in missing:
                owner = shard_owner(self.cache, kind.topic, shard)
                if owner is None:
                    missing[shard] = "no coordinator owns it"
                else:
                    by_owner.setdefault(owner.address, []).append(shard)
            answers = await asyncio.gather(*(self._list_shards(address, shards, request)
                                             for address, shards in by_owner.items()))
            for part in answers:
                for shard in part.listed_shards:
                    missing.pop(shard, None)
                for item in getattr(part, kind.items_field):
                    if getattr(item, kind.item_key) not in seen:
                        seen.add(getattr(item, kind.item_key))
                        getattr(response, kind.items_field).append(item)
                unknown.update(getattr(part, "unknown_state_filters", ()))
                for shard in part.unavailable_shards:
                    if shard in missing:
                        missing[shard] = part.error_message
            remaining = deadline - loop.time()
            if not missing or remaining <= 0:
                break
            # A shard's load completes without an etcd change: ask again soon anyway.
            await self.cache.wait_changed(min(remaining, LIST_RETRY_S))
        if unknown:
            response.unknown_state_filters.extend(sorted(unknown))
        if missing:
            loading = all("loading" in why for why in missing.values())
            response.error_code = common_pb2.ErrorCode.Value(
                "COORDINATOR_LOAD_IN_PROGRESS" if loading else "COORDINATOR_NOT_AVAILABLE")
            response.unavailable_shards.extend(sorted(missing))
            response.error_message = (
                f"the list is incomplete: {len(missing)} of {topic.partitions} shards of "
                f"{kind.topic} did not answer within {wait_s:g}s ("
                + "; ".join(f"shard {k}: {why}" for k, why in sorted(missing.items()))
                + "); retry")
        response.listed_shards.extend(k for k in range(topic.partitions) if k not in missing)
        return response

    async def _list_shards(self, address: str, shards: list[int], request: Any) -> Any:
        stub = self.kind.stub(self.channels.get(address))
        asked = type(request)()
        asked.CopyFrom(request)
        del asked.shards[:]
        asked.shards.extend(shards)
        try:
            return await getattr(stub, self.kind.list_method)(asked, timeout=CALL_TIMEOUT_S)
        except grpc.aio.AioRpcError as exc:
            return self.kind.list_response(
                unavailable_shards=shards,
                error_message=f"coordinator {address}: {exc.code().name}")
