"""The launcher's two gRPC questions to a running cluster (its transport module):
does a service serve (the standard gRPC health check), and how many storage nodes
has the gateway registered."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from strand.v1 import common_pb2, gateway_pb2_grpc

T = TypeVar("T")


def _ask(address: str, call: Callable[[grpc.Channel], T]) -> T | None:
    """``call`` on a channel of its own to ``address``; None when the call fails."""
    with grpc.insecure_channel(address) as channel:
        try:
            return call(channel)
        except grpc.RpcError:
            return None


def healthy(address: str, timeout: float = 0.5) -> bool:
    """Whether the service at ``address`` answers its health check with SERVING."""
    response = _ask(address, lambda channel: health_pb2_grpc.HealthStub(channel).Check(
        health_pb2.HealthCheckRequest(), timeout=timeout))
    return response is not None and response.status == health_pb2.HealthCheckResponse.SERVING


def registered_brokers(gateway: str, timeout: float = 2.0) -> int:
    """How many storage nodes the gateway's metadata lists (0 when it does not answer)."""
    response = _ask(gateway, lambda channel: gateway_pb2_grpc.GatewayStub(channel).Metadata(
        common_pb2.MetadataRequest(), timeout=timeout))
    return len(response.brokers) if response is not None else 0
