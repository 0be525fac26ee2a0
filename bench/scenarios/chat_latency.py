"""Chat latency: send-to-subscriber latency and messages delivered per second with
CHATS chats of MEMBERS members, every member subscribed to one server.

CHATS x MEMBERS distinct users each hold one Subscribe stream (ack mode auto,
concord.AsyncClient) to one concord-server; the streams live in SUB_PROCS spawned
processes (one is enough: it uses about a tenth of a core even at the server's
maximum, and a second one only adds contention on 2 cores), and a run starts only
once every stream has sent CAUGHT_UP. A sender process (chat_clients.py) then sends;
message i goes to chat i mod CHATS from one of its members, so every message is
delivered to MEMBERS streams (the sender's own included). Three runs per repetition,
each with fresh processes and streams:

  steady  RATE messages/s, one SendMessage issued every 1/RATE s whatever the replies
          do (open loop), for 5 s (2 s with --quick):
            latency        arrival at the subscriber - the moment its SendMessage call
                           was issued (the body carries that CLOCK_MONOTONIC reading;
                           the clock is system-wide on Linux, so processes compare)
            deliveries/s   messages that reached a subscriber, per second of the window
  max     IN_FLIGHT loops send back to back for 3 s (1.5 s with --quick):
            messages/s delivered   deliveries that arrived in the window, leaving out
                           its first WARM s (queues filling), per second, / MEMBERS;
                           the note gives the sends/s the server accepted and the
                           latency under that load
  streams the peer, right after steady: the steady run on Redis Streams used
          directly (chat_streams.py), same Valkey, chats, rate, window and latency
          definition: XADD to one stream per chat, one XREAD BLOCK connection per
          subscriber. Its p50/p99 are the baseline of Concord's in rows with
          Row.peer set (the peer arena); target: Concord's p99 <= 1.5x Streams'.

A delivery that has not arrived DRAIN s after the window ends counts as lost (a ❌
row); so does one that arrives twice. Baseline for latency: the round trip of an
empty call (health Check) probed from the bench process every PROBE_GAP s during the
steady runs (handoff.Probe), so under the same load; targets: Concord's p99 <= 5 ms
and <= that probe's p99. Server and Redis CPU and Redis script calls and commands
(INFO commandstats) are sampled from the bench process and cut to each window. Each
run repeats min(--reps, 3) times; rows show medians of the per-run figures (the
probe's percentiles are over all its round trips).
"""

from __future__ import annotations

import bisect
import math
import time
from collections import Counter

import grpc
import psutil
from grpc_health.v1 import health_pb2, health_pb2_grpc

import concord

from ..harness import RedisServer, concord_server, cpu_seconds, median, percentile, redis_server
from ..report import Row, fmt
from . import Context
from .chat_clients import Spec, main as client_main
from .chat_streams import create_chats as create_streams, main as streams_main
from .handoff import PROBE_GAP, Probe, run_client_processes
from .queue_cost import medians

SC = "chat-latency"
CHATS, MEMBERS = 100, 10
SUB_PROCS = 1
RATE = 100  # messages/s in the steady run: x MEMBERS deliveries/s
IN_FLIGHT = 32  # sender loops in the max run
DRAIN = 2.0
WARM = 0.5  # the max run's delivery rate leaves out its first WARM s (queues filling)
TARGET_P99 = 0.005
SENT, ARRIVED, CHAT, MESSAGE = range(4)  # fields of a chat_clients.Record


def chat_id(c: int) -> str:
    return f"bench:chat-latency:{c}"


def streams_chat_id(c: int) -> str:
    """The Redis Streams peer's chat c: its stream's key."""
    return f"bench:chat-streams:{c}"


def members(c: int) -> tuple[str, ...]:
    return tuple(f"c{c}m{m}" for m in range(MEMBERS))


