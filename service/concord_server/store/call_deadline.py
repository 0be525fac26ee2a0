"""A call's gRPC deadline, as the bound of its own waits on Redis.

A link fails what it owes once its oldest command has waited the reply timeout (5 s),
but a call whose client gives it less (a retry with what is left of its budget, a
client's short timeout) would meanwhile run into its deadline, and its client would
hear DEADLINE_EXCEEDED with no word from the server. So ``@rpc`` notes each unary
call's deadline (less a margin for the answer's way back) with ``bound``, and
``by_the_deadline`` ends a wait on Redis made by that call at that time with
RedisTimeoutError: UNAVAILABLE, "may have happened", as for any Redis timeout.

Only the call's own task is bounded: a task it starts (a let-go in the background, a
listener) inherits the context variable but not the deadline, which is the call's and
not theirs.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable
from typing import TypeVar

from redis.exceptions import TimeoutError as RedisTimeoutError

T = TypeVar("T")

# Seconds before the deadline the answer leaves (at most 4% of the call's time): less
# than the margin a blocked call's wait keeps (api/convert.wait_budget_ms: 50 ms, 10%),
# so a wait that ends there still has time to give up cleanly and answer "not acquired".
MARGIN = 0.02

_DEADLINE: contextvars.ContextVar[tuple[asyncio.Task[object], float] | None] = contextvars.ContextVar(
    "concord_call_deadline", default=None)


def bound(seconds_left: float | None) -> None:
    """The running task is a call with ``seconds_left`` before its deadline (None: none)."""
    task = asyncio.current_task()
    if seconds_left is None or task is None:
        return
    loop = asyncio.get_running_loop()
    _DEADLINE.set((task, loop.time() + seconds_left - min(MARGIN, seconds_left / 25)))


def left(within: float) -> float | None:
    """Seconds until this call must answer, when that comes before ``within`` seconds
    from now; else None (the usual case: no deadline, or a distant one)."""
    got = _DEADLINE.get()
    if got is None or got[0] is not asyncio.current_task():
        return None
    remaining = got[1] - asyncio.get_running_loop().time()
    return remaining if remaining < within else None


async def by_the_deadline(waiting: Awaitable[T], within: float, what: str = "Redis") -> T:
    """``await waiting``, ended with RedisTimeoutError at the call's deadline when that
    comes before ``within`` seconds (the bound the wait has anyway)."""
    remaining = left(within)
    if remaining is None:
        return await waiting
    bounded = asyncio.timeout(max(0.0, remaining))
    try:
        async with bounded:
            return await waiting
    except TimeoutError:
        if not bounded.expired():
            raise
        raise RedisTimeoutError(f"the call's deadline came before {what} answered") from None
