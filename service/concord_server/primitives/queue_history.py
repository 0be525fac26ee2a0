"""A queue's history for the console: its counts by state and its enqueued total,
one sample per interval, kept in Redis beside the queue (``{p:queue:N}:series``,
keys.QueueKeys.series) so that any replica shows it and a restart loses nothing.

A sample is one script (lua/queue_sample.lua) that reads the counts after the
clock's changes, as Stats does, and pushes ``<interval start ms> ready delayed leased
dead enqueued`` unless the newest entry already covers the interval: two samplers,
or one retried, add at most one entry per interval. The list keeps ``keep`` entries
and expires ``keep`` intervals (at least a minute) after its last sample, so a queue
nobody samples any more leaves nothing behind. Who samples, and how often: console/sampler.py.

Rates need no counter of their own: between two samples, in = the difference of the
queue's task counter (``seq``: one per task enqueued, schedules' included), out =
in - the growth of the live tasks (ready + delayed + leased): tasks acked, cancelled,
dead or purged, less dead ones retried (``rates``).
"""

from __future__ import annotations

from typing import NamedTuple

from ..keys import KeySpace
from ..store.client import command
from ..store.reply_shapes import INT, Codes, Tup
from ..store.scripts import Commands, script

KEEP = 360  # samples kept per queue: an hour at the default 10 s interval
MIN_TTL_MS = 60_000  # a list outlives its last sample by keep intervals, and at least this

_SAMPLE = script("queue_sample.lua", Tup(Codes(0, 1), INT))

SCRIPTS = (_SAMPLE,)


class Sample(NamedTuple):
    at_ms: int  # the interval's start, Redis clock
    ready: int
    delayed: int
    leased: int
    dead: int
    enqueued: int  # tasks ever enqueued to the queue (its task counter)


class QueueHistory:
    """The samples of one key space's queues (per tenant: tenants.py)."""

    def __init__(self, redis: Commands, keyspace: KeySpace, weight: int, *, keep: int = KEEP) -> None:
        self._redis, self._keys, self._weight, self.keep = redis, keyspace, weight, keep

    async def sample(self, queue: str, interval_ms: int) -> bool:
        """Samples the queue unless this interval has a sample; True if this call added it."""
        k = self._keys.queue(queue)
        added, _ = await _SAMPLE.run(self._redis, [*k.keys, k.series],
                                     [k.channel, k.finished, k.task_prefix, self._weight, k.group_prefix,
                                      k.group_ready_prefix, interval_ms, self.keep,
                                      max(MIN_TTL_MS, interval_ms * (self.keep + 1))])
        return added == 1

    async def read(self, queue: str, limit: int | None = None) -> list[Sample]:
        """The queue's last ``limit`` samples (at most keep), oldest first."""
        n = min(limit or self.keep, self.keep)
        entries = await command(self._redis, "LRANGE", self._keys.queue(queue).series, 0, n - 1)
        samples = []
        for entry in reversed(entries or []):
            text = entry.decode() if isinstance(entry, bytes) else str(entry)
            fields = text.split()
            if len(fields) == 6 and all(f.isdigit() for f in fields):
                samples.append(Sample(*map(int, fields)))
        return samples


def rates(older: Sample, newer: Sample) -> tuple[float, float]:
    """Tasks per second in (enqueued) and out (left the live states) between two samples."""
    seconds = max((newer.at_ms - older.at_ms) / 1000, 0.001)
    came = newer.enqueued - older.enqueued
    live = lambda s: s.ready + s.delayed + s.leased  # noqa: E731
    return came / seconds, (came - (live(newer) - live(older))) / seconds
