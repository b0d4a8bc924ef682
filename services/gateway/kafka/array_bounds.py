"""A Kafka request body's arrays checked against the bytes that carry them, before kio
reads the body.

kio's native reader reserves room for an array from the length on the wire before it
reads the elements: a compact array announcing ~2^32 elements in a 26-byte request
makes it ask for tens of gigabytes, and the allocation failure aborts the whole
gateway process (found by fuzz/harnesses/kafka_requests.py). Kafka's generated readers
refuse such a length first ("Tried to allocate a collection of size N, but there are
only M bytes remaining"); :func:`check_arrays` does the same, walking the request's
schema (kio's entity classes) over the bytes without building anything:

* an array whose elements cannot fit in the bytes left (each takes at least its
  smallest encoding) is refused;
* a null array, bytes or records value where the schema does not allow null is
  refused, as Kafka's readers do ("non-nullable field ... was serialized as null");
  kio would read it as None and a handler would trip over it.

The walk reads the bytes exactly as kio's reader does (a known tagged field is read
where it starts, whatever size it announces; an unknown one is skipped by its size),
so it checks every array kio would meet. Anything else that does not add up (a
truncated body, a varint over 5 bytes) ends the walk quietly: kio's reader fails at
the same place and says what is wrong, as before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import struct
from dataclasses import dataclass

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

__all__ = ["ArrayOutOfBounds", "check_arrays"]

# Bytes of the fixed-size kafka types (bool, ints, durations, floats, uuids).
_FIXED = {"bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
          "timedelta_i32": 4, "int64": 8, "timedelta_i64": 8, "datetime_i64": 8,
          "float64": 8, "uuid": 16}
_LENGTH_PREFIXED = ("string", "bytes", "records")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class ArrayOutOfBounds(ValueError):
    """An array longer than the body could hold, or a null where none is allowed."""


class _Stop(Exception):
    """The bytes do not add up: leave it to kio's reader to say why."""


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    kind: str  # "fixed", "length" (string/bytes/records), "entity"
    array: bool
    nullable: bool
    size: int = 0  # fixed: its bytes
    kafka_type: str = ""
    entity: type | None = None
    # an array: one of its elements (never null), and the fewest bytes one takes (>= 1)
    element: _Field | None = None
    element_size: int = 0


@dataclass(frozen=True, slots=True)
class _Plan:
    name: str
    flexible: bool
    fields: tuple[_Field, ...]  # in wire order, untagged
    tagged: dict[int, _Field]
    min_size: int  # the fewest bytes an instance takes


@functools.cache
def _plan(entity: type) -> _Plan:
    flexible = bool(getattr(entity, "__flexible__", False))
    fields: list[_Field] = []
    tagged: dict[int, _Field] = {}
    for field in dataclasses.fields(entity):
        kind = classify_field(field)
        nullable = is_optional(field)
        array = isinstance(kind, (PrimitiveTupleField, EntityTupleField))
        if isinstance(kind, (EntityField, EntityTupleField)):
            planned = _Field(field.name, "entity", array, nullable, entity=kind.type_)
        else:
            kafka_type = str(field.metadata.get("kafka_type", ""))
            if kafka_type in _FIXED:
                planned = _Field(field.name, "fixed", array, nullable,
                                 size=_FIXED[kafka_type], kafka_type=kafka_type)
            elif kafka_type in _LENGTH_PREFIXED:
                planned = _Field(field.name, "length", array, nullable,
                                 kafka_type=kafka_type)
            else:  # a type this walk does not know: stop there, kio decides
                planned = _Field(field.name, "unknown", array, nullable)
        if array:
            element = dataclasses.replace(planned, array=False, nullable=False)
            planned = dataclasses.replace(planned, element=element,
                                          element_size=max(_min_size(element, flexible), 1))
        tag = get_field_tag(field)
        if tag is not None:
            tagged[int(tag)] = planned
        else:
            fields.append(planned)
    min_size = sum(_min_size(f, flexible) for f in fields) + (1 if flexible else 0)
    return _Plan(entity.__name__, flexible, tuple(fields), tagged, min_size)


