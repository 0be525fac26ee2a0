"""Health follows Redis: NOT_SERVING while Redis cannot be reached, SERVING again by
itself once it answers.

A watcher task sends PING through the server's own command path every ``interval``
seconds, each bounded by ``timeout`` (a paused Redis answers nothing at all, so a
check must not wait for the connection's own socket timeout). One failed check sets
NOT_SERVING on the overall status ("") and on every service; one good check sets
SERVING again. Each transition is logged once.

The watcher is closed before the health servicer enters graceful shutdown (which
makes further ``set`` calls no-ops anyway), so it never turns a stopping server
back to SERVING.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import Any, Protocol

from grpc_health.v1 import health, health_pb2

log = logging.getLogger(__name__)

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class Commands(Protocol):
    async def execute_command(self, *args: Any, **options: Any) -> Any: ...


class RedisHealth:
    def __init__(self, commands: Commands, servicer: health.aio.HealthServicer, services: Iterable[str],
                 interval: float = 0.5, timeout: float = 1.0) -> None:
        self.commands = commands
        self.servicer = servicer
        self.services = ("", *(s for s in services if s))
        self.interval = interval
        self.timeout = timeout
        self.serving: bool | None = None  # None until the first check
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> RedisHealth:
        """Checks once now (so the first status told is already the truth), then keeps watching."""
        await self._apply(await self.check())
        self._task = asyncio.create_task(self._watch(), name="redis-health")
        return self

    async def check(self) -> BaseException | None:
        """One PING, bounded by ``timeout``: None if Redis answered, else what went wrong."""
        try:
            await asyncio.wait_for(self.commands.execute_command("PING"), self.timeout)
        except asyncio.TimeoutError:
            return TimeoutError(f"no answer to PING within {self.timeout:g}s")
        except Exception as exc:  # connection refused or reset, LOADING, a cluster without the node, ...
            return exc
        return None

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self._apply(await self.check())
            except asyncio.CancelledError:
                raise
            except Exception:  # never let the watcher die: health would freeze at its last status
                log.exception("Redis health check failed unexpectedly")

    async def _apply(self, error: BaseException | None) -> None:
        ok = error is None
        if ok == self.serving:
            return
        if ok:
            if self.serving is not None:
                log.info("Redis reachable again: health SERVING")
        else:
            log.warning("Redis not reachable (%s): health NOT_SERVING until it is", str(error) or type(error).__name__)
        self.serving = ok
        for name in self.services:
            await self.servicer.set(name, SERVING if ok else NOT_SERVING)

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
