"""Live views over Server-Sent Events, at a bounded cost.

One ``Feed`` per tenant that has viewers: a task that computes the tenant's snapshot
(views.py) once per interval, or at once when poked (after an action), and hands the
same serialized snapshot to every viewer of that tenant; it stops when the last one
leaves. A viewer whose connection is slow misses intermediate snapshots (a queue of
one: only the newest waits), never holds memory for them. At most ``max_streams``
event streams are open per process (past it: 429 RESOURCE_EXHAUSTED), so the work
is at most one snapshot per tenant per interval however many pages are open.

A snapshot has one part per view, and a feed reads only the parts its viewers'
pages show (a page says which when it opens its stream; the overview's part is always
read): a page on the overview costs Redis and the event loop no lock, queue or chat
listing, and the locks page none of the others (bench load: the parts of every view
at once, over 10,000 waiters, came to 327 KiB a second). A viewer whose token may not
list locks gets the snapshot without them (``Feed.payload``, serialized once per
variant).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from .. import tenants
from ..errors import ResourceExhausted

log = logging.getLogger(__name__)

# Seconds between snapshots: a change shows on an open page within about this plus
# one snapshot's read (bench load: 0.8 s + at most 0.1 s over 10,000 blocked calls,
# inside the second), at about 3.6% of a core per snapshot a second there.
INTERVAL = 0.8
KEEPALIVE = 15.0  # seconds without news before a comment line keeps proxies from closing the stream
MAX_STREAMS = 64  # open event streams per process

Snapshot = Callable[[frozenset[str]], Awaitable[dict[str, Any]]]  # the parts to read -> the snapshot


class Feed:
    def __init__(self, tenant: str | None, snapshot: Snapshot, interval: float) -> None:
        self.tenant = tenant
        self._snapshot = snapshot
        self._interval = interval
        self.viewers: dict[asyncio.Queue[dict[str, Any] | None], frozenset[str]] = {}  # -> the parts it shows
        self.latest: dict[str, Any] | None = None
        self._poked = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._payloads: dict[tuple[str, ...], bytes] = {}

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name=f"console-feed-{self.tenant or ''}")

    def poke(self) -> None:
        self._poked.set()

    def payload(self, hidden: tuple[str, ...]) -> bytes:
        """The latest snapshot as one SSE event, without the parts in ``hidden``."""
        found = self._payloads.get(hidden)
        if found is None and self.latest is not None:
            shown = {k: v for k, v in self.latest.items() if k not in hidden}
            found = self._payloads[hidden] = b"event: snapshot\ndata: " + json.dumps(shown).encode() + b"\n\n"
        return found or b""

    async def _run(self) -> None:
        tenants.current.set(self.tenant)  # this task's own context: the tenant's primitives
        while self.viewers:
            started = time.monotonic()
            try:
                snapshot = await self._snapshot(frozenset().union(*self.viewers.values()))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis away, say: the page shows the error and keeps the stream
                log.debug("console snapshot failed: %r", exc)
                snapshot = {"error": str(exc) or type(exc).__name__}
            snapshot["at_ms"] = int(time.time() * 1000)
            self.latest, self._payloads = snapshot, {}
            for queue in list(self.viewers):
                _put_newest(queue, snapshot)
            self._poked.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._poked.wait(), max(0.0, self._interval - (time.monotonic() - started)))

    async def aclose(self) -> None:
        for queue in list(self.viewers):
            _put_newest(queue, None)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def _put_newest(queue: asyncio.Queue[Any], item: Any) -> None:
    while not queue.empty():
        queue.get_nowait()
    queue.put_nowait(item)


class Hub:
    """The feeds of every tenant with viewers, and the cap on open streams."""

    def __init__(self, snapshot_of: Callable[[], Snapshot], *, interval: float = INTERVAL,
                 max_streams: int = MAX_STREAMS) -> None:
        self._snapshot_of = snapshot_of
        self._interval = interval
        self._max_streams = max_streams
        self._feeds: dict[str | None, Feed] = {}
        self.open_streams = 0
        self.closed = False

    def poke(self, tenant: str | None) -> None:
        feed = self._feeds.get(tenant)
        if feed is not None:
            feed.poke()

    @contextlib.asynccontextmanager
    async def subscribe(self, tenant: str | None, parts: frozenset[str]):
        """A queue of the tenant's snapshots, with at least ``parts`` (None: the console
        is closing)."""
        if self.closed or self.open_streams >= self._max_streams:
            raise ResourceExhausted(f"the console has {self.open_streams} live views open, its most; "
                                    "close one or try again later", limit="console_streams")
        feed = self._feeds.get(tenant)
        if feed is None:
            feed = self._feeds[tenant] = Feed(tenant, self._snapshot_of(), self._interval)
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(maxsize=1)
        if feed.latest is not None:
            queue.put_nowait(feed.latest)
        if not parts <= frozenset().union(*feed.viewers.values()):
            feed.poke()  # a part nobody read so far: read it now, not at the next tick
        feed.viewers[queue] = parts
        self.open_streams += 1
        feed.start()
        try:
            yield feed, queue
        finally:
            self.open_streams -= 1
            feed.viewers.pop(queue, None)
            if not feed.viewers:
                feed.poke()  # its task wakes and ends
                if self._feeds.get(tenant) is feed:
                    del self._feeds[tenant]

    async def aclose(self) -> None:
        self.closed = True
        for feed in list(self._feeds.values()):
            await feed.aclose()
