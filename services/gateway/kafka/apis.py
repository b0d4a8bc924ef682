"""The APIs the Kafka listener serves: each module's handlers and versions, gathered.

Every API module exposes ``HANDLERS`` (api key -> handler) and ``VERSIONS`` (api key ->
(min, max) version served). A module listed in ``_MODULES`` is served; one not listed is
not (its APIs are then absent from ApiVersions, so clients do not send them).
ApiVersions itself answers from the table gathered here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType, ModuleType

from kio.index import KioIndexError, load_request_schema, load_response_schema

from services.gateway.kafka import acls as acls
from services.gateway.kafka import admin as admin
from services.gateway.kafka import api_versions, metadata
from services.gateway.kafka import configs as configs
from services.gateway.kafka import fetch as fetch
from services.gateway.kafka import group_admin as group_admin
from services.gateway.kafka import groups as groups
from services.gateway.kafka import leader_epochs as leader_epochs
from services.gateway.kafka import list_offsets as list_offsets
from services.gateway.kafka import offsets as offsets
from services.gateway.kafka import produce as produce
from services.gateway.kafka import sasl as sasl
from services.gateway.kafka import transactions as transactions
from services.gateway.kafka.call import Handler

__all__ = ["ApiTable", "api_table", "build_table"]

# The API modules served; add a module here to serve its HANDLERS.
_MODULES: list[ModuleType] = [metadata, produce, fetch, list_offsets, groups, offsets,
                               group_admin, transactions, admin, configs, leader_epochs,
                               sasl, acls]


class ApiTableError(ValueError):
    """API modules that do not fit together (a bug in a module, found at start)."""


@dataclass(frozen=True, slots=True)
class ApiTable:
    handlers: Mapping[int, Handler]
    versions: Mapping[int, tuple[int, int]]

    def serves(self, api_key: int, api_version: int) -> bool:
        low, high = self.versions.get(api_key, (0, -1))
        return low <= api_version <= high


def build_table(modules: Sequence[ModuleType]) -> ApiTable:
    """The dispatch table of ``modules``, plus ApiVersions answering from it."""
    handlers: dict[int, Handler] = {}
    versions: dict[int, tuple[int, int]] = dict(api_versions.VERSIONS)
    owners: dict[int, str] = {api_versions.API_VERSIONS_KEY: api_versions.__name__}
    for module in modules:
        served: Mapping[int, Handler] = module.HANDLERS
        ranges: Mapping[int, tuple[int, int]] = module.VERSIONS
        if set(served) != set(ranges):
            raise ApiTableError(f"{module.__name__}: HANDLERS and VERSIONS name different "
                                f"api keys ({sorted(served)} vs {sorted(ranges)})")
        for key, (low, high) in ranges.items():
            if key in owners:
                raise ApiTableError(f"api key {key} is served by both {owners[key]} and "
                                    f"{module.__name__}")
            _check_known(module.__name__, key, low, high)
            owners[key] = module.__name__
            versions[key] = (low, high)
            handlers[key] = served[key]
    handlers[api_versions.API_VERSIONS_KEY] = api_versions.handler(versions)
    return ApiTable(MappingProxyType(handlers), MappingProxyType(versions))


def _check_known(owner: str, key: int, low: int, high: int) -> None:
    if not 0 <= low <= high:
        raise ApiTableError(f"{owner}: api key {key}: versions {low}..{high} are no range")
    for version in range(low, high + 1):
        try:
            load_request_schema(key, version)
            load_response_schema(key, version)
        except KioIndexError as exc:
            raise ApiTableError(f"{owner}: api key {key} version {version} is not in "
                                f"kio's schemas: {exc}") from exc


def api_table() -> ApiTable:
    """The table of every module served."""
    return build_table(_MODULES)
