"""Prometheus metrics of one server process, served over HTTP (``--metrics-listen``).

Three sources:

- ``edge/rpc_metrics.RpcMetrics``, the grpc.aio server interceptor that counts and
  times every call (``Metrics(RpcMetrics)`` makes it over this registry); it notes
  the queues that calls used in ``RecentQueues``.
- Counters the rest of the server feeds: Redis failures (redis_client.FAILURES)
  and the lock/semaphore handoff latency (``observe_handoff``, which
  primitives/fifo_acquire.py calls through ``Waiters.on_handoff``).
- ``_StateCollector``: gauges read at scrape time from the structures that hold
  them (wakeups/, the loop monitor) and the depths of the queues
  this process served recently. The scrape runs on the HTTP server's thread; those
  structures belong to the event loop, so it hands one coroutine to the loop
  (``run_coroutine_threadsafe``) that reads everything, the queue depths in one
  pipelined batch, and waits for it at most ``SCRAPE_TIMEOUT``. A loop too busy to
  answer in time gets the last reading served again, never a blocked loop.

The metrics live in a registry of this server's own (plus the standard process
and Python collectors), so servers started in one process do not collide.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from . import tenants
from .store import client as redis_client
from .loop_monitor import BOUNDS as LOOP_BOUNDS
from .loop_monitor import LoopMonitor
from .wakeups.doorbells import Doorbells
from .wakeups.waiters import Waiters

log = logging.getLogger(__name__)

# Handoffs are measured on the Redis clock's whole milliseconds (see observe_handoff).
HANDOFF_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
SCRAPE_TIMEOUT = 2.0
MAX_QUEUES = 200  # queue depths are exported for at most this many recently used queues per tenant
MAX_TENANTS = 1000  # ... of at most this many recently active tenants (tenants come from --auth-tokens)


class RecentQueues:
    """The (tenant, name) of the queues that calls used successfully, the last
    ``limit`` of each tenant (only valid names get here: a rejected request never
    ends OK). The tenant is the call's (tenants.current), "" without --auth-tokens.

    Bounded per tenant, not globally: a tenant touching thousands of queues pushes
    out only its own older series, never another tenant's. The tenants themselves
    are bounded too (``max_tenants``, least recently active first), so the series
    count is at most max_tenants * limit."""

    def __init__(self, limit: int = MAX_QUEUES, max_tenants: int = MAX_TENANTS) -> None:
        self._tenants: OrderedDict[str, OrderedDict[str, None]] = OrderedDict()
        self._limit = limit
        self._max_tenants = max_tenants

    def seen(self, names: Iterable[str]) -> None:
        tenant = tenants.current.get() or ""
        recent = self._tenants.get(tenant)
        if recent is None:
            recent = self._tenants[tenant] = OrderedDict()
            while len(self._tenants) > self._max_tenants:
                self._tenants.popitem(last=False)
        self._tenants.move_to_end(tenant)
        for name in names:
            recent[name] = None
            recent.move_to_end(name)
        while len(recent) > self._limit:
            recent.popitem(last=False)

    def names(self) -> list[tuple[str, str]]:
        return [(tenant, name) for tenant, recent in self._tenants.items() for name in recent]


class _StateCollector:
    """Gauges read at scrape time (see the module docstring)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, loop_thread: int, waiters: Waiters, doorbells: Doorbells,
                 chat_bells: Doorbells, queues: Any, recent: RecentQueues, monitor: LoopMonitor | None) -> None:
        self._loop, self._loop_thread = loop, loop_thread
        self._waiters, self._doorbells, self._chat_bells = waiters, doorbells, chat_bells
        self._queues, self._recent, self._monitor = queues, recent, monitor
        self._last: dict[str, Any] = {"waiters": {}, "channels": {}, "depths": {}, "loop": None}
        self._lock = threading.Lock()

    def describe(self) -> list:
        return []  # collected only on scrape, never at registration

    async def _read(self) -> dict[str, Any]:
        reading: dict[str, Any] = {
            "waiters": {"lock_semaphore": self._waiters.waiting(), "queue": self._doorbells.waiting(),
                        "chat_file": self._chat_bells.waiting()},
            "channels": {"lock_semaphore": len(self._waiters.listeners), "queue": len(self._doorbells.listeners),
                         "chat_file": len(self._chat_bells.listeners)},
            "loop": self._monitor.reading() if self._monitor is not None else None,
        }
        names = self._recent.names()
        stats = await asyncio.gather(*(self._stats(t, n) for t, n in names), return_exceptions=True)
        reading["depths"] = {n: s for n, s in zip(names, stats) if not isinstance(s, BaseException)}
        return reading

    async def _stats(self, tenant: str, name: str) -> Any:
        tenants.current.set(tenant or None)  # in this gather task's own context: the tenant's queues
        return await self._queues.stats(name)

    def _reading(self) -> dict[str, Any]:
        with self._lock:  # concurrent scrapes share the loop's answer rather than pile up
            try:
                if self._loop.is_closed() or threading.get_ident() == self._loop_thread:
                    return self._last
                self._last = asyncio.run_coroutine_threadsafe(self._read(), self._loop).result(SCRAPE_TIMEOUT)
            except Exception as exc:  # timed out (a stalled loop) or shutting down: serve the last one
                log.debug("metrics scrape could not read the server state: %r", exc)
            return self._last

    def collect(self) -> Iterable[Any]:
        r = self._reading()
        waiters = GaugeMetricFamily("concord_blocked_waiters",
                                    "calls waiting now: lock/semaphore Acquire tickets, Dequeue/Consume waits, "
                                    "chat subscriptions and file transfers waiting on a doorbell", labels=["kind"])
        channels = GaugeMetricFamily("concord_wait_channels",
                                     "wake-up channels this process is subscribed to (one per resource waited on)",
                                     labels=["kind"])
        for kind, n in r["waiters"].items():
            waiters.add_metric([kind], n)
        for kind, n in r["channels"].items():
            channels.add_metric([kind], n)
        depth = GaugeMetricFamily("concord_queue_tasks",
                                  f"tasks per queue and state, for the last {MAX_QUEUES} queues of each tenant this "
                                  "process served",
                                  labels=["tenant", "queue", "state"])
        oldest = GaugeMetricFamily("concord_queue_oldest_ready_seconds",
                                   "how long the longest-waiting ready task has been ready", labels=["tenant", "queue"])
        for (tenant, name), s in r["depths"].items():
            for state in ("ready", "delayed", "leased", "dead"):
                depth.add_metric([tenant, name, state], getattr(s, state))
            oldest.add_metric([tenant, name], s.oldest_ready_age_ms / 1000)
        yield from (waiters, channels, depth, oldest)
        errors = CounterMetricFamily("concord_redis_errors", "Redis failures: commands that failed as unavailable "
                                     "(where=command) and lost notification connections (where=pubsub)",
                                     labels=["where", "error"])
        for (where, error), n in list(redis_client.FAILURES.items()):
            errors.add_metric([where, error], n)
        yield errors
        loop = r["loop"]
        if loop is not None:
            late = HistogramMetricFamily("concord_event_loop_lateness_seconds",
                                         "how late a 10 ms timer fired on the event loop (loop stalls)")
            buckets, seen = [], 0
            for bound, n in zip((*LOOP_BOUNDS, float("inf")), loop["counts"]):
                seen += n
                buckets.append((str(bound) if bound != float("inf") else "+Inf", seen))
            late.add_metric([], buckets, None)
            yield late
            yield GaugeMetricFamily("concord_event_loop_lateness_max_seconds", "largest lateness since start",
                                    value=loop["max_s"])
            yield CounterMetricFamily("concord_gc_pause_seconds", "time spent in garbage collection",
                                      value=loop["gc_s"])


