"""Calls the services make to the active controller (not the gateway's clients'):
found through the watched metadata cache, retried across a controller change.

* :func:`allocate_producer_ids`: a block of producer ids (a transaction
  coordinator's :class:`strand.coordination.producer_ids.ProducerIdManager`);
* :func:`ensure_internal_topic`: a coordinator's internal topic
  (``__consumer_offsets``, ``__transaction_state``), created by the controller.
"""

from __future__ import annotations

import asyncio
import logging

import grpc

from strand.client.channel import open_aio_channel
from strand.cluster.cache import MetadataCache
from strand.cluster.model import ProducerIdsBlock
from strand.errors import ErrorCode, RequestTimedOutError, error_for
from strand.security.tls import ClientTls
from strand.v1 import controller_pb2 as pb_ctl
from strand.v1 import controller_pb2_grpc

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 10.0
RETRY_S = 0.25
# The controller is moving (standby answered, or the old one is unreachable): wait for
# the election key to change in the cache, then ask the new one.
_MOVED = {ErrorCode.NOT_CONTROLLER}
_UNREACHABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                grpc.StatusCode.CANCELLED}


async def allocate_producer_ids(cache: MetadataCache, coordinator_id: str,
                                coordinator_epoch: int, timeout_s: float = 30.0,
                                tls: ClientTls | None = None) -> ProducerIdsBlock:
    """A new block of producer ids for the coordinator instance ``coordinator_id``,
    registered under lease ``coordinator_epoch``; retries while there is no active
    controller or it is changing, up to ``timeout_s`` (then RequestTimedOutError).
    Refusals are raised as their typed errors (STALE_BROKER_EPOCH: re-register)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    request = pb_ctl.AllocateProducerIdsRequest(coordinator_id=coordinator_id,
                                                coordinator_epoch=coordinator_epoch)
    last = "no active controller in etcd"
    while (remaining := deadline - loop.time()) > 0:
        controller = cache.controller
        if controller is None:
            await cache.wait_changed(min(remaining, RETRY_S * 4))
            continue
        try:
            async with open_aio_channel(controller.address, tls=tls) as channel:
                response = await controller_pb2_grpc.ControllerStub(channel).AllocateProducerIds(
                    request, timeout=min(remaining, CALL_TIMEOUT_S))
        except grpc.aio.AioRpcError as exc:
            if exc.code() not in _UNREACHABLE:
                raise
            last = f"controller {controller.address} unreachable ({exc.code().name})"
        else:
            if response.error_code == ErrorCode.NONE:
                return ProducerIdsBlock(response.first_producer_id, response.count)
            if response.error_code not in _MOVED:
                raise error_for(response.error_code, response.error_message)
            last = f"{controller.address}: {response.error_message}"
        log.info("asking another controller for producer ids", extra={"detail": last})
        await cache.wait_changed(min(max(deadline - loop.time(), 0), RETRY_S))
    raise RequestTimedOutError(
        f"no producer ids for coordinator {coordinator_id!r} within {timeout_s:g}s: {last}")


async def ensure_internal_topic(cache: MetadataCache, name: str, partitions: int,
                                stopping: asyncio.Event, tls: ClientTls | None = None) -> None:
    """Ask the active controller for the internal topic ``name`` until the cache shows
    it (or ``stopping`` is set). The controller creates it compacted and replicated
    like Kafka's offsets topic; an existing topic keeps its partition count."""
    while not stopping.is_set() and name not in cache.topics:
        controller = cache.controller
        if controller is not None and cache.brokers:
            try:
                async with open_aio_channel(controller.address, tls=tls) as channel:
                    result = await controller_pb2_grpc.ControllerStub(channel) \
                        .EnsureInternalTopic(pb_ctl.EnsureInternalTopicRequest(
                            name=name, partitions=partitions), timeout=CALL_TIMEOUT_S)
                if result.error_code and result.error_message:
                    log.info("waiting to create an internal topic",
                             extra={"topic": name, "detail": result.error_message})
            except grpc.aio.AioRpcError as exc:
                log.info("controller unreachable", extra={"error": exc.code().name})
        if name not in cache.topics:  # the watch may have delivered it during the call
            await cache.wait_changed(1.0)
