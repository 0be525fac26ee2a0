"""Samples the queues' histories (primitives/queue_history.py) for the console's
charts: one process at a time, every --console-history-interval.

Why a background sampler, and one process at a time. A history is kept so that
someone opening the console after an incident sees what the queues did before they
looked; sampling only when a page's snapshot is taken would keep nothing while nobody
watched. Every process serving the console runs this task, but only the holder of a
short lease (``{<prefix>#history}:sampler``, lua/history_lease.lua: taken when free,
renewed by its holder each tick, TTL three ticks) samples, so the Redis work is one
script per queue per interval however many replicas run, and another replica takes
over within three ticks of the holder's death. Two samplers at once (a lease that
expired under a slow tick) are harmless: the sample script adds at most one entry
per queue and interval.

What is sampled, bounded before it is paid: for each tenant of this process's token
table (the shared key space without --auth-tokens), the first MAX_QUEUES queues of
its queue index by name (the ones the console's queues view lists), at most
MAX_PER_TICK queues of at most MAX_TENANTS_PER_TICK tenants per tick, SAMPLES_AT_ONCE
scripts in flight; when a cap binds, the next tick goes on with the next tenants in
turn. Each queue's list is bounded (queue_history.KEEP samples) and expires when no
longer sampled.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from .. import tenants
from ..keys import KeySpace
from ..store.reply_shapes import Codes
from ..store.scripts import Commands, script
from .views import MAX_QUEUES, names_of

log = logging.getLogger(__name__)

MAX_PER_TICK = 1000  # queues sampled per tick, all tenants together
MAX_TENANTS_PER_TICK = 200  # tenants whose queue index one tick lists
SAMPLES_AT_ONCE = 32
LEASE_TICKS = 3  # the lease outlives its holder by this many ticks

_LEASE = script("history_lease.lua", Codes(0, 1))

SCRIPTS = (_LEASE,)

T = TypeVar("T")


class HistorySampler:
    def __init__(self, commands: Commands, keyspace: KeySpace, process_id: str, primitives: Any,
                 tenants_of: Callable[[], list[str | None]], interval: float) -> None:
        self._commands, self._key, self._id = commands, keyspace.history_sampler, process_id
        self._primitives, self._tenants_of = primitives, tenants_of
        self.interval = interval
        self._lease_ms = int(interval * LEASE_TICKS * 1000)
        self._next = 0  # where the next tick starts in the tenant list, when the cap bound the last
        self._task: asyncio.Task[None] | None = None
        self.holding = False

    def start(self) -> HistorySampler:
        self._task = asyncio.create_task(self._run(), name="console history sampler")
        return self

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            try:
                self.holding = await _LEASE.run(self._commands, [self._key], [self._id, self._lease_ms, "take"]) == 1
                if self.holding:
                    await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis away: the next tick tries again
                log.debug("console history sampling failed: %r", exc)
            await asyncio.sleep(max(0.0, self.interval - (loop.time() - started)))

    async def tick(self) -> int:
        """Samples the next queues within MAX_PER_TICK; returns how many were sampled."""
        known = self._tenants_of()
        budget, done = MAX_PER_TICK, 0
        interval_ms = max(1, int(self.interval * 1000))
        gate = asyncio.Semaphore(SAMPLES_AT_ONCE)
        first = self._next
        for turn in range(min(len(known), MAX_TENANTS_PER_TICK)):
            if budget <= 0:
                break
            i = (first + turn) % len(known)
            tenant = known[i]

            async def sample_tenant(cap: int) -> int:
                names, _ = await names_of(self._primitives.queues.names, min(cap, MAX_QUEUES))

                async def one(name: str) -> None:
                    async with gate:
                        await self._primitives.history.sample(name, interval_ms)

                await asyncio.gather(*(one(n) for n in names))
                return len(names)

            n = await _in_tenant(tenant, lambda: sample_tenant(budget))
            budget -= n
            done += n
            self._next = (i + 1) % len(known)
        return done

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self.holding:  # another replica may take over at its next tick, not three ticks later
            with contextlib.suppress(Exception):
                await asyncio.wait_for(_LEASE.run(self._commands, [self._key], [self._id, self._lease_ms, "drop"]), 1.0)


async def _in_tenant(tenant: str | None, work: Callable[[], Awaitable[T]]) -> T:
    """Runs work with tenants.current set to tenant, in a context of its own."""
    async def run() -> T:
        return await work()

    context = contextvars.copy_context()
    context.run(tenants.current.set, tenant)
    return await asyncio.create_task(run(), context=context)
