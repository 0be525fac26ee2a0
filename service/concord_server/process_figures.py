"""This process's figures, as the console shows them for every process: pid, memory,
CPU, calls per second by service and code, blocked calls, open streams, event-loop lag.

Nothing is counted here: each figure is read from what already holds it. Calls come
from the RPC metrics' counter (edge/rpc_metrics.py, on with --metrics-listen or
--console-listen; without either a process reports none), as differences between two
readings; blocked calls from the waiters and doorbells; streams from the RPC metrics'
gauge; the loop's lag from the loop monitor's per-second windows (loop_monitor.py);
memory from /proc. ``read`` is called by one reader, the process registry's beat
(process_registry.py), so its rates are over the time since its last beat.
"""

from __future__ import annotations

import os
import resource
import time
from typing import Any


class ProcessFigures:
    def __init__(self, waiters: Any, bells: tuple[Any, ...], metrics: Any, monitor: Any, workers: int) -> None:
        self._waiters, self._bells, self._metrics, self._monitor = waiters, bells, metrics, monitor
        self._workers = workers
        self.started = time.time()
        self._calls: tuple[float, dict[tuple[str, str], float]] | None = None  # (when, totals) of the last read
        self._cpu: tuple[float, float] | None = None
        self._last_read = time.monotonic()

    def read(self) -> dict[str, Any]:
        now = time.monotonic()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        figures = {"pid": os.getpid(), "started_at_ms": int(self.started * 1000), "workers": self._workers,
                   "rss_bytes": _rss(usage), "cpu_percent": self._cpu_percent(now, usage),
                   "calls": self._call_rates(now), "blocked": self._blocked(), "streams": self._streams(),
                   "loop_lag_ms": self._loop_lag_ms()}
        self._last_read = now
        return figures

    def _cpu_percent(self, now: float, usage: resource.struct_rusage) -> float | None:
        cpu = usage.ru_utime + usage.ru_stime
        percent = None
        if self._cpu is not None and now > self._cpu[0]:
            percent = round(100 * (cpu - self._cpu[1]) / (now - self._cpu[0]), 1)
        self._cpu = (now, cpu)
        return percent

    def _call_rates(self, now: float) -> dict[str, Any]:
        """Calls per second by service and code since the last reading, from the RPC
        metrics' counter; only the pairs with any call since start."""
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

    def _blocked(self) -> dict[str, int]:
        return {"locks_semaphores": self._waiters.waiting(),
                "queues": self._bells[0].waiting() if self._bells else 0,
                "chats_files": sum(b.waiting() for b in self._bells[1:])}

    def _streams(self) -> int | None:
        if self._metrics is None:
            return None
        return int(sum(s.value for f in self._metrics.interceptor.streams.collect() for s in f.samples))

    def mark(self) -> None:
        """Serving starts: the next reading's loop lag leaves out what came before."""
        self._last_read = time.monotonic()

    def _loop_lag_ms(self) -> float | None:
        """The longest the loop was late in its per-second windows since the last
        reading (None until one has started since)."""
        found = self._monitor.recent_max(self._last_read) if self._monitor is not None else None
        return None if found is None else round(found * 1000, 1)


def _rss(usage: resource.struct_rusage) -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return usage.ru_maxrss * 1024  # the peak, where /proc is not there