class Metrics:
    """The metrics of one server: its registry, the RPC interceptor (made by ``interceptor``,
    edge/rpc_metrics.RpcMetrics, over the registry and the recent queues), the scrape-time
    gauges, the HTTP endpoint."""

    def __init__(self, interceptor: Callable[[CollectorRegistry, RecentQueues], Any]) -> None:
        self.registry = CollectorRegistry()
        for c in (ProcessCollector, PlatformCollector, GCCollector):
            c(registry=self.registry)
        self.recent_queues = RecentQueues()
        self.interceptor = interceptor(self.registry, self.recent_queues)
        self.handoff = Histogram(
            "concord_handoff_seconds",
            "lock/semaphore handoff latency: from the grant in Redis (a release, withdraw or expiry freed the "
            "resource) to the queued Acquire resuming in this process; Redis-clock ms, +-1 ms",
            ("primitive",), buckets=HANDOFF_BUCKETS, registry=self.registry)
        self._http: Any = None
        self.port: int | None = None

    def observe_handoff(self, primitive: str, seconds: float) -> None:
        self.handoff.labels(primitive).observe(seconds)

    def watch(self, waiters: Waiters, doorbells: Doorbells, chat_bells: Doorbells, queues: Any,
              monitor: LoopMonitor | None) -> None:
        """Reads these at scrape time; call on the server's event loop."""
        self.registry.register(_StateCollector(asyncio.get_running_loop(), threading.get_ident(), waiters, doorbells, chat_bells, queues, self.recent_queues,
                                               monitor))
        waiters.on_handoff = self.observe_handoff

    def serve(self, listen: str) -> int:
        """Starts the /metrics endpoint on its own thread; returns the bound port."""
        host, _, port = listen.rpartition(":")
        self._http, _thread = start_http_server(int(port), host.strip("[]") or "0.0.0.0", registry=self.registry)
        self.port = self._http.server_port
        return self.port

    def close(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
