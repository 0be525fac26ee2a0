"""What the console shows, read through the objects the gRPC servicers use (the
primitives app.py built, its Redis commands, the process registry), never a Redis
client of its own. Each reader is bounded by what it names: the overview reads one
INFO and the process registry (at most MAX_PROCESSES records: every replica's
figures, process_registry.py); the locks view reads at most MAX_LOCKS of the viewer's tenant's
locks (its own listing index: primitives/listing.py), each with one Describe script,
and a lock with waiters one more script for its first MAX_WAITERS waiters in FIFO
order (lock_waiters.lua), and the tenant's lock activity (one LRANGE of at most
lock_activity.KEEP entries); a queue's history is one LRANGE of at most
queue_history.KEEP samples, for at most MAX_QUEUES named queues.

Everything here is plain data (dicts of str, int, float, bool) ready for JSON.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ..primitives.queue_history import rates
from ..store.client import command

MAX_LOCKS = 500  # locks one view lists (the page says when there are more)
MAX_WAITERS = 50  # waiters shown per lock, in FIFO order (with the total count)
MAX_SEMAPHORES = 200  # semaphores one view lists
MAX_HOLDERS = 50  # holders shown per semaphore (with the total count)
MAX_QUEUES = 100  # queues one view lists
MAX_DEAD = 20  # dead tasks shown per queue, with their last error
LIST_PAGE = 200
DESCRIBE_AT_ONCE = 64  # Describe scripts in flight for one view
MAX_PROCESSES = 100  # server processes the overview lists (process_registry.MAX_LISTED)
SLOW_LOOP_MS = 250  # a process whose event loop was this late since its last beat shows as slow


class Overview:
    """Redis, and every live server process (the process registry, so any replica
    shows them all): the same for every tenant, so read once per ``interval`` for all
    of them (``read`` returns the cached reading)."""

    def __init__(self, commands: Any, redis_health: Any, registry: Any, interval: float) -> None:
        self._commands, self._redis_health, self._registry = commands, redis_health, registry
        self._interval = interval
        self._last: dict[str, Any] | None = None
        self._last_at = 0.0
        self._reading: asyncio.Future[dict[str, Any]] | None = None

    async def read(self) -> dict[str, Any]:
        """{"overview": Redis and this process's id, "processes": the registry's records}."""
        if self._last is not None and time.monotonic() - self._last_at < self._interval * 0.9:
            return self._last
        if self._reading is None:  # concurrent readers share one reading
            self._reading = asyncio.ensure_future(self._read())
        reading = self._reading
        try:
            return await asyncio.shield(reading)
        finally:
            if self._reading is reading and reading.done():
                self._reading = None

    async def _read(self) -> dict[str, Any]:
        redis, processes = await asyncio.gather(self._redis(), self._processes())
        reading = {"overview": {"redis": redis, "process_id": self._registry.process_id},
                   "processes": processes}
        self._last, self._last_at = reading, time.monotonic()
        return reading

    async def _processes(self) -> dict[str, Any]:
        try:
            listed = await asyncio.wait_for(self._registry.processes(), 1.0)
        except Exception as exc:  # Redis away: the page says so
            return {"error": str(exc) or type(exc).__name__, "items": []}
        items = [dict(r, health=health_of(r, listed.now_ms)) for r in listed.records]
        items.sort(key=lambda r: (r.get("host", ""), r.get("pid", 0)))
        return {"items": items, "limit": MAX_PROCESSES, "more": len(items) >= MAX_PROCESSES,
                "now_ms": listed.now_ms, **totals(items)}

    async def _redis(self) -> dict[str, Any]:
        serving = getattr(self._redis_health, "serving", None)
        redis: dict[str, Any] = {"serving": bool(serving)}
        try:
            info = _info(await asyncio.wait_for(command(self._commands, "INFO", "memory"), 1.0))
            server = _info(await asyncio.wait_for(command(self._commands, "INFO", "server"), 1.0))
        except Exception as exc:  # Redis away: the page says so
            redis["error"] = str(exc) or type(exc).__name__
            return redis
        redis.update({
            "version": server.get("valkey_version") or server.get("redis_version", ""),
            "used_memory": int(info.get("used_memory", 0)),
            "peak_memory": int(info.get("used_memory_peak", 0)),
            "maxmemory": int(info.get("maxmemory", 0)),
            "maxmemory_policy": info.get("maxmemory_policy", ""),
        })
        return redis


def health_of(record: dict[str, Any], now_ms: int) -> str:
    """One word for a process's state, which the page shows as colour and shape:
    draining (shutting down), redis (its Redis link is down), late (no beat for two
    beats: stalled, or cut off), slow (its event loop was late by SLOW_LOOP_MS or
    more since its last beat), else ok."""
    beat_ms = 1000 * float(record.get("beat_s") or 2.0)
    if record.get("state") == "draining":
        return "draining"
    if not record.get("redis_serving", True):
        return "redis"
    if now_ms - int(record.get("beat_ms", now_ms)) > 2 * beat_ms:
        return "late"
    if (record.get("loop_lag_ms") or 0) >= SLOW_LOOP_MS:
        return "slow"
    return "ok"


def totals(items: list[dict[str, Any]]) -> dict[str, Any]:
    """Calls per second by service and code, blocked calls and streams, summed over
    the processes (those that count calls: process_figures.py)."""
    rates: dict[tuple[str, str], list[float]] = {}
    blocked = {"locks_semaphores": 0, "queues": 0, "chats_files": 0}
    streams, counted = 0, 0
    for r in items:
        calls = r.get("calls") or {}
        if calls.get("available"):
            counted += 1
        for c in calls.get("rates", []):
            found = rates.setdefault((c["service"], c["code"]), [0.0, 0])
            found[0] += c["per_second"]
            found[1] += c["total"]
        for k in blocked:
            blocked[k] += int((r.get("blocked") or {}).get(k, 0))
        streams += int(r.get("streams") or 0)
    return {"calls": {"available": counted > 0, "processes_counting": counted,
                      "rates": [{"service": s, "code": c, "per_second": round(v[0], 2), "total": int(v[1])}
                                for (s, c), v in sorted(rates.items())]},
            "blocked": blocked, "streams": streams}


def _info(reply: Any) -> dict[str, str]:
    if isinstance(reply, dict):
        return {k: str(v) for k, v in reply.items()}
    text = reply.decode() if isinstance(reply, bytes) else str(reply)
    pairs = (line.split(":", 1) for line in text.splitlines() if ":" in line and not line.startswith("#"))
    return {k.strip(): v.strip() for k, v in pairs}


async def names_of(lister: Any, cap: int) -> tuple[list[str], bool]:
    """The first ``cap`` names (sorted) of a primitive's listing index, and whether
    there are more; reads at most about cap + LIST_PAGE names."""
    seen: dict[str, None] = {}  # HSCAN may return a name twice
    token = ""
    while len(seen) <= cap:
        page, token = await lister(token, LIST_PAGE)
        seen.update(dict.fromkeys(page))
        if not token:
            break
    return sorted(seen)[:cap], bool(token) or len(seen) > cap


async def locks_view(locks: Any, activity: Any) -> dict[str, Any]:
    """The current tenant's locks (tenants.current): at most MAX_LOCKS names, each
    described: held or free, owner, fencing token, time left, waiters; and the
    tenant's lock activity (handoffs per second, deadlocks broken)."""
    names, more = await names_of(locks.names, MAX_LOCKS)
    rows = [{"name": name, "held": s.held, "owner": s.owner if s.held else "",
             "fencing_token": s.fencing_token if s.held else 0, "ttl_ms": s.ttl_remaining_ms if s.held else 0,
             "expires_at_ms": s.now_ms + s.ttl_remaining_ms if s.held else 0, "waiters": s.waiters,
             "queue": [{"owner": owner, "waited_ms": max(s.now_ms - since_ms, 0)} for owner, since_ms in first]}
            for name, (s, first) in zip(names, await locks.views(names, MAX_WAITERS))]
    rows.sort(key=lambda r: (not r["held"] and not r["waiters"], -r["waiters"], r["name"]))
    now_ms, intervals = await activity.read()
    return {"items": rows, "more": more, "limit": MAX_LOCKS,
            "activity": activity_summary(now_ms, intervals, activity.interval_ms)}


