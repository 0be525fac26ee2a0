"""The coordination page's read-write locks and elections, read through the
primitives the gRPC servicers use (app.py's, in the viewer's tenant), bounded by
what they name:

- read-write locks: the first MAX_RWLOCKS by name of the tenant's listing index
  (ListReadWriteLocks' summaries: writer with owner, fencing token and time left,
  readers holding, queue length; one bounded script each), and for one with a queue
  its first MAX_WAITERS waiters in FIFO order with their mode (rwlock_waiters.lua).
- elections: the first MAX_ELECTIONS by name (ListElections' summaries: leader,
  term, value cut to VALUE_BYTES, time left, candidates queued), each with its first
  MAX_CANDIDATES candidates in FIFO order (the lock's waiters script: an election's
  queue is a lock's) and its last HISTORY leaders from the history of changes the
  election keeps anyway (its last 1,000 changes: election_common.lua), newest first.

Plain data for JSON; a value's bytes are shown as UTF-8 when they are, else as hex.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..primitives.rwlock import READ
from .capped import AT_ONCE, first_summaries

MAX_RWLOCKS = 200  # read-write locks one view lists
MAX_ELECTIONS = 200  # elections one view lists
MAX_WAITERS = 50  # waiters shown per read-write lock, FIFO order (with the queue's length)
MAX_CANDIDATES = 50  # candidates shown per election, FIFO order
HISTORY = 10  # past changes of leadership shown per election, newest first
VALUE_BYTES = 256  # of a leader's value (up to 64 KiB)


def shown_value(value: bytes, cut: bool) -> dict[str, Any]:
    """A value as the page shows it: text when it is UTF-8, else hex."""
    try:
        return {"text": value.decode("utf-8"), "bytes": len(value), "cut": cut}
    except UnicodeDecodeError:
        return {"hex": value.hex(), "bytes": len(value), "cut": cut}


async def rwlocks_view(rwlocks: Any) -> dict[str, Any]:
    """The current tenant's read-write locks held or waited for."""
    found, more = await first_summaries(rwlocks.summaries, MAX_RWLOCKS, lambda s: s.name)
    gate = asyncio.Semaphore(AT_ONCE)

    async def row(s: Any) -> dict[str, Any]:
        queue: list[dict[str, Any]] = []
        if s.waiters:  # one more bounded script, only for a lock someone waits for
            async with gate:
                now_ms, first = await rwlocks.waiters(s.name, MAX_WAITERS)
            queue = [{"mode": "read" if mode == READ else "write", "owner": owner,
                      "waited_ms": max(now_ms - since_ms, 0)} for mode, owner, since_ms in first]
        w = s.writer
        return {"name": s.name, "state": "write" if w else "read" if s.readers else "free",
                "writer": {"owner": w.owner, "fencing_token": w.fencing_token, "ttl_ms": w.ttl_remaining_ms}
                if w else None,
                "readers": s.readers, "waiters": s.waiters, "queue": queue}

    rows = list(await asyncio.gather(*(row(s) for s in found)))
    rows.sort(key=lambda r: (-r["waiters"], r["state"] == "free", r["name"]))
    return {"items": rows, "more": more, "limit": MAX_RWLOCKS, "waiters_limit": MAX_WAITERS}


async def elections_view(elections: Any) -> dict[str, Any]:
    """The current tenant's elections with a leader or candidates."""
    found, more = await first_summaries(elections.summaries, MAX_ELECTIONS, lambda s: s.election)
    gate = asyncio.Semaphore(AT_ONCE)

    async def row(s: Any) -> dict[str, Any]:
        async with gate:
            (_, first), (now_ms, history) = await asyncio.gather(
                elections.candidates(s.election, MAX_CANDIDATES) if s.candidates else _nobody(),
                elections.recent(s.election, HISTORY, VALUE_BYTES))
        leader = s.leader
        cut = leader is not None and (s.value_cut or len(leader.value) > VALUE_BYTES)
        return {"name": s.election,
                "leader": {"candidate": leader.candidate, "term": leader.term,
                           "value": shown_value(leader.value[:VALUE_BYTES], cut),
                           "expires_at_ms": leader.expires_at_ms,
                           "ttl_ms": max(leader.expires_at_ms - now_ms, 0)}
                if leader else None,
                "candidates": s.candidates,
                "queue": [{"candidate": c, "waited_ms": max(now_ms - since_ms, 0)} for c, since_ms in first],
                "history": [{"position": c.position, "term": c.term, "candidate": c.candidate,
                             "value": shown_value(c.value, c.value_cut), "at_ms": c.at_ms} for c in history]}

    rows = list(await asyncio.gather(*(row(s) for s in found)))
    rows.sort(key=lambda r: (r["leader"] is None, r["name"]))
    return {"items": rows, "more": more, "limit": MAX_ELECTIONS, "candidates_limit": MAX_CANDIDATES,
            "history_limit": HISTORY}


async def _nobody() -> tuple[int, list[tuple[str, int]]]:
    return 0, []
