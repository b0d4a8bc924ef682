"""The config changes that make a topic's configs what its Topic says.

Configs the Topic sets are set when Strand has another value (compared typed, so
``compact,delete`` equals ``delete,compact``); configs set on the topic that the
Topic does not name go back to their defaults: the Topic is the whole truth.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from strand.errors import InvalidConfigError
from strand.log.config import TOPIC_CONFIG

__all__ = ["ConfigChange", "config_change"]


@dataclass(frozen=True, slots=True)
class ConfigChange:
    set: Mapping[str, str]
    delete: tuple[str, ...]

    def __bool__(self) -> bool:
        return bool(self.set or self.delete)

    def describe(self) -> str:
        parts = [f"{k}={v}" for k, v in sorted(self.set.items())]
        parts += [f"{k} to its default" for k in self.delete]
        return ", ".join(parts)


def _typed(key: str, value: str) -> Any:
    known = TOPIC_CONFIG.get(key)
    if known is None:
        return value
    try:
        return known.parse(value)
    except InvalidConfigError:
        return value  # Strand will refuse it with a message naming the key


def config_change(desired: Mapping[str, str], actual: Mapping[str, str]) -> ConfigChange:
    """What to set and what to return to its default; ``actual`` holds only the
    configs set on the topic (not the defaults)."""
    to_set = {k: v for k, v in desired.items()
              if k not in actual or _typed(k, actual[k]) != _typed(k, v)}
    to_delete = tuple(sorted(k for k in actual if k not in desired))
    return ConfigChange(to_set, to_delete)
