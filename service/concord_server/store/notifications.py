"""One pub/sub connection per server process, shared by every blocked call.

Scripts that free a resource SPUBLISH on the resource's shard channel (a channel in
the resource's own slot, so the same code runs on Redis Cluster). The bus keeps one
subscription per channel that has local waiters and hands each message to the
channel's handler. Every subscription confirmation, including the ones after a
reconnect, calls the channel's ``on_subscribed`` so its owner can re-check state it
may have missed while not subscribed.

The connection is a link.Link owned by one task, the bus's keeper: it opens
the link, subscribes every channel listed, reads (the link hands it each message),
pings when the line has been quiet, and when the link is lost opens a new one after
a backoff. Nothing else connects, so no two handshakes can interleave on a socket.
Subscribing while Redis is unreachable only lists the channel: the keeper's next
link subscribes it, and the confirmation tells its owner to look.

On Redis Cluster there is one bus per node (cluster.ClusterBus); ``on_displaced``
tells it when a channel may now belong to another node.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from redis.exceptions import RedisError, ResponseError

from ..errors import Unavailable
from .client import count_failure
from .link import Endpoint, Link

log = logging.getLogger(__name__)

_QUIET = 5.0  # the keeper pings after at most this long without a message
_BACKOFF = (0.05, 1.0)  # first and longest wait between attempts to reconnect


class Bus(Protocol):
    """What blocked calls need of pub/sub (wakeups/listener.py): NotificationBus on
    one Redis, cluster.ClusterBus on a Redis Cluster."""

    async def subscribe(self, channel: str, on_message: Callable[[str], None],
                        on_subscribed: Callable[[], None]) -> None:
        """Starts delivering the channel's messages; on_subscribed fires on each
        confirmation, including after a reconnect. Raises ConcordError when the
        channel cannot even be listed (shutting down; cluster: no slot map)."""

    async def unsubscribe(self, channel: str) -> None: ...

    async def close(self) -> None: ...


@dataclass
class _Subscription:
    on_message: Callable[[str], None]
    on_subscribed: Callable[[], None]


class NotificationBus:
    def __init__(self, endpoint: Endpoint,
                 on_displaced: Callable[[str | BaseException], None] | None = None) -> None:
        self._endpoint = endpoint
        # Cluster only: called with a channel the server dropped (its slot moved), or
        # with the error of a refused subscription (MOVED) or of a lost connection.
        self._on_displaced = on_displaced or (lambda cause: None)
        self._subs: dict[str, _Subscription] = {}
        self._link: Link | None = None
        self._heard = 0.0  # monotonic time of the last message on the link
        self._keeper: asyncio.Task[None] | None = None
        self._closed = False

    async def subscribe(self, channel: str, on_message: Callable[[str], None], on_subscribed: Callable[[], None]) -> None:
        """Starts delivering the channel's messages; on_subscribed fires on each confirmation."""
        if self._closed:
            raise Unavailable("server is shutting down")
        self._subs[channel] = _Subscription(on_message, on_subscribed)
        link = self._link
        log.debug("%s: subscribe %s (link %s)", self._endpoint.name, channel, "up" if link and link.alive else "down")
        if link is not None and link.alive:
            link.send(("SSUBSCRIBE", channel))
        if self._keeper is None or self._keeper.done():
            self._keeper = asyncio.create_task(self._keep(), name=f"concord-notifications {self._endpoint.name}")

    async def unsubscribe(self, channel: str) -> None:
        self._subs.pop(channel, None)
        link = self._link
        if link is not None and link.alive:
            link.send(("SUNSUBSCRIBE", channel))

    def reset(self, reason: str) -> None:
        """Drops the connection (the keeper opens a new one and subscribes again, each
        channel's on_subscribed then re-checks what it may have missed)."""
        link = self._link
        if link is not None and link.alive:
            link.close(ConnectionError(f"connection dropped: {reason}"))

    def forget(self, channel: str) -> None:
        """Drops a channel the server no longer holds (cluster: its slot moved away)
        without a command, so a reconnect does not subscribe it here again."""
        self._subs.pop(channel, None)

    async def _keep(self) -> None:
        backoff = _BACKOFF[0]
        while not self._closed:
            try:
                link = await Link.open(self._endpoint, on_push=self._on_push)
            except RedisError as exc:
                self._lost(exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _BACKOFF[1])
                continue
            backoff = _BACKOFF[0]
            self._link, self._heard = link, time.monotonic()
            gone = asyncio.Event()
            link.on_lost(lambda exc: gone.set())
            for channel in self._subs:  # one each: a cluster refuses channels of two slots in one
                link.send(("SSUBSCRIBE", channel))
            pinged = None  # when the unanswered PING went out
            try:
                while link.alive:
                    try:
                        await asyncio.wait_for(gone.wait(), _QUIET / 2)
                    except TimeoutError:
                        now = time.monotonic()
                        if pinged is not None and self._heard < pinged:
                            if now - pinged > self._endpoint.reply_timeout:
                                link.close(ConnectionError(f"no answer to PING for {now - pinged:.1f}s"))
                        elif now - self._heard >= _QUIET / 2:
                            pinged = now
                            link.send(("PING",))
            finally:
                if self._closed:
                    link.close()
            if not self._closed:
                self._lost(link.error or ConnectionError("lost"), backoff)

    def _lost(self, exc: BaseException, backoff: float) -> None:
        count_failure("pubsub", exc)
        self._on_displaced(exc)
        log.warning("notification connection to %s lost (%s); retrying in %.2fs", self._endpoint.name, exc, backoff)

    def _on_push(self, msg: Any) -> None:
        self._heard = time.monotonic()
        if isinstance(msg, ResponseError):  # a refused SSUBSCRIBE, e.g. MOVED on a cluster
            log.warning("notification subscription refused: %s", msg)
            self._on_displaced(msg)
            return
        if not isinstance(msg, list) or len(msg) < 3:
            return  # PONG
        kind, channel, data = msg[0], msg[1], msg[2]
        log.debug("%s: %s %s %r", self._endpoint.name, kind, channel, data)
        sub = self._subs.get(channel)
        if sub is None:
            return
        if kind == "smessage":
            sub.on_message(data)
        elif kind == "ssubscribe":
            sub.on_subscribed()
        elif kind == "sunsubscribe":  # not asked for (it is still listed): the server dropped it
            self._on_displaced(channel)

    async def close(self) -> None:
        self._closed = True
        if self._link is not None:
            self._link.close()
        if self._keeper is not None:
            self._keeper.cancel()
            await asyncio.gather(self._keeper, return_exceptions=True)
