"""The Hold stream every leased primitive offers (locks, semaphores), as events.

    acquired -> refreshed ... -> lost

The hold is let go (released, or its queue place left) as soon as the stream ends any
other way: the client cancelled or went away, or the server is shutting down.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TypeVar

T = TypeVar("T")

ACQUIRED, REFRESHED, LOST = "acquired", "refreshed", "lost"


async def hold_events(granted: T, renewals: AsyncIterator[T], let_go: Callable[[], None]) -> AsyncIterator[tuple[str, T]]:
    held = True
    try:
        yield ACQUIRED, granted
        async for renewed in renewals:
            yield REFRESHED, renewed
        held = False
        yield LOST, granted
    finally:
        if held:
            let_go()
