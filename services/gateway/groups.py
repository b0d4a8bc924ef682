"""Consumer-group calls: forwarded to the coordinator instance that owns the group's
shard (``shards/groups/<k>`` in etcd, watched by the gateway's metadata cache).

While a shard moves (its owner died, a new instance joined, the successor is still
loading it) the call waits for the metadata to settle and tries again, up to a
deadline; then it is answered COORDINATOR_NOT_AVAILABLE and the client retries.

ListGroups asks every shard's owner for the groups of that shard. Shards that are
loading or moving are asked again until they answer or the wait ends; an answer
without some shards names them (``unavailable_shards``) and carries an error, so a
listing is never silently incomplete.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import grpc

from strand.cluster.cache import MetadataCache
from strand.cluster.model import CoordinatorRecord
from strand.coordination.shards import GROUP_TOPIC, shard_for
from strand.errors import ErrorCode
from strand.v1 import common_pb2, groups_pb2_grpc
from strand.v1 import groups_pb2 as pb

__all__ = ["GroupRouter", "peer_host"]

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


class GroupRouter:
    def __init__(self, cache: MetadataCache, channels: ChannelSource) -> None:
        self.cache = cache
        self.channels = channels

    def _owner(self, group_id: str) -> CoordinatorRecord | None:
        topic = self.cache.topics.get(GROUP_TOPIC)
        if topic is None or not group_id:
            return None
        return self.cache.group_shard_owners.get(shard_for(group_id, topic.partitions))

    async def forward(self, method: str, request: Any, response_type: type[Any],
                      timeout_s: float = CALL_TIMEOUT_S) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ROUTE_WAIT_S
        if not request.group_id:
            return response_type(error_code=common_pb2.ErrorCode.Value("INVALID_GROUP_ID"),
                                 error_message="the group id must not be empty")
        while True:
            owner = self._owner(request.group_id)
            if owner is None:
                failure = f"no coordinator serves group {request.group_id!r} right now"
            else:
                stub = groups_pb2_grpc.GroupCoordinatorStub(self.channels.get(owner.address))
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

    async def list_groups(self, wait_s: float | None = None) -> pb.ListGroupsResponse:
        """Every group, asked shard by shard of their owners. Shards that are loading,
        moving or whose owner does not answer are asked again as the metadata changes,
        up to ``wait_s``; those still missing then are named in the answer, with
        COORDINATOR_LOAD_IN_PROGRESS (all loading) or COORDINATOR_NOT_AVAILABLE."""
        wait_s = ROUTE_WAIT_S if wait_s is None else wait_s
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        response = pb.ListGroupsResponse()
        topic = self.cache.topics.get(GROUP_TOPIC)
        if topic is None:
            return response  # no coordinator has ever run: there are no groups
        missing: dict[int, str] = dict.fromkeys(range(topic.partitions), "not asked yet")
        seen: set[str] = set()
        while True:
            by_owner: dict[str, list[int]] = {}
            for shard in missing:
                owner = self.cache.group_shard_owners.get(shard)
                if owner is None:
                    missing[shard] = "no coordinator owns it"
                else:
                    by_owner.setdefault(owner.address, []).append(shard)
            answers = await asyncio.gather(*(self._list_shards(address, shards)
                                             for address, shards in by_owner.items()))
            for part in answers:
                for shard in part.listed_shards:
                    missing.pop(shard, None)
                for group in part.groups:
                    if group.group_id not in seen:
                        seen.add(group.group_id)
                        response.groups.append(group)
                for shard in part.unavailable_shards:
                    if shard in missing:
                        missing[shard] = part.error_message
            remaining = deadline - loop.time()
            if not missing or remaining <= 0:
                break
            # A shard's load completes without an etcd change: ask again soon anyway.
            await self.cache.wait_changed(min(remaining, LIST_RETRY_S))
        if missing:
            loading = all("loading" in why for why in missing.values())
            response.error_code = common_pb2.ErrorCode.Value(
                "COORDINATOR_LOAD_IN_PROGRESS" if loading else "COORDINATOR_NOT_AVAILABLE")
            response.unavailable_shards.extend(sorted(missing))
            response.error_message = (
                f"the list is incomplete: {len(missing)} of {topic.partitions} shards of "
                f"{GROUP_TOPIC} did not answer within {wait_s:g}s ("
                + "; ".join(f"shard {k}: {why}" for k, why in sorted(missing.items()))
                + "); retry")
        response.listed_shards.extend(k for k in range(topic.partitions) if k not in missing)
        return response

    async def _list_shards(self, address: str, shards: list[int]) -> pb.ListGroupsResponse:
        stub = groups_pb2_grpc.GroupCoordinatorStub(self.channels.get(address))
        try:
            answer: pb.ListGroupsResponse = await stub.ListGroups(
                pb.ListGroupsRequest(shards=shards), timeout=CALL_TIMEOUT_S)
        except grpc.aio.AioRpcError as exc:
            return pb.ListGroupsResponse(
                unavailable_shards=shards,
                error_message=f"coordinator {address}: {exc.code().name}")
        return answer
