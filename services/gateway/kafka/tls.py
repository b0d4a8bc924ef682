"""TLS on the Kafka listener (Kafka's SSL and SASL_SSL security protocols).

The gateway serves its own certificate, key and CA (its ``--tls-*`` flags, the ones its
gRPC listener serves), so one certificate covers both ports. With
``--tls-client-auth required`` a client must present a certificate chaining to the CA
(mutual TLS) and its common name is its principal, as on the gRPC side
(:mod:`services.gateway.principals`). Certificates rotated on disk are served to new
connections without a restart, as the gRPC listener does (:mod:`strand.security.tls`):
before each handshake the files' stamps (inode, size, modification time) are compared,
and when one moved the files are loaded again; a pair that does not load (a rotation
half done) is refused with a warning and the previous context kept.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
from pathlib import Path
from typing import Any

from strand.security.tls import ServerTls, TlsError

__all__ = ["KafkaTls", "certificate_names"]

log = logging.getLogger(__name__)

_Stamps = tuple[tuple[int, int, int], ...]


def _stamps(paths: list[Path]) -> _Stamps:
    stamps = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            stamps.append((-1, -1, -1))
        else:
            stamps.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(stamps)


class KafkaTls:
    """The listener's server-side TLS context, following the files of ``tls``."""

    def __init__(self, tls: ServerTls) -> None:
        self.tls = tls
        self._lock = threading.Lock()
        self._paths = [tls.cert, tls.key] + ([tls.ca] if tls.ca is not None else [])
        self._stamps = _stamps(self._paths)
        self._current = self._load()  # raises TlsError: a listener that cannot serve TLS
        self.reloads = 0
        # The context the server is started with: every handshake starts here and is
        # moved, from the hello callback, to the newest context.
        self.context = self._load()
        self.context.sni_callback = self._on_hello

    def _load(self) -> ssl.SSLContext:
        self.tls.check()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.tls.cert, self.tls.key)
        if self.tls.ca is not None:
            context.load_verify_locations(cafile=self.tls.ca)
        # Without required client authentication a certificate is still verified and
        # used when a client presents one (Kafka's ssl.client.auth=requested).
        context.verify_mode = (ssl.CERT_REQUIRED if self.tls.require_client_cert
                               else ssl.CERT_OPTIONAL if self.tls.ca is not None
                               else ssl.CERT_NONE)
        return context

    def current(self) -> ssl.SSLContext:
        """The newest context that loads (the files read again if they changed)."""
        with self._lock:
            stamps = _stamps(self._paths)
            if stamps != self._stamps:
                try:
                    context = self._load()
                except (TlsError, ssl.SSLError, OSError) as exc:
                    # Not remembered: looked at again at the next handshake.
                    log.warning("new TLS certificates do not load; the Kafka listener "
                                "serves the previous ones",
                                extra={"cert": str(self.tls.cert), "error": str(exc)})
                    return self._current
                self._stamps, self._current = stamps, context
                self.reloads += 1
                log.info("TLS certificates reloaded for the Kafka listener",
                         extra={"cert": str(self.tls.cert)})
            return self._current

    def _on_hello(self, connection: ssl.SSLObject, server_name: str | None,
                  context: ssl.SSLContext) -> None:
        connection.context = self.current()


def certificate_names(peer: Any) -> tuple[str, ...]:
    """The names a verified client certificate carries (``ssl``'s ``getpeercert()``),
    common name first, then its DNS and IP alternative names; () without one."""
    if not peer:
        return ()
    common: list[str] = []
    for rdn in peer.get("subject", ()) or ():
        for key, value in rdn:
            if key == "commonName":
                common.append(str(value))
    alternative = [str(value) for kind, value in peer.get("subjectAltName", ()) or ()
                   if kind in ("DNS", "IP Address")]
    return (*common, *alternative)
