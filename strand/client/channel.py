"""The one gRPC channel each client opens to its gateway, and transport failures.

Messages may be up to 64 MiB each way, like the services' own limit (a produce call
carries up to ``max_request_size``; a fetch answer up to ``fetch_max_bytes``).
Reconnection backs off from 100 ms to 1 s (gRPC's defaults, 1 s to 120 s, would keep
a client idle for minutes after a gateway restart), in line with Kafka's
``reconnect.backoff.ms`` / ``reconnect.backoff.max.ms``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc

from strand.client.sasl import AioSaslInterceptor, SaslCredentials, sasl_channel
from strand.client.tracing import aio_tracing_interceptors, traced_channel
from strand.errors import ErrorCode, NetworkError, RequestTimedOutError, StrandError, error_for
from strand.security.tls import ClientTls, ClientTlsSettings
from strand.version import VERSION

__all__ = [
    "MAX_MESSAGE_BYTES",
    "RETRIABLE_STATUS",
    "AioChannels",
    "TransportError",
    "channel_options",
    "open_aio_channel",
    "open_channel",
    "transport_error",
    "wait_for_gateway",
]

MAX_MESSAGE_BYTES = 64 * 1024 * 1024

# Failures of the call itself (no response) that a retry may cure: the gateway is
# down or restarting, the call timed out, or the channel was torn down under it.
RETRIABLE_STATUS = frozenset({
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.ABORTED,
})


class TransportError(NetworkError):
    """A call to the gateway failed below Strand's protocol (no response came back):
    code NETWORK_EXCEPTION.

    ``status`` is the gRPC status code's name (e.g. ``"UNAVAILABLE"``). ``retriable``
    is true for the statuses a retry may cure (the gateway unreachable or restarting).
    """

    def __init__(self, message: str, status: str = "UNKNOWN", retriable: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.retriable = retriable


# How the gateway refuses a whole call, naming Kafka's error first in the details
# ("INVALID_REQUEST: …" over a size limit, "GROUP_AUTHORIZATION_FAILED: …",
# "SASL_AUTHENTICATION_FAILED: …").
_REFUSALS = frozenset({grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.PERMISSION_DENIED,
                       grpc.StatusCode.UNAUTHENTICATED})


def transport_error(exc: grpc.RpcError, address: str, what: str) -> StrandError:
    """The typed error for a failed call: RequestTimedOutError for a deadline; the
    error a refusal names (INVALID_ARGUMENT, PERMISSION_DENIED or UNAUTHENTICATED with
    details "CODE_NAME: …"); else a TransportError naming the gateway and the gRPC
    status."""
    code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
    details = exc.details() if hasattr(exc, "details") else str(exc)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return RequestTimedOutError(f"{what} to gateway {address} timed out: {details}")
    if code in _REFUSALS and details:
        name, sep, message = details.partition(":")
        if sep and name in ErrorCode.__members__:
            return error_for(ErrorCode[name], message.strip())
    name = code.name if code is not None else "UNKNOWN"
    return TransportError(f"{what} to gateway {address} failed: {name} {details}", name,
                          code in RETRIABLE_STATUS)


def channel_options(client_id: str | None = None) -> list[tuple[str, Any]]:
    agent = f"strand-python/{VERSION}" + (f" {client_id}" if client_id else "")
    return [
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.primary_user_agent", agent),
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.min_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 1000),
    ]


def open_channel(address: str, client_id: str | None = None,
                 tls: ClientTls | None = None,
                 sasl: SaslCredentials | None = None) -> grpc.Channel:
    """A blocking-API channel (Consumer, Admin); TLS with ``tls``, every call
    authenticated with ``sasl``, traced when tracing is on (strand.client.tracing)."""
    options = channel_options(client_id)
    if tls is None:
        channel = grpc.insecure_channel(address, options=options)
    else:
        channel = grpc.secure_channel(address, tls.credentials(), options=options)
    channel = traced_channel(channel)
    return channel if sasl is None else sasl_channel(channel, sasl)


def open_aio_channel(address: str, client_id: str | None = None,
                     tls: ClientTls | None = None,
                     sasl: SaslCredentials | None = None) -> grpc.aio.Channel:
    """An asyncio channel (the producer's sender, the services' calls to each other);
    create it inside its event loop. Traced when tracing is on (strand.client.tracing)."""
    options = channel_options(client_id)
    interceptors = aio_tracing_interceptors()
    if sasl is not None:
        interceptors.append(
            AioSaslInterceptor(sasl, lambda: open_channel(address, client_id, tls)))
    if tls is None:
        return grpc.aio.insecure_channel(address, options=options, interceptors=interceptors)
    return grpc.aio.secure_channel(address, tls.credentials(), options=options,
                                   interceptors=interceptors)


class AioChannels:
    """One asyncio channel per address, reused by every call (a service's channels to
    its peers); :meth:`close` closes them all. ``sasl`` authenticates the calls to
    the addresses it names (a coordinator's gateway), not those to the other services
    (they know no users: they serve service identities)."""

    def __init__(self, client_id: str | None = None, tls: ClientTls | None = None,
                 sasl: dict[str, SaslCredentials] | None = None) -> None:
        self.client_id = client_id
        self.tls = tls
        self.sasl = dict(sasl or {})
        self._channels: dict[str, grpc.aio.Channel] = {}

    def get(self, address: str) -> grpc.aio.Channel:
        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = open_aio_channel(
                address, self.client_id, self.tls, self.sasl.get(address))
        return channel

    def client_settings(self, address: str) -> ClientTlsSettings:
        """The SDK clients' keywords for a client of ``address`` made like these."""
        settings = self.tls.as_settings() if self.tls else ClientTlsSettings()
        sasl = self.sasl.get(address)
        if sasl is not None:
            settings.update(sasl.as_settings(self.tls is not None))  # type: ignore[typeddict-item]
        return settings

    async def close(self) -> None:
        channels = list(self._channels.values())
        self._channels.clear()
        for channel in channels:
            await channel.close()


def wait_for_gateway(address: str, timeout_s: float,
                     on_retry: Callable[[], None] | None = None,
                     tls: ClientTls | None = None) -> bool:
    """Whether a connection to the gateway at ``address`` is up within ``timeout_s``
    (gRPC retries meanwhile, backing off as ``channel_options`` says). ``on_retry``
    is called once, when a first attempt has failed: a tool can say what it is
    waiting for instead of staying silent. Not from a running event loop's thread.

    An asyncio channel in a loop of its own, because the blocking API can only watch
    a channel's state through a thread of gRPC's (``subscribe``), which raises
    "Channel closed!" when the channel is closed while it polls, whatever was
    unsubscribed first."""
    return asyncio.run(_connected(address, timeout_s, on_retry, tls))


async def _connected(address: str, timeout_s: float, on_retry: Callable[[], None] | None,
                     tls: ClientTls | None) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0.0, timeout_s)
    failed_once = False
    async with open_aio_channel(address, tls=tls) as channel:
        while (state := channel.get_state(try_to_connect=True)) \
                is not grpc.ChannelConnectivity.READY:
            if state is grpc.ChannelConnectivity.TRANSIENT_FAILURE and not failed_once:
                failed_once = True
                if on_retry is not None:
                    on_retry()
            try:
                await asyncio.wait_for(channel.wait_for_state_change(state),
                                       deadline - loop.time())
            except TimeoutError:
                return False
        return True
