"""Autocomplete: a name index of NAMES names (autocomplete_names.py; fewer with
--quick): load time, Redis memory per name, Suggest latency on the server side and
through gRPC; the book's sentinel-based autocomplete on the same Valkey for
comparison.

  load          AddNames through gRPC (concord.Client), BATCH names per call, one
                call at a time; then every SCORED_EVERY-th name gets a popularity
                score (AddNames again, with scores) for the SCORE-order lookups.
                Target: at most TARGET_LOAD times the book's load of the same names
  memory/name   INFO memory used_memory after the load minus before it (a fresh
                Valkey with only the server's scripts), over the names loaded; the
                note gives the names' own UTF-8 bytes for scale. Target: at most
                TARGET_MEMORY times the book's bytes per name
  cold lists    right after the load, one score-order Suggest (server side) for each
                distinct prefix the lookups below draw from: the first best-score
                Suggest of a common prefix builds its cached list (names_best.lua),
                so these are the lookups that pay for it; the passes below then
                meet built lists. No target: the price of not building lists at load
  server side   the primitive itself (concord_server.primitives.autocomplete's
                Autocomplete.suggest / suggest_best) over the server's own Redis
                stack (link.Endpoint + AutoPipeline, under uvloop as the
                server runs), in the bench process against the same Valkey and keys:
                normalization, ZRANGEBYLEX + ZMSCORE (or names_best.lua), decoding.
                What a Suggest costs the server beyond gRPC. The note adds Redis's
                own time per lookup (INFO commandstats usec, reset before each pass)
  gRPC          the Suggest round trip through the sync generated stub, one call at
                a time; baseline: the empty call (health Check) round trip on the
                same channel in the same repetition
  book          "Redis in Action" 6.1.2 autocomplete_on_prefix (autocomplete_book.py)
                over sync redis-py, on a zset of the same names ASCII-folded and
                lower-cased (the book handles a-z only; names with no ASCII spelling
                are left out); loaded with ZADD of BATCH names per call

Lookups: prefixes of 1-4 characters of the names (autocomplete_names.prefixes),
limit LIMIT, fresh ones each repetition, the same for every implementation (the
book gets their ASCII folding, those that fold to a-z). Each repetition runs every
pass once; rows show medians over --reps of each pass's p50 and p99. A lookup that
finds nothing stops the scenario (every prefix comes from a loaded name). Targets
on p99: server side at most TARGET_P99, and at most TARGET_GRPC_P99 times the
empty call's p99 through gRPC, in both orders (the figures before the lists became
lazy: 2.5 and 2.1).
"""

from __future__ import annotations

import asyncio
import inspect
import random
import re
import time
from collections.abc import Callable, Sequence

import grpc
import psutil
import redis
from grpc_health.v1 import health_pb2, health_pb2_grpc

import concord
from concord.autocomplete.v1 import autocomplete_pb2 as pb
from concord.autocomplete.v1 import autocomplete_pb2_grpc
from concord_server.store.autopipeline import AutoPipeline
from concord_server.config import Settings
from concord_server.keys import KeySpace
from concord_server.primitives.autocomplete import Autocomplete, normalize
from concord_server.store.link import Endpoint

from ..harness import concord_server, percentile, redis_server
from ..report import Row, fmt
from . import Context
from . import autocomplete_book as book
from .autocomplete_names import ascii_fold, names, prefixes
from .queue_cost import _sequential, medians

try:
    import uvloop
except ImportError:  # the server falls back the same way
    uvloop = None

