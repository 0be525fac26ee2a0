"""What every attack shares: a live server with two tenants, the victim's probe, the
server's memory, every status code seen, and the three checks every attack must pass.

A run goes: start the server and the probe; the attack prepares (its own warm-up,
so first-use costs such as a tenant's primitives or loaded scripts are not blamed on
it); ``ctx.baseline()`` measures the victim and the server's RSS undisturbed;
``with ctx.attacking():`` marks the attack; afterwards the harness waits (with a
deadline) for the server's RSS to come back and judges:

(a) every victim call during the attack succeeded, and the victim's p99 during the
    attack is at most P99_FACTOR x its baseline p99 of the same run. The baseline is
    raised to P99_FLOOR first: on a 2-core machine shared with other work a 1-2 ms
    baseline p99 is noise-level, and 3x of it would fail on one scheduler hiccup;
    the floor keeps the bound (>= 15 ms) far below the failures the issue reports
    (hundreds of ms to seconds);
(b) the server's RSS comes back within RSS_SLACK of its baseline (median of the
    baseline phase's samples) before the recovery deadline;
(c) nobody, victim or attacker, saw INTERNAL or UNKNOWN.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import psutil
import redis

from concord_server.store.embedded_valkey import free_port
from support import ServerProcess, wait_until

P99_FACTOR = 3.0
P99_FLOOR = float(os.environ.get("ABUSE_P99_FLOOR_MS", "5")) / 1000
RSS_SLACK = 1.20
FORBIDDEN = {"INTERNAL", "UNKNOWN"}

KEY_PREFIX = "kp7abuse"  # distinctive, so a message that leaks a Redis key is easy to spot
VICTIM = "victim-token-0123456789abcdef"
ATTACKER = "attacker-token-0123456789abcdef"
ATTACKER_ADMIN = "attacker-admin-token-0123456789"  # same tenant, role admin (Purge, ForceRelease, policies)


def tokens_toml(extra: str = "") -> str:
    """The token file: one token per tenant, plus ``extra`` (more [[tokens]] or [tenants.x])."""
    return f"""
[[tokens]]
token = "{VICTIM}"
tenant = "victim"

