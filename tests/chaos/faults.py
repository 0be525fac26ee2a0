"""The seeded fault schedule, the processes it is played against, and its player.

``plan(seed, ...)`` decides everything with ``random.Random(seed)``: which faults, in
which order, how long each lasts and how long the calm after it is. The same seed and
settings give the same schedule; ``Fleet`` + ``play`` then execute it in order:

- redis_kill:  Redis SIGKILLed, down for ``duration``, restarted on its port from its
               append-only file (appendfsync always: nothing acknowledged is lost);
- redis_pause: Redis SIGSTOPped for ``duration`` (past the server's 5 s socket timeout
               in the long form), then SIGCONT;
- link_cut:    every connection between the servers and Redis reset, and new ones
               refused, for ``duration`` (support.TcpProxy);
- server_kill: one concord-server SIGKILLed, restarted on its port after ``duration``;
- cpu_pressure: two busy-loop processes beside the run for ``duration`` (a loaded
               machine: the servers' event loops run late, leases come close to expiring);
- failover:    (Redis Sentinel) the primary SIGKILLed and kept down for ``duration``
               (past Sentinel's down-after, so a replica is promoted), then started
               again on its port from its append-only file, where Sentinel makes it a
               replica of the new primary;
- primary_pause: (Redis Sentinel) the primary SIGSTOPped for ``duration`` (past
               Sentinel's down-after, so a replica is promoted while the old primary
               still holds the servers' connections), then SIGCONT: it comes back a
               primary with nobody replicating it until Sentinel demotes it;
- primary_cut: (Redis Sentinel) the primary cut off from everyone (its replicas, the
               Sentinels and the servers: each node sits behind its own TcpProxy) for
               ``duration``, so a replica is promoted while the old primary runs on;
               then the cut heals and Sentinel demotes it;
- primary_kill: (Redis Cluster with a replica per primary) the primary serving one
               queue's slot SIGKILLed and kept down for ``duration`` (past the
               cluster's node timeout, so its replica takes over), then started again
               on its port, where the cluster makes it a replica of the promoted one.
               ``target`` is the queue's index;
- slot_move:   (Redis Cluster) the slot of one queue's hash tag migrates to another
               node: SETSLOT IMPORTING/MIGRATING, ``duration`` of streams consuming
               from it while it migrates (ASK, TRYAGAIN), then MIGRATE of its keys and
               SETSLOT NODE on every node. ``target`` is the queue's index.

Every fault is healed in a ``finally`` (SIGCONT above all), and ``Fleet.heal`` puts
back whatever a failure left broken. Only processes this module started are
signalled, by their pid.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from redis.crc import key_slot

from sentinel_topology import SentinelTopology
from support import RedisCluster, RedisServer, ServerProcess, TcpProxy, backend_binary, wait_until

from .history import History

KINDS = ("redis_kill", "redis_pause", "link_cut", "server_kill", "cpu_pressure", "slot_move", "failover",
         "primary_kill", "primary_pause", "primary_cut")
SOCKET_TIMEOUT = 5.0  # how long the server waits for a Redis reply (redis_link.REPLY_TIMEOUT, was socket_timeout)
LIVENESS = 5.0  # a server cut off this long counts as dead to the others (liveness_ms, waiters.py)
# Seconds a fault costs on top of its duration (restarts), to size a schedule.
OVERHEAD = {"redis_kill": 0.5, "redis_pause": 0.0, "link_cut": 0.0, "server_kill": 2.5, "cpu_pressure": 0.1,
            "slot_move": 0.3, "failover": 1.0, "primary_kill": 1.0,
            "primary_pause": 1.0, "primary_cut": 1.0}
# How often each kind is drawn once the minimums are in, per topology: one Redis (kills,
# pauses, cuts through the proxy) or a Redis Cluster (slot moves; no proxy in front).
WEIGHTS = {
    "single": {"redis_kill": 4, "redis_pause": 2, "link_cut": 2, "server_kill": 1, "cpu_pressure": 1},
    "cluster": {"slot_move": 4, "cpu_pressure": 1, "server_kill": 1},
    "sentinel": {"failover": 4, "primary_pause": 2, "primary_cut": 2, "server_kill": 1, "cpu_pressure": 1},
    "cluster-failover": {"primary_kill": 4, "server_kill": 1, "cpu_pressure": 1},
}
CLUSTER_NODE_TIMEOUT_MS = 1000  # cluster-failover: a primary silent this long is failed over
CPU_HOGS = 2  # busy-loop processes a cpu_pressure fault (or Config.cpu_hogs) runs


@dataclass(frozen=True)
class Fault:
    kind: str
    duration: float  # seconds it lasts before it is healed
    gap: float  # seconds of calm after healing
    target: int = 0  # the server a server_kill kills; the queue (index) a slot_move moves

    def describe(self) -> str:
        what = (f"{self.kind}(s{self.target})" if self.kind == "server_kill" else
                f"{self.kind}(q{self.target})" if self.kind in ("slot_move", "primary_kill") else self.kind)
        return f"{what} {self.duration:.2f}s +{self.gap:.2f}s"


def _duration(rng: random.Random, kind: str, long: bool, required_long: bool) -> float:
    if kind == "redis_kill":
        return round(rng.uniform(0.1, 1.5 if long else 0.8), 2)
    if kind == "redis_pause":
        if required_long or (long and rng.random() < 0.4):
            return round(rng.uniform(SOCKET_TIMEOUT + 0.5, SOCKET_TIMEOUT + 2.5), 2)
        return round(rng.uniform(0.8, 2.0), 2)
    if kind == "link_cut":
        if required_long or (long and rng.random() < 0.3):
            return round(rng.uniform(LIVENESS + 0.5, LIVENESS + 2.5), 2)
        return round(rng.uniform(0.3, 2.0), 2)
    if kind == "cpu_pressure":
        return round(rng.uniform(2.0, 8.0) if long else rng.uniform(1.0, 4.0), 2)
    if kind == "slot_move":  # migrating (ASK, TRYAGAIN) this long before the keys move
        return round(rng.uniform(0.8, 3.0), 2)
    if kind in ("failover", "primary_kill", "primary_pause", "primary_cut"):  # down past down-after / node timeout (1 s) and the election
        return round(rng.uniform(2.5, 5.0), 2)
    return round(rng.uniform(0.0, 1.0), 2)  # server_kill: down time before the restart


def plan(seed: int, seconds: float, *, servers: int, minimum: dict[str, int], long: bool = False,
         long_pauses: int = 0, long_cuts: int = 0, topology: str = "single", queues: int = 1) -> list[Fault]:
    """At least ``minimum[kind]`` faults of each kind (``long_pauses`` of the pauses past
    the socket timeout, ``long_cuts`` of the cuts past the liveness window), then random
    ones until the schedule fills about ``seconds``; shuffled. Depends only on its
    arguments."""
    rng = random.Random(seed)
    kinds = [k for k in KINDS for _ in range(minimum.get(k, 0))]
    longs = Counter({"redis_pause": long_pauses, "link_cut": long_cuts})
    faults = []
    for kind in kinds:
        required_long = longs[kind] > 0
        longs[kind] -= 1
        faults.append((kind, _duration(rng, kind, long, required_long)))

    def cost(fs) -> float:
        return sum(d + OVERHEAD[k] + (1.75 if long else 0.9) for k, d in fs)

    weights = WEIGHTS[topology]
    while cost(faults) < seconds:
        kind = rng.choices(list(weights), list(weights.values()))[0]
        faults.append((kind, _duration(rng, kind, long, False)))
    rng.shuffle(faults)
    return [Fault(kind, duration, round(rng.uniform(0.5, 3.0) if long else rng.uniform(0.3, 1.5), 2),
                  rng.randrange(servers) if kind == "server_kill" else
                  rng.randrange(queues) if kind in ("slot_move", "primary_kill") else 0)
            for kind, duration in faults]


def counts(faults: list[Fault]) -> dict[str, int]:
    c = Counter(f.kind for f in faults)
    return {k: c.get(k, 0) for k in KINDS}


SERVER_ARGS = (
    "--log-level", "WARNING",
    "--queue-retry-backoff", "0.05",
    "--chat-max-messages", "1000000",
    "--chat-max-bytes", str(1 << 30),
    "--max-wait", "60",
    "--shutdown-grace", "2",
)


class CpuHogs:
    """Busy-loop processes beside the run (a competing process on a loaded machine);
    started and stopped by this harness, by pid."""

    def __init__(self, n: int = CPU_HOGS) -> None:
        self.n = n
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> None:
        if not self.procs:
            self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                          for _ in range(self.n)]

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait(10)
        self.procs = []


class Fleet:
    """The servers and their Redis. Single topology: one Redis (AOF, appendfsync
    always), a TcpProxy in front of it and ``servers`` concord-server processes whose
    Redis URL is the proxy. Cluster topology: a three-primary Redis Cluster
    (support.RedisCluster) the servers reach directly (--redis-cluster); its faults are
    slot moves. ``queues`` names the queues a slot_move's target indexes."""

    def __init__(self, backend: str, workdir: Path, servers: int, *, topology: str = "single",
                 queues: list[str] | None = None, cpu_hogs: bool = False, replica_acks: int = 0) -> None:
        binary = backend_binary(backend)
        assert binary, f"{backend} server not installed"
        self.workdir = workdir
        self.topology = topology
        self.redis: RedisServer | None = None
        self.cluster: RedisCluster | None = None
        self.sentinel: SentinelTopology | None = None
        self.replica_acks = replica_acks
        self.killed_primary: RedisServer | None = None  # a failover's, until it is started again
        self.paused_primary: RedisServer | None = None  # a primary_pause's, until SIGCONT
        self.cut_primary: RedisServer | None = None  # a primary_cut's, until its proxy resumes
        # (killed at, a new primary named at) per failover or primary_kill, time.monotonic()
        self.promotions: list[tuple[float, float | None]] = []
        self._timer: threading.Thread | None = None
        self._timer_stop = threading.Event()
        if topology == "cluster":
            self.cluster = RedisCluster(binary, workdir / "cluster")
        elif topology == "cluster-failover":
            self.cluster = RedisCluster(binary, workdir / "cluster", replicas=1,
                                        node_timeout_ms=CLUSTER_NODE_TIMEOUT_MS)
        elif topology == "sentinel":
            self.sentinel = SentinelTopology(binary, workdir / "sentinel", proxied=True)
        else:
            self.redis = RedisServer(binary, workdir / "redis")
        self.proxy: TcpProxy | None = None
        self.servers: list[ServerProcess] = []
        self.logs = [workdir / f"server{i}.log" for i in range(servers)]
        self.paused = False
        self.queues = list(queues or [])
        self.moving: tuple[int, RedisServer, RedisServer] | None = None  # a slot_move under way
        self.hogs = CpuHogs()  # a cpu_pressure fault's
        self.run_hogs = CpuHogs() if cpu_hogs else None  # for the whole run (Config.cpu_hogs)

    def start(self) -> Fleet:
        if self.run_hogs is not None:
            self.run_hogs.start()
        if self.cluster is not None:
            self.cluster.start()
            url, extra = self.cluster.url, ("--redis-cluster", "--redis-replica-acks", str(self.replica_acks))
        elif self.sentinel is not None:
            self.sentinel.start()
            url, extra = self.sentinel.url(), ("--redis-replica-acks", str(self.replica_acks))
        else:
            assert self.redis is not None
            self.redis.start()
            self.proxy = TcpProxy(self.redis.port).start()
            url, extra = self.proxy.url, ()
        for log in self.logs:
            self.servers.append(ServerProcess("--redis-url", url, *extra, *SERVER_ARGS))
            self.servers[-1].start(log)
        return self

    @property
    def targets(self) -> list[str]:
        return [s.target for s in self.servers]

    # Each fault: inject, then heal (both blocking: run them in a thread).

    def redis_kill(self) -> None:
        assert self.redis is not None, "redis_kill needs the single topology"
        self.redis.kill()

    def redis_restart(self) -> None:
        if self.redis is not None and (self.redis.proc is None or self.redis.proc.poll() is not None):
            self.redis.start()

    def redis_pause(self) -> None:
        assert self.redis is not None and self.redis.proc is not None, "redis_pause needs the single topology"
        self.paused = True
        os.kill(self.redis.proc.pid, signal.SIGSTOP)

    def redis_resume(self) -> None:
        if self.paused and self.redis is not None and self.redis.proc is not None and self.redis.proc.poll() is None:
            os.kill(self.redis.proc.pid, signal.SIGCONT)
        self.paused = False

    def cut(self) -> None:
        assert self.proxy is not None, "link_cut needs the single topology"
        self.proxy.cut()

    def resume(self) -> None:
        if self.proxy is not None:
            self.proxy.resume()

    def server_kill(self, i: int) -> None:
        self.servers[i].kill()

    def server_restart(self, i: int) -> None:
        s = self.servers[i]
        if s.proc is None or s.proc.poll() is not None:
            s.start(self.logs[i])

    def cpu_on(self) -> None:
        self.hogs.start()

    def cpu_off(self) -> None:
        self.hogs.stop()

    def _strike_primary(self, strike: Callable[[RedisServer], object]) -> RedisServer:
        """Applies ``strike`` to the primary the Sentinels name and times Sentinel's
        promotion of another (a failover, primary_pause, primary_cut)."""
        assert self.sentinel is not None, "a failover needs the sentinel topology"
        sentinel, primary = self.sentinel, self.sentinel.primary()
        strike(primary)
        self._time_promotion(lambda: (n := sentinel.named()) is not None and n != sentinel.public_port(primary)
                             and sentinel.role(sentinel.node_at(n)) == "master")
        return primary

    def failover(self) -> dict[str, int]:
        """Kills the primary the Sentinels name (SIGKILL); returns its port."""
        self.killed_primary = self._strike_primary(RedisServer.kill)
        return {"primary": self.killed_primary.port}

    def primary_pause(self) -> dict[str, int]:
        """SIGSTOPs the primary the Sentinels name; returns its port."""
        self.paused_primary = self._strike_primary(lambda node: os.kill(node.proc.pid, signal.SIGSTOP))
        return {"primary": self.paused_primary.port}

    def primary_cut(self) -> dict[str, int]:
        """Cuts the primary the Sentinels name off from everyone; returns its port."""
        assert self.sentinel is not None and self.sentinel.proxies, "primary_cut needs the proxied sentinel topology"
        self.cut_primary = self._strike_primary(lambda node: self.sentinel.proxy_of(node).cut())
        return {"primary": self.cut_primary.port}

    def _let_primary_back(self, node: RedisServer, undo: Callable[[RedisServer], object]) -> None:
        """Undoes a pause or cut (a short one promotes nobody: the timing stops here);
        healed once the Sentinels agree on a live primary and node is it or a synced
        replica of it (Sentinel demotes a primary it replaced)."""
        assert self.sentinel is not None
        self._timer_stop.set()
        if self._timer is not None:
            self._timer.join(60)
        undo(node)
        wait_until(lambda: self.sentinel.rejoined(node), timeout=60, interval=0.1,
                   message=f"the primary on {node.port} to be the primary or a synced replica again")

    def primary_pause_heal(self) -> None:
        if self.paused_primary is not None:
            node, self.paused_primary = self.paused_primary, None
            self._let_primary_back(node, lambda n: n.proc is not None and n.proc.poll() is None
                                   and os.kill(n.proc.pid, signal.SIGCONT))

    def primary_cut_heal(self) -> None:
        if self.cut_primary is not None:
            node, self.cut_primary = self.cut_primary, None
            self._let_primary_back(node, lambda n: self.sentinel.proxy_of(n).resume())

    def primary_kill(self, queue: int) -> dict[str, int | str]:
        """Kills the primary serving queue ``queue``'s slot (SIGKILL)."""
        assert self.cluster is not None and len(self.cluster.nodes) > self.cluster.size, \
            "primary_kill needs the cluster-failover topology"
        name, slot = self._queue_slot(queue)
        primary = self.cluster.slot_owner(slot)
        assert primary is not None, f"slot {slot} not served"
        primary.kill()
        self.killed_primary = primary
        cluster = self.cluster
        self._time_promotion(lambda: (o := cluster.slot_owner(slot)) is not None and o is not primary)
        return {"queue": name, "slot": slot, "primary": primary.port}

    def _time_promotion(self, promoted) -> None:
        """Notes when ``promoted()`` first holds (polled every 20 ms, at most 60 s or
        until a heal stops it): the store's own failover time, beside which the
        campaign puts the servers'."""
        killed_at = time.monotonic()
        self.promotions.append((killed_at, None))
        index = len(self.promotions) - 1
        self._timer_stop = stop = threading.Event()

        def watch() -> None:
            while time.monotonic() - killed_at < 60 and not stop.is_set():
                try:
                    if promoted():
                        self.promotions[index] = (killed_at, time.monotonic())
                        return
                except Exception:  # noqa: BLE001 - a node mid-restart: asked again
                    pass
                time.sleep(0.02)

        self._timer = threading.Thread(target=watch, daemon=True)
        self._timer.start()

    def primary_kill_heal(self) -> None:
        """The killed primary started again once its replica took over (waited for), and
        healed once it is a synced replica and every node says cluster_state:ok."""
        if self.killed_primary is None or self.cluster is None or self.sentinel is not None:
            return
        node, self.killed_primary = self.killed_primary, None
        cluster = self.cluster
        if self._timer is not None:
            self._timer.join(60)
        wait_until(lambda: cluster.healthy(), timeout=60, interval=0.1,
                   message="a replica to take over the killed primary's slots")
        node.start()
        wait_until(lambda: cluster.synced_replica(node) and cluster.healthy(), timeout=60, interval=0.1,
                   message=f"the old primary on {node.port} to rejoin as a synced replica")

    def failover_heal(self) -> None:
        """The killed primary started again; a replica was promoted meanwhile (waited for)."""
        if self.killed_primary is None or self.sentinel is None:
            return
        node, self.killed_primary = self.killed_primary, None
        if self._timer is not None:
            self._timer.join(60)
        promoted = self.sentinel.primary(timeout=60)  # a live primary the Sentinels agree on
        assert promoted is not node
        node.start()
        # Healed once Sentinel has made it a replica of the new primary and it has synced:
        # until then it is a primary of its own with the data it had when it was killed,
        # and a second failover could promote it (a double fault, not this one).
        wait_until(lambda: self.sentinel.rejoined(node), timeout=60, interval=0.1,
                   message=f"the old primary on {node.port} to rejoin as a synced replica")

    def slot_begin(self, queue: int) -> dict[str, int | str]:
        """Marks the slot of queue ``queue``'s keys migrating from its owner to the next
        node; returns what moves where (for the history)."""
        assert self.cluster is not None, "slot_move needs the cluster topology"
        name, slot = self._queue_slot(queue)
        source = self.cluster.slot_owner(slot)
        assert source is not None, f"slot {slot} not served"
        nodes = self.cluster.nodes
        target = nodes[(nodes.index(source) + 1) % len(nodes)]
        self.cluster.begin_move(slot, source, target)
        self.moving = (slot, source, target)
        return {"queue": name, "slot": slot, "from": source.port, "to": target.port}

    def _queue_slot(self, queue: int) -> tuple[str, int]:
        from concord_server.keys import KeySpace

        name = self.queues[queue % len(self.queues)]
        return name, key_slot(KeySpace("concord").queue(name).ready.encode())

    def slot_finish(self) -> None:
        """Moves the migrating slot's keys and gives the slot to its target everywhere."""
        if self.cluster is not None and self.moving is not None:
            slot, source, target = self.moving
            self.cluster.finish_move(slot, source, target)
            self.moving = None

    def heal(self) -> None:
        """Everything back up, whatever state a fault or a failure left."""
        self.cpu_off()
        self.redis_resume()
        self.resume()
        self.redis_restart()
        self.slot_finish()
        self.failover_heal()
        self.primary_pause_heal()
        self.primary_cut_heal()
        self.primary_kill_heal()
        for i in range(len(self.servers)):
            self.server_restart(i)

    def stop(self) -> dict[str, int | None]:
        """Stops everything (SIGCONT first); the servers' exit codes."""
        codes: dict[str, int | None] = {}
        try:
            self.cpu_off()
            if self.run_hogs is not None:
                self.run_hogs.stop()
            self.redis_resume()
            self.resume()
            if self.paused_primary is not None and self.paused_primary.proc is not None \
                    and self.paused_primary.proc.poll() is None:
                os.kill(self.paused_primary.proc.pid, signal.SIGCONT)
            for i, s in enumerate(self.servers):
                try:
                    codes[f"server{i}"] = s.stop(timeout=15)
                except Exception as exc:  # noqa: BLE001 - reported, the rest still stops
                    codes[f"server{i}"] = None
                    s.kill()
                    print(f"chaos: stopping server{i} failed: {exc}")
        finally:
            if self.proxy is not None:
                self.proxy.stop()
            if self.redis is not None:
                self.redis.kill()
            if self.cluster is not None:
                for node in self.cluster.nodes:
                    node.kill()
            if self.sentinel is not None:
                self.sentinel.stop()
        return codes

    def log_texts(self) -> dict[str, str]:
        return {log.name: log.read_text(errors="replace") if log.exists() else "" for log in self.logs}


