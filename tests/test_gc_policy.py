"""The server's garbage-collection policy (gc_policy.py): no automatic full
collection, objects frozen as they age, frozen garbage cycles reclaimed when the
process is idle, or after a bound when it never is."""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys
import weakref

from concord_server.gc_policy import GcPolicy
from support import async_wait_until


class _Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector frees it


async def _frozen_cycle() -> weakref.ref:
    """A garbage cycle that a freeze has moved out of reach of the young collections."""
    ref = weakref.ref(_Node())
    gc.freeze()
    return ref


def _freed(ref: weakref.ref):
    async def freed() -> bool:
        return ref() is None

    return freed


async def test_frozen_garbage_is_reclaimed_when_idle_and_not_while_a_single_call_is_in_progress():
    """One call in progress (a blocked call, a stream) would wait out the whole walk:
    the process is idle only with none."""
    busy = [1]
    policy = GcPolicy(lambda: busy[0], period=0.02, idle_every=0.05, max_deferred=3600, growth=0)
    before = gc.get_threshold()
    policy.start()
    try:
        assert gc.get_threshold()[2] > 10**9  # no automatic full collection
        ref = await _frozen_cycle()
        gc.collect(1)
        for _ in range(10):  # ten periods with one call in progress: no full collection
            await asyncio.sleep(0.03)
        assert ref() is not None  # frozen: young collections never see it, and busy: no full one
        busy[0] = 0
        await async_wait_until(_freed(ref), timeout=30, message="idle full collection")
    finally:
        await policy.aclose()
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


async def test_a_process_never_idle_still_collects_after_the_bound():
    policy = GcPolicy(lambda: 10**6, period=0.02, idle_every=0.05, max_deferred=0.2)
    policy.start()
    try:
        ref = await _frozen_cycle()
        await async_wait_until(_freed(ref), timeout=30, message="deferred full collection")
    finally:
        await policy.aclose()


async def test_an_idle_full_collection_waits_until_enough_was_kept_to_be_worth_its_walk():
    """A full collection walks the start-up objects too (tens of ms), so a process that
    is idle between calls but steadily serving does not run one every few seconds for
    nothing: only once the process has grown by ``growth`` bytes since the last one."""
    kept: list[object] = []
    policy = GcPolicy(lambda: 0, period=0.02, idle_every=0.05, max_deferred=3600, growth=2 * 2**20)
    policy.start()
    try:
        ref = await _frozen_cycle()
        for _ in range(10):  # ten periods, idle, and little kept: the cycle stays
            await asyncio.sleep(0.03)
        assert ref() is not None
        # Fresh pages, written: a long test process's allocator may hold enough freed
        # memory to place millions of small objects without growing at all (CI saw it).
        kept.append(b"x" * (8 * 2**20))
        await async_wait_until(_freed(ref), timeout=30, message="the idle full collection once enough was kept")
    finally:
        await policy.aclose()


def test_the_growth_is_seen_on_the_c_allocator_the_server_runs_on():
    """The server re-executes itself on the C allocator (c_heap.py), where
    sys.getallocatedblocks() is always 0: the growth must be read another way, or no
    idle collection ever runs and a burst's memory never goes back."""
    probe = ("from concord_server.gc_policy import resident_bytes; before = resident_bytes(); "
             "kept = [[] for _ in range(300_000)]; grown = resident_bytes() - before; "
             "assert grown > 8 * 2**20, grown")
    done = subprocess.run([sys.executable, "-c", probe], env={**os.environ, "PYTHONMALLOC": "malloc"},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


async def test_a_period_s_garbage_cycles_die_young_instead_of_being_frozen():
    """Each period collects what is not frozen before it freezes: a cycle made and
    dropped since the last freeze is reclaimed then, with no full collection (the
    growth needed for one is never reached here)."""
    policy = GcPolicy(lambda: 0, period=0.02, idle_every=0.05, max_deferred=3600, growth=2**40)
    policy.start()
    try:
        gc.disable()  # no automatic young collection: only the policy's may free it
        ref = weakref.ref(_Node())
        assert ref() is not None
        await async_wait_until(_freed(ref), timeout=30, message="the period's collection")
    finally:
        gc.enable()
        await policy.aclose()
