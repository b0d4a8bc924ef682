"""Secrets in the Kubernetes API, read and written with kopf's own API client.

kopf has no public client for objects other than the ones it handles, and the
operator has no other Kubernetes client (the import contracts keep the `kubernetes`
package to the storage pods' init step). kopf's internal request functions are the
ones it uses itself for Events and patches: they carry its login, its retries on
5xx, 429 and 403, and its re-login on 401, so a Secret call authenticates exactly as
the watches do. They are internal (kopf._cogs); pyproject pins kopf below 2, and the
end-to-end tests exercise every call here against the API emulator.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import kopf
from kopf._cogs.clients import api, errors

from strand_operator.user_secret import SecretStoreError

__all__ = ["KubeSecrets"]

log = logging.getLogger(__name__)
_MERGE_PATCH = {"Content-Type": "application/merge-patch+json"}


def _url(namespace: str, name: str = "") -> str:
    base = f"/api/v1/namespaces/{namespace}/secrets"
    return f"{base}/{name}" if name else base


def _failure(what: str, namespace: str, name: str, exc: errors.APIError) -> SecretStoreError:
    hint = (" (the operator's Role needs get, create, patch and delete on secrets in this "
            "namespace)" if isinstance(exc, errors.APIForbiddenError) else "")
    return SecretStoreError(f"cannot {what} Secret {namespace}/{name}: {exc}{hint}")


class KubeSecrets:
    """The operator's Secret calls (the SecretStore of user_reconciler)."""

    def __init__(self, settings: kopf.OperatorSettings) -> None:
        self._settings = settings  # kopf's request timeouts and retry backoffs

    async def read(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        try:
            found: Mapping[str, Any] = await api.get(
                _url(namespace, name), settings=self._settings, logger=log)
        except errors.APINotFoundError:
            return None
        except errors.APIError as exc:
            raise _failure("read", namespace, name, exc) from exc
        return found

    async def create(self, namespace: str, body: Mapping[str, Any]) -> None:
        name = str(body["metadata"]["name"])
        try:
            await api.post(_url(namespace), payload=dict(body), settings=self._settings,
                           logger=log)
        except errors.APIError as exc:
            raise _failure("create", namespace, name, exc) from exc

    async def replace(self, namespace: str, name: str, body: Mapping[str, Any]) -> None:
        """Merge ``body`` into the Secret: its keys and owner references replaced."""
        try:
            await api.patch(_url(namespace, name), payload=dict(body), headers=_MERGE_PATCH,
                            settings=self._settings, logger=log)
        except errors.APIError as exc:
            raise _failure("update", namespace, name, exc) from exc

    async def delete(self, namespace: str, name: str) -> None:
        """Delete the Secret; a missing one is no error."""
        try:
            await api.delete(_url(namespace, name), settings=self._settings, logger=log)
        except errors.APINotFoundError:
            return
        except errors.APIError as exc:
            raise _failure("delete", namespace, name, exc) from exc
