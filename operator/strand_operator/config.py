"""The operator's settings, as the command line and the environment give them."""

from __future__ import annotations

from dataclasses import dataclass, field

from strand.security.settings import ClientTlsSettings, client_tls_settings

__all__ = ["OperatorConfig"]


@dataclass(frozen=True, slots=True)
class OperatorConfig:
    """What one operator process manages and how often it checks for drift."""

    bootstrap: str  # a Strand gateway, HOST:PORT
    namespaces: tuple[str, ...]  # where it watches Topics
    cluster: str  # the strand.io/cluster label value of the Topics it manages
    health_port: int | None = None  # kopf's liveness endpoint, /healthz
    resync_interval: float = 60.0  # seconds between drift checks of each Topic
    request_timeout_s: float = 30.0  # one Strand admin call
    # TLS to the gateway: its CA, the operator's certificate and key (mutual TLS).
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    # SCRAM-SHA-512 to the gateway: a super user when the cluster enforces ACLs (it
    # manages StrandUsers' credentials and ACLs). The password is never printed.
    user: str | None = None
    password: str | None = field(default=None, repr=False)

    @property
    def security(self) -> ClientTlsSettings:
        """The SDK's settings for the operator's admin calls: TLS and SASL."""
        return client_tls_settings(False, self.tls_ca, self.tls_cert, self.tls_key,
                                   self.user, self.password)

    def __post_init__(self) -> None:
        if not self.namespaces:
            raise ValueError("the operator needs at least one namespace to watch")
        if not self.cluster:
            raise ValueError("the operator needs the name of the Strand cluster it manages")
        if self.resync_interval <= 0:
            raise ValueError(f"resync interval must be positive, got {self.resync_interval}")
        if self.health_port is not None and not 0 < self.health_port < 65536:
            raise ValueError(f"health port must be in 1..65535, got {self.health_port}")
        if self.user and not self.password:
            raise ValueError(f"user {self.user!r} needs a password (--password-file)")
        if self.password and not self.user:
            raise ValueError("a password needs --user")
