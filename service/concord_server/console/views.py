"""What the console shows, read through the objects the gRPC servicers use (the
primitives app.py built, its Redis commands, waiters and metrics), never a Redis
client of its own. Each reader is bounded by what it names: the overview reads this
process and one INFO; the locks view reads at most MAX_LOCKS of the viewer's tenant's
locks (its own listing index: primitives/listing.py), each with one Describe script,
and a lock with waiters one more script for its first MAX_WAITERS waiters in FIFO
order (lock_waiters.lua).

Everything here is plain data (dicts of str, int, float, bool) ready for JSON.
"""

from __future__ import annotations

import asyncio
import os
import resource
import time
from typing import Any

from ..store.client import command

MAX_LOCKS = 500  # locks one view lists (the page says when there are more)
MAX_WAITERS = 50  # waiters shown per lock, in FIFO order (with the total count)
MAX_SEMAPHORES = 200  # semaphores one view lists
MAX_HOLDERS = 50  # holders shown per semaphore (with the total count)
MAX_QUEUES = 100  # queues one view lists
MAX_DEAD = 20  # dead tasks shown per queue, with their last error
LIST_PAGE = 200
DESCRIBE_AT_ONCE = 64  # Describe scripts in flight for one view


class Overview:
    """The server process, its Redis, its calls: the same for every tenant, so read
    once per ``interval`` for all of them (``read`` returns the cached reading)."""

    def __init__(self, commands: Any, redis_health: Any, waiters: Any, bells: tuple[Any, ...], metrics: Any,
                 workers: int, interval: float) -> None:
        self._commands, self._redis_health = commands, redis_health
        self._waiters, self._bells, self._metrics = waiters, bells, metrics
        self._workers, self._interval = workers, interval
        self._started = time.time()
        self._last: dict[str, Any] | None = None
        self._last_at = 0.0
        self._calls: tuple[float, dict[tuple[str, str], float]] | None = None  # (when, totals) of the last read
        self._cpu: tuple[float, float] | None = None
        self._reading: asyncio.Future[dict[str, Any]] | None = None

    async def read(self) -> dict[str, Any]:
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
        now = time.monotonic()
        overview = {"process": self._process(now), "redis": await self._redis(), "calls": self._call_rates(now),
                    "blocked": {"locks_semaphores": self._waiters.waiting(),
                                "queues": self._bells[0].waiting() if self._bells else 0,
                                "chats_files": sum(b.waiting() for b in self._bells[1:])},
                    "streams": self._streams()}
        self._last, self._last_at = overview, time.monotonic()
        return overview

    def _process(self, now: float) -> dict[str, Any]:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        cpu = usage.ru_utime + usage.ru_stime
        cpu_percent = None
        if self._cpu is not None and now > self._cpu[0]:
            cpu_percent = round(100 * (cpu - self._cpu[1]) / (now - self._cpu[0]), 1)
        self._cpu = (now, cpu)
        return {"pid": os.getpid(), "started_at_ms": int(self._started * 1000), "uptime_s": round(time.time() - self._started),
                "rss_bytes": _rss(usage), "cpu_percent": cpu_percent, "workers": self._workers}

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

    def _call_rates(self, now: float) -> dict[str, Any]:
        """Calls per second by service and code since the last reading, from the RPC
        metrics' counter (edge/rpc_metrics.py)."""
        if self._metrics is None:
            return {"available": False, "rates": []}
        totals: dict[tuple[str, str], float] = {}
        for family in self._metrics.interceptor.handled.collect():
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    key = (sample.labels["service"].rpartition(".")[2], sample.labels["code"])
                    totals[key] = totals.get(key, 0.0) + sample.value
        rates = []
        if self._calls is not None and now > self._calls[0]:
            span = now - self._calls[0]
            for key, total in sorted(totals.items()):
                rate = (total - self._calls[1].get(key, 0.0)) / span
                rates.append({"service": key[0], "code": key[1], "per_second": round(rate, 2), "total": int(total)})
        self._calls = (now, totals)
        return {"available": True, "rates": rates}

    def _streams(self) -> int | None:
        if self._metrics is None:
            return None
        return int(sum(s.value for f in self._metrics.interceptor.streams.collect() for s in f.samples))


def _rss(usage: resource.struct_rusage) -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return usage.ru_maxrss * 1024  # the peak, where /proc is not there


def _info(reply: Any) -> dict[str, str]:
    if isinstance(reply, dict):
        return {k: str(v) for k, v in reply.items()}
    text = reply.decode() if isinstance(reply, bytes) else str(reply)
    pairs = (line.split(":", 1) for line in text.splitlines() if ":" in line and not line.startswith("#"))
    return {k.strip(): v.strip() for k, v in pairs}


async def _names(lister: Any, cap: int) -> tuple[list[str], bool]:
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


async def locks_view(locks: Any) -> dict[str, Any]:
    """The current tenant's locks (tenants.current): at most MAX_LOCKS names, each
    described: held or free, owner, fencing token, time left, waiters."""
    names, more = await _names(locks.names, MAX_LOCKS)
    gate = asyncio.Semaphore(DESCRIBE_AT_ONCE)

    async def describe(name: str) -> dict[str, Any]:
        async with gate:
            s = await locks.describe(name)
            queue: list[dict[str, Any]] = []
            if s.waiters:  # one more bounded script, only for a lock someone waits for
                now_ms, _, first = await locks.waiters(name, MAX_WAITERS)
                queue = [{"owner": owner, "waited_ms": max(now_ms - since_ms, 0)} for owner, since_ms in first]
        return {"name": name, "held": s.held, "owner": s.owner if s.held else "",
                "fencing_token": s.fencing_token if s.held else 0, "ttl_ms": s.ttl_remaining_ms if s.held else 0,
                "expires_at_ms": s.now_ms + s.ttl_remaining_ms if s.held else 0, "waiters": s.waiters,
                "queue": queue}

    rows = await asyncio.gather(*(describe(n) for n in names))
    rows.sort(key=lambda r: (not r["held"] and not r["waiters"], -r["waiters"], r["name"]))
    return {"items": rows, "more": more, "limit": MAX_LOCKS}


async def semaphores_view(semaphores: Any) -> dict[str, Any]:
    """The current tenant's semaphores that are held or waited for: at most
    MAX_SEMAPHORES names, each described (one script): limit, permits held, the first
    MAX_HOLDERS holders (owner, permits, time left), live waiters."""
    names, more = await _names(semaphores.names, MAX_SEMAPHORES)
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
    names, more = await _names(queues.names, MAX_QUEUES)
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
