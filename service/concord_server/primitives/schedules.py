"""Recurring schedules of a queue: each tick enqueues one task, exactly once.

A schedule is a hash beside the queue's tasks (same hash tag) holding its spec and
its next tick, and the queue's ``schedules`` zset orders them by next tick. Nothing
in Redis can evaluate a cron expression, so a tick is taken in two steps: read what
is due on Redis's clock (queue_schedules.lua), plan it here (schedule_times.plan:
which ticks run, which were missed, the tick after), then claim the plan in one
script (queue_schedule_claim.lua) that enqueues only if the schedule's version and
next tick are still what was read. Every server's ticker does this for every due
tick (schedule_ticker.py); the first claim moves the next tick on and the rest find
their plan stale, so a tick is enqueued once whichever servers run, restart or race,
with no leader. A claim lost with Redis (a restart without persistence of the last
writes) loses its tasks too, and the tick is claimed again from the restored state.

Which queues have schedules is kept in one index set (keys.KeySpace.schedule_index),
in its own slot: create adds the queue before its script runs, so a schedule is
never missing from it; a queue left without schedules is dropped from it by the
tickers. Changes are published on the index's channel so tickers re-read that queue.

Imports no grpc: api/queue.py validates and maps errors.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..errors import FailedPrecondition, ScheduleExists, ScheduleNotFound
from ..keys import KeySpace, QueueKeys
from ..store.client import command
from ..store.reply_shapes import INT, Seq, STR, Tup
from ..store.scripts import Commands, script
from ..statuses import SCHEDULE
from .listing import note
from .queue import run
from .schedule_times import BadTiming, Timing, off_loop, plan

log = logging.getLogger(__name__)

FIELDS = ("type", "payload", "prio", "max", "cron", "tz", "every", "anchor", "missed", "grace", "paused", "ver",
          "next", "created", "updated", "last", "lastid", "runs", "lastmiss")
MISSED = ("once", "skip")
DEFAULT_GRACE_MS = 10_000
LIST_MAX = 1000


class SchedulesReply(NamedTuple):
    now_ms: int
    until_next_ms: int  # -1: no active schedule
    count: int  # schedules in the queue, paused ones too
    schedules: list[list[Any]]  # each: name, zset score, then FIELDS (b'' when unset)


_PUT = script("queue_schedule.lua", Tup(INT, INT))  # (SCHEDULE status, version)
_CLAIM = script("queue_schedule_claim.lua", Tup(INT, INT))  # (SCHEDULE status, ms until the next tick)
_READ = script("queue_schedules.lua", Seq(INT, INT, INT, each=(Tup(STR, STR, *[STR] * len(FIELDS)),)), raw=True,
               decode=lambda r: SchedulesReply(*r[:3], r[3:]))
SCRIPTS = (_PUT, _CLAIM, _READ)


@dataclass(frozen=True)
class ScheduleSpec:
    timing: Timing
    type: str
    payload: bytes = b""
    priority: int = 0
    max_attempts: int = 0  # 0: the queue's retry policy
    missed: str = "once"  # once: one run stands for all missed ticks; skip: dropped
    grace_ms: int = DEFAULT_GRACE_MS  # a tick this late still runs as itself
    start_ms: int | None = None  # intervals: the first tick (default: one interval from now)

    def fields(self, anchor_ms: int) -> list[object]:
        t = self.timing
        when: list[object] = ["cron", t.cron, "tz", t.timezone] if t.cron else ["every", t.every_ms, "anchor", anchor_ms]
        return ["type", self.type, "payload", self.payload, "prio", self.priority, "max", self.max_attempts,
                "missed", self.missed, "grace", self.grace_ms, *when]


@dataclass(frozen=True)
class ScheduleRecord:
    queue: str
    name: str
    spec: ScheduleSpec
    paused: bool
    version: int
    next_ms: int | None  # None while paused
    last_ms: int | None  # the tick of the last task it enqueued
    last_task_id: str
    runs: int
    last_missed_ms: int | None
    created_ms: int
    updated_ms: int


def _int(b: bytes) -> int | None:
    return int(b) if b else None


def _record(queue: str, f: list[Any]) -> ScheduleRecord:
    v = dict(zip(FIELDS, f[2:]))
    text = {k: x.decode() for k, x in v.items() if k != "payload"}
    every = int(text["every"] or 0)
    timing = Timing.stored(text["cron"], text["tz"] or "UTC", every, int(text["anchor"] or 0))
    spec = ScheduleSpec(timing, text["type"], bytes(v["payload"]), int(text["prio"]), int(text["max"]),
                        text["missed"], int(text["grace"]), int(text["anchor"]) if every else None)
    return ScheduleRecord(queue, f[0].decode(), spec, text["paused"] == "1", int(text["ver"]), _int(v["next"]),
                          _int(v["last"]), text["lastid"], int(text["runs"] or 0), _int(v["lastmiss"]),
                          int(text["created"]), int(text["updated"]))


class Schedules:
    """The schedules of one key space's queues. ``weight``: the queues' priority
    weight (primitives/queue.py), which a tick's task is enqueued with."""

    def __init__(self, redis: Commands, keyspace: KeySpace, weight: int) -> None:
        self._redis = redis
        self._keys = keyspace
        self._weight = weight
        self._index = keyspace.schedule_index

    def _run(self, s, k: QueueKeys, *args: object):
        return run(self._redis, s, k, self._weight, *args)

    async def _read(self, queue: str, what: str, a: object = "", b: object = 0) -> SchedulesReply:
        k = self._keys.queue(queue)
        return await self._run(_READ, k, what, k.schedule_prefix, a, b)

    async def _put(self, queue: str, name: str, action: str, next_ms: object = "", paused: object = "",
                   spec: list[object] = ()) -> int:
        k = self._keys.queue(queue)
        status, version = await self._run(_PUT, k, action, k.schedule_prefix + name, name, next_ms, paused, *spec)
        if status == SCHEDULE.NO_SUCH_SCHEDULE:
            raise ScheduleNotFound(f"queue {queue!r} has no schedule {name!r}", queue=queue, schedule=name)
        if status == SCHEDULE.EXISTS:
            raise ScheduleExists(f"queue {queue!r} has a schedule {name!r} already (UpdateSchedule changes it)",
                                 queue=queue, schedule=name)
        await note(self._redis, self._keys, "queue", queue)  # a queue with schedules is listed
        return version

    async def _changed(self, queue: str) -> None:
        await command(self._redis, "SPUBLISH", self._index.channel, self._keys.index_entry(queue))

    @staticmethod
    async def _first(spec: ScheduleSpec, now_ms: int) -> tuple[int, int]:
        """(anchor, next tick) of a spec made or changed at now_ms; BadTiming if it
        never ticks. The cron search runs off the event loop (schedule_times)."""
        t = spec.timing
        if t.every_ms:
            anchor = now_ms if spec.start_ms is None else spec.start_ms
            t = Timing(every_ms=t.every_ms, anchor_ms=anchor)
        else:
            anchor = 0
        return anchor, await off_loop(t.next_after, now_ms if spec.start_ms is None else max(now_ms, spec.start_ms - 1))

    async def create(self, queue: str, name: str, spec: ScheduleSpec, paused: bool = False) -> ScheduleRecord:
        now = (await self._read(queue, "get", name)).now_ms
        anchor, first = await self._first(spec, now)
        await command(self._redis, "SADD", self._index.queues, self._keys.index_entry(queue))
        await self._put(queue, name, "create", first, int(paused), spec.fields(anchor))
        await self._changed(queue)
        return await self.get(queue, name)

    async def update(self, queue: str, name: str, spec: ScheduleSpec, paused: bool | None = None) -> ScheduleRecord:
        now = (await self._read(queue, "get", name)).now_ms
        anchor, first = await self._first(spec, now)
        await self._put(queue, name, "update", first, "" if paused is None else int(paused), spec.fields(anchor))
        await self._changed(queue)
        return await self.get(queue, name)

    async def pause(self, queue: str, name: str) -> ScheduleRecord:
        await self._put(queue, name, "pause")
        return await self.get(queue, name)

    async def resume(self, queue: str, name: str) -> ScheduleRecord:
        """Ticks again from the first tick after now; ticks due while paused do not run."""
        s = await self.get(queue, name)
        if s.paused:
            now = (await self._read(queue, "get", name)).now_ms
            try:
                s.spec.timing.check_shape()
                first = await off_loop(s.spec.timing.next_after, now)
            except BadTiming as exc:  # stored by an older server without today's limits
                raise FailedPrecondition(
                    f"schedule {name!r} of queue {queue!r} cannot tick ({exc}); UpdateSchedule gives it a timing "
                    "that can", queue=queue, schedule=name) from exc
            await self._put(queue, name, "resume", first)
            await self._changed(queue)
        return await self.get(queue, name)

    async def delete(self, queue: str, name: str) -> None:
        await self._put(queue, name, "delete")
        await self._changed(queue)

    async def get(self, queue: str, name: str) -> ScheduleRecord:
        r = await self._read(queue, "get", name)
        if not r.schedules:
            raise ScheduleNotFound(f"queue {queue!r} has no schedule {name!r}", queue=queue, schedule=name)
        return _record(queue, r.schedules[0])

    async def list(self, queue: str, after: str, count: int) -> tuple[list[ScheduleRecord], str]:
        """A page, soonest next tick first and paused ones last, after the page
        token ``after`` ('' for the first); and the next page's token ('' at the end).
        Like SCAN: one that ticks meanwhile may come again; none is skipped unless
        changed meanwhile to tick earlier."""
        r = await self._read(queue, "list", after, count)
        page = [_record(queue, f) for f in r.schedules]
        last = r.schedules[-1] if len(page) == count else None
        return page, f"{last[1].decode()} {last[0].decode()}" if last else ""

    async def tick(self, queue: str) -> tuple[int, int]:
        """Claims every due tick of the queue's schedules; returns (ms until its next
        tick, -1 for none; how many schedules it has)."""
        k = self._keys.queue(queue)
        for _ in range(10):  # each pass claims what was due; a claim that raced another reads again
            r = await self._read(queue, "due")
            if not r.schedules:
                return r.until_next_ms, r.count
            claims = [await self._claim(k, queue, f, r.now_ms) for f in r.schedules]
            if all(status == SCHEDULE.OK for status, _ in claims) and claims[-1][1] != 0:
                return claims[-1][1], r.count
        return 0, r.count

    async def _claim(self, k: QueueKeys, queue: str, f: list[Any], now_ms: int) -> tuple[int, int]:
        """(SCHEDULE status, ms until the queue's next tick after it)."""
        try:
            s = _record(queue, f)
            assert s.next_ms is not None
            s.spec.timing.check_shape()  # microseconds; what passes is small enough to parse
            p = await off_loop(plan, s.spec.timing, s.next_ms, now_ms, s.spec.grace_ms, s.spec.missed)
        except (BadTiming, ValueError) as exc:
            # Nothing this server stores: a hand-edited hash, or a timing an older server
            # stored without today's limits (a cron of any size, one that never fires).
            # Paused, it costs no tick again; UpdateSchedule gives it a usable timing.
            log.warning("schedule %r of queue %r cannot tick (%s); pausing it", f[0], queue, str(exc)[:300])
            await self._put(queue, f[0].decode(), "pause")
            return SCHEDULE.STALE, 0
        status, until = await self._run(_CLAIM, k, k.schedule_prefix + s.name, s.name, s.version, s.next_ms,
                                        p.next_ms, "" if p.last_missed_ms is None else p.last_missed_ms, *p.runs)
        return status, until
