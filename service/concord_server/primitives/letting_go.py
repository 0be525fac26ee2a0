"""A blocked call answers in time, and lets go in the background of what it took.

A blocked call answers within its wait plus ``LATE``, whatever Redis does: a script
still in flight then (Redis paused or cut off) is abandoned and the call answers
UNAVAILABLE (``answer_within``). Its scripts may meanwhile have taken something in
Redis that nobody will hear of (a lock, a queue place, leased tasks), so the call
lets go of it in the background (``Releaser``), retrying while Redis is away until
Redis would have forgotten it anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from ..errors import Unavailable

log = logging.getLogger(__name__)

LATE = 0.3  # seconds past its wait a blocked call may take to answer (the guarantee is 0.5 s at the client)


@contextlib.asynccontextmanager
async def answer_within(wait_ms: int, let_go: Callable[[], None] | None = None) -> AsyncIterator[asyncio.Timeout]:
    """Bounds a blocked call to wait_ms + LATE: past that, whatever it awaits is
    cancelled and it raises Unavailable. On any exception, let_go() runs first (the
    call's scripts may have taken something in Redis that nobody will hear of).
    Yields the bound: a step that bounds itself (a give-up at the wait's end, which
    answers "not acquired" when it runs late) lifts it with ``reschedule(None)``."""
    bound = asyncio.timeout(wait_ms / 1000 + LATE)
    try:
        async with bound:
            yield bound
    except BaseException as exc:
        if let_go is not None:
            let_go()
        if isinstance(exc, TimeoutError) and bound.expired():
            raise Unavailable("Redis did not answer within the call's wait timeout") from None
        raise


class Releaser:
    """Lets go in the background: runs a withdraw-and-release script until Redis
    answers, or until ``within_ms`` (after which Redis has forgotten the caller anyway)."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def let_go(self, withdraw: Callable[[], Awaitable[object]], within_ms: int, what: str) -> None:
        task = asyncio.create_task(self._run(withdraw, within_ms, what))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, withdraw: Callable[[], Awaitable[object]], within_ms: int, what: str) -> None:
        loop = asyncio.get_running_loop()
        give_up_at = loop.time() + within_ms / 1000
        delay = 0.05
        while True:
            try:
                await withdraw()
                return
            except Unavailable:
                if loop.time() + delay > give_up_at:
                    log.warning("could not let go of %s before it expires by itself", what)
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    async def drain(self, timeout: float) -> None:
        """Waits (up to timeout) for pending releases to reach Redis; used at shutdown."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)
