"""A job run in the background on request, where requests that arrive while it
runs coalesce into one more run after it: a burst of "the slot map may have
changed" costs two reads of the map, not one per report."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


class Rerun:
    def __init__(self, job: Callable[[], Awaitable[None]], name: str, gap: float = 0.0) -> None:
        self._job = job
        self._name = name
        self._gap = gap  # seconds between a run and the one more it owes
        self._task: asyncio.Task[None] | None = None
        self._again = False
        self.closed = False

    def request(self) -> None:
        if self.closed:
            return
        if self._task is not None and not self._task.done():
            self._again = True
            return
        self._task = asyncio.create_task(self._run(), name=self._name)

    async def _run(self) -> None:
        while True:
            self._again = False
            await self._job()
            if not self._again:
                return
            await asyncio.sleep(self._gap)

    async def close(self) -> None:
        self.closed = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
