"""Auto-pipelining: the process's commands share one Redis connection, and each goes
out without waiting for the replies to the ones before it.

Commands issued in the same event-loop turn leave in one write; Redis answers in
order, and the link (link.Link) hands each reply to its caller's future.
Compared with checking a pooled connection out per command this halves the CPU per
command under load, and any number of concurrent calls use one connection. Nothing
blocking may go through here (Concord never blocks in Redis: waiting happens on
futures).

A link that fails, or leaves its oldest command unanswered for its reply timeout,
fails every command in flight on it (they become UNAVAILABLE, see client.py)
and is dropped; the next command opens a new one, which owes nothing. Concurrent
callers share one attempt to open it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from redis.client import NEVER_DECODE
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ..errors import ReplicationTimeout

from .call_deadline import by_the_deadline
from .link import Endpoint, Link
from .replica_acks import Confirmations, changes

log = logging.getLogger(__name__)


SEEN_MARK_MS = 1000  # how long confirm_seen's key lives


class AutoPipeline:
    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._link: Link | None = None
        self._opening: asyncio.Future[Link] | None = None
        self._closed = False
        self._watchers: list[Callable[[BaseException], None]] = []
        acks = endpoint.replica_acks
        self._confirmations = Confirmations(acks) if acks is not None else None

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        """Sends one command; ``NEVER_DECODE=True`` (redis-py's option) keeps its reply bytes.
        With replica acks, a change's reply is returned once the batch's WAIT confirmed it."""
        link = self._link
        within = self.endpoint.reply_timeout
        if link is None or not link.alive:
            link = await by_the_deadline(self._open(), within)
        reply = link.send(args, bool(options.get(NEVER_DECODE)))
        if self._confirmations is None or not changes(args):
            return await by_the_deadline(reply, within)
        confirmed = self._confirmations.after(link)
        result = await by_the_deadline(reply, within)
        try:
            # Shielded: the batch's callers share this future, and a caller cancelled while
            # it waits (its call bound, its client gone) would otherwise cancel it for all.
            await by_the_deadline(asyncio.shield(confirmed), within, "the replicas")
        except (ReplicationTimeout, RedisConnectionError, RedisTimeoutError) as exc:
            # The script ran (its reply is here) but is not confirmed: say what it answered.
            raise ReplicationTimeout(f"the change was made on the Redis primary but not confirmed: {exc}",
                                     reply=result) from exc
        return result

    async def confirm_seen(self, key: str) -> None:
        """With replica acks, returns once the replicas have every change this connection
        has seen, not only those it made (a grant another connection wrote and
        announced): ``WAIT`` counts only what its own connection wrote, so a write of
        its own goes first (``key``, expiring in a second) and moves that mark past
        the change. Raises ReplicationTimeout if the replicas do not confirm."""
        if self._confirmations is None:
            return
        await self.execute_command("SET", key, "1", "PX", SEEN_MARK_MS)

    async def execute_adjacent(self, commands: Sequence[tuple[Any, ...]], raw: bool = False) -> list[Any]:
        """Several commands back to back on one connection, nothing between them (ASKING
        and the command it applies to); returns their replies or raises the first error."""
        link = self._link
        within = self.endpoint.reply_timeout
        if link is None or not link.alive:
            link = await by_the_deadline(self._open(), within)
        futures = [link.send(c, raw) for c in commands]
        confirmed = (self._confirmations.after(link) if self._confirmations is not None
                     and any(changes(c) for c in commands) else None)
        results = list(await by_the_deadline(asyncio.gather(*futures), within))
        if confirmed is not None:  # shared by the batch's callers (execute_command)
            await by_the_deadline(asyncio.shield(confirmed), within, "the replicas")
        return results

    def on_lost(self, callback: Callable[[BaseException], None]) -> None:
        """callback(error) runs each time a connection of this pipeline is lost."""
        self._watchers.append(callback)

    def reset(self, reason: str, key: Any = None) -> None:
        """Drops the current connection: what is in flight on it fails UNAVAILABLE."""
        link = self._link
        if link is not None and link.alive:
            link.close(RedisConnectionError(f"connection dropped: {reason}"))

    async def _open(self) -> Link:
        if self._closed:
            raise RedisConnectionError("closed")
        if self._opening is None:
            self._opening = asyncio.ensure_future(self._connect())
            self._opening.add_done_callback(self._opened)
        return await asyncio.shield(self._opening)

    async def _connect(self) -> Link:
        link = await Link.open(self.endpoint)
        for watcher in self._watchers:
            link.on_lost(watcher)
        return link

    def _opened(self, opening: asyncio.Future[Link]) -> None:
        self._opening = None
        if not opening.cancelled() and opening.exception() is None:
            link = opening.result()
            if self._closed:
                link.close()
            else:
                self._link = link

    async def aclose(self) -> None:
        self._closed = True
        if self._opening is not None:
            await asyncio.gather(self._opening, return_exceptions=True)
        if self._link is not None:
            self._link.close()
            self._link = None