SC = "autocomplete"
INDEX = "bench:autocomplete"
GUILD = "bench"
BATCH = 10_000
LIMIT = 10
SCORED_EVERY = 10
TARGET_P99 = 0.002
TARGET_GRPC_P99 = 3.0  # × the empty call's p99
TARGET_LOAD = 3.0  # × the book's load time
TARGET_MEMORY = 2.0  # × the book's bytes per name
COLD_DRAW = 5000  # prefixes drawn to find the distinct ones for the cold pass
PASSES = {  # pass: label
    "empty": "empty call (health Check) RTT",
    "grpc_name": "Suggest, name order, through gRPC",
    "grpc_score": "Suggest, score order, through gRPC",
    "server_name": "Suggest, name order, server side (primitive + Redis)",
    "server_score": "Suggest, score order, server side (primitive + Redis)",
    "book": "book autocomplete_on_prefix (sync redis-py)",
    "cold": "Suggest, score order, server side, first of each prefix after the load (builds lists)",
}


def used_memory(conn: redis.Redis) -> int:
    return conn.info("memory")["used_memory"]


def _load(conn: redis.Redis, batches: Sequence[Sequence], add: Callable[[Sequence], object],
          procs: dict[str, psutil.Process]) -> dict:
    """``add(batch)`` for every batch, one at a time: wall time, how busy each process
    was, and the Redis memory the names added."""
    n, mem0 = sum(len(b) for b in batches), used_memory(conn)
    r = _sequential(len(batches), lambda i: add(batches[i]), procs)
    memory = used_memory(conn) - mem0
    return {**r, "names": n, "names_per_s": n / r["wall_s"], "memory_b": memory, "bytes_per_name": memory / n}


def _batches(items: Sequence, size: int = BATCH) -> list[Sequence]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def _found(n: int, prefix: str, who: str) -> int:
    if not n:
        raise RuntimeError(f"{who} found no name for prefix {prefix!r}, which was drawn from a loaded name")
    return n


async def _pass(conn: redis.Redis, lookups: Sequence[str], call: Callable[[str], object]) -> dict:
    """``call(prefix)`` (sync, or returning an awaitable) for each prefix, one at a
    time: latency percentiles, and Redis's own time per lookup from commandstats."""
    conn.config_resetstat()
    latencies = []
    for prefix in lookups:
        t0 = time.perf_counter()
        result = call(prefix)
        if inspect.isawaitable(result):
            await result
        latencies.append(time.perf_counter() - t0)
    stats = conn.info("commandstats")
    redis_us = sum(v["usec"] for k, v in stats.items() if k not in ("cmdstat_info", "cmdstat_config"))
    return {"n": len(lookups), "p50_s": percentile(latencies, 50), "p99_s": percentile(latencies, 99),
            "max_s": max(latencies), "redis_s_per_lookup": redis_us / 1e6 / len(lookups)}


