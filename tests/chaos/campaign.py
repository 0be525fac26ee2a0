"""A campaign: every service's workload against one or three servers on one Redis (or
the queue workloads on a Redis Cluster, topology "cluster") while a seeded fault
schedule plays, then quiesce, final reads and the checker.

    report = run(Config(seed=123, servers=3, seconds=20, minimum={...}), tmp_path)
    assert report.ok, report.failure()

1. start Redis (AOF, appendfsync always), a TcpProxy in front of it and the servers
   (or a three-node cluster the servers reach directly), and the busy loops of
   ``cpu_hogs`` if set;
2. create the chats, start the actors and play the schedule (faults.play);
3. quiesce: heal everything, wait (condition waits with deadlines) until every server
   is SERVING and answers a call, stop the actors (each finishes its current call);
4. final reads (Workloads.final), stop everything, run every rule over the history and
   over the servers' logs;
5. print a summary and write it (JSON) and the history (JSON lines) to the work dir.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import secrets
import signal
import sys
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvloop
from grpc_health.v1 import health_pb2

from . import checker
from .faults import Fault, Fleet, counts, plan, play
from .history import History
from .workloads import QUEUES, Workloads, client_retries, lag_monitor

ACTORS_STOP_DEADLINE = 20.0  # every call has a deadline of at most wait (2 s) + 5 s
SETTLE_DEADLINE = 45.0
# Replicas of each primary in the failover topologies (faults.Fleet): what fewer of them
# confirmed can be lost (Report.loses_state).
REPLICAS = {"sentinel": 2, "cluster-failover": 1}


def seed_from_env() -> int:
    """CHAOS_SEED, or a fresh random seed."""
    value = os.environ.get("CHAOS_SEED", "").strip()
    return int(value) if value else secrets.randbelow(2**31)


@dataclass
class Config:
    seed: int
    servers: int
    seconds: float  # about how long the fault schedule runs
    minimum: dict[str, int]  # at least this many faults of each kind
    long: bool = False  # long form: longer faults and calms
    long_pauses: int = 0  # pauses past the server's socket timeout (5 s)
    long_cuts: int = 0  # cuts past the liveness window (5 s)
    backend: str = "valkey"
    rerun: str = ""  # how to replay this run, printed on failure
    faults: list[Fault] | None = None  # a given schedule instead of the seeded one
    # one Redis behind a proxy, "cluster" (queue workloads, slot moves), "cluster-failover"
    # (queue workloads, a replica per primary, primaries killed) or "sentinel"
    topology: str = "single"
    replica_acks: int = 0  # sentinel and cluster: the servers' --redis-replica-acks
    cpu_hogs: bool = False  # two busy-loop processes beside the whole run

    def schedule(self) -> list[Fault]:
        if self.faults is not None:
            return list(self.faults)
        return plan(self.seed, self.seconds, servers=self.servers, minimum=self.minimum, long=self.long,
                    long_pauses=self.long_pauses, long_cuts=self.long_cuts, topology=self.topology,
                    queues=len(QUEUES))


@dataclass
class Report:
    config: Config
    schedule: list[Fault]
    history: History
    results: list[checker.RuleResult]
    faults_done: list[dict[str, Any]] = field(default_factory=list)
    harness_errors: list[str] = field(default_factory=list)
    log_errors: list[str] = field(default_factory=list)
    exit_codes: dict[str, int | None] = field(default_factory=dict)
    duration: float = 0.0
    promotions: list[tuple[float, float | None]] = field(default_factory=list)  # Fleet.promotions
    summary_path: Path | None = None
    history_path: Path | None = None

    @property
    def loses_state(self) -> bool:
        """A failover topology whose changes are not confirmed by every replica: what
        the primary acknowledged and the promoted replica lacks is lost (guarantees.md;
        with acks from some replicas, when Sentinel fails over again before the others
        caught up), so state rules measure that loss instead of failing the run."""
        replicas = REPLICAS.get(self.config.topology)
        return replicas is not None and self.config.replica_acks < replicas

    @property
    def violations(self) -> list[checker.Violation]:
        return [v for r in self.results for v in r.violations
                if not self.loses_state or r.rule in checker.ANSWER_RULES]

    @property
    def losses(self) -> list[checker.Violation]:
        return [v for r in self.results for v in r.violations
                if self.loses_state and r.rule not in checker.ANSWER_RULES]

    def loss_window(self) -> dict[str, Any] | None:
        """What the failovers lost, changes not confirmed by every replica: how many state-rule violations,
        by rule, and the window: for each, how long before a primary's kill its latest
        call answered before that kill was answered (the lost change is among them); the
        longest such gap is how far back an acknowledged change was lost."""
        if not self.loses_state:
            return None
        index = {e.id: e for e in self.history.events}
        kills = sorted(k for k, _ in self.promotions)
        gaps = []
        for v in self.losses:
            acked = [index[i].complete for i in v.events if i in index and index[i].complete is not None]
            before = [k - max(c for c in acked if c <= k) for k in kills if any(c <= k for c in acked)]
            if before:
                gaps.append(min(before))
        gaps.sort()
        return {"violations": dict(Counter(v.rule for v in self.losses)),
                "seconds_before_kill_p50": round(gaps[len(gaps) // 2], 3) if gaps else None,
                "longest_seconds_before_kill": round(gaps[-1], 3) if gaps else None}

    @property
    def ok(self) -> bool:
        return not self.violations and not self.harness_errors

    def summary(self) -> dict[str, Any]:
        events = self.history.events
        calls = [e for e in events if e.outcome in ("ok", "fail", "pending") and e.op != "fault"]
        done = Counter(f["kind"] for f in self.faults_done)
        return {
            "seed": self.config.seed,
            "servers": self.config.servers,
            "backend": self.config.backend,
            "topology": self.config.topology + (" + cpu hogs" if self.config.cpu_hogs else "")
            + (f" + {self.config.replica_acks} replica acks" if self.config.replica_acks else ""),
            "server_code": _server_code(),
            "rerun": self.config.rerun,
            "planned_seconds": self.config.seconds,
            "duration_seconds": round(self.duration, 2),
            "faults_planned": counts(self.schedule),
            "faults_done": {k: done.get(k, 0) for k in counts(self.schedule)} | (
                {"calm": done["calm"]} if done.get("calm") else {}),
            "schedule": [f.describe() for f in self.schedule],
            "client_retries": checker.client_retries(events),
            "calls_recorded": len(calls),
            "calls_by_op": dict(sorted(Counter(e.op for e in calls).items())),
            "outcomes": dict(sorted(Counter(e.code or e.outcome for e in calls).items())),
            "client_errors": dict(Counter(f"{e.op}: {e.message[:80]}" for e in calls if e.code == "CLIENT_ERROR")),
            "grpc_client_transport_errors": dict(Counter(
                f"{e.op}: {e.code} {e.message[:60]}" for e in checker.transport_errors(events))),
            "other_server_log_errors": self.log_errors[:20],
            "notes_recorded": sum(1 for e in events if e.outcome == "note"),
            "failover_seconds": failover_seconds(events, self.promotions),
            "loss_unconfirmed_by_every_replica": self.loss_window(),
            "rules": {r.rule: {"checked": r.checked, "violations": len(r.violations)} for r in self.results},
            "replica_acks": self.config.replica_acks,
            "violations": len(self.violations),
            "harness_errors": self.harness_errors,
            "server_exit_codes": self.exit_codes,
            "history": str(self.history_path) if self.history_path else None,
        }

    def render(self, limit: int = 40) -> str:
        s = self.summary()
        lines = [
            f"chaos: seed {s['seed']}, {s['servers']} server(s) on {s['backend']} ({s['topology']}), "
            f"{s['duration_seconds']}s; server code {s['server_code']}",
            f"  faults done: {s['faults_done']} (planned {s['faults_planned']})",
            f"  schedule: {', '.join(s['schedule'])}",
            f"  calls recorded: {s['calls_recorded']} (client library retries: {s['client_retries']}); "
            f"outcomes: {s['outcomes']}",
            f"  client-side errors (indeterminate, not violations): {s['client_errors'] or 'none'}",
            f"  INTERNAL made up by the client's gRPC library (not violations): "
            f"{s['grpc_client_transport_errors'] or 'none'}",
            f"  other ERROR lines in server logs (not violations): {s['other_server_log_errors'] or 'none'}",
            *([f"  failovers (seconds from the primary's kill, pause or cut, p50 / p99 / max): {s['failover_seconds']}"]
              if s["failover_seconds"] else []),
            *([f"  lost, not confirmed by every replica (measured, not failed): {s['loss_unconfirmed_by_every_replica']}"]
              if s['loss_unconfirmed_by_every_replica'] else []),
            "  rules (checked / violations): " + ", ".join(
                f"{k} {v['checked']}/{v['violations']}" for k, v in s["rules"].items()),
        ]
        if self.harness_errors:
            lines.append("  RUN ERRORS (the campaign could not do or read everything; see each):")
            lines += [f"    {e}" for e in self.harness_errors]
        if self.violations:
            index = {e.id: e for e in self.history.events}
            faults = [e for e in self.history.events if e.op == "fault"]
            lines.append(f"  VIOLATIONS: {len(self.violations)}")
            per_rule: Counter[str] = Counter()
            shown = 0
            for v in self.violations:
                per_rule[v.rule] += 1
                if per_rule[v.rule] <= 4 and shown < limit:
                    shown += 1
                    lines.append("  " + v.render(index, faults).replace("\n", "\n  "))
        lines.append(f"  summary: {self.summary_path}")
        lines.append(f"  history: {self.history_path}")
        if not self.ok:
            lines.append(f"  replay this schedule: {self.config.rerun or f'CHAOS_SEED={self.config.seed}'}")
        return "\n".join(lines)

    def failure(self) -> str:
        return (f"chaos campaign failed with seed {self.config.seed} "
                f"(replay: {self.config.rerun or f'CHAOS_SEED={self.config.seed}'})\n" + self.render())

    def write(self, workdir: Path) -> None:
        self.history_path = workdir / "chaos-history.jsonl"
        self.summary_path = workdir / "chaos-summary.json"
        self.history.dump(self.history_path)
        data = self.summary()
        data["violation_list"] = [v.to_json() for v in self.violations]
        self.summary_path.write_text(json.dumps(data, indent=2, default=str))


def run(cfg: Config, workdir: Path) -> Report:
    """Runs one campaign in ``workdir`` (its Redis data, server logs, summary, history)."""
    schedule = cfg.schedule()
    print(f"\nchaos: seed {cfg.seed} ({cfg.servers} server(s)); replay with: {cfg.rerun or f'CHAOS_SEED={cfg.seed}'}")
    print(f"chaos: schedule {counts(schedule)}: " + ", ".join(f.describe() for f in schedule), flush=True)
    history = History()
    report = Report(cfg, schedule, history, [])
    started = time.monotonic()
    fleet = Fleet(cfg.backend, workdir, cfg.servers, topology=cfg.topology, queues=QUEUES, cpu_hogs=cfg.cpu_hogs,
                  replica_acks=cfg.replica_acks)
    try:
        fleet.start()
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(_campaign(cfg, schedule, fleet, history, report))
    except BaseException as exc:  # noqa: BLE001 - the run is reported, with what was recorded
        report.harness_errors.append(f"campaign aborted: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
        if isinstance(exc, KeyboardInterrupt):
            raise
    finally:
        report.exit_codes = fleet.stop()
        report.promotions = list(fleet.promotions)
        report.duration = time.monotonic() - started
    for name, code in report.exit_codes.items():
        if code not in (0, None):
            report.harness_errors.append(f"{name} exited {code} on SIGTERM (see its log)")
    logs = fleet.log_texts()
    report.results = checker.check(history.events, logs)
    report.log_errors = checker.other_log_errors(logs)
    report.write(workdir)
    print(report.render(), flush=True)
    return report


def _print_tasks() -> None:
    """Where every task waits, on stderr: ``kill -USR1 <pid>`` on a run that seems
    stuck. A suspended task's own stack shows only its outermost coroutine, so the
    chain of what each awaits is followed down (cr_await / ag_await)."""
    for task in asyncio.all_tasks():
        lines, coro = [], task.get_coro()
        while coro is not None and len(lines) < 40:
            frame = getattr(coro, "cr_frame", None) or getattr(coro, "ag_frame", None)
            if frame is not None:
                lines.append(f"  {frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}")
            coro = getattr(coro, "cr_await", None) or getattr(coro, "ag_await", None)
        print(f"--- {task.get_name()}\n" + "\n".join(lines), file=sys.stderr)
    sys.stderr.flush()


async def _campaign(cfg: Config, schedule: list[Fault], fleet: Fleet, history: History, report: Report) -> None:
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, _print_tasks)
    stop, lag_stop = asyncio.Event(), asyncio.Event()
    wl = Workloads(history, fleet.targets, cfg.seed, stop, queues_only=cfg.topology == "cluster")
    await wl.open()
    history.note("harness", "harness.client", retries=client_retries())
    if cfg.cpu_hogs:
        history.note("harness", "harness.cpu_hogs", processes=fleet.run_hogs.n if fleet.run_hogs else 0)
    lag = asyncio.create_task(lag_monitor(history, lag_stop))
    actors: list[asyncio.Task] = []
    try:
        await wl.setup()
        actors = [asyncio.create_task(a) for a in wl.actors()]
        try:
            await play(schedule, fleet, history, report.faults_done)
        finally:
            await asyncio.to_thread(fleet.heal)
        await _settle(fleet, wl)
        stop.set()
        _, late = await asyncio.wait(actors, timeout=ACTORS_STOP_DEADLINE) if actors else (set(), set())
        if late:
            report.harness_errors.append(f"{len(late)} actors did not stop within {ACTORS_STOP_DEADLINE}s")
        for problem in await wl.final():
            report.harness_errors.append(f"final reads: {problem}")
    finally:
        stop.set()
        for t in actors:
            t.cancel()
        await asyncio.gather(*actors, return_exceptions=True)
        for t in actors:
            if not t.cancelled() and t.exception() is not None:
                exc = t.exception()
                report.harness_errors.append(
                    f"actor crashed: {''.join(traceback.format_exception(exc)).strip()}")
        lag_stop.set()
        await asyncio.gather(lag, return_exceptions=True)
        await wl.close()


def failover_seconds(events: list[Any], promotions: list[tuple[float, float | None]]) -> dict[str, Any] | None:
    """For each failover (a Sentinel primary killed, paused or cut off, a cluster primary_kill): how long the store took to name a new
    primary (``store``: Sentinel's or the cluster's own failover time) and how long until
    the first call invoked after the kill succeeded (``first_success``; on a cluster,
    only calls on the killed primary's queue alone, not Consume streams over several),
    as p50 / p99 / max over the run."""
    if not promotions:
        return None
    notes = [e for e in events if e.op in ("fault.failover", "fault.primary_kill", "fault.primary_pause",
                                                 "fault.primary_cut")]
    store, served = [], []
    for i, (killed_at, promoted_at) in enumerate(promotions):
        if promoted_at is not None:
            store.append(promoted_at - killed_at)
        queue = notes[i].args.get("queue") if i < len(notes) else None
        ok = [e.complete for e in events if e.outcome == "ok" and e.invoke >= killed_at and e.process != "faults"
              and (queue is None or e.args.get("queue") == queue)]
        if ok:
            served.append(min(ok) - killed_at)

    def spread(xs: list[float]) -> list[float] | None:
        if not xs:
            return None
        xs = sorted(xs)
        return [round(xs[len(xs) // 2], 2), round(xs[min(len(xs) - 1, int(len(xs) * 0.99))], 2), round(xs[-1], 2)]

    return {"failovers": len(promotions), "store": spread(store), "first_success": spread(served)}


@functools.cache
def _server_code() -> str:
    """Where the servers' concord_server package comes from (they inherit this
    process's environment: PYTHONPATH runs an older tree's server)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", "import concord_server; print(concord_server.__file__)"],
                         capture_output=True, text=True, check=False)
    return out.stdout.strip() or out.stderr.strip()[-200:]


async def _settle(fleet: Fleet, wl: Workloads) -> None:
    """Every server SERVING, and each client's server answering a call: condition waits
    with a deadline, no sleeps."""
    deadline = time.monotonic() + SETTLE_DEADLINE

    def serving() -> bool:
        return all(s.health() == health_pb2.HealthCheckResponse.SERVING for s in fleet.servers)

    while not await asyncio.to_thread(serving):
        if time.monotonic() > deadline:
            raise TimeoutError(f"servers not SERVING {SETTLE_DEADLINE}s after healing")
        await asyncio.sleep(0.05)
    for i, c in enumerate(wl.clients):
        while True:
            try:
                await c.lock("settle-probe").describe()
                break
            except Exception:  # noqa: BLE001 - retried until the deadline
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.05)