class Sampler(Probe):
    """handoff.Probe's background thread, sampling instead of probing: every 50 ms
    (time, server CPU s, Redis CPU s, EVALSHA calls so far), so a window's figures can
    be cut out of a run that also spent time on setup."""

    def __init__(self, server: psutil.Process, rds: RedisServer, redis_ps: psutil.Process) -> None:
        super().__init__("")
        self.server, self.rds, self.redis_ps = server, rds, redis_ps
        self.samples: list[tuple[float, float, float, int, int]] = []

    def _run(self) -> None:
        with self.rds.client() as conn:
            while True:
                stats = conn.info("commandstats")
                calls = stats.get("cmdstat_evalsha", {}).get("calls", 0)
                commands = sum(v.get("calls", 0) for k, v in stats.items() if k != "cmdstat_info")
                self.samples.append((time.monotonic(), cpu_seconds(self.server), cpu_seconds(self.redis_ps), calls,
                                     commands))
                if self._stop.wait(0.05):
                    return

    def between(self, t0: float, t1: float) -> tuple[float, float, int, int]:
        """(server CPU s, Redis CPU s, EVALSHA calls, Redis commands of any kind but
        INFO) from the samples nearest t0 and t1."""
        times = [s[0] for s in self.samples]
        a, b = (self.samples[min(bisect.bisect_left(times, t), len(times) - 1)] for t in (t0, t1))
        return b[1] - a[1], b[2] - a[2], b[3] - a[3], b[4] - a[4]


def _empty_call(channel: grpc.Channel):
    stub = health_pb2_grpc.HealthStub(channel)
    req = health_pb2.HealthCheckRequest()
    return lambda: stub.Check(req, timeout=5)


def _run_once(target: str, sampler: Sampler, duration: float, rate: float, streams: bool = False) -> dict:
    """Fresh subscriber processes and a sender: one window of ``duration`` s. With
    ``streams`` the clients are chat_streams' (``target`` is then the Valkey's port)."""
    users = [u for c in range(CHATS) for u in members(c)]
    chats = tuple(((streams_chat_id if streams else chat_id)(c), members(c)) for c in range(CHATS))
    specs = [Spec("subscribe", target, users=tuple(users[p::SUB_PROCS]), chats=chats if streams else (), drain=DRAIN)
             for p in range(SUB_PROCS)]
    specs.append(Spec("send", target, chats=chats, rate=rate, in_flight=IN_FLIGHT))
    results, start_at, end_at = run_client_processes(specs, streams_main if streams else client_main,
                                                     duration, DRAIN + 60)
    sends = [s for s in results[-1]["events"] if s[SENT] < end_at]
    deliveries = [d for r in results[:-1] for d in r["events"] if start_at <= d[SENT] < end_at]
    counts = Counter((d[CHAT], d[MESSAGE]) for d in deliveries)
    latencies = [d[ARRIVED] - d[SENT] for d in deliveries]
    server_cpu, redis_cpu, scripts, commands = sampler.between(start_at, end_at)
    window = end_at - start_at
    return {
        "messages": len(sends),
        "deliveries": len(deliveries),
        "messages_per_s": len(sends) / window,
        "deliveries_per_s": len(deliveries) / window,
        "arrivals_per_s": sum(start_at + WARM <= d[ARRIVED] < end_at for d in deliveries) / (window - WARM),
        "lost": sum(max(0, MEMBERS - counts.get((s[CHAT], s[MESSAGE]), 0)) for s in sends),
        "duplicates": sum(max(0, n - MEMBERS) for n in counts.values()),
        "latency_p50_s": percentile(latencies, 50),
        "latency_p99_s": percentile(latencies, 99),
        "latency_max_s": max(latencies, default=math.nan),
        "over_100ms": sum(x > 0.1 for x in latencies),
        "send_p99_s": percentile([s[ARRIVED] - s[SENT] for s in sends], 99),
        "server_cpu_busy": server_cpu / window,
        "redis_cpu_busy": redis_cpu / window,
        "scripts_per_message": scripts / len(sends) if sends else math.nan,
        "commands_per_message": commands / len(sends) if sends else math.nan,
        "client_cpu_busy": [r["client_cpu_busy"] for r in results],
    }


def _create_chats(target: str) -> None:
    with concord.Client(target) as client:
        for c in range(CHATS):
            first, *others = members(c)
            client.chat.create(first, others, "hello", chat_id=chat_id(c))


