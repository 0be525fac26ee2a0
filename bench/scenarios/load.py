"""Load: one concord-server process holding BLOCKED blocked calls and STREAMS open
streams across the services at once; its memory, Redis connections and event-loop
stalls while they arrive, while they wait, and while they are all released.

The mix (load_clients.py; a tenth of it with --quick):

  blocked calls (10,000)   4,000 lock Acquires, 16 on each of 250 locks held by Hold streams
                           3,000 semaphore Acquires, 30 on each of 100 full semaphores (limit 2)
                           3,000 Dequeues, 10 on each of 300 empty queues
  streams (1,000)          250 lock Hold streams (holding those 250 locks)
                           250 chat Subscribe streams, 5 members of each of 50 chats
                           250 Consume streams, 5 on each of 50 empty queues (credits 1)
                           250 file streams: 10 uploads kept open after their first chunk,
                           each followed by 24 Downloads (lines) waiting for the rest

Every call has a wait of 600 s, longer than the run. They come from CLIENT_PROCS
spawned processes with CHANNELS grpc.aio channels each (one TCP connection each),
with the generated stubs; the bench process only orchestrates and measures. Each
repetition starts a fresh Valkey and concord-server (``--loop-stall-report`` on,
``--file-chunk-size 4096`` so an upload's first chunk is small, ``--file-upload-lease
3600`` so an open upload outlives the run, ``--max-streams-per-connection 100000`` since
the calls share 8 connections). Phases:

  idle      the client processes have run the whole cycle once at a tiny size (a
            warm-up: every code path loaded) and set up chats and full semaphores;
            IDLE_S s of nothing: the baselines (RSS, Redis connections, stall)
  ramp-up   each kind opened in turn, streams first (the Hold streams hold the
            locks the Acquires queue for); the next starts when every call of this
            one is open at the server (load_clients.py says how that is known per
            kind), and VmRSS is read after each
  steady    STEADY_S s with everything open: RSS, CPU, fds, Redis commands
  release   Hold streams cancelled, semaphore permits released, one task enqueued
            per waiting Dequeue/Consume, a message sent to each chat, the uploads
            finished; every lock/semaphore waiter releases what it is granted, every
            task is acked, so the storm runs by itself until every call has ended.
            The clients count the calls that ended as they should.

The console's cost (issue 34): the server also serves its web console
(``--console-listen``); after the steady window come CONSOLE_ROUNDS pairs of windows of
the same length, one without a console page and one with a page watching (its event
stream, /api/events?parts=locks, as the Locks page opens it: the overview and the
locks with their waiters each snapshot (console/live.py INTERVAL), the largest page here, over 250 locks with 16
waiters each), on the same server with the same calls open. What the page adds to the
server's CPU, in % of a core (target: at most 5). Each round also has a window with a
person's detail pages open instead (DETAIL_PATHS: a lock's waiters page, 16 waiters,
and a queue's page, each read again every DETAIL_REFRESH_S as console-detail.js does,
beside the event stream such a page opens, which carries the overview alone). And
how soon a lock taken through the API shows on a watching Locks page (the issue's
"within a second"): PROBES locks taken one after another, each timed from the
Acquire's reply to the first snapshot naming it (see ``visible_after``).

Measured from outside the server: VmRSS from /proc/<pid>/status; the server's Redis
connections (CLIENT LIST minus the bench's own, named "bench"), sampled every
SAMPLE_S s for the peak. From inside: the server's loop monitor
(service/concord_server/loop_monitor.py) writes how late its 10 ms timer fired, per
1 s window, to the report file; each window counts in the phase its middle falls in
(a phase shorter than a window gets every window it overlaps).

Memory per stream = (RSS after the streams' stages - idle RSS) / streams; per blocked
call = (RSS after the blocked calls' stages - RSS after the streams) / blocked calls;
per kind from the RSS read before and after its own stage. Figures are medians over
the repetitions; completions are the worst repetition's (they must hold in each).
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import multiprocessing
import socket
import threading
import time
from pathlib import Path

import psutil

from concord_server.console.live import INTERVAL

from ..harness import RedisServer, concord_server, cpu_seconds, free_port, median, redis_server
from ..report import Row, fmt
from . import Context
from .load_clients import BLOCKED_KINDS, KINDS, RELEASE_TIMEOUT, STREAM_KINDS, Plan, Spec, main as client_main

SC = "load"
PLAN = Plan(locks=250, lock_waiters=16, semaphores=100, sem_limit=2, sem_waiters=30, queues=300, dequeuers=10,
            consume_queues=50, consumers=5, chats=50, members=5, groups=10, downloads=24)
QUICK = dataclasses.replace(PLAN, locks=25, semaphores=10, queues=30, consume_queues=5, chats=5, groups=1)
WARM = Plan(locks=2, lock_waiters=2, semaphores=2, sem_limit=2, sem_waiters=2, queues=2, dequeuers=2,
            consume_queues=2, consumers=2, chats=2, members=2, groups=2, downloads=2)
CLIENT_PROCS = 2
CHANNELS = 4
CHUNK = 4096
IDLE_S, STEADY_S = 2.0, 5.0
SAMPLE_S = 0.1
TARGET_STALL = 0.050
TARGET_CONNECTIONS = 16
TARGET_CONSOLE = 5.0  # % of a core a watching console may add
CONSOLE_ROUNDS = 2  # windows without and with a console watching, in turns
PAGE_PARTS = b"locks"  # the page watched: Locks, the largest here (4,000 lock waiters on 250 locks)
# The detail pages read in the detail windows (console/queue_detail.py), as the page asks
# for them: a lock with 16 waiters, and a queue the warm-up round left tasks and events in.
DETAIL_PATHS = ("/api/locks/bench:load:load:lock:0/waiters?offset=0&limit=100",
                "/api/queues/bench:load:warm:dequeue:0?limit=20")
DETAIL_REFRESH_S = 2.0  # console-detail.js REFRESH_MS
PROBES = 5  # locks taken through the API while a Locks page watches, per run
TARGET_VISIBLE_S = 1.0
PHASES = ("idle", "ramp-up", "steady", "release")
LABELS = {"hold": "Hold", "subscribe": "Subscribe", "consume": "Consume", "download": "Upload+Download",
          "lock": "lock Acquire", "semaphore": "semaphore Acquire", "dequeue": "Dequeue"}


def vm_rss(pid: int) -> int:
    """VmRSS of /proc/<pid>/status, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


