"""asyncio helpers shared by the services.

Python 3.11's ``asyncio.wait_for`` can swallow a cancellation that arrives just as
the awaited thing completes (gh-86296, fixed in 3.12 by rebuilding it on
``asyncio.timeout``): a task cancelled at that moment carries on, and whoever
awaits it hangs. Every timed wait here goes through ``asyncio.timeout`` instead.
"""

from __future__ import annotations

import asyncio

__all__ = ["wait_event"]


async def wait_event(event: asyncio.Event, timeout: float | None) -> bool:
    """Wait until ``event`` is set or ``timeout`` seconds pass; returns whether it is
    set. Cancellation always propagates."""
    if event.is_set():
        return True
    try:
        async with asyncio.timeout(timeout):
            await event.wait()
    except TimeoutError:
        return event.is_set()
    return True