async def play(schedule: list[Fault], fleet: Fleet, history: History, done: list[dict], *,
               warmup: float = 1.0) -> None:
    """Executes the schedule in order, after ``warmup`` seconds of calm, appending what
    was done (with times) to ``done``. Each fault is recorded as a ``fault`` event
    spanning injection to healing."""
    await asyncio.sleep(warmup)
    for n, f in enumerate(schedule):
        ev = history.invoke("faults", "fault", **asdict(f), n=n)
        try:
            if f.kind == "redis_kill":
                await asyncio.to_thread(fleet.redis_kill)
                await asyncio.sleep(f.duration)
            elif f.kind == "redis_pause":
                await asyncio.to_thread(fleet.redis_pause)
                await asyncio.sleep(f.duration)
            elif f.kind == "link_cut":
                await asyncio.to_thread(fleet.cut)
                await asyncio.sleep(f.duration)
            elif f.kind == "server_kill":
                await asyncio.to_thread(fleet.server_kill, f.target)
                await asyncio.sleep(f.duration)
            elif f.kind == "cpu_pressure":
                await asyncio.to_thread(fleet.cpu_on)
                await asyncio.sleep(f.duration)
            elif f.kind == "failover":
                killed = await asyncio.to_thread(fleet.failover)
                history.note("faults", "fault.failover", parent=ev.id, **killed)
                await asyncio.sleep(f.duration)
            elif f.kind == "primary_pause":
                paused = await asyncio.to_thread(fleet.primary_pause)
                history.note("faults", "fault.primary_pause", parent=ev.id, **paused)
                await asyncio.sleep(f.duration)
            elif f.kind == "primary_cut":
                cut = await asyncio.to_thread(fleet.primary_cut)
                history.note("faults", "fault.primary_cut", parent=ev.id, **cut)
                await asyncio.sleep(f.duration)
            elif f.kind == "primary_kill":
                killed = await asyncio.to_thread(fleet.primary_kill, f.target)
                history.note("faults", "fault.primary_kill", parent=ev.id, **killed)
                await asyncio.sleep(f.duration)
            elif f.kind == "slot_move":
                moving = await asyncio.to_thread(fleet.slot_begin, f.target)
                history.note("faults", "fault.slot_move", parent=ev.id, **moving)
                await asyncio.sleep(f.duration)
            elif f.kind == "calm":  # no fault (a control run: the checker must find nothing)
                await asyncio.sleep(f.duration)
            else:
                raise ValueError(f"unknown fault kind {f.kind!r}")
        finally:
            # Healing must happen even if this task is cancelled: shield the thread.
            heal = asyncio.ensure_future(asyncio.to_thread(_heal_one, fleet, f))
            try:
                await asyncio.shield(heal)
            except asyncio.CancelledError:
                await heal
                raise
            except BaseException as exc:  # noqa: BLE001 - recorded, then the campaign stops
                history.fail(ev, exc)
                raise
        history.ok(ev, {"healed": True})
        done.append({**asdict(f), "at": ev.invoke, "healed": ev.complete})
        await asyncio.sleep(f.gap)


def _heal_one(fleet: Fleet, f: Fault) -> None:
    if f.kind == "redis_kill":
        fleet.redis_restart()
    elif f.kind == "redis_pause":
        fleet.redis_resume()
    elif f.kind == "link_cut":
        fleet.resume()
    elif f.kind == "server_kill":
        fleet.server_restart(f.target)
    elif f.kind == "cpu_pressure":
        fleet.cpu_off()
    elif f.kind == "slot_move":
        fleet.slot_finish()
    elif f.kind == "failover":
        fleet.failover_heal()
    elif f.kind == "primary_kill":
        fleet.primary_kill_heal()
    elif f.kind == "primary_pause":
        fleet.primary_pause_heal()
    elif f.kind == "primary_cut":
        fleet.primary_cut_heal()