def run(ctx: Context) -> tuple[list[Row], dict]:
    steady, burst = (2.0, 1.5) if ctx.quick else (5.0, 3.0)
    reps = min(ctx.reps, 3)
    runs: dict[str, list[dict]] = {"steady": [], "max": [], "streams": []}
    with redis_server(ctx.tmp) as rds, concord_server(rds.url, ctx.tmp, profile_to=ctx.profile(SC)) as srv:
        _create_chats(srv.target)
        create_streams(rds.port, tuple((streams_chat_id(c), members(c)) for c in range(CHATS)))
        with Sampler(srv.ps, rds, psutil.Process(rds.proc.pid)) as sampler:
            for _ in range(reps):
                with Probe(srv.target, _empty_call) as probe:
                    r = _run_once(srv.target, sampler, steady, RATE)
                r["probe_rtts"] = probe.rtts
                runs["steady"].append(r)
                # The peer: Redis Streams used directly, same Valkey, same chats and rate,
                # right after Concord's steady run so the two see the machine alike.
                runs["streams"].append(_run_once(str(rds.port), sampler, steady, RATE, streams=True))
                runs["max"].append(_run_once(srv.target, sampler, burst, 0))
    details = {"chats": CHATS, "members": MEMBERS, "subscriber_procs": SUB_PROCS, "rate": RATE,
               "in_flight": IN_FLIGHT, "steady_s": steady, "max_s": burst, "drain_s": DRAIN, "reps": reps,
               "runs": runs}
    return _rows(runs), details


def _rows(runs: dict[str, list[dict]]) -> list[Row]:
    probe = [x for r in runs["steady"] for x in r.pop("probe_rtts")]
    empty = {p: percentile(probe, p) for p in (50, 99)}
    s = {k: medians(runs["steady"], k) for k in ("latency_p50_s", "latency_p99_s", "deliveries_per_s",
                                                 "messages_per_s", "scripts_per_message", "commands_per_message")}
    worst = max(r["latency_max_s"] for r in runs["steady"])
    late, delivered = (sum(r[k] for r in runs["steady"]) for k in ("over_100ms", "deliveries"))
    m = {k: medians(runs["max"], k) for k in ("arrivals_per_s", "messages_per_s", "latency_p50_s",
                                              "latency_p99_s", "scripts_per_message")}

    def cpu_note(kind: str) -> str:
        clients = median([sum(r["client_cpu_busy"]) for r in runs[kind]])
        server, redis = (median([r[k] for r in runs[kind]]) for k in ("server_cpu_busy", "redis_cpu_busy"))
        return f"CPU: server {server:.0%}, Redis {redis:.0%}, clients {clients:.0%} of a core"

    streams = f"{CHATS} chats x {MEMBERS} members, {CHATS * MEMBERS} streams on one server"
    rows = [
        Row(SC, f"baseline: empty call RTT during the steady runs (every {PROBE_GAP * 1e3:.0f} ms), p50", empty[50],
            "s", note=f"p99 {fmt(empty[99], 's')}, {len(probe)} probes"),
        Row(SC, f"Concord: p50 send-to-subscriber latency at {RATE} messages/s", s["latency_p50_s"][0], "s",
            baseline=empty[50], baseline_label="empty call p50", runs=s["latency_p50_s"][1], note=streams),
        Row(SC, f"Concord: p99 send-to-subscriber latency at {RATE} messages/s", s["latency_p99_s"][0], "s",
            baseline=empty[99], baseline_label="empty call p99", target=f"≤ {TARGET_P99 * 1e3:.0f} ms",
            passed=s["latency_p99_s"][0] <= TARGET_P99, runs=s["latency_p99_s"][1],
            note=f"worst run's max {fmt(worst, 's')}; {late} of {delivered:,} deliveries over 100 ms"),
        Row(SC, f"Concord: deliveries/s at {RATE} messages/s", s["deliveries_per_s"][0], "/s",
            runs=s["deliveries_per_s"][1],
            note=f"{s['messages_per_s'][0]:,.0f} messages/s sent; {cpu_note('steady')}; "
                 f"{s['scripts_per_message'][0]:.1f} Redis script calls per message "
                 f"({s['commands_per_message'][0]:.1f} Redis commands, those inside scripts included)"),
        Row(SC, f"Concord: max messages/s delivered ({IN_FLIGHT} senders back to back)",
            m["arrivals_per_s"][0] / MEMBERS, "/s", runs=[v / MEMBERS for v in m["arrivals_per_s"][1]],
            note=f"{m['arrivals_per_s'][0]:,.0f} deliveries/s, {m['messages_per_s'][0]:,.0f} sends/s "
                 f"accepted; latency p50 {fmt(m['latency_p50_s'][0], 's')}, p99 {fmt(m['latency_p99_s'][0], 's')}; "
                 f"{cpu_note('max')}; {m['scripts_per_message'][0]:.1f} script calls per message"),
        Row(SC, "target: Concord p99 send-to-subscriber latency ≤ the empty call's p99 under this load",
            s["latency_p99_s"][0], "s", baseline=empty[99], baseline_label="empty call p99",
            target="≤ 1.0× empty call p99", passed=s["latency_p99_s"][0] <= empty[99], runs=s["latency_p99_s"][1]),
    ]
    if runs["streams"]:
        rows += _streams_rows(runs["streams"], s, cpu_note)
    for kind, kind_runs in runs.items():
        who = "Redis Streams (steady runs)" if kind == "streams" else f"Concord ({kind} runs)"
        for key, what in (("lost", f"deliveries missing {DRAIN:.0f} s after the window"),
                          ("duplicates", "deliveries received twice")):
            bad = sum(r[key] for r in kind_runs)
            if bad:
                rows.append(Row(SC, f"{who}: {what}", bad, "", target="0", passed=False))
    return rows


