"""A check run before every call a gRPC service serves: the one handler wrapper the
server interceptors share (service identities on internal services, the caller's
principal at the gateway). The check aborts the call, or sets what the handler reads
(a context variable set in the check is seen by the handler: both run in the call's
task)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

__all__ = ["Check", "guarded"]

# (the call's context, its full method name) -> None; aborts the call to refuse it.
Check = Callable[[grpc.aio.ServicerContext, str], Awaitable[None]]


def guarded(handler: grpc.RpcMethodHandler, method: str, check: Check) -> Any:
    """``handler`` with ``check`` awaited before it serves, whatever its arity."""
    if handler.unary_unary is not None:
        unary = handler.unary_unary

        async def unary_unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await check(context, method)
            return await unary(request, context)

        return grpc.unary_unary_rpc_method_handler(
            unary_unary, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)
    if handler.unary_stream is not None:
        streaming = handler.unary_stream

        async def unary_stream(request: Any, context: grpc.aio.ServicerContext
                               ) -> AsyncIterator[Any]:
            await check(context, method)
            async for answer in streaming(request, context):
                yield answer

        return grpc.unary_stream_rpc_method_handler(
            unary_stream, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)
    if handler.stream_unary is not None:
        collecting = handler.stream_unary

        async def stream_unary(requests: Any, context: grpc.aio.ServicerContext) -> Any:
            await check(context, method)
            return await collecting(requests, context)

        return grpc.stream_unary_rpc_method_handler(
            stream_unary, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)
    both = handler.stream_stream

    async def stream_stream(requests: Any, context: grpc.aio.ServicerContext
                            ) -> AsyncIterator[Any]:
        await check(context, method)
        async for answer in both(requests, context):
            yield answer

    return grpc.stream_stream_rpc_method_handler(
        stream_stream, request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer)
