"""Per-tenant storage quotas: a tenant's stored task payloads are bounded by its
``storage_bytes`` ([tenants.X] in --auth-tokens, default --tenant-storage-bytes; 0:
unlimited), so one tenant cannot fill the Redis every tenant shares.

What is counted: the bytes of task payloads and types (what dominates a queue's
memory), per queue, in the tenant's usage hash ``{<prefix>:usage}`` (KeySpace.usage):
one field per queue plus ``*``, their total. Chat messages and files are bounded by
their own limits (--chat-max-bytes per chat, --file-group-bound per group) and are
not counted here.

How it is kept. A queue's keys share one hash tag and the usage hash has its own, so
on a Redis Cluster no script can update both atomically. Instead:

- Admission: before an Enqueue, lua/quota_admit.lua (one key, atomic) refuses it
  STORAGE_QUOTA_EXCEEDED if the total plus its bytes would pass the quota, else adds
  them. An Enqueue that then fails gives them back.
- Measurement: every MEASURE_INTERVAL seconds, each process measures the next
  MEASURE_BATCH queues of each usage hash it has charged (lua/quota_queue_bytes.lua:
  exact up to SAMPLE tasks per state, estimated from a random sample of SAMPLE above
  that) and moves each queue's field, and the total, by (measured - the value read
  before measuring). So acked, expired, purged and cancelled tasks are released
  within ceil(queues / MEASURE_BATCH) intervals, and admissions made meanwhile are
  kept.

The bound: a tenant's counted bytes never pass its quota at admission; the stored
bytes can exceed the counted ones only by what was released in the books but not
yet in Redis, never the other way, except (a) tasks admitted between a measurement's
read and its script (counted twice until the next measurement: over-counting, the
safe side) and (b) a queue of more than SAMPLE tasks in a state, whose bytes are an
unbiased estimate from SAMPLE random tasks. Without --auth-tokens all callers are
one tenant (""), bounded by --tenant-storage-bytes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from . import tenants
from .errors import ConcordError, StorageQuotaExceeded
from .keys import KeySpace
from .store.client import command
from .store.reply_shapes import INT, Tup
from .store.scripts import Commands, script

log = logging.getLogger(__name__)

MEASURE_INTERVAL = 2.0  # seconds between two measurements of a tenant's queues
MEASURE_BATCH = 100  # queues measured per usage hash and round (one HSCAN page; the next round goes on)
SAMPLE = 64  # tasks per state read exactly; more are estimated from this many
TOTAL = "*"  # the usage hash's field holding the sum of the others

_ADMIT = script("quota_admit.lua", Tup(INT, INT))  # (1 admitted | 0 refused, total after)
_MEASURE = script("quota_queue_bytes.lua", INT)


class StorageQuotas:
    def __init__(self, limit_of: Callable[[str], int]) -> None:
        self._limit_of = limit_of  # tenant -> storage_bytes (0: unlimited)
        self._charged: dict[str, tuple[Commands, KeySpace]] = {}  # usage key -> where it lives
        self._cursors: dict[str, str] = {}  # usage key -> where the next round's HSCAN page starts
        self._measurer: asyncio.Task[None] | None = None

    async def admit(self, redis: Commands, keyspace: KeySpace, queue: str, nbytes: int) -> int:
        """Charges nbytes of the calling tenant's quota to queue; returns what was
        charged (0: no quota), to give back with refund() if the write fails."""
        limit = self._limit_of(tenants.current.get() or "")
        if limit <= 0 or nbytes <= 0:
            return 0
        usage = keyspace.usage
        self._charged[usage] = (redis, keyspace)
        if self._measurer is None or self._measurer.done():
            self._measurer = asyncio.get_running_loop().create_task(self._measure_forever())
        admitted, total = await _ADMIT.run(redis, [usage], [limit, queue, nbytes])
        if not admitted:
            raise StorageQuotaExceeded(
                f"the tenant's stored task payloads ({total} bytes) plus these {nbytes} would pass its storage "
                f"quota of {limit} bytes; purge or cancel tasks, or let finished ones go under the queue's retention", limit=str(limit), used=str(total))
        return nbytes

    async def refund(self, redis: Commands, keyspace: KeySpace, queue: str, nbytes: int) -> None:
        if nbytes:
            await _adjust(redis, keyspace.usage, queue, -nbytes)

    async def _measure_forever(self) -> None:
        while True:
            await asyncio.sleep(MEASURE_INTERVAL)
            for usage, (redis, keyspace) in list(self._charged.items()):
                try:
                    await self.measure(redis, keyspace)
                except ConcordError as exc:  # Redis unreachable: the next round tries again
                    log.debug("could not measure storage of %s: %s", usage, exc)

    async def measure(self, redis: Commands, keyspace: KeySpace) -> bool:
        """One round: the next page (about MEASURE_BATCH) of the key space's charged
        queues, so a round's cost is bounded however many queues a tenant wrote; a
        tenant with N queues has each measured every N / MEASURE_BATCH rounds. True
        when the round ended a pass over all of them."""
        usage = keyspace.usage
        cursor, flat = await command(redis, "HSCAN", usage, self._cursors.get(usage, "0"), "COUNT", MEASURE_BATCH)
        fields = [(_text(flat[i]), int(flat[i + 1])) for i in range(0, len(flat), 2)]
        for queue, read in fields:
            if queue == TOTAL:
                continue
            k = keyspace.queue(queue)
            measured = await _MEASURE.run(redis, k.keys, [k.task_prefix, SAMPLE])
            if measured != read:
                await _adjust(redis, usage, queue, measured - read)
        self._cursors[usage] = _text(cursor)
        return self._cursors[usage] == "0"


async def _adjust(redis: Commands, usage: str, queue: str, delta: int) -> None:
    """Moves a queue's field and the total by delta; a field at or below 0 goes."""
    await _ADMIT.run(redis, [usage], [0, queue, delta])


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


_installed: StorageQuotas | None = None


def install(quotas: StorageQuotas | None) -> None:
    """The process's quotas (app.py, from the tenants' limits); None: no quotas."""
    global _installed
    _installed = quotas


async def admit(redis: Commands, keyspace: KeySpace, queue: str, nbytes: int) -> int:
    return await _installed.admit(redis, keyspace, queue, nbytes) if _installed is not None else 0


async def refund(redis: Commands, keyspace: KeySpace, queue: str, nbytes: int) -> None:
    if _installed is not None:
        await _installed.refund(redis, keyspace, queue, nbytes)


def from_interceptors(chain: list[Any]) -> StorageQuotas | None:
    """Storage quotas over the limits interceptor's tenant quotas (edge/limits.py:
    storage_bytes), None when no limits are installed (no --auth-tokens, no --tenant-*)."""
    for interceptor in chain:
        limiter = getattr(interceptor, "limiter", None)
        if limiter is not None:
            return StorageQuotas(lambda tenant: limiter.quota_of(tenant).storage_bytes)
    return None
