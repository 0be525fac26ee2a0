"""Counts, per tenant, of events that happen inside calls and that the console shows
per second across every replica: lock, semaphore, read-write lock and election
handoffs (a queued Acquire granted: primitives/fifo_acquire.py) and deadlocks broken
(primitives/deadlocks.deadlock_error).

Counting is a dict increment in the call's own process, nothing sent to Redis: the
process registry's beat (process_registry.py) takes what was counted once per beat
and adds it to each tenant's per-interval list in Redis (primitives/lock_activity.py),
one script per tenant that had any. At most MAX_TENANTS tenants are held between two
beats (tenants come from --auth-tokens; past that a new tenant's counts are dropped,
not another's). The counts are the Python process's: one server per process, as
concord-server runs (servers started side by side in one test process share them).
"""

from __future__ import annotations

from collections import Counter

from . import tenants

KINDS = ("lock", "semaphore", "rwlock", "election", "deadlocks")  # the fields of lock_activity's entries
MAX_TENANTS = 1000

_counts: dict[str, Counter[str]] = {}


def count(kind: str, n: int = 1) -> None:
    """Counts n events of kind for the calling tenant ("" without --auth-tokens)."""
    tenant = tenants.current.get() or ""
    found = _counts.get(tenant)
    if found is None:
        if len(_counts) >= MAX_TENANTS:
            return
        found = _counts[tenant] = Counter()
    found[kind] += n


def take() -> dict[str, Counter[str]]:
    """Everything counted since the last take, by tenant; counting starts again at zero."""
    global _counts
    taken, _counts = _counts, {}
    return taken
