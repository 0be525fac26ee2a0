"""The blocking acquire shared by every primitive whose callers queue in Redis
(locks, semaphores).

One script tries to take the resource and, failing that, joins its FIFO queue. A
queued caller then waits on a ticket (waiters.py) for the grant's notification.
On timeout it leaves the queue, keeping a grant that raced the timeout. If the
caller goes away or Redis fails mid-way, it lets go in the background: leaves the
queue or passes on whatever reached it. A caller dropped from the queue as dead
while its process could not reach Redis queues again (at the back) for the rest
of its wait.

A blocked call answers within its wait plus ``LATE``, whatever Redis does: a script
still in flight then (Redis paused or cut off) is abandoned, the call lets go in the
background and answers UNAVAILABLE (answer_within).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from ..errors import Unavailable
from ..waiters import Dropped, Poll, Waiters

log = logging.getLogger(__name__)

T = TypeVar("T")

LATE = 0.3  # seconds past its wait a blocked call may take to answer (the guarantee is 0.5 s at the client)


@contextlib.asynccontextmanager
async def answer_within(wait_ms: int, let_go: Callable[[], None] | None = None) -> AsyncIterator[None]:
    """Bounds a blocked call to wait_ms + LATE: past that, whatever it awaits is
    cancelled and it raises Unavailable. On any exception, let_go() runs first (the
    call's scripts may have taken something in Redis that nobody will hear of)."""
    bound = asyncio.timeout(wait_ms / 1000 + LATE)
    try:
        async with bound:
            yield
    except BaseException as exc:
        if let_go is not None:
            let_go()
        if isinstance(exc, TimeoutError) and bound.expired():
            raise Unavailable("Redis did not answer within the call's wait timeout") from None
        raise


async def acquire_queued(
    waiters: Waiters,
    channel: str,
    token: str,
    poll: Poll,
    wait_ms: int,
    *,
    attempt: Callable[[], Awaitable[tuple[T | None, int, int]]],
    granted: Callable[[str], T],
    give_up: Callable[[], Awaitable[T | None]],
    let_go: Callable[[], None],
    granted_ms: Callable[[T], int],
    primitive: str,
) -> T | None:
    """attempt() runs the acquire script: (the grant, or None if queued; ms until
    the resource may free itself, or -1; the Redis clock, ms). granted(payload)
    turns a notification into the grant, granted_ms(grant) says when Redis granted
    it. give_up() withdraws, returning a grant that raced the timeout."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_ms / 1000
    with waiters.ticket(channel, token, poll) as ticket:
        async with answer_within(wait_ms, let_go):
            while True:
                grant, recheck_ms, queued_ms = await attempt()
                if grant is not None:
                    return grant
                queued_at = loop.time()
                try:
                    payload = await ticket.wait(max(0.0, deadline - loop.time()),
                                                recheck_in=(recheck_ms + 1) / 1000 if recheck_ms > 0 else None)
                except Dropped:
                    if loop.time() < deadline:
                        continue
                    payload = None
                if payload is not None:
                    grant = granted(payload)
                    if waiters.on_handoff is not None:
                        waiters.on_handoff(primitive, _handoff(queued_ms, queued_at, granted_ms(grant), loop.time()))
                    return grant
                return await give_up()


def _handoff(queued_ms: int, queued_at: float, granted_ms: int, resumed_at: float) -> float:
    """Seconds from the grant in Redis to the waiter resuming here, without comparing
    two machines' clocks: the time waited here less the time Redis kept the waiter
    queued (both clocks measure only an interval). Redis whole ms make it +-1 ms;
    the acquire reply's travel time is not counted."""
    return max(0.0, (resumed_at - queued_at) - (granted_ms - queued_ms) / 1000)


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


async def keep_alive(refresh: Callable[[], Awaitable[T]], not_held: type[Exception], ttl_ms: int) -> AsyncIterator[T]:
    """Calls refresh() every ttl/3 and yields each result; returns when the hold is
    lost: refresh raised ``not_held``, or Redis could not confirm a refresh before the
    TTL, counted from before the last confirmed one was sent, ran out."""
    loop = asyncio.get_running_loop()
    period = ttl_ms / 3000
    valid_until = loop.time() + ttl_ms / 1000
    delay = period
    while True:
        await asyncio.sleep(delay)
        sent = loop.time()
        try:
            renewed = await refresh()
        except not_held:
            return
        except Unavailable:
            if loop.time() >= valid_until:
                return
            delay = min(period, max(0.01, (valid_until - loop.time()) / 4))
            continue
        valid_until = sent + ttl_ms / 1000
        delay = period
        yield renewed