class Sampler:
    """A thread of the bench: every SAMPLE_S s the server's Redis connections and
    VmRSS; every few samples the loop monitor's report, whose windows it keeps (the
    server's file holds only the latest ones)."""

    def __init__(self, pid: int, rds: RedisServer, report: Path) -> None:
        self.pid, self.rds, self.report = pid, rds, report
        self.samples: list[tuple[float, int, int]] = []  # (time, connections, rss)
        self._windows: dict[float, dict] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="load sampler", daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        with self.rds.client() as conn:
            i = 0
            while True:
                clients = conn.client_list()
                conns = sum(1 for c in clients if c.get("name") != "bench")
                self.samples.append((time.monotonic(), conns, vm_rss(self.pid)))
                if i % 5 == 0:
                    self.read_report()
                i += 1
                if self._stop.wait(SAMPLE_S):
                    return

    def read_report(self) -> dict | None:
        try:
            reading = json.loads(self.report.read_text())
        except (OSError, ValueError):
            return None  # not written yet
        with self._lock:
            for w in reading["windows"]:
                self._windows[w["start"]] = w
        return reading

    def windows(self) -> list[dict]:
        with self._lock:
            return sorted(self._windows.values(), key=lambda w: w["start"])

    def wait_for_window(self, t: float, timeout: float = 10.0) -> None:
        """Until the monitor has closed a window ending after t (it closes one a second)."""
        deadline = time.monotonic() + timeout
        while not any(w["end"] >= t for w in self.windows()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server's loop monitor wrote no window past t={t:.1f} to {self.report}")
            self.read_report()
            time.sleep(0.1)


class Clients:
    """The spawned client processes and their pipes."""

    def __init__(self, specs: list[Spec]) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.procs, self.conns = [], []
        for spec in specs:
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=client_main, args=(child, spec), daemon=True)
            proc.start()
            child.close()
            self.procs.append(proc)
            self.conns.append(parent)

    def __enter__(self) -> Clients:
        return self

    def __exit__(self, *exc) -> None:
        for proc in self.procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join()

    def send(self, msg: tuple) -> None:
        for c in self.conns:
            c.send(msg)

    def expect(self, tag: str, timeout: float) -> list:
        """Each process's next message, which must be ``tag`` (or carry it first)."""
        got = []
        deadline = time.monotonic() + timeout
        for i, c in enumerate(self.conns):
            if not c.poll(max(0.0, deadline - time.monotonic())):
                raise RuntimeError(f"load client {i} sent no {tag!r} within {timeout:.0f}s")
            msg = c.recv()
            head = msg if isinstance(msg, str) else msg[0]
            if head == "error":
                raise RuntimeError(f"load client {i} failed:\n{msg[1]}")
            if head != tag:
                raise RuntimeError(f"load client {i} sent {msg!r}, expected {tag!r}")
            got.append(msg)
        return got