def _streams_rows(streams: list[dict], concord: dict, cpu_note) -> list[Row]:
    """The peer's rows: Concord's steady latency against Redis Streams' (the baseline,
    Row.peer), and the peer's own deliveries/s with where its work went."""
    p = {k: medians(streams, k) for k in ("latency_p50_s", "latency_p99_s", "deliveries_per_s", "messages_per_s",
                                          "commands_per_message")}
    worst = max(r["latency_max_s"] for r in streams)
    late, delivered = (sum(r[k] for r in streams) for k in ("over_100ms", "deliveries"))
    peer = "Redis Streams"
    how = "XADD, XREAD BLOCK per subscriber"
    return [
        Row(SC, f"p50 send-to-subscriber latency at {RATE} messages/s, Concord vs {peer} ({how})",
            concord["latency_p50_s"][0], "s", baseline=p["latency_p50_s"][0], baseline_label=f"{peer} p50",
            runs=concord["latency_p50_s"][1], peer=peer,
            note=f"{peer} runs: {', '.join(fmt(v, 's') for v in p['latency_p50_s'][1])}"),
        Row(SC, f"p99 send-to-subscriber latency at {RATE} messages/s, Concord vs {peer} ({how})",
            concord["latency_p99_s"][0], "s", baseline=p["latency_p99_s"][0], baseline_label=f"{peer} p99",
            target=f"≤ 1.5× {peer}", passed=concord["latency_p99_s"][0] <= 1.5 * p["latency_p99_s"][0],
            runs=concord["latency_p99_s"][1], peer=peer,
            note=f"{peer} runs: {', '.join(fmt(v, 's') for v in p['latency_p99_s'][1])}; its worst run's max "
                 f"{fmt(worst, 's')}, {late} of {delivered:,} deliveries over 100 ms"),
        Row(SC, f"{peer}: deliveries/s at {RATE} messages/s ({CHATS * MEMBERS} XREAD BLOCK connections, "
                f"{SUB_PROCS} asyncio process)", p["deliveries_per_s"][0], "/s", runs=p["deliveries_per_s"][1],
            note=f"{p['messages_per_s'][0]:,.0f} messages/s sent; {cpu_note('streams')} (Concord's server idle in this run); "
                 f"{p['commands_per_message'][0]:.1f} Redis commands per message"),
    ]
