"""The process's Redis client, and the one place Redis failures become domain errors."""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Iterator

import redis.asyncio as aioredis
from typing import Any

from redis.asyncio.retry import Retry
from redis.client import NEVER_DECODE
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import AskError, BusyLoadingError, ClusterDownError, ReadOnlyError, SlotNotCoveredError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .errors import Unavailable

# Failures that mean "Redis cannot answer right now": retryable by the caller. The
# cluster ones: a slot moving or unserved (a MOVED left after the one retry is an AskError).
UNAVAILABLE_ERRORS = (RedisConnectionError, RedisTimeoutError, BusyLoadingError, ReadOnlyError, TryAgainError,
                      ClusterDownError, AskError, SlotNotCoveredError)


def connect(url: str, max_connections: int) -> aioredis.Redis:
    """A client over a bounded, blocking pool.

    Scripts do not use the pool: they go through autopipeline.AutoPipeline on one
    connection of their own. The pool serves the pub/sub connection and any other
    command; a burst beyond it queues for a connection instead of opening more.
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


def connect_cluster(url: str, max_connections: int) -> aioredis.RedisCluster:
    """A Redis Cluster client that discovers the cluster from the URL's node. Scripts
    and commands go through cluster.ClusterCommands; its own pools (``max_connections``
    per node) only serve slot map reads and ASK redirects."""
    return aioredis.RedisCluster.from_url(
        url,
        max_connections=max_connections,
        socket_timeout=5,
        socket_connect_timeout=2,
        socket_keepalive=True,
        decode_responses=True,
        retry=Retry(ExponentialWithJitterBackoff(base=0.01, cap=0.1), retries=1),
    )


# Redis failures this process has seen, by (where, exception class): metrics.py exports them.
FAILURES: collections.Counter[tuple[str, str]] = collections.Counter()


def count_failure(where: str, exc: BaseException) -> None:
    FAILURES[where, type(exc).__name__] += 1


@contextlib.contextmanager
def unavailable_on_redis_errors() -> Iterator[None]:
    try:
        yield
    except UNAVAILABLE_ERRORS as exc:
        count_failure("command", exc)
        raise Unavailable(f"Redis is unavailable: {exc}") from exc


async def command(redis: Any, *args: Any, raw: bool = False) -> Any:
    """One plain Redis command (reads that need no script), Redis failures as
    Unavailable; ``raw`` keeps the reply as bytes."""
    with unavailable_on_redis_errors():
        return await redis.execute_command(*args, **({NEVER_DECODE: True} if raw else {}))
