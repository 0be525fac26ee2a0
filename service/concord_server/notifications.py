"""One pub/sub connection per server process, shared by every blocked call.

Scripts that free a resource SPUBLISH on the resource's shard channel (a channel in
the resource's own slot, so the same code runs on Redis Cluster). The bus keeps one
subscription per channel that has local waiters and hands each message to the
channel's handler. Every subscription confirmation, including the re-subscriptions
redis-py makes after a reconnect, calls the channel's ``on_subscribed`` so its owner
can re-check state it may have missed while not subscribed.

On Redis Cluster there is one bus per node (cluster.ClusterBus); ``on_displaced``
tells it when a channel may now belong to another node.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ResponseError

from .errors import ConcordError, Unavailable
from .redis_client import UNAVAILABLE_ERRORS, count_failure, unavailable_on_redis_errors

log = logging.getLogger(__name__)

_NO_RETRY = Retry(NoBackoff(), 0)


@dataclass
class _Subscription:
    on_message: Callable[[str], None]
    on_subscribed: Callable[[], None]


class NotificationBus:
    def __init__(self, redis: aioredis.Redis,
                 on_displaced: Callable[[str | BaseException], None] | None = None) -> None:
        self._pubsub = redis.pubsub()
        # Cluster only: called with a channel the server dropped (its slot moved), or
        # with the error of a refused subscription (MOVED) or of a lost connection.
        self._on_displaced = on_displaced or (lambda cause: None)
        self._subs: dict[str, _Subscription] = {}
        self._reader: asyncio.Task[None] | None = None
        self._closed = False
        # (Un)subscribe commands go out in call order, so a group that ends and a new
        # one that starts on the same channel cannot leave it unsubscribed.
        self._order = asyncio.Lock()

    async def subscribe(self, channel: str, on_message: Callable[[str], None], on_subscribed: Callable[[], None]) -> None:
        """Starts delivering the channel's messages; on_subscribed fires on each confirmation."""
        self._subs[channel] = _Subscription(on_message, on_subscribed)
        try:
            with unavailable_on_redis_errors():
                async with self._order:
                    if self._reconnecting():
                        # Only the reader connects (a second connect on the same
                        # connection would read its handshake concurrently); its
                        # reconnect subscribes every channel listed here, and the
                        # confirmation calls on_subscribed as usual.
                        self._pubsub.shard_channels[channel] = None
                    else:
                        await self._pubsub.ssubscribe(channel)
                        # A failed command must not reconnect by itself, for the same reason.
                        self._pubsub.connection.retry = _NO_RETRY
        except BaseException:
            self._subs.pop(channel, None)
            raise
        if self._reader is None or self._reader.done():
            self._reader = asyncio.create_task(self._read(), name="concord-notifications")

    async def subscribe_reporting(self, channel: str, on_message: Callable[[str], None],
                                  on_subscribed: Callable[[], None], subscribed: asyncio.Future[None],
                                  wanted: Callable[[], bool] = lambda: False) -> bool:
        """subscribe(), with the outcome reported through ``subscribed`` (which the
        blocked calls await) rather than raised: True once subscribed. While Redis is
        unreachable it tries again (backing off to 1 s) as long as ``wanted()``, so a
        call that began waiting just before an outage waits through it."""
        delay = 0.05
        while True:
            try:
                await self.subscribe(channel, on_message, on_subscribed)
            except Unavailable as exc:
                if wanted():
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 1.0)
                    continue
                subscribed.set_exception(exc)
                return False
            except BaseException as exc:
                subscribed.set_exception(exc if isinstance(exc, ConcordError) else ConcordError(str(exc)))
                return False
            subscribed.set_result(None)
            return True

    def _reconnecting(self) -> bool:
        conn = self._pubsub.connection
        return conn is not None and not conn.is_connected

    async def unsubscribe(self, channel: str) -> None:
        self._subs.pop(channel, None)
        try:
            async with self._order:
                if self._reconnecting():  # the reader's reconnect will not subscribe it again
                    self._pubsub.shard_channels.pop(channel, None)
                    return
                await self._pubsub.sunsubscribe(channel)
        except UNAVAILABLE_ERRORS:
            pass  # the connection is gone, and with it the subscription

    def forget(self, channel: str) -> None:
        """Drops a channel the server no longer holds (cluster: its slot moved away)
        without a command, so a reconnect does not subscribe it here again."""
        self._subs.pop(channel, None)
        self._pubsub.shard_channels.pop(channel, None)
        self._pubsub.pending_unsubscribe_shard_channels.discard(channel)

    async def _read(self) -> None:
        backoff = 0.05
        while not self._closed:
            try:
                msg = await self._pubsub.get_message(timeout=None)
                backoff = 0.05
            except ResponseError as exc:  # a refused (S)SUBSCRIBE, e.g. MOVED on a cluster
                log.warning("notification subscription refused: %s", exc)
                self._on_displaced(exc)
                continue
            except RuntimeError as exc:  # "read() called while another coroutine is already waiting"
                # Should not happen (only this task connects); if it does, start over
                # on a fresh connection rather than let notifications stop for good.
                log.warning("notification connection in a bad state (%s); reconnecting", exc)
                await self._pubsub.connection.disconnect()
                await asyncio.sleep(backoff)
                continue
            except UNAVAILABLE_ERRORS as exc:
                count_failure("pubsub", exc)
                self._on_displaced(exc)
                log.warning("notification connection lost (%s); retrying in %.2fs", exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
                continue
            if msg is None:
                continue
            sub = self._subs.get(msg["channel"])
            if sub is None:
                continue
            kind = msg["type"]
            if kind == "smessage":
                sub.on_message(msg["data"])
            elif kind == "ssubscribe":
                sub.on_subscribed()
            elif kind == "sunsubscribe":  # not asked for (it is still in _subs): the server dropped it
                self._on_displaced(msg["channel"])

    async def close(self) -> None:
        self._closed = True
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
        await self._pubsub.aclose()
