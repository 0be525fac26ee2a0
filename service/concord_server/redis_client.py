"""The process's Redis client, and the one place Redis failures become domain errors."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import BusyLoadingError, ReadOnlyError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .errors import Unavailable

# Failures that mean "Redis cannot answer right now": retryable by the caller.
UNAVAILABLE_ERRORS = (RedisConnectionError, RedisTimeoutError, BusyLoadingError, ReadOnlyError, TryAgainError)


def connect(url: str, max_connections: int) -> aioredis.Redis:
    """A client over a bounded, blocking pool.

    Blocked calls wait on futures, not connections, so a small pool serves thousands
    of them; a burst beyond the pool queues for a connection instead of opening more.
    Each command is retried once on a dropped connection (a restarted Redis leaves
    dead sockets in the pool); scripts are written to be safe to run twice.
    """
    tcp = {} if url.startswith("unix:") else {"socket_keepalive": True}
    pool = aioredis.BlockingConnectionPool.from_url(
        url,
        max_connections=max_connections,
        timeout=10,
        socket_timeout=5,
        socket_connect_timeout=2,
        decode_responses=True,
        retry=Retry(ExponentialWithJitterBackoff(base=0.01, cap=0.1), retries=1),
        **tcp,
    )
    return aioredis.Redis(connection_pool=pool)


@contextlib.contextmanager
def unavailable_on_redis_errors() -> Iterator[None]:
    try:
        yield
    except UNAVAILABLE_ERRORS as exc:
        raise Unavailable(f"Redis is unavailable: {exc}") from exc
