"""ApiVersions (key 18): which APIs, in which versions, this listener serves.

A client asks first and then speaks, per API, the highest version both sides know.
An ApiVersions request of a version the listener does not know is still answered:
version 0 of the response with UNSUPPORTED_VERSION and the versions served, so the
client retries with one it finds there (KIP-511; Kafka's own behaviour).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.static.primitive import i16

from services.gateway.kafka.call import Handler, KafkaCall
from services.gateway.kafka.messages import build, response_module, timedelta_ms

__all__ = ["API_VERSIONS_KEY", "VERSIONS", "handler", "unsupported_version"]

API_VERSIONS_KEY = 18
VERSIONS = {API_VERSIONS_KEY: (0, 4)}
# KIP-511: what a client may name itself (Kafka answers INVALID_REQUEST otherwise).
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def unsupported_version(versions: Mapping[int, tuple[int, int]]) -> ApiVersionsResponseV0:
    """The answer to an ApiVersions request of a version not served (always v0)."""
    return ApiVersionsResponseV0(
        error_code=KafkaErrorCode.unsupported_version,
        api_keys=tuple(ApiVersionV0(api_key=i16(key), min_version=i16(low),
                                    max_version=i16(high))
                       for key, (low, high) in sorted(versions.items())))


def handler(versions: Mapping[int, tuple[int, int]]) -> Handler:
    """The ApiVersions handler answering with ``versions`` (api key -> (min, max))."""
    async def api_versions(request: Any, call: KafkaCall) -> Any:
        module = response_module(API_VERSIONS_KEY, call.api_version)
        name = getattr(request, "client_software_name", None)
        version = getattr(request, "client_software_version", None)
        valid = all(value is None or _SOFTWARE.fullmatch(value) for value in (name, version))
        keys = tuple(build(module, "ApiVersion", api_key=i16(key), min_version=i16(low),
                           max_version=i16(high))
                     for key, (low, high) in sorted(versions.items()))
        return build(module, "ApiVersionsResponse",
                     error_code=(KafkaErrorCode.none if valid
                                 else KafkaErrorCode.invalid_request),
                     api_keys=keys, throttle_time=timedelta_ms(0))
    return api_versions
