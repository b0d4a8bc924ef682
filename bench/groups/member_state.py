"""What a group member's consumer knows of its group beyond the public API.

``Consumer`` shows its assignment (``assignment()``) and its topics
(``subscription()``); ``Admin().describe_group()`` shows the coordinator's view (state,
generation, protocol, members and their assignments). Neither shows what one member
itself holds: the generation it joined, whether it has a rejoin pending, the protocol
it was told. The join rounds need exactly that (every member in the same generation,
none about to rejoin), and the throughput run tags each assignment with its
generation, so these come from the SDK's internals: ``consumer._group.coordinator``.
If those move, ``coordinator()`` gives None and the callers fall back on defaults
(the join rounds then rely on the coordinator's description alone).
"""

from __future__ import annotations

from typing import Any

from strand import Consumer

UNKNOWN = -2  # the SDK's internals moved: rely on the coordinator's description alone


def coordinator(consumer: Consumer) -> Any:
    """The consumer's ConsumerCoordinator (SDK internals: the generation, a pending
    rejoin and the chosen protocol are not part of the public API); None when the
    consumer has no group or the internals moved."""
    return getattr(getattr(consumer, "_group", None), "coordinator", None)
