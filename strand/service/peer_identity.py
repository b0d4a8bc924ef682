"""Who an internal service serves. The gateway is the clients' door; the storage
nodes, the controller and the coordinators serve the other services. With mutual TLS
and ``--tls-service-names`` (glob patterns), those refuse every call whose client
certificate names no service identity — its common name or a DNS / IP subject
alternative name matching a pattern — with PERMISSION_DENIED, so a client holding a
certificate of the cluster's CA cannot reach a storage node around the gateway. The
health service stays open to any certificate of the CA (probes)."""

from __future__ import annotations

import fnmatch
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import grpc

from strand.service.call_guard import guarded

__all__ = ["HEALTH_METHODS", "ServiceIdentityInterceptor", "peer_names"]

HEALTH_METHODS = frozenset({"/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/Watch"})


def peer_names(context: grpc.aio.ServicerContext) -> list[str]:
    """The names the caller's verified certificate carries (common name first)."""
    auth = context.auth_context()
    return [value.decode(errors="replace")
            for key in ("x509_common_name", "x509_subject_alternative_name")
            for value in auth.get(key, [])]


class ServiceIdentityInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Serve only callers whose certificate matches one of ``patterns``."""

    def __init__(self, patterns: Sequence[str], service: str) -> None:
        if not patterns:
            raise ValueError("no service identity pattern: every call would be refused")
        self.patterns = tuple(patterns)
        self.service = service

    def allowed(self, names: Sequence[str]) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern)
                   for name in names for pattern in self.patterns)

    async def _check(self, context: grpc.aio.ServicerContext, method: str) -> None:
        names = peer_names(context)
        if not self.allowed(names):
            who = f"certificate {names[0]!r}" if names else "a caller without a certificate"
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"{method} on the {self.service}: {who} is not a service identity of this "
                f"cluster (--tls-service-names {','.join(self.patterns)}); clients go "
                "through the gateway")

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Any]],
        details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = await continuation(details)
        if handler is None or details.method in HEALTH_METHODS:
            return handler
        return guarded(handler, details.method, self._check)
