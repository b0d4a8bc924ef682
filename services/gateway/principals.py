"""The gateway's authentication step, before every call: the caller's session token
(``authorization: Bearer …`` metadata) or verified client certificate becomes its
principal, which the handlers read (:func:`services.gateway.access.caller`). A caller
that cannot be authenticated is refused with UNAUTHENTICATED and Kafka's
``SASL_AUTHENTICATION_FAILED`` in the details; SaslAuthenticate and health checks
need no principal."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import grpc

from services.gateway.access import CALLER, Caller
from services.gateway.authenticator import Authenticator
from services.gateway.coordinators import peer_host
from strand.errors import AuthenticationError
from strand.service.call_guard import guarded
from strand.service.peer_identity import (
    HEALTH_METHODS,
    ServiceIdentityInterceptor,
    peer_names,
)

__all__ = ["AUTHORIZATION_KEY", "PrincipalInterceptor"]

AUTHORIZATION_KEY = "authorization"
_BEARER = "bearer "
_OPEN = HEALTH_METHODS | {"/strand.v1.Gateway/SaslAuthenticate"}


def _token(context: grpc.aio.ServicerContext) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if (key == AUTHORIZATION_KEY and isinstance(value, str)
                and value[: len(_BEARER)].lower() == _BEARER):
            return value[len(_BEARER):].strip()
    return None


def client_id_of(user_agent: str) -> str:
    """The client.id Strand's SDK puts in its user agent (``strand-python/<version>
    <client id> grpc-python/…``); "" for another client."""
    words = user_agent.split()
    if len(words) > 1 and words[0].startswith("strand-python/") \
            and not words[1].startswith("grpc-"):
        return words[1]
    return ""


def _client_id(context: grpc.aio.ServicerContext) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == "user-agent" and isinstance(value, str):
            return client_id_of(value)
    return ""


def _certificate_names(context: grpc.aio.ServicerContext) -> list[str]:
    # Only a certificate the TLS layer verified is in the auth context.
    return [name.decode(errors="replace")
            for name in context.auth_context().get("x509_common_name", [])]


class PrincipalInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """``service_names``: the gateway's --tls-service-names; a caller whose verified
    certificate matches one is a service of the cluster (a super user)."""

    def __init__(self, authenticator: Authenticator, service_names: Sequence[str] = ()) -> None:
        self.authenticator = authenticator
        self.services = ServiceIdentityInterceptor(service_names, "gateway") if service_names \
            else None

    async def _authenticate(self, context: grpc.aio.ServicerContext, method: str) -> None:
        token = _token(context)
        try:
            principal = self.authenticator.principal(token, _certificate_names(context))
        except AuthenticationError as exc:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED,
                                f"{exc.code.name}: {method.rsplit('/', 1)[-1]}: {exc}")
        service = (token is None and self.services is not None
                   and self.services.allowed(peer_names(context)))
        CALLER.set(Caller(principal, peer_host(context.peer()), service, _client_id(context)))

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Any]],
        details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = await continuation(details)
        if handler is None or details.method in _OPEN:
            return handler
        return guarded(handler, details.method, self._authenticate)
