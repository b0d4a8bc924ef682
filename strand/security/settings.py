"""The plain parts of the TLS settings (no gRPC: the CLI builds them before it knows
whether a command connects at all): Kafka's client setting names and the error of
a setting that cannot work."""

from __future__ import annotations

from typing import TypedDict

__all__ = ["SECURITY_PROTOCOLS", "ClientTlsSettings", "TlsError", "client_tls_settings"]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL")


class ClientTlsSettings(TypedDict, total=False):
    """Kafka's names for a client's TLS settings (the SDK clients' keywords)."""

    security_protocol: str
    ssl_cafile: str
    ssl_certfile: str
    ssl_keyfile: str


class TlsError(ValueError):
    """A TLS setting that cannot work: a missing or unreadable file, a key that is not
    its certificate's, a certificate without its key."""


def client_tls_settings(tls: bool, ca: str | None, cert: str | None,
                        key: str | None) -> ClientTlsSettings:
    """The SDK clients' settings from a tool's TLS options (``--tls``, ``--tls-ca``,
    ``--tls-cert``, ``--tls-key``: any file turns TLS on). The files are checked when
    a client is made."""
    settings = ClientTlsSettings()
    if tls or ca or cert or key:
        settings["security_protocol"] = "SSL"
    if ca:
        settings["ssl_cafile"] = ca
    if cert:
        settings["ssl_certfile"] = cert
    if key:
        settings["ssl_keyfile"] = key
    return settings
