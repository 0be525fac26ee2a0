"""Redis failures as domain errors (the one place), and the cluster client that reads
the slot map. Commands go through autopipeline.AutoPipeline (standalone) or
cluster.ClusterCommands over link.Link connections."""

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
from redis.exceptions import OutOfMemoryError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ..errors import StorageFull, Unavailable

# Failures that mean "Redis cannot answer right now": retryable by the caller. The
# cluster ones: a slot moving or unserved (a MOVED left after the one retry is an AskError).
UNAVAILABLE_ERRORS = (RedisConnectionError, RedisTimeoutError, BusyLoadingError, ReadOnlyError, TryAgainError,
                      ClusterDownError, AskError, SlotNotCoveredError)


def connect_cluster(url: str, max_connections: int) -> aioredis.RedisCluster:
    """A Redis Cluster client that discovers the cluster from the URL's node. Scripts
    and commands go through cluster.ClusterCommands on links of their own
    (link.py); this client's pools (``max_connections`` per node) only read
    the slot map."""
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
    except OutOfMemoryError as exc:  # maxmemory with noeviction: the write was refused, nothing changed
        count_failure("command", exc)
        raise StorageFull("storage is full: Redis refused the write (out of memory); nothing was changed") from exc


async def confirm_seen(redis: Any, key: str) -> None:
    """redis.confirm_seen(key) (scripts.Commands), Redis failures as Unavailable."""
    with unavailable_on_redis_errors():
        await redis.confirm_seen(key)


async def command(redis: Any, *args: Any, raw: bool = False) -> Any:
    """One plain Redis command (reads that need no script), Redis failures as
    Unavailable; ``raw`` keeps the reply as bytes."""
    with unavailable_on_redis_errors():
        return await redis.execute_command(*args, **({NEVER_DECODE: True} if raw else {}))
