"""Runs every queue's schedules: one ticker per server process, and no leader.

The ticker keeps, for each queue with schedules, when its next tick is due (from
the last script's "ms until the next tick", on Redis's clock) and sleeps until the
soonest. Then it claims that queue's due ticks (Schedules.tick), which says when
the next one is. Every process does the same at the same moment, and the claim
script lets exactly one of them enqueue each tick; the others' claims are refused
and cost a round trip. A tick is late by a timer and two round trips, and never
early: the scripts check it against Redis's now.

What it knows of comes from the index (keys.KeySpace.schedule_index), read whole at
start, after every (re)subscription to the index's channel (a message may have been
lost meanwhile) and every ``rescan`` seconds as a safety net; a message on the
channel (a schedule made, changed or deleted) re-reads that one queue at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ..errors import ConcordError
from ..keys import KeySpace
from ..store.client import command
from ..store.scripts import Commands
from ..store.notifications import Bus
from .schedules import Schedules

log = logging.getLogger(__name__)

RETRY_S = 1.0  # after Redis failed a queue's claim, or the index read


class Ticker:
    def __init__(self, redis: Commands, keyspace: KeySpace, bus: Bus, weight: int, rescan: float = 60.0) -> None:
        self._redis = redis
        self._index = keyspace.schedule_index
        self._bus = bus
        self._weight = weight
        self._rescan = rescan
        self._due: dict[str, float] = {}  # index member -> loop time its next tick is due
        self._changed: set[str] = set()  # members to read again now
        self._announced: set[str] = set()  # of those, the ones a message named
        self._read_all = True
        self._wake = asyncio.Event()
        self._spaces: dict[str, Schedules] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> Ticker:
        self._task = asyncio.create_task(self._run(), name="schedule ticker")
        return self

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(Exception):
            await self._bus.unsubscribe(self._index.channel)

    def _on_message(self, member: str) -> None:
        self._changed.add(member)
        self._announced.add(member)
        self._wake.set()

    def _on_subscribed(self) -> None:
        self._read_all = True
        self._wake.set()

    def _schedules(self, member: str) -> tuple[Schedules, str]:
        prefix, _, queue = member.partition(" ")
        found = self._spaces.get(prefix)
        if found is None:
            found = self._spaces[prefix] = Schedules(self._redis, KeySpace(prefix), self._weight)
        return found, queue

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                await self._bus.subscribe(self._index.channel, self._on_message, self._on_subscribed)
                break
            except ConcordError as exc:
                log.warning("schedule ticker cannot subscribe yet (%s); retrying", exc)
                await asyncio.sleep(RETRY_S)
        last_read_all, read_again_at = loop.time(), 0.0
        while True:
            now = loop.time()
            if now - last_read_all >= self._rescan:
                self._read_all = True
            if self._read_all and now >= read_again_at:
                last_read_all = now
                if not await self._read_index():
                    read_again_at = now + RETRY_S
            todo = self._changed | {m for m, at in self._due.items() if at <= now}
            announced, self._changed, self._announced = self._announced, set(), set()
            if todo:
                await asyncio.gather(*(self._tick(m, m in announced) for m in todo))
                continue
            wakes = [*self._due.values(), last_read_all + self._rescan]
            if self._read_all:
                wakes.append(read_again_at)
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, min(wakes) - loop.time())):
                    await self._wake.wait()

    async def _read_index(self) -> bool:
        """Every queue of the index will be read again; False if Redis failed it."""
        try:
            members = await command(self._redis, "SMEMBERS", self._index.queues)
        except ConcordError as exc:
            log.info("schedule ticker cannot read its index (%s); retrying", exc)
            return False
        self._read_all = False
        self._changed.update(m.decode() if isinstance(m, bytes) else m for m in members)
        return True

    async def _tick(self, member: str, announced: bool) -> None:
        """Claims the queue's due ticks and notes when its next one is. A queue left
        with no schedules leaves the index; one a message named is put back in it,
        in case a ticker took it out while the schedule was being made."""
        loop = asyncio.get_running_loop()
        schedules, queue = self._schedules(member)
        try:
            until_ms, count = await schedules.tick(queue)
            removed = count == 0
            if removed:
                await command(self._redis, "SREM", self._index.queues, member)
                until_ms, count = await schedules.tick(queue)  # one made meanwhile keeps its entry
            if count and (announced or removed):
                await command(self._redis, "SADD", self._index.queues, member)
        except Exception as exc:  # Redis unreachable (ConcordError), or a bug: the ticker must go on
            (log.info if isinstance(exc, ConcordError) else log.exception)(
                "schedule ticker: queue %r: %s; retrying in %.0fs", queue, exc, RETRY_S)
            self._due[member] = loop.time() + RETRY_S
            return
        if until_ms < 0:
            self._due.pop(member, None)
        else:  # + 1 ms: Redis's clock has whole ms
            self._due[member] = loop.time() + (until_ms + 1) / 1000
