"""A cluster that requires SCRAM-SHA-512 authentication and enforces ACLs (deny by
default), with the launcher's super user, and clients' settings for a user."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from strand.launcher import ClusterSpec
from strand.security.settings import ClientTlsSettings, client_tls_settings
from tests.support.cluster import cluster_spec

SUPERUSER = ("admin", "admin-secret")
SECURED_GATEWAY_ARGS = ("--require-authentication", "--authorizer", "acl",
                        "--super-users", f"User:{SUPERUSER[0]}")


def secured_spec(directory: Path, name: str, **shape: Any) -> ClusterSpec:
    """``cluster_spec`` with authentication required, ACLs enforced and SUPERUSER
    created by the controllers (the coordinators are that user at the gateway)."""
    return cluster_spec(directory, name, superuser=SUPERUSER,
                        gateway_args=SECURED_GATEWAY_ARGS, **shape)


def as_user(name: str, password: str) -> ClientTlsSettings:
    """The SDK clients' settings of SCRAM user ``name`` (plaintext transport)."""
    return client_tls_settings(False, None, None, None, name, password)