def activity_summary(now_ms: int, intervals: list[Any], interval_ms: int) -> dict[str, Any]:
    """Handoffs per second over the last whole interval of the Redis clock (0 when it
    had none: only intervals with activity are kept), handoffs and deadlocks broken
    over the kept hour, and the interval of the last deadlock."""
    kinds = ("lock", "semaphore", "rwlock", "election")
    whole = now_ms - now_ms % interval_ms - interval_ms
    last = next((i for i in intervals if i.at_ms == whole), None)
    return {"interval_ms": interval_ms, "handoffs_at_ms": whole,
            "handoffs_per_second": {k: round(getattr(last, k) * 1000 / interval_ms, 2) if last else 0.0 for k in kinds},
            "handoffs_last_hour": {k: sum(getattr(i, k) for i in intervals) for k in kinds},
            "deadlocks_broken": sum(i.deadlocks for i in intervals),
            "last_deadlock_at_ms": max((i.at_ms for i in intervals if i.deadlocks), default=0)}


async def queue_histories(history: Any, names: list[str]) -> dict[str, Any]:
    """The kept samples of the named queues of the current tenant (at most MAX_QUEUES
    names, one LRANGE each), oldest first, with the rates in and out over the last two."""
    gate = asyncio.Semaphore(DESCRIBE_AT_ONCE)

    async def read(name: str) -> dict[str, Any]:
        async with gate:
            samples = await history.read(name)
        found: dict[str, Any] = {"samples": [list(s) for s in samples], "in_per_second": None,
                                 "out_per_second": None}
        if len(samples) > 1:
            came, left = rates(samples[-2], samples[-1])
            found["in_per_second"], found["out_per_second"] = round(came, 2), round(left, 2)
        return found

    read_all = await asyncio.gather(*(read(n) for n in names[:MAX_QUEUES]))
    return {"keep": history.keep, "queues": dict(zip(names[:MAX_QUEUES], read_all))}


