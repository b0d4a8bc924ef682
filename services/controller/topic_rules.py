"""Kafka's rules for topic names and partition counts.

Strand keeps Kafka's rules exactly so that any name valid here is valid on Kafka
and the other way round (mirroring between the two must never meet a name one side
cannot hold). Why each rule exists:

* Characters ``[a-zA-Z0-9._-]`` only, ASCII: the name becomes a directory name
  (``<topic>-<partition>``) on every storage node and part of metric names, so it
  must be safe on every filesystem and in every metrics system.
* At most 249 characters: a partition directory is ``<topic>-<partition>`` and a
  deleted one is renamed to ``<topic>-<partition>.<32-hex uuid>-delete``, which must
  still fit the usual 255-byte file name limit.
* Not ``"."`` or ``".."``: those are directory names with a meaning of their own.
* Names starting with ``"__"`` are reserved for internal topics
  (``__consumer_offsets``, ``__transaction_state``); only the services that own them
  pass ``allow_internal=True``.
* Collisions: metric names replace ``'.'`` with ``'_'``, so ``a.b`` and ``a_b`` would
  report into the same metrics. Kafka warns about names that contain either
  character and refuses to create a topic that collides with an existing one; this
  module offers both as separate steps (:func:`collision_warning`,
  :func:`reject_collisions`) so the caller decides which applies.
"""

from __future__ import annotations

from collections.abc import Iterable

from strand.errors import InvalidPartitionsError, InvalidTopicError

__all__ = [
    "INTERNAL_TOPICS",
    "LEGAL_CHARS",
    "MAX_NAME_LENGTH",
    "MAX_PARTITIONS",
    "collides",
    "collision_warning",
    "find_collisions",
    "has_collision_chars",
    "is_internal",
    "reject_collisions",
    "unify_collision_chars",
    "validate_partitions",
    "validate_topic_name",
]

MAX_NAME_LENGTH = 249
LEGAL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
INTERNAL_PREFIX = "__"
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})

# Far above any sane topic (Kafka suggests staying below a few thousand per broker)
# but low enough that a typo (10**9) fails fast instead of exhausting the controller
# and etcd with a billion partition records.
MAX_PARTITIONS = 100_000


def validate_topic_name(name: str, *, allow_internal: bool = False) -> None:
    """Raise :class:`InvalidTopicError` saying exactly which rule ``name`` breaks.

    Checks run in a fixed order (type, empty, length, ``.``/``..``, characters,
    internal prefix) so that a name breaking several rules always gets the same
    message.
    """
    if not isinstance(name, str):
        raise InvalidTopicError(f"topic name must be a string, got {type(name).__name__}")
    if not name:
        raise InvalidTopicError("topic name is illegal, it can't be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopicError(
            f"topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters "
            f"(it has {len(name)}): {name[:40]!r}..."
        )
    if name in (".", ".."):
        raise InvalidTopicError(f'topic name cannot be "." or "..", got {name!r}')
    illegal = sorted({c for c in name if c not in LEGAL_CHARS})
    if illegal:
        shown = ", ".join(repr(c) for c in illegal)
        raise InvalidTopicError(
            f"topic name {name!r} is illegal: it contains {shown}; only ASCII letters, "
            "digits, '.', '_' and '-' are allowed"
        )
    if name.startswith(INTERNAL_PREFIX) and not allow_internal:
        raise InvalidTopicError(
            f"topic name {name!r} is reserved: names starting with {INTERNAL_PREFIX!r} "
            "are for internal topics"
        )


def is_internal(name: str) -> bool:
    """Whether ``name`` is in the internal namespace (starts with ``"__"``)."""
    return name.startswith(INTERNAL_PREFIX)


def has_collision_chars(name: str) -> bool:
    """Whether ``name`` contains ``'.'`` or ``'_'``, the characters metrics conflate."""
    return "." in name or "_" in name


def unify_collision_chars(name: str) -> str:
    """The form metrics see: every ``'.'`` replaced by ``'_'``."""
    return name.replace(".", "_")


def collides(a: str, b: str) -> bool:
    """Whether two names differ only by ``'.'`` versus ``'_'`` (identical names collide too)."""
    return unify_collision_chars(a) == unify_collision_chars(b)


def collision_warning(name: str) -> str | None:
    """Kafka's warning for names that could collide in metrics, or None if it cannot."""
    if not has_collision_chars(name):
        return None
    return (
        f"topic name {name!r} contains '.' or '_'; because metric names replace '.' with "
        "'_', topics whose names differ only in these characters collide. To avoid "
        "issues it is best to use either, but not both."
    )


def find_collisions(name: str, existing: Iterable[str]) -> list[str]:
    """Existing topics, other than ``name`` itself, whose names collide with ``name``."""
    unified = unify_collision_chars(name)
    return sorted(t for t in existing if t != name and unify_collision_chars(t) == unified)


def reject_collisions(name: str, existing: Iterable[str]) -> None:
    """Raise :class:`InvalidTopicError` if ``name`` collides with an existing topic.

    Kafka refuses such a topic at creation; a name equal to an existing one is not a
    collision here (that is TOPIC_ALREADY_EXISTS, which the caller reports).
    """
    clashes = find_collisions(name, existing)
    if clashes:
        raise InvalidTopicError(
            f"topic {name!r} collides with existing topic(s) {clashes}: names that differ "
            "only in '.' versus '_' share metric names"
        )


def validate_partitions(n: int) -> None:
    """Raise :class:`InvalidPartitionsError` unless ``1 <= n <= MAX_PARTITIONS``."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise InvalidPartitionsError(
            f"number of partitions must be an integer, got {type(n).__name__}"
        )
    if n < 1:
        raise InvalidPartitionsError(f"number of partitions must be at least 1, got {n}")
    if n > MAX_PARTITIONS:
        raise InvalidPartitionsError(
            f"number of partitions must be at most {MAX_PARTITIONS}, got {n}"
        )