def _min_size(field: _Field, flexible: bool) -> int:
    """The fewest bytes ``field`` takes on the wire."""
    if field.array:
        return 1 if flexible else 4
    if field.kind == "fixed":
        return field.size
    if field.kind == "length":
        return 1 if flexible else (2 if field.kafka_type == "string" else 4)
    if field.kind == "entity":
        assert field.entity is not None
        return 1 if field.nullable else _plan(field.entity).min_size
    return 0


class _Walk:
    def __init__(self, data: bytes | memoryview, start: int, end: int) -> None:
        self.data = memoryview(data)
        self.pos = start
        self.end = end

    def need(self, count: int) -> None:
        if count < 0 or self.pos + count > self.end:
            raise _Stop

    def uvarint(self) -> int:
        value = shift = 0
        for _ in range(5):
            self.need(1)
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
        raise _Stop  # longer than an int32's varint

    def int16(self) -> int:
        self.need(2)
        (value,) = _I16.unpack_from(self.data, self.pos)
        self.pos += 2
        return int(value)

    def int32(self) -> int:
        self.need(4)
        (value,) = _I32.unpack_from(self.data, self.pos)
        self.pos += 4
        return int(value)

    def length(self, flexible: bool, wide: bool) -> int:
        """A length prefix; -1 for null. ``wide``: int32 (else int16) when not compact."""
        if flexible:
            return self.uvarint() - 1
        return self.int32() if wide else self.int16()

    def entity(self, plan: _Plan) -> None:
        for field in plan.fields:
            self.field(field, plan)
        if plan.flexible:
            self.tagged_fields(plan)

    def tagged_fields(self, plan: _Plan) -> None:
        for _ in range(self.uvarint()):
            tag, size = self.uvarint(), self.uvarint()
            field = plan.tagged.get(tag)
            if field is None:  # unknown: skipped by its size
                self.need(size)
                self.pos += size
            else:  # known: read where it starts, whatever its size says (as kio and
                # Kafka's generated readers do), so the walk stays where kio's reader is
                self.field(field, plan)

    def field(self, field: _Field, plan: _Plan) -> None:
        if field.kind == "unknown":
            raise _Stop
        if not field.array:
            self.value(field, plan)
            return
        count = self.length(plan.flexible, wide=True)
        if count < 0:
            if count == -1 and not field.nullable:
                raise ArrayOutOfBounds(f"non-nullable field {plan.name}.{field.name} "
                                       "was serialized as null")
            if count < -1:
                raise _Stop
            return
        element, smallest = field.element, field.element_size
        assert element is not None
        left = self.end - self.pos
        if count * smallest > left:
            raise ArrayOutOfBounds(
                f"{plan.name}.{field.name}: an array of {count} elements announced with "
                f"{left} bytes left (each takes at least {smallest})")
        if field.kind == "fixed":
            self.need(count * field.size)
            self.pos += count * field.size
            return
        for _ in range(count):
            self.value(element, plan)

    def value(self, field: _Field, plan: _Plan) -> None:
        if field.kind == "fixed":
            self.need(field.size)
            self.pos += field.size
        elif field.kind == "length":
            size = self.length(plan.flexible, wide=field.kafka_type != "string")
            if size < 0:
                if size == -1 and not field.nullable and field.kafka_type != "string":
                    raise ArrayOutOfBounds(f"non-nullable field {plan.name}.{field.name} "
                                           "was serialized as null")
                if size < -1:
                    raise _Stop
                return
            self.need(size)
            self.pos += size
        else:
            assert field.entity is not None
            if field.nullable:  # a nullable struct: a marker byte first
                self.need(1)
                marker = self.data[self.pos]
                self.pos += 1
                if marker == 0xFF:
                    return
            self.entity(_plan(field.entity))


def check_arrays(data: bytes | memoryview, offset: int, request_type: type) -> None:
    """Raise ArrayOutOfBounds if the ``request_type`` body at ``offset`` of ``data``
    announces an array it cannot hold, or a null where its schema allows none."""
    walk = _Walk(data, offset, len(data))
    with contextlib.suppress(_Stop):
        walk.entity(_plan(request_type))