def _phase_stalls(windows: list[dict], bounds: dict[str, tuple[float, float]]) -> dict:
    """Per phase: the largest lateness, an upper bound of the p99 (histogram bucket),
    the ticks, and the longest garbage collection and how many were full, from the
    windows whose middle lies in the phase."""
    from concord_server.loop_monitor import percentile

    out = {}
    for phase, (a, b) in bounds.items():
        mine = [w for w in windows if a <= (w["start"] + w["end"]) / 2 < b]
        if not mine:  # shorter than a window
            mine = [w for w in windows if w["end"] > a and w["start"] < b]
        counts = [sum(c) for c in zip(*(w["counts"] for w in mine))] if mine else []
        worst = max((w["max_s"] for w in mine), default=float("nan"))
        out[phase] = {"max_s": worst, "p99_s": percentile(counts, 99, worst) if counts else float("nan"),
                      "cpu_max_s": max((w.get("cpu_max_s", float("nan")) for w in mine), default=float("nan")),
                      "ticks": sum(w["ticks"] for w in mine), "windows": len(mine),
                      "gc_max_s": max((w["gc_max_s"] for w in mine), default=float("nan")),
                      "gc_full": sum(w["gc_full"] for w in mine)}
    return out


def _redis_figures(rds: RedisServer) -> tuple[float, int]:
    """(Redis CPU seconds, EVALSHA calls so far)."""
    with rds.client() as conn:
        calls = conn.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
    return cpu_seconds(psutil.Process(rds.proc.pid)), calls