async def _measure(target: str, rds_url: str, conn: redis.Redis, pool: list[str], reps: int, n_lookups: int,
                   n_scored: int) -> dict[str, list[dict]]:
    settings = Settings()
    commands = AutoPipeline(Endpoint.from_url(rds_url))
    ac = Autocomplete(commands, KeySpace(settings.key_prefix))
    channel = grpc.insecure_channel(target)
    health, stub = health_pb2_grpc.HealthStub(channel), autocomplete_pb2_grpc.AutocompleteServiceStub(channel)
    check = health_pb2.HealthCheckRequest()
    truncated: dict[str, int] = {}

    def grpc_suggest(order: int, kind: str) -> Callable[[str], int]:
        def call(prefix: str) -> int:
            r = stub.Suggest(pb.SuggestRequest(index=INDEX, prefix=prefix, limit=LIMIT, order=order), timeout=10)
            truncated[kind] += r.truncated
            return _found(len(r.suggestions), prefix, "Suggest")
        return call

    async def server_name(prefix: str) -> int:
        return _found(len(await ac.suggest(INDEX, prefix, LIMIT)), prefix, "Autocomplete.suggest")

    async def server_score(prefix: str) -> int:
        found, cut = await ac.suggest_best(INDEX, prefix, LIMIT)
        truncated["server_score"] += cut
        return _found(len(found), prefix, "Autocomplete.suggest_best")

    def book_lookup(prefix: str) -> int:
        found, retries = book.autocomplete_on_prefix(conn, GUILD, prefix)
        if retries:
            raise RuntimeError("the book's lookup hit a WatchError although it runs alone")
        return _found(len(found), prefix, "autocomplete_on_prefix")

    calls = {"empty": lambda _: health.Check(check, timeout=10),
             "grpc_name": grpc_suggest(pb.SUGGEST_ORDER_NAME, "grpc_name"),
             "grpc_score": grpc_suggest(pb.SUGGEST_ORDER_SCORE, "grpc_score"),
             "server_name": server_name, "server_score": server_score, "book": book_lookup}
    out: dict[str, list[dict]] = {k: [] for k in calls}
    try:
        # Cold lists: the first score-order Suggest of each distinct prefix.
        firsts = list({normalize(p): p for p in prefixes(pool, COLD_DRAW, seed=999)}.values())
        truncated["server_score"] = 0
        cold = await _pass(conn, firsts, server_score)
        out["cold"] = [{**cold, "truncated": truncated["server_score"]}]
        for rep in range(-1, reps):  # -1: warm-up (connections, script cache)
            lookups = prefixes(pool, n_lookups if rep >= 0 else 200, seed=1000 + rep)
            subsets = {"grpc_score": lookups[:n_scored], "server_score": lookups[:n_scored],
                       "book": [f for f in map(ascii_fold, lookups) if re.fullmatch("[a-z]+", f)]}
            for kind, call in calls.items():
                truncated[kind] = 0
                r = await _pass(conn, subsets.get(kind, lookups), call)
                if rep >= 0:
                    out[kind].append({**r, "truncated": truncated[kind]})
    finally:
        channel.close()
        await commands.aclose()
    return out


