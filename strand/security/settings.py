"""The plain parts of the TLS settings (no gRPC: the CLI builds them before it knows
whether a command connects at all): Kafka's client setting names and the error of
a setting that cannot work."""

from __future__ import annotations

from typing import TypedDict

__all__ = ["SASL_PROTOCOLS", "SECURITY_PROTOCOLS", "TLS_PROTOCOLS", "ClientTlsSettings",
           "TlsError", "client_tls_settings"]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")


class ClientTlsSettings(TypedDict, total=False):
    """Kafka's names for a client's TLS and SASL settings (the SDK clients' keywords)."""

    security_protocol: str
    ssl_cafile: str
    ssl_certfile: str
    ssl_keyfile: str
    sasl_mechanism: str
    sasl_plain_username: str
    sasl_plain_password: str


class TlsError(ValueError):
    """A TLS setting that cannot work: a missing or unreadable file, a key that is not
    its certificate's, a certificate without its key."""


def client_tls_settings(tls: bool, ca: str | None, cert: str | None,
                        key: str | None, user: str | None = None,
                        password: str | None = None) -> ClientTlsSettings:
    """The SDK clients' settings from a tool's security options (``--tls``,
    ``--tls-ca``, ``--tls-cert``, ``--tls-key``: any file turns TLS on; ``--user`` and
    its password: SCRAM-SHA-512). The files are checked when a client is made."""
    settings = ClientTlsSettings()
    tls = bool(tls or ca or cert or key)
    if user:
        settings["security_protocol"] = "SASL_SSL" if tls else "SASL_PLAINTEXT"
        settings["sasl_mechanism"] = "SCRAM-SHA-512"
        settings["sasl_plain_username"] = user
        settings["sasl_plain_password"] = password or ""
    elif tls:
        settings["security_protocol"] = "SSL"
    if ca:
        settings["ssl_cafile"] = ca
    if cert:
        settings["ssl_certfile"] = cert
    if key:
        settings["ssl_keyfile"] = key
    return settings