class ConsoleWatcher:
    """One console page's event stream (/api/events?parts=...), read in a thread while
    the ``with`` lasts: how many snapshots arrived and how many bytes they took. A
    plain socket: the stream is read as it comes, and stopping never waits on a read.
    With ``details``, a second thread reads each of those paths every
    DETAIL_REFRESH_S, as an open detail page does (``detail_reads``, ``detail_errors``)."""

    def __init__(self, port: int, parts: bytes = PAGE_PARTS, details: tuple[str, ...] = ()) -> None:
        self.port, self.parts, self.details = port, parts, details
        self.events = self.bytes = self.detail_reads = self.detail_errors = 0
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._read, daemon=True)]
        if details:
            self._threads.append(threading.Thread(target=self._read_details, daemon=True))

    def _read_details(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            while True:
                for path in self.details:
                    conn.request("GET", path)
                    response = conn.getresponse()
                    response.read()
                    self.detail_reads += 1
                    self.detail_errors += response.status != 200
                if self._stop.wait(DETAIL_REFRESH_S):
                    return
        finally:
            conn.close()

    def _read(self) -> None:
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
            sock.sendall(b"GET /api/events?parts=" + self.parts + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         b"Accept: text/event-stream\r\n\r\n")
            sock.settimeout(0.2)
            tail = b""
            while not self._stop.is_set():
                try:
                    chunk = sock.recv(1 << 16)
                except TimeoutError:
                    continue
                if not chunk:
                    return
                self.bytes += len(chunk)
                seen = tail + chunk  # an event starts a line with "data:" (chunked framing aside)
                self.events += seen.count(b"\ndata:") - tail.count(b"\ndata:")
                tail = seen[-8:]

    def __enter__(self) -> "ConsoleWatcher":
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(5)


def visible_after(console_port: int, target: str, name: str) -> float:
    """Seconds from a lock Acquire's reply to the first snapshot of a watching Locks
    page that names it: the page's event stream is opened first, then the lock taken
    (and released at the end). What a person waits for after a change."""
    from concord import Client

    needle = f'"name": "{name}"'.encode()
    with socket.create_connection(("127.0.0.1", console_port), timeout=10) as sock, Client(target) as client:
        sock.sendall(b"GET /api/events?parts=locks HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Accept: text/event-stream\r\n\r\n")
        sock.recv(1 << 16)  # the stream is open: its headers (and maybe a first snapshot) came
        lock = client.lock(name, ttl=60)
        lease = lock.acquire()
        taken = time.monotonic()
        seen = b""
        try:
            while needle not in seen:
                chunk = sock.recv(1 << 20)
                if not chunk:
                    raise RuntimeError("the console closed its event stream")
                seen = seen[-len(needle):] + chunk
            return time.monotonic() - taken
        finally:
            lock.release(lease)


def _run_once(ctx: Context, plan: Plan, rep: int, idle_s: float, steady_s: float) -> dict:
    report = ctx.tmp / f"load-stalls-{rep}.json"
    console_port = free_port()
    extra = ["--loop-stall-report", str(report), "--file-chunk-size", str(CHUNK), "--file-upload-lease", "3600",
             "--console-listen", f"127.0.0.1:{console_port}",
             # Its clients hold 11,000 calls on 8 connections: past the default 100 a
             # connection's further calls would wait at the HTTP/2 layer for a free stream.
             "--max-streams-per-connection", "100000"]
    specs = [Spec(target="", plan=plan, warm=WARM, proc=p, nprocs=CLIENT_PROCS, channels=CHANNELS, chunk=CHUNK)
             for p in range(CLIENT_PROCS)]
    stages: list[dict] = []
    with redis_server(ctx.tmp) as rds, \
            concord_server(rds.url, ctx.tmp, profile_to=ctx.profile(SC) if rep == 0 else None,
                           extra_args=extra) as srv, \
            Sampler(srv.ps.pid, rds, report) as sampler, \
            Clients([dataclasses.replace(s, target=srv.target) for s in specs]) as clients:
        pid = srv.ps.pid
        clients.expect("ready", 300)
        t_idle = time.monotonic()
        cpu0 = cpu_seconds(srv.ps)
        time.sleep(idle_s)  # the idle baseline: nothing happens
        idle_cpu = (cpu_seconds(srv.ps) - cpu0) / idle_s
        idle_rss = rss = vm_rss(pid)
        t_ramp = time.monotonic()
        for kind in KINDS:
            t0 = time.monotonic()
            clients.send(("open", kind))
            calls = sum(m[2] for m in clients.expect("opened", 600))
            after = vm_rss(pid)
            stages.append({"kind": kind, "calls": calls, "rss_before": rss, "rss_after": after,
                           "t0": t0, "t1": time.monotonic()})
            rss = after
        t_steady = time.monotonic()
        cpu0, (redis_cpu0, evalsha0) = cpu_seconds(srv.ps), _redis_figures(rds)
        time.sleep(steady_s)  # everything open; what does waiting cost?
        steady_cpu = (cpu_seconds(srv.ps) - cpu0) / steady_s
        redis_cpu1, evalsha1 = _redis_figures(rds)
        open_rss, fds, threads = vm_rss(pid), srv.ps.num_fds(), srv.ps.num_threads()
        # The console's cost: windows of steady_s in turns, without a page watching and
        # with one (its event stream), so the calls' own re-checks weigh on both alike.
        without, watched, detailed, events, received, detail_reads, detail_errors = [], [], [], 0, 0, 0, 0
        for _ in range(CONSOLE_ROUNDS):
            cpu0 = cpu_seconds(srv.ps)
            time.sleep(steady_s)
            without.append((cpu_seconds(srv.ps) - cpu0) / steady_s)
            with ConsoleWatcher(console_port) as watcher:
                cpu0 = cpu_seconds(srv.ps)
                time.sleep(steady_s)
                watched.append((cpu_seconds(srv.ps) - cpu0) / steady_s)
            events, received = events + watcher.events, received + watcher.bytes
            with ConsoleWatcher(console_port, parts=b"", details=DETAIL_PATHS) as details:
                cpu0 = cpu_seconds(srv.ps)
                time.sleep(steady_s)
                detailed.append((cpu_seconds(srv.ps) - cpu0) / steady_s)
            detail_reads, detail_errors = detail_reads + details.detail_reads, detail_errors + details.detail_errors
        visible = [visible_after(console_port, srv.target, f"bench:console:probe:{rep}:{i}") for i in range(PROBES)]
        t_release = time.monotonic()
        clients.send(("release",))
        released = [m[1] for m in clients.expect("released", RELEASE_TIMEOUT + 120)]
        t_done = time.monotonic()
        after_rss = vm_rss(pid)
        sampler.wait_for_window(t_done)
        windows = sampler.windows()
        samples = list(sampler.samples)
    bounds = {"idle": (t_idle, t_ramp), "ramp-up": (t_ramp, t_steady), "steady": (t_steady, t_release),
              "release": (t_release, t_done)}
    live = [s for s in samples if s[0] >= t_idle]
    idle_conns = max((c for t, c, _ in live if t < t_ramp), default=0)
    counts = {k: sum(r["kinds"][k]["completed"] for r in released) for k in KINDS}
    expected = {k: sum(r["kinds"][k]["expected"] for r in released) for k in KINDS}
    errors: dict[str, int] = {}
    for r in released:
        for k in KINDS:
            for msg, n in r["kinds"][k]["errors"].items():
                errors[f"{k}: {msg}"] = errors.get(f"{k}: {msg}", 0) + n
    checks = {name: all(r["checks"][name] for r in released) for name in released[0]["checks"]}
    by_kind = {s["kind"]: s for s in stages}
    streams = sum(by_kind[k]["calls"] for k in STREAM_KINDS)
    blocked = sum(by_kind[k]["calls"] for k in BLOCKED_KINDS)
    streams_rss = by_kind[STREAM_KINDS[-1]]["rss_after"]
    return {
        "blocked": blocked, "streams": streams, "stages": stages,
        "idle_rss": idle_rss, "streams_rss": streams_rss, "all_rss": by_kind[BLOCKED_KINDS[-1]]["rss_after"],
        "steady_rss": open_rss, "after_release_rss": after_rss,
        "per_stream_kib": (streams_rss - idle_rss) / streams / 1024,
        "per_blocked_kib": (by_kind[BLOCKED_KINDS[-1]]["rss_after"] - streams_rss) / blocked / 1024,
        "per_kind_kib": {s["kind"]: (s["rss_after"] - s["rss_before"]) / s["calls"] / 1024 for s in stages},
        "idle_conns": idle_conns, "peak_conns": max((c for _, c, _ in live), default=0),
        "peak_rss": max((r for _, _, r in live), default=0),
        "stalls": _phase_stalls(windows, bounds),
        # Stages are shorter than a window: each gets every window it overlaps.
        "stage_stalls": {s["kind"]: max((w["max_s"] for w in windows if w["end"] > s["t0"] and w["start"] < s["t1"]),
                                        default=float("nan")) for s in stages},
        "phase_s": {p: b - a for p, (a, b) in bounds.items()},
        "idle_cpu_busy": idle_cpu, "steady_cpu_busy": steady_cpu,
        "console_added_cpu": sum(watched) / len(watched) - sum(without) / len(without),
        "console_unwatched_cpu": sum(without) / len(without),
        "console_detail_added_cpu": sum(detailed) / len(detailed) - sum(without) / len(without),
        "console_detail_reads": detail_reads, "console_detail_errors": detail_errors, "console_visible_s": visible,
        "console_events_per_s": events / (CONSOLE_ROUNDS * steady_s), "console_bytes_per_event": received / max(1, events),
        "steady_redis_cpu_busy": (redis_cpu1 - redis_cpu0) / steady_s,
        "steady_evalsha_per_s": (evalsha1 - evalsha0) / steady_s, "server_fds": fds, "server_threads": threads,
        "release_s": t_done - t_release, "client_release_s": [r["release_s"] for r in released],
        "completed": counts, "expected": expected, "errors": errors, "checks": checks,
    }


def run(ctx: Context) -> tuple[list[Row], dict]:
    plan = QUICK if ctx.quick else PLAN
    idle_s, steady_s = (1.0, 2.0) if ctx.quick else (IDLE_S, STEADY_S)
    runs = [_run_once(ctx, plan, rep, idle_s, steady_s) for rep in range(ctx.reps)]
    details = {"plan": dataclasses.asdict(plan), "warm_plan": dataclasses.asdict(WARM), "client_procs": CLIENT_PROCS,
               "channels_per_proc": CHANNELS, "file_chunk_size": CHUNK, "idle_s": idle_s, "steady_s": steady_s,
               "reps": ctx.reps, "runs": runs}
    return _rows(runs), details


def _med(runs: list[dict], get) -> tuple[float, list[float]]:
    values = [get(r) for r in runs]
    return median(values), values


def _rows(runs: list[dict]) -> list[Row]:
    r0 = runs[0]
    n, m = r0["blocked"], r0["streams"]
    sc = f"load {n:,} blocked + {m:,} streams"
    idle_rss = _med(runs, lambda r: r["idle_rss"])
    all_rss = _med(runs, lambda r: r["all_rss"])
    per_blocked = _med(runs, lambda r: r["per_blocked_kib"])
    per_stream = _med(runs, lambda r: r["per_stream_kib"])

    def per_kind(kinds) -> str:
        return ", ".join(f"{LABELS[k]} {median([r['per_kind_kib'][k] for r in runs]):.1f}" for k in kinds)

    idle_stall = _med(runs, lambda r: r["stalls"]["idle"]["max_s"])
    rows = [
        Row(sc, "server RSS with all open", all_rss[0], "B", baseline=idle_rss[0],
            baseline_label="idle server, after a warm-up round", runs=all_rss[1],
            note=f"{median([r['after_release_rss'] for r in runs]) / 2**20:.0f} MiB after the release"),
        Row(sc, "server memory per blocked call (KiB)", per_blocked[0], "", runs=per_blocked[1],
            note=f"per kind: {per_kind(BLOCKED_KINDS)} KiB"),
        Row(sc, "server memory per open stream (KiB)", per_stream[0], "", runs=per_stream[1],
            note=f"per kind: {per_kind(STREAM_KINDS)} KiB"),
    ]
    peak = max(r["peak_conns"] for r in runs)
    rows.append(Row(sc, "server's Redis connections (peak, whole run)", peak, "",
                    baseline=median([r["idle_conns"] for r in runs]), baseline_label="idle server",
                    target=f"≤ {TARGET_CONNECTIONS}", passed=peak <= TARGET_CONNECTIONS,
                    runs=[r["peak_conns"] for r in runs]))
    for phase in PHASES[1:]:
        stall = _med(runs, lambda r: r["stalls"][phase]["max_s"])
        p99 = median([r["stalls"][phase]["p99_s"] for r in runs])
        secs = median([r["phase_s"][phase] for r in runs])
        gc_max = median([r["stalls"][phase]["gc_max_s"] for r in runs])
        gc_full = median([r["stalls"][phase]["gc_full"] for r in runs])
        cpu = median([r["stalls"][phase]["cpu_max_s"] for r in runs])
        note = (f"worst run {fmt(max(stall[1]), 's')}; p99 ≤ {fmt(p99, 's')}; of the longest, on the server's own "
                f"CPU at most {fmt(cpu, 's')} (the rest: off the CPU, the machine's load); longest garbage collection "
                f"{fmt(gc_max, 's')} ({gc_full:g} full); phase {secs:.1f} s; idle server: {fmt(idle_stall[0], 's')}")
        if phase == "ramp-up":
            stage = {k: median([r["stage_stalls"][k] for r in runs]) for k in KINDS}
            worst = max(stage, key=stage.get)
            note += f"; largest while opening the {LABELS[worst]} calls ({fmt(stage[worst], 's')})"
        rows.append(Row(sc, f"longest event-loop stall, {phase}", stall[0], "s",
                        target=f"≤ {TARGET_STALL * 1e3:.0f} ms", passed=stall[0] <= TARGET_STALL, runs=stall[1],
                        note=note))
    steady = _med(runs, lambda r: r["steady_cpu_busy"] * 100)

    def med(key: str) -> float:
        return median([r[key] for r in runs])

    rows.append(Row(sc, "server CPU with all open (steady)", steady[0], "%", runs=steady[1],
                    note=f"idle server {med('idle_cpu_busy'):.0%}; {med('steady_evalsha_per_s'):,.0f} Redis "
                         f"scripts/s (re-checks, heartbeats), Redis {med('steady_redis_cpu_busy'):.0%} of a core; "
                         f"{r0['server_fds']} fds, {r0['server_threads']} threads"))
    added = _med(runs, lambda r: r["console_added_cpu"] * 100)
    rows.append(Row(sc, "server CPU a watching console adds (steady)", added[0], "%", runs=added[1],
                    baseline=med("console_unwatched_cpu") * 100, baseline_label="the same windows unwatched",
                    target=f"≤ {TARGET_CONSOLE:g}% of a core", passed=added[0] <= TARGET_CONSOLE,
                    note=f"{CONSOLE_ROUNDS} windows each way, in turns; one page's event stream: "
                         f"{med('console_events_per_s'):.2f} snapshots/s of "
                         f"{med('console_bytes_per_event') / 1024:.0f} KiB"))
    detail = _med(runs, lambda r: r["console_detail_added_cpu"] * 100)
    rows.append(Row(sc, "server CPU a console's detail pages add (steady)", detail[0], "%", runs=detail[1],
                    baseline=med("console_unwatched_cpu") * 100, baseline_label="the same windows unwatched",
                    target=f"≤ {TARGET_CONSOLE:g}% of a core",
                    passed=detail[0] <= TARGET_CONSOLE and all(r["console_detail_errors"] == 0 for r in runs),
                    note=f"a lock's waiters page and a queue's page, each read every {DETAIL_REFRESH_S:g} s, "
                         f"{median([r['console_detail_reads'] for r in runs]):.0f} reads a run, "
                         f"{sum(r['console_detail_errors'] for r in runs)} not 200"))
    seen = sorted(v for r in runs for v in r["console_visible_s"])
    rows.append(Row(sc, "a lock taken through the API shows on a watching Locks page", median(seen), "s",
                    runs=[median(r["console_visible_s"]) for r in runs], target=f"≤ {TARGET_VISIBLE_S:g} s",
                    passed=seen[-1] <= TARGET_VISIBLE_S,
                    note=f"median of {len(seen)} locks over the runs, at most {seen[-1]:.2f} s; from the Acquire's "
                         f"reply to the first snapshot naming it (one each {INTERVAL:g} s)"))
    release = _med(runs, lambda r: r["release_s"])
    rows.append(Row(sc, "release: until every call has ended", release[0], "s", runs=release[1],
                    note=f"{n + m:,} calls; {(n + m) / release[0]:,.0f}/s; ramp-up took "
                         f"{median([r['phase_s']['ramp-up'] for r in runs]):.1f} s"))
    for label, kinds, total in (("blocked calls", BLOCKED_KINDS, n), ("streams", STREAM_KINDS, m)):
        worst = min(sum(r["completed"][k] for k in kinds) for r in runs)
        ok = all(sum(r["completed"][k] for k in kinds) == total for r in runs)
        checks = {c: all(r["checks"][c] for r in runs) for c in r0["checks"]}
        note = ", ".join(f"{LABELS[k]} {min(r['completed'][k] for r in runs):,}/{r0['expected'][k]:,}" for k in kinds)
        if label == "blocked calls":
            note += "; " + ", ".join(f"{c}: {'yes' if v else 'NO'}" for c, v in checks.items())
            ok = ok and all(checks.values())
        errors = {e: c for r in runs for e, c in r["errors"].items() if e.split(":")[0] in kinds}
        if errors:
            note += f"; errors: {errors}"
        rows.append(Row(sc, f"{label} that ended as they should after the release (worst run)", worst, "",
                        target=f"{total:,}", passed=ok, note=note))
    return rows