async def semaphores_view(semaphores: Any) -> dict[str, Any]:
    """The current tenant's semaphores that are held or waited for: at most
    MAX_SEMAPHORES names, each described (one script): limit, permits held, the first
    MAX_HOLDERS holders (owner, permits, time left), live waiters."""
    names, more = await names_of(semaphores.names, MAX_SEMAPHORES)
    gate = asyncio.Semaphore(DESCRIBE_AT_ONCE)

    async def describe(name: str) -> dict[str, Any]:
        async with gate:
            s = await semaphores.describe(name)
        holders = sorted(s.holders, key=lambda h: h.ttl_remaining_ms)
        return {"name": name, "limit": s.limit, "held": s.held, "holder_count": len(holders), "waiters": s.waiters,
                "holders": [{"owner": h.owner, "permits": h.permits, "ttl_ms": h.ttl_remaining_ms,
                             "expires_at_ms": s.now_ms + h.ttl_remaining_ms} for h in holders[:MAX_HOLDERS]]}

    rows = await asyncio.gather(*(describe(n) for n in names))
    rows.sort(key=lambda r: (-r["waiters"], -r["held"], r["name"]))
    return {"items": rows, "more": more, "limit": MAX_SEMAPHORES, "holders_limit": MAX_HOLDERS}


async def queues_view(queues: Any) -> dict[str, Any]:
    """The current tenant's queues that hold tasks: at most MAX_QUEUES names, each
    with its counts by state (one Stats script) and, for a queue with dead tasks, the
    first MAX_DEAD of them (one ListDead read, payloads left out of the snapshot)."""
    names, more = await names_of(queues.names, MAX_QUEUES)
    gate = asyncio.Semaphore(DESCRIBE_AT_ONCE)

    async def describe(name: str) -> dict[str, Any]:
        async with gate:
            s = await queues.stats(name)
            dead = await queues.peek(name, "dead", MAX_DEAD) if s.dead else []
        return {"name": name, "ready": s.ready, "delayed": s.delayed, "leased": s.leased, "dead": s.dead,
                "done": s.finished, "paused": s.paused, "oldest_ready_age_ms": s.oldest_ready_age_ms,
                "dead_tasks": [{"task_id": t.task_id, "type": t.type, "attempt": t.attempt,
                                "max_attempts": t.max_attempts, "last_error": t.last_error,
                                "dead_reason": t.dead_reason} for t in dead[:MAX_DEAD]]}

    rows = await asyncio.gather(*(describe(n) for n in names))
    rows.sort(key=lambda r: (-r["dead"], -r["ready"], r["name"]))
    return {"items": rows, "more": more, "limit": MAX_QUEUES, "dead_limit": MAX_DEAD}
