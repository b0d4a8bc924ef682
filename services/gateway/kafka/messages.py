"""Building kio messages of whatever version a client speaks.

kio generates one set of classes per API version (Kafka's JSON schemas, field by
field), so a handler serving versions 4 to 17 of Fetch would otherwise repeat itself
per version. :func:`build` fills a class of the request's version from the values of
the newest one, dropping the fields that version does not have — as Kafka's own
generated ``write(version)`` skips them.
"""

from __future__ import annotations

import datetime
import functools
import uuid
from dataclasses import fields
from types import ModuleType
from typing import Any

from kio.index import load_payload_module
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.static.constants import EntityType

__all__ = ["ZERO_UUID", "build", "kafka_error", "milliseconds", "response_module", "timedelta_ms",
           "topic_uuid"]

ZERO_UUID = uuid.UUID(int=0)


@functools.cache
def response_module(api_key: int, version: int) -> ModuleType:
    """kio's module of the response classes of ``api_key`` at ``version``."""
    return load_payload_module(api_key, version, EntityType.response)


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls))


def build(module: ModuleType, class_name: str, **values: Any) -> Any:
    """``module.class_name`` filled with the ``values`` its version has."""
    cls = getattr(module, class_name)
    names = _field_names(cls)
    return cls(**{name: value for name, value in values.items() if name in names})


@functools.cache
def kafka_error(code: int) -> KafkaErrorCode:
    """Kafka's error code of a Strand code (the same numbers: strand.errors.ErrorCode)."""
    return KafkaErrorCode(int(code))


def timedelta_ms(ms: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ms)


def milliseconds(delta: datetime.timedelta) -> int:
    return int(delta.total_seconds() * 1000)


def topic_uuid(topic_id: str) -> uuid.UUID:
    """A topic's id as Kafka's UUID (Strand keeps it as text; not a UUID: the zero id,
    Kafka's "no id")."""
    try:
        return uuid.UUID(topic_id)
    except ValueError:
        return ZERO_UUID