def run(ctx: Context) -> tuple[list[Row], dict]:
    n_names, n_lookups, n_scored = (50_000, 500, 200) if ctx.quick else (1_000_000, 3000, 1000)
    pool = names(n_names)
    folded = [f for f in map(ascii_fold, pool) if f]
    rng = random.Random(7)
    scored = [(n, float(10_000 // rng.randint(1, 10_000))) for n in pool[::SCORED_EVERY]]  # Zipf-like popularity
    with redis_server(ctx.tmp) as rds, concord_server(rds.url, ctx.tmp, profile_to=ctx.profile(SC)) as srv, \
            rds.client() as conn, concord.Client(srv.target, timeout=60) as client:
        procs = {"server": srv.ps, "redis": psutil.Process(rds.proc.pid)}
        load = {"concord": _load(conn, _batches(pool), lambda b: client.autocomplete.add_names(INDEX, b), procs)}
        if client.autocomplete.count(INDEX) != n_names:
            raise RuntimeError(f"the index holds {client.autocomplete.count(INDEX)} names, not {n_names}")
        load["scores"] = _load(conn, _batches(scored), lambda b: client.autocomplete.add_names(INDEX, b), procs)
        load["book"] = _load(conn, _batches(folded), lambda b: book.join_guild(conn, GUILD, b), procs)
        load["book"]["distinct"] = conn.zcard(book.zset(GUILD))
        run_loop = uvloop.run if uvloop is not None else asyncio.run
        runs = run_loop(_measure(srv.target, rds.url, conn, pool, ctx.reps, n_lookups, n_scored))
    name_bytes = sum(len(n.encode()) for n in pool)
    details = {"names": n_names, "name_bytes": name_bytes, "non_ascii": sum(not n.isascii() for n in pool),
               "batch": BATCH, "limit": LIMIT, "scored": len(scored), "lookups": n_lookups,
               "scored_lookups": n_scored, "reps": ctx.reps, "load": load, "runs": runs}
    return _rows(details), details


def _rows(d: dict) -> list[Row]:
    load, runs = d["load"], d["runs"]
    c, b, s = load["concord"], load["book"], load["scores"]
    med = {(kind, p): medians(runs[kind], f"p{p}_s") for kind in runs for p in (50, 99)}
    redis_us = {kind: medians(runs[kind], "redis_s_per_lookup")[0] for kind in runs}
    n = f"{d['names']:,}"
    memory = c["memory_b"] + s["memory_b"]
    per_name = memory / d["names"]
    load_ratio, memory_ratio = c["wall_s"] / b["wall_s"], per_name / (b["memory_b"] / b["distinct"])
    rows = [
        Row(SC, f"Concord AddNames through gRPC, {n} names in calls of {BATCH:,}: load time", c["wall_s"], "s",
            baseline=b["wall_s"], baseline_label="book ZADD", target=f"≤ {TARGET_LOAD:g}× book",
            passed=load_ratio <= TARGET_LOAD,
            note=f"{c['names_per_s']:,.0f} names/s; server {c['server_busy']:.0%}, Redis {c['redis_busy']:.0%} of a "
                 f"core; then scores for {s['names']:,} names in {fmt(s['wall_s'], 's')}"),
        Row(SC, "book ZADD (redis-py), same names ASCII-folded: load time", b["wall_s"], "s",
            note=f"{b['names']:,} names ({b['distinct']:,} distinct once folded), {b['names_per_s']:,.0f} names/s"),
        Row(SC, "Concord: Redis memory per name, bytes (used_memory after - before both loads)", per_name, "",
            baseline=b["memory_b"] / b["distinct"], baseline_label="book", target=f"≤ {TARGET_MEMORY:g}× book",
            passed=memory_ratio <= TARGET_MEMORY,
            note=f"{fmt(memory, 'B')} in all (the zset by name, and for the {s['names']:,} scored names the score "
                 f"zset and the positive-name entries; lists are built later, by lookups); the names themselves "
                 f"average {d['name_bytes'] / d['names']:.1f} bytes of UTF-8, {d['non_ascii'] / d['names']:.0%} "
                 f"non-ASCII"),
        Row(SC, "book: Redis memory per name, bytes", b["memory_b"] / b["distinct"], "",
            note=f"{fmt(b['memory_b'], 'B')} in all (one zset)"),
    ]

    def latency(kind: str, p: int, **kw) -> Row:
        value, values = med[kind, p]
        if p == 99 and kind.startswith("server"):
            kw |= {"target": f"≤ {TARGET_P99 * 1e3:.0f} ms", "passed": value <= TARGET_P99}
        if p == 99 and kind.startswith("grpc"):
            kw |= {"target": f"≤ {TARGET_GRPC_P99:g}× empty p99", "passed": value <= TARGET_GRPC_P99 * med["empty", 99][0]}
        if kind == "empty":
            notes = [f"p99 {fmt(med[kind, 99][0], 's')}",
                     f"{d['lookups']:,} prefixes of 1-4 characters a pass, limit {LIMIT}"]
        else:
            notes = [f"Redis time {fmt(redis_us[kind], 's')}/lookup"]
        if p == 99:
            notes.append(f"worst run's max {fmt(max(r['max_s'] for r in runs[kind]), 's')}")
        if kind == "cold":
            notes.insert(0, f"{runs[kind][0]['n']} distinct prefixes, once")
        if "score" in kind or kind == "cold":
            notes.append(f"{sum(r['truncated'] for r in runs[kind])} of {sum(r['n'] for r in runs[kind])} truncated")
        return Row(SC, f"{PASSES[kind]}: p{p}", value, "s", runs=values, note="; ".join(notes), **kw)

    rows.append(latency("empty", 50))
    rows += [latency("cold", p) for p in (50, 99)]
    for kind in ("server_name", "grpc_name", "server_score", "grpc_score", "book"):
        for p in (50, 99):
            base = {}
            if kind.startswith("grpc"):
                base = {"baseline": med["empty", p][0], "baseline_label": f"empty call p{p}"}
            elif kind == "book":
                base = {"baseline": med["server_name", p][0], "baseline_label": f"Concord server side p{p}"}
            rows.append(latency(kind, p, **base))
    return rows
