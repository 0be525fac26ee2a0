"""Auto-pipelining: the process's commands share one Redis connection, and each goes
out without waiting for the replies to the ones before it.

Commands issued in the same event-loop turn leave in one write; Redis answers in
order, and a reader task hands each reply to its caller's future. Compared with
checking a pooled connection out per command this halves the CPU per command under
load, and any number of concurrent calls use one connection. Nothing blocking may
go through here (Concord never blocks in Redis: waiting happens on futures).

A connection that fails, or leaves a command unanswered for ``socket_timeout``,
fails every command in flight (they become UNAVAILABLE, see redis_client.py) and is
replaced on the next command.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from typing import Any

import hiredis
import redis.asyncio as aioredis
from redis.asyncio.connection import AbstractConnection
from redis.client import NEVER_DECODE
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError


class AutoPipeline:
    def __init__(self, pool: aioredis.ConnectionPool) -> None:
        self._pool = pool  # only for its connection settings (URL, auth, TLS, timeouts)
        self._conn: AbstractConnection | None = None
        self._connecting = asyncio.Lock()
        self._outbox: list[bytes] = []
        self._inflight: deque[tuple[asyncio.Future[Any], bool]] = deque()  # (caller, raw reply)
        self._has_output = asyncio.Event()
        self._has_inflight = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        """Sends one command; ``NEVER_DECODE=True`` (redis-py's option) keeps its reply bytes."""
        if self._conn is None:
            await self._connect()
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._outbox.append(hiredis.pack_command(args))
        if not self._inflight:
            self._has_inflight.set()
        self._inflight.append((fut, bool(options.get(NEVER_DECODE))))
        self._has_output.set()
        return await fut

    async def _connect(self) -> None:
        async with self._connecting:
            if self._conn is not None:
                return
            conn = self._pool.connection_class(**self._pool.connection_kwargs)
            await conn.connect()
            self._conn = conn
            self._tasks = [asyncio.create_task(self._write(conn)), asyncio.create_task(self._read(conn))]

    async def _write(self, conn: AbstractConnection) -> None:
        try:
            while True:
                await self._has_output.wait()
                self._has_output.clear()
                batch, self._outbox = self._outbox, []
                await conn.send_packed_command(batch, check_health=False)
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            await self._fail(conn, exc)

    async def _read(self, conn: AbstractConnection) -> None:
        try:
            while True:
                if not self._inflight:
                    self._has_inflight.clear()
                    await self._has_inflight.wait()
                raw = self._inflight[0][1] if self._inflight else False
                try:
                    # Nothing is owed while idle, so only a read with commands in
                    # flight is bounded by socket_timeout.
                    reply = await conn.read_response(disable_decoding=raw, timeout=None if self._inflight else math.inf)
                except ResponseError as exc:
                    reply = exc
                fut, _ = self._inflight.popleft()
                if fut.done():  # its caller was cancelled
                    continue
                if isinstance(reply, ResponseError):
                    fut.set_exception(reply)
                else:
                    fut.set_result(reply)
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            await self._fail(conn, exc)

    async def _fail(self, conn: AbstractConnection, exc: BaseException) -> None:
        if self._conn is not conn:
            return
        self._conn = None
        error = exc if isinstance(exc, (RedisConnectionError, RedisTimeoutError)) else RedisConnectionError(str(exc))
        while self._inflight:
            fut, _ = self._inflight.popleft()
            if not fut.done():
                fut.set_exception(error)
        self._outbox = []
        current = asyncio.current_task()
        for t in self._tasks:
            if t is not current:
                t.cancel()
        await conn.disconnect(nowait=True)

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        while self._inflight:
            fut, _ = self._inflight.popleft()
            if not fut.done():
                fut.set_exception(RedisConnectionError("connection closed"))
        if conn is not None:
            await conn.disconnect()
