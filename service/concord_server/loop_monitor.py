"""How long the event loop is held: a task that sleeps a short interval and records
how late it woke.

Everything one server process does runs on one event loop, so a callback that
holds it (a big parse, a burst of thousands of wake-ups handled in one turn) delays
every call of the process by as long. Lateness of a 10 ms timer measures exactly
that, from inside, whatever the cause; the timer's own cost is a few microseconds
100 times a second. A stall of S seconds reads as a lateness between S - 10 ms (the
timer was part-way through its interval when the loop stopped) and S plus the
timer's granularity (1 ms under uvloop). A lateness is also the machine's doing
when other processes keep this one off the CPU, so each tick also notes how much
CPU time the loop's thread used meanwhile: ``cpu_max_s`` is the largest lateness
counting only that (an upper bound of the process's own share; under no
contention it equals ``max_s``). The garbage collector is timed too
(``gc.callbacks``): a full collection walks every live object, so in a process
holding thousands of calls it is the usual suspect, and the reading says whether
the collector was the stall.

Off unless ``--loop-stall-report FILE`` is given. Then the readings are written to
FILE as JSON once a second (a temp file renamed over it, so a reader never sees half
a file). A file was chosen over the alternatives because it needs no new RPC or
proto, prints nothing into the logs, and a reader (the bench, an operator with
``cat``) needs nothing but the path; a metrics endpoint can serve the same
``reading()`` later. Times are seconds; ``start``/``end`` of windows are
CLOCK_MONOTONIC readings, which on Linux other processes on the host can compare
with their own ``time.monotonic()``.
"""

from __future__ import annotations

import asyncio
import bisect
import gc
import json
import logging
import os
import time
from collections import deque
from pathlib import Path

log = logging.getLogger(__name__)

INTERVAL = 0.010
WINDOW = 1.0  # readings are also kept per window of this length, and the file rewritten as each closes
KEEP_WINDOWS = 120
# Upper bounds of the histogram's buckets (seconds); a last bucket takes the rest.
BOUNDS = (0.001, 0.002, 0.005, 0.010, 0.020, 0.050, 0.100, 0.200, 0.500, 1.0, 2.0, 5.0)


class _Tally:
    """Ticks, the largest lateness and a bucket count per lateness range; garbage
    collections: the longest, the time in all, and how many were full (generation 2)."""

    def __init__(self) -> None:
        self.ticks = 0
        self.max = 0.0
        self.counts = [0] * (len(BOUNDS) + 1)
        self.cpu_max = 0.0  # the largest part of a lateness this thread spent on the CPU
        self.gc_max = self.gc_total = 0.0
        self.gc_full = 0

    def add(self, late: float, cpu: float) -> None:
        self.ticks += 1
        self.max = max(self.max, late)
        self.cpu_max = max(self.cpu_max, min(late, cpu))
        self.counts[bisect.bisect_left(BOUNDS, late)] += 1

    def add_gc(self, seconds: float, generation: int) -> None:
        self.gc_max = max(self.gc_max, seconds)
        self.gc_total += seconds
        self.gc_full += generation == 2

    def figures(self) -> dict:
        return {"ticks": self.ticks, "max_s": self.max, "cpu_max_s": self.cpu_max, "counts": self.counts,
                "gc_max_s": self.gc_max,
                "gc_s": self.gc_total, "gc_full": self.gc_full}


def percentile(counts: list[int], p: float, largest: float) -> float:
    """An upper bound of the p-th percentile: the bound of the bucket it falls in
    (``largest`` when that is lower, or for the open last bucket)."""
    total = sum(counts)
    if not total:
        return 0.0
    rank, seen = p / 100 * total, 0
    for bound, n in zip((*BOUNDS, largest), counts):
        seen += n
        if seen >= rank:
            return min(bound, largest)
    return largest


class LoopMonitor:
    def __init__(self, path: Path | None, *, interval: float = INTERVAL, window: float = WINDOW) -> None:
        self.path = path
        self.interval = interval
        self.window = window
        self.started = time.monotonic()
        self._total = _Tally()
        self._current = _Tally()
        self._current_start = self.started
        self._windows: deque[dict] = deque(maxlen=KEEP_WINDOWS)
        self._write_failed = False
        self._task: asyncio.Task | None = None
        self._gc_started = 0.0

    def start(self) -> LoopMonitor:
        self._task = asyncio.create_task(self._run(), name="loop monitor")
        gc.callbacks.append(self._on_gc)
        return self

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_started = time.monotonic()
            return
        took = time.monotonic() - self._gc_started
        self._total.add_gc(took, info["generation"])
        self._current.add_gc(took, info["generation"])

    async def _run(self) -> None:
        while True:
            before, cpu_before = time.monotonic(), time.thread_time()
            await asyncio.sleep(self.interval)
            now, cpu = time.monotonic(), time.thread_time() - cpu_before
            late = max(0.0, now - before - self.interval)
            self._total.add(late, cpu)
            self._current.add(late, cpu)
            if now - self._current_start >= self.window:
                self._close_window(now)

    def _close_window(self, now: float) -> None:
        self._windows.append({"start": self._current_start, "end": now, **self._current.figures()})
        self._current, self._current_start = _Tally(), now
        self.write()

    def reading(self) -> dict:
        t = self._total
        return {
            "pid": os.getpid(), "interval_s": self.interval, "started": self.started, "now": time.monotonic(),
            **t.figures(),
            **{f"p{p}_s".replace(".", "_"): percentile(t.counts, p, t.max) for p in (50, 90, 99, 99.9)},
            "bounds_s": list(BOUNDS),
            "windows": list(self._windows),  # the last KEEP_WINDOWS, oldest first
        }

    def recent_max(self, since: float) -> float | None:
        """The largest lateness in the windows that started at ``since`` (monotonic) or
        later, the one open now included; None before one has (the process registry's
        beat: process_figures.py, which so leaves out the start-up)."""
        found = self._current.max if self._current_start >= since and self._current.ticks else None
        for window in reversed(self._windows):
            if window["start"] < since:
                break
            found = max(found or 0.0, window["max_s"])
        return found

    def write(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(self.reading()))
            os.replace(tmp, self.path)
        except OSError as exc:
            if not self._write_failed:  # once: a full disk must not flood the log
                log.warning("cannot write the loop stall report to %s: %s", self.path, exc)
            self._write_failed = True

    async def aclose(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self.write()


def from_settings(report: str | None, workers: int) -> LoopMonitor | None:
    """The monitor ``--loop-stall-report`` asks for, started; None when it is unset.
    With several workers each process writes its own file, ``FILE.<pid>``."""
    if not report:
        return None
    path = Path(report) if workers == 1 else Path(f"{report}.{os.getpid()}")
    return LoopMonitor(path).start()
