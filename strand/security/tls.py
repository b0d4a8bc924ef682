"""TLS for Strand's gRPC listeners and channels.

- :class:`ServerTls`: a listener's certificate chain and key, and (mutual TLS) the CA
  bundle its clients' certificates must chain to. :func:`server_credentials` serves
  them and picks up new files without a restart: gRPC asks before every handshake
  whether the certificates changed, and they are read again when a file's stamp
  (inode, size, modification time) moved; a pair that does not load (a key that is not
  the certificate's, a file half written) is refused with a warning and the previous
  pair kept, so a rotation in progress never breaks new connections.
- :class:`ClientTls`: the CA bundle a channel verifies the server with (the system's
  when none is given) and, for mutual TLS, the client's own certificate and key;
  :func:`ClientTls.from_settings` reads Kafka's client settings (``security_protocol``,
  ``ssl_cafile``, ``ssl_certfile``, ``ssl_keyfile``). Files are read when a channel is
  opened: a rotated client certificate is used by the next channel.

Pure of any service: the server module, the SDK's channels and the launcher use it.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import grpc

from strand.security.settings import (
    SECURITY_PROTOCOLS,
    TLS_PROTOCOLS,
    ClientTlsSettings,
    TlsError,
)

__all__ = ["SECURITY_PROTOCOLS", "ClientTls", "ClientTlsSettings", "ServerTls", "ServiceTls",
           "TlsError", "server_credentials"]

log = logging.getLogger(__name__)

SecurityProtocol = Literal["PLAINTEXT", "SSL"]


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise TlsError(f"cannot read the {what} {str(path)!r}: {exc.strerror or exc}") from None


def _check_pair(cert: Path, key: Path) -> None:
    """The key is the certificate's (the standard library's TLS loads the pair)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        raise TlsError(f"the certificate {str(cert)!r} and the key {str(key)!r} do not "
                       f"load as a pair ({exc.reason or exc}): give the key of that "
                       "certificate, both in PEM") from None
    except OSError as exc:
        raise TlsError(f"cannot read {str(cert)!r} or {str(key)!r}: "
                       f"{exc.strerror or exc}") from None


def _check_ca(ca: Path) -> None:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        context.load_verify_locations(cafile=ca)
    except (ssl.SSLError, OSError) as exc:
        raise TlsError(f"the CA bundle {str(ca)!r} does not load "
                       f"({getattr(exc, 'reason', None) or exc}): give PEM "
                       "certificates") from None


@dataclass(frozen=True)
class ServerTls:
    """A TLS listener: ``cert`` (PEM chain, leaf first) and ``key``; with
    ``require_client_cert``, clients must present a certificate chaining to ``ca``."""

    cert: Path
    key: Path
    ca: Path | None = None
    require_client_cert: bool = False

    def __post_init__(self) -> None:
        if self.require_client_cert and self.ca is None:
            raise TlsError("mutual TLS needs the CA bundle that client certificates must "
                           "chain to: give a CA file with the client certificate check")

    def check(self) -> None:
        """Raise :class:`TlsError` if the files do not load (at start: a listener that
        cannot serve TLS does not start)."""
        _check_pair(self.cert, self.key)
        if self.ca is not None:
            _check_ca(self.ca)


class _Reloader:
    """gRPC's certificate configuration fetcher: called from gRPC's threads before
    every handshake; reads the files again only when one of them changed."""

    def __init__(self, tls: ServerTls) -> None:
        self.tls = tls
        self._lock = threading.Lock()
        self._stamps = self._stamp()
        self.config = self._load()
        self.reloads = 0

    def _paths(self) -> list[Path]:
        return [self.tls.cert, self.tls.key] + ([self.tls.ca] if self.tls.ca else [])

    def _stamp(self) -> tuple[tuple[int, int, int], ...]:
        stamps = []
        for path in self._paths():
            try:
                st = os.stat(path)
            except OSError:
                stamps.append((-1, -1, -1))
            else:
                stamps.append((st.st_ino, st.st_size, st.st_mtime_ns))
        return tuple(stamps)

    def _load(self) -> grpc.ServerCertificateConfiguration:
        self.tls.check()
        chain = _read(self.tls.cert, "certificate chain")
        key = _read(self.tls.key, "private key")
        root = _read(self.tls.ca, "CA bundle") if self.tls.ca is not None else None
        return grpc.ssl_server_certificate_configuration([(key, chain)], root)

    def __call__(self) -> grpc.ServerCertificateConfiguration | None:
        with self._lock:
            stamps = self._stamp()
            if stamps == self._stamps:
                return None
            try:
                config = self._load()
            except TlsError as exc:
                # Not remembered: looked at again at the next handshake, once the
                # rotation is complete.
                log.warning("new TLS certificates do not load; serving the previous ones",
                            extra={"cert": str(self.tls.cert), "error": str(exc)})
                return None
            self._stamps, self.config = stamps, config
            self.reloads += 1
            log.info("TLS certificates reloaded", extra={"cert": str(self.tls.cert)})
            return config