[[tokens]]
token = "{ATTACKER}"
tenant = "attacker"
{extra}"""


# For the attacks that need it (a token file with roles does not load on a server without them).
ADMIN_TOKEN = f"""
[[tokens]]
token = "{ATTACKER_ADMIN}"
tenant = "attacker"
role = "admin"
"""


def bearer(token: str | None) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),) if token else ()


@dataclass(frozen=True)
class Scale:
    """Short (make test) or full (make abuse, the issue's counts) form."""

    full: bool
    timed: bool  # whether (a)'s p99 bound and (b) are judged, or only reported (see SHORT)
    baseline: float  # seconds of undisturbed victim measurement
    attack: float  # seconds an attack keeps going (when it is a loop)
    recover: float  # deadline for the server's RSS to come back
    probe_interval: float

    def n(self, short: int, full: int) -> int:
        return full if self.full else short


# The short form runs in `make test` on a shared 2-core machine, where timings are noise
# (DESIGN: timings belong in bench/): it judges each attack's own promise, that no victim
# call fails and (c), and only reports the victim's p99 and the server's RSS. The full
# form (`make abuse`) judges all three.
SHORT = Scale(full=False, timed=False, baseline=1.5, attack=2.5, recover=0.0, probe_interval=0.02)
FULL = Scale(full=True, timed=True, baseline=8.0, attack=12.0, recover=60.0, probe_interval=0.05)


def nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


class AbuseServer:
    """concord-server on its own embedded Valkey (data in ``root``), with --auth-tokens
    and a metrics endpoint; ``redis()`` reaches the Valkey through its unix socket."""

    def __init__(self, root: Path, tokens: str, *args: str) -> None:
        self.root = root
        self.tokens_path = root / "tokens.toml"
        self.tokens_path.write_text(tokens)
        self.metrics_port = free_port()
        self.process = ServerProcess("--data-dir", str(root / "data"), "--auth-tokens", str(self.tokens_path),
                                     "--key-prefix", KEY_PREFIX, "--log-level", "WARNING",
                                     "--metrics-listen", f"127.0.0.1:{self.metrics_port}", *args)
        self.target = self.process.target

    def start(self) -> AbuseServer:
        self.process.start(self.root / "server.log")
        return self

    @property
    def pid(self) -> int:
        assert self.process.proc is not None
        return self.process.proc.pid

    def rss(self) -> int:
        return psutil.Process(self.pid).memory_info().rss

    def valkey_rss(self) -> int:
        try:
            return sum(c.memory_info().rss for c in psutil.Process(self.pid).children(recursive=True))
        except psutil.Error:
            return 0

    def redis(self) -> redis.Redis:
        return redis.Redis(unix_socket_path=str(self.root / "data" / "valkey.sock"), decode_responses=True)

    def reload_tokens(self, tokens: str) -> None:
        """Rewrites the token file and makes the server re-read it (SIGHUP)."""
        self.tokens_path.write_text(tokens)
        self.process.signal(__import__("signal").SIGHUP)

    def log_text(self) -> str:
        return self.process.log_text()

    def metrics(self) -> str:
        """The Prometheus exposition text of /metrics."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as reply:
            return reply.read().decode()

    def stop(self) -> None:
        self.process.stop()


class Probe:
    """The victim's probe process (probe.py) and its samples."""

    def __init__(self, server: AbuseServer, out: Path, interval: float) -> None:
        self.out = out
        script = Path(__file__).with_name("probe.py")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        self.proc = subprocess.Popen([sys.executable, str(script), server.target, VICTIM, str(out), str(interval)],
                                     env=env, stdout=subprocess.DEVNULL, stderr=open(out.with_suffix(".err"), "wb"))
        wait_until(lambda: out.exists() and len(self.samples()) >= 3, timeout=20, message="the victim probe's first calls")

    def samples(self, since: float = 0.0, until: float = math.inf) -> list[tuple[float, float, str]]:
        found = []
        for line in self.out.read_text().splitlines():
            parts = line.split()
            if len(parts) == 3 and since <= float(parts[0]) <= until:
                found.append((float(parts[0]), float(parts[1]), parts[2]))
        return found

    def alive(self) -> bool:
        assert self.proc.poll() is None, f"the victim probe exited: {self.out.with_suffix('.err').read_text()}"
        return True

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


class RssSampler:
    """The server's RSS every 100 ms, on a thread, as (time, bytes)."""

    def __init__(self, server: AbuseServer) -> None:
        self.server = server
        self.readings: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            with contextlib.suppress(psutil.Error):
                self.readings.append((time.monotonic(), self.server.rss()))

    def between(self, since: float, until: float) -> list[int]:
        return [r for t, r in list(self.readings) if since <= t <= until]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


@dataclass
class Context:
    """What an attack module's run(ctx) gets."""

    server: AbuseServer
    scale: Scale
    tmp: Path
    probe: Probe
    rss: RssSampler
    codes: Counter = field(default_factory=Counter)  # (who, code name) -> count, attacker's calls
    figures: dict = field(default_factory=dict)  # what the attack measured, for the report
    base: tuple[float, float] | None = None
    window: tuple[float, float] | None = None

    def record(self, code: grpc.StatusCode | str, who: str = "attacker") -> None:
        self.codes[(who, code if isinstance(code, str) else code.name)] += 1

    def call(self, fn, request, token: str | None = ATTACKER, who: str = "attacker", **kw):
        """One unary call: its response, or the RpcError; its code is recorded."""
        try:
            response = fn(request, metadata=bearer(token), **kw)
        except grpc.RpcError as exc:
            self.record(exc.code(), who)
            return exc
        self.record("OK", who)
        return response

    def baseline(self) -> None:
        start = time.monotonic()
        time.sleep(self.scale.baseline)  # the measurement itself: the probe samples meanwhile
        self.base = (start, time.monotonic())

    @contextlib.contextmanager
    def attacking(self) -> Iterator[None]:
        assert self.base is not None, "ctx.baseline() comes before the attack"
        start = time.monotonic()
        try:
            yield
        finally:
            self.window = (start, time.monotonic())

    def until(self, seconds: float | None = None) -> Iterator[int]:
        """0, 1, 2... until the attack's duration has passed (a loop attack's clock)."""
        deadline = time.monotonic() + (self.scale.attack if seconds is None else seconds)
        i = 0
        while time.monotonic() < deadline:
            yield i
            i += 1


def judge(ctx: Context) -> tuple[list[str], dict]:
    """Waits for the RSS to come back, then checks (a), (b), (c); returns the failures
    and the figures of the run."""
    assert ctx.base is not None and ctx.window is not None, "the attack never ran its attacking() block"
    base_rss = statistics.median(ctx.rss.between(*ctx.base) or [ctx.server.rss()])
    deadline = time.monotonic() + ctx.scale.recover
    peak = max(ctx.rss.between(ctx.window[0], math.inf) or [0])
    while (now_rss := ctx.server.rss()) > base_rss * RSS_SLACK and time.monotonic() < deadline:
        time.sleep(0.2)
    recovered_after = time.monotonic() - ctx.window[1]
    # The probe is sequential: once a call that started after the attack is written down,
    # every call that started during it is too (one stuck past its 10 s deadline included).
    wait_until(lambda: ctx.probe.alive() and ctx.probe.samples(ctx.window[1]), timeout=30, interval=0.05,
               message="the victim probe's first call after the attack")

    base = [s for s in ctx.probe.samples(*ctx.base)]
    during = [s for s in ctx.probe.samples(*ctx.window)]
    everything = ctx.probe.samples()
    base_p99 = nearest_rank([lat for _, lat, code in base if code == "OK"] or [math.inf], 0.99)
    attack_lat = [lat for _, lat, _ in during]
    attack_p99 = nearest_rank(attack_lat, 0.99) if attack_lat else 0.0
    bound = P99_FACTOR * max(base_p99, P99_FLOOR)
    victim_codes = Counter(code for _, _, code in everything)
    victim_failed = Counter(code for _, _, code in during if code != "OK")
    figures = {
        **ctx.figures,
        "victim_baseline_samples": len(base), "victim_baseline_p50_ms": round(1000 * nearest_rank(
            [lat for _, lat, _ in base] or [0], 0.5), 2), "victim_baseline_p99_ms": round(1000 * base_p99, 2),
        "victim_attack_samples": len(during), "victim_attack_p50_ms": round(1000 * nearest_rank(attack_lat or [0], 0.5), 2),
        "victim_attack_p99_ms": round(1000 * attack_p99, 2), "victim_attack_max_ms": round(1000 * max(attack_lat or [0]), 2),
        "p99_bound_ms": round(1000 * bound, 2), "attack_seconds": round(ctx.window[1] - ctx.window[0], 2),
        "rss_baseline_mb": round(base_rss / 2**20, 1), "rss_peak_mb": round(peak / 2**20, 1),
        "rss_after_mb": round(now_rss / 2**20, 1), "rss_back_after_s": round(recovered_after, 1),
        "valkey_rss_mb": round(ctx.server.valkey_rss() / 2**20, 1),
        "victim_codes": dict(victim_codes), "attacker_codes": {f"{w}:{c}": n for (w, c), n in ctx.codes.items()},
    }
    failures = []
    if not during:
        failures.append("(a) no victim sample fell inside the attack window")
    if victim_failed:
        failures.append(f"(a) victim calls failed during the attack: {dict(victim_failed)}")
    if ctx.scale.timed and attack_p99 > bound:
        failures.append(f"(a) victim p99 {1000 * attack_p99:.1f} ms during the attack > {P99_FACTOR:g} x "
                        f"max(baseline p99 {1000 * base_p99:.1f} ms, floor {1000 * P99_FLOOR:.0f} ms) = "
                        f"{1000 * bound:.1f} ms")
    if ctx.scale.timed and now_rss > base_rss * RSS_SLACK:
        failures.append(f"(b) server RSS {now_rss / 2**20:.0f} MB still > {RSS_SLACK:.2f} x baseline "
                        f"{base_rss / 2**20:.0f} MB {ctx.scale.recover:g} s after the attack (peak {peak / 2**20:.0f} MB)")
    seen = {code for code in victim_codes} | {c for (_, c) in ctx.codes}
    if seen & FORBIDDEN:
        failures.append(f"(c) INTERNAL/UNKNOWN seen: victim {dict(victim_codes)}, others {figures['attacker_codes']}")
    return failures, figures


def play(attack, root: Path, scale: Scale, tokens: str | None = None, args: tuple[str, ...] = ()) -> dict:
    """Runs one attack module end to end and fails (with its figures) on any broken
    promise: the attack's own (AssertionError from its run) and the harness's three."""
    server = AbuseServer(root, tokens if tokens is not None else tokens_toml(getattr(attack, "TOKENS", "")),
                         *getattr(attack, "ARGS", ()), *args).start()
    probe = rss = None
    try:
        probe = Probe(server, root / "probe.txt", scale.probe_interval)
        rss = RssSampler(server)
        ctx = Context(server, scale, root, probe, rss)
        own: list[str] = []
        try:
            attack.run(ctx)
        except AssertionError as exc:
            own.append(f"attack's own check: {exc}")
        failures, figures = (own, dict(ctx.figures)) if ctx.window is None else judge(ctx)
        failures = own + [f for f in failures if f not in own]
        figures["passed"] = not failures
        (root / "figures.json").write_text(json.dumps(figures, indent=1, default=str))
        print(f"\nabuse {attack.__name__.rsplit('.', 1)[-1]} ({'full' if scale.full else 'short'}): "
              f"{json.dumps(figures, default=str)}")
        assert not failures, "\n".join(failures) + f"\nfigures: {json.dumps(figures, default=str)}"
        return figures
    finally:
        if rss is not None:
            rss.stop()
        if probe is not None:
            probe.stop()
        server.stop()
