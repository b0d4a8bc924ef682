"""Consumer-group calls: forwarded to the coordinator instance that owns the group's
shard (``shards/groups/<k>`` in etcd, watched by the gateway's metadata cache).

While a shard moves (its owner died, a new instance joined, the successor is still
loading it) the call waits for the metadata to settle and tries again, up to a
deadline; then it is answered COORDINATOR_NOT_AVAILABLE and the client retries.
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

__all__ = ["GroupRouter"]

ROUTE_WAIT_S = 15.0
CALL_TIMEOUT_S = 30.0
# Answers meaning "not here / not yet": look the owner up again.
_MOVING = frozenset(common_pb2.ErrorCode.Value(c.name) for c in (
    ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE))


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

    async def list_groups(self) -> pb.ListGroupsResponse:
        """Every coordinator's groups, merged."""
        response = pb.ListGroupsResponse()
        seen: set[str] = set()
        for record in list(self.cache.coordinators.values()):
            stub = groups_pb2_grpc.GroupCoordinatorStub(self.channels.get(record.address))
            try:
                part = await stub.ListGroups(pb.ListGroupsRequest(), timeout=10)
            except grpc.aio.AioRpcError as exc:
                response.error_code = common_pb2.ErrorCode.Value("COORDINATOR_NOT_AVAILABLE")
                response.error_message = f"coordinator {record.address}: {exc.code().name}"
                continue
            for group in part.groups:
                if group.group_id not in seen:
                    seen.add(group.group_id)
                    response.groups.append(group)
        return response