def server_credentials(tls: ServerTls) -> grpc.ServerCredentials:
    """Credentials for ``grpc.aio.Server.add_secure_port`` that follow the files."""
    reloader = _Reloader(tls)
    return grpc.dynamic_ssl_server_credentials(
        reloader.config, reloader, require_client_authentication=tls.require_client_cert)


@dataclass(frozen=True)
class ClientTls:
    """A TLS channel: the server verified against ``ca`` (None: the system's roots);
    with ``cert`` and ``key``, the client presents that certificate (mutual TLS)."""

    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None

    def __post_init__(self) -> None:
        if (self.cert is None) != (self.key is None):
            raise TlsError("a client certificate needs its key and a key its certificate: "
                           "give both ssl_certfile and ssl_keyfile, or neither")

    @classmethod
    def from_settings(cls, security_protocol: str = "PLAINTEXT", ssl_cafile: str | None = None,
                      ssl_certfile: str | None = None, ssl_keyfile: str | None = None,
                      ) -> ClientTls | None:
        """Kafka's client settings; None for PLAINTEXT and SASL_PLAINTEXT. Files given
        without TLS (``SSL`` or ``SASL_SSL``) are refused (they would be silently
        unused)."""
        if security_protocol not in SECURITY_PROTOCOLS:
            raise TlsError(f"security_protocol {security_protocol!r}: use "
                           f"{', '.join(SECURITY_PROTOCOLS)}")
        files = {"ssl_cafile": ssl_cafile, "ssl_certfile": ssl_certfile,
                 "ssl_keyfile": ssl_keyfile}
        if security_protocol not in TLS_PROTOCOLS:
            given = sorted(name for name, value in files.items() if value)
            if given:
                raise TlsError(f"{', '.join(given)} given with security_protocol="
                               f"{security_protocol!r}: set security_protocol='SSL' (or "
                               "'SASL_SSL') to use TLS")
            return None
        tls = cls(Path(ssl_cafile) if ssl_cafile else None,
                  Path(ssl_certfile) if ssl_certfile else None,
                  Path(ssl_keyfile) if ssl_keyfile else None)
        tls.check()
        return tls

    def check(self) -> None:
        if self.ca is not None:
            _check_ca(self.ca)
        if self.cert is not None and self.key is not None:
            _check_pair(self.cert, self.key)

    def as_settings(self) -> ClientTlsSettings:
        """The Kafka client settings that give this (for an SDK client)."""
        settings = ClientTlsSettings(security_protocol="SSL")
        if self.ca is not None:
            settings["ssl_cafile"] = str(self.ca)
        if self.cert is not None and self.key is not None:
            settings["ssl_certfile"], settings["ssl_keyfile"] = str(self.cert), str(self.key)
        return settings

    def credentials(self) -> grpc.ChannelCredentials:
        """Read now: a channel opened after a rotation uses the new files."""
        return grpc.ssl_channel_credentials(
            root_certificates=_read(self.ca, "CA bundle") if self.ca else None,
            private_key=_read(self.key, "private key") if self.key else None,
            certificate_chain=_read(self.cert, "certificate chain") if self.cert else None)


@dataclass(frozen=True)
class ServiceTls:
    """A service's TLS: its listener, and its calls to the other services, which
    verify them with the same CA bundle and present the service's own certificate
    (its identity when the listeners require client certificates)."""

    server: ServerTls
    client: ClientTls
    # Glob patterns of the services' certificate names: the internal services serve
    # only callers matching one (strand.service.peer_identity); empty: any certificate.
    service_names: tuple[str, ...] = ()
    # A port on which the health service alone is served in plaintext as well (0:
    # none), for probes that cannot speak TLS (the kubelet's gRPC probe).
    plaintext_health_port: int = 0

    def __post_init__(self) -> None:
        if self.service_names and not self.server.require_client_cert:
            raise TlsError("service identities are checked on client certificates: "
                           "--tls-service-names needs --tls-client-auth required")

    @classmethod
    def from_files(cls, cert: Path, key: Path, ca: Path | None,
                   require_client_cert: bool = False,
                   service_names: tuple[str, ...] = (),
                   plaintext_health_port: int = 0) -> ServiceTls:
        server = ServerTls(cert, key, ca, require_client_cert)
        server.check()
        return cls(server, ClientTls(ca, cert, key), service_names, plaintext_health_port)
