"""Test helpers: real server processes and condition waits with deadlines."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import grpc
import pytest
import redis
from redis.crc import key_slot
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status

from concord_server.store.autopipeline import AutoPipeline
from concord_server.wakeups.doorbells import Doorbells
from concord_server.wakeups.outcomes import Outcomes
from concord_server.store.embedded_valkey import free_port, valkey_binary
from concord_server.keys import KeySpace
from concord_server.store.notifications import NotificationBus
from concord_server.primitives.chat import Chats
from concord_server.primitives.chat_feeds import Feeds
from concord_server.primitives.lock import Locks
from concord_server.primitives.queue import Queues
from concord_server.primitives.semaphore import Semaphores
from concord_server.store.link import Endpoint
from concord_server.wakeups.waiters import Waiters

BACKENDS = ["valkey", "redis"]
VALIDATION_PREFIX = "validation"  # the validation_server fixture's keys, so "nothing written" is exact


@contextlib.contextmanager
def worker_running(worker, join: float = 30.0):
    """A concord.Worker's run() on a thread for the with block (yields the thread);
    on the way out it is stopped and joined (up to ``join`` s)."""
    runner = threading.Thread(target=worker.run, kwargs={"install_signal_handlers": False})
    runner.start()
    try:
        yield runner
    finally:
        worker.stop()
        runner.join(join)


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.01, message: str = "condition"):
    """Polls predicate until it returns a truthy value; fails the test at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


def error_info(err: grpc.RpcError) -> error_details_pb2.ErrorInfo:
    """The google.rpc.ErrorInfo a failed call carries (there must be one)."""
    info = error_details_pb2.ErrorInfo()
    assert rpc_status.from_call(err).details[0].Unpack(info)
    return info


def prefixed_keys(redis_sync) -> set[str]:
    """The keys the validation_server fixture's server has written."""
    return {k for k in redis_sync.keys("*") if VALIDATION_PREFIX in k}


def assert_rejected_and_nothing_written(call, redis_sync, field: str) -> None:
    """call() (one RPC, streams drained) fails with INVALID_ARGUMENT naming ``field``,
    with ErrorInfo{INVALID_ARGUMENT, concord}, and writes no key of the validation server."""
    before = prefixed_keys(redis_sync)
    with pytest.raises(grpc.RpcError) as err:
        result = call()
        if hasattr(result, "__next__"):
            list(result)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
    info = error_info(err.value)
    assert (info.reason, info.domain, info.metadata["field"]) == ("INVALID_ARGUMENT", "concord", field)
    assert field in err.value.details()
    assert prefixed_keys(redis_sync) <= before


def unless_unavailable(call, *args):
    """For wait_until across a Redis restart: call(*args), or None while UNAVAILABLE."""
    import concord

    try:
        return call(*args)
    except concord.Unavailable:
        return None


def renewed_past(handle, first_expiry, seconds: float) -> bool:
    """For wait_until: the handle's expiry moved ``seconds`` past first_expiry;
    fails at once if background renewal found the hold lost."""
    if handle.lost:
        pytest.fail(f"{handle!r} was lost during background renewal")
    return (handle.expires_at - first_expiry).total_seconds() > seconds


def backend_binary(backend: str) -> str | None:
    if backend == "valkey":
        return valkey_binary()
    return shutil.which("redis-server")


class RedisServer:
    """A Redis-protocol server process with its append-only file on, restartable in place."""

    def __init__(self, binary: str, data_dir: Path, port: int | None = None, extra_args: Sequence[str] = ()) -> None:
        self.binary = binary
        self.data_dir = data_dir
        self.extra_args = list(extra_args)  # e.g. cluster mode (RedisCluster)
        self.port = port or free_port()  # a given port: a replacement for a killed server
        self.url = f"redis://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> RedisServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.data_dir),
             "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--daemonize", "no",
             "--logfile", str(self.data_dir / "server.log"), *self.extra_args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url, socket_timeout=1)

        def up() -> bool:
            assert self.proc is not None and self.proc.poll() is None, f"{self.binary} exited"
            try:
                return bool(client.ping())
            except (redis.ConnectionError, redis.BusyLoadingError):
                return False

        wait_until(up, message=f"{self.binary} on port {self.port}")
        client.close()
        return self

    def stop(self) -> None:
        """SIGTERM, and SIGKILL if it has not exited in 10 s (a loaded machine: Redis
        fsyncs its append-only file and may wait for replicas before it exits)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url, decode_responses=True)


class RedisCluster:
    """Three (``size``) primaries of one binary in cluster mode, the 16384 slots split
    evenly, each with ``replicas`` replicas; nodes bind 127.0.0.1 on free ports
    (cluster bus included). ``node_timeout_ms`` is how long a primary may be silent
    before its replica takes over (the failover tests use 1 s)."""

    def __init__(self, binary: str, data_dir: Path, size: int = 3, replicas: int = 0,
                 node_timeout_ms: int = 5000) -> None:
        # The bus port is given: the default (port + 10000) may be taken or past 65535.
        total = size * (1 + replicas)
        self.size = size
        self.bus_ports = [free_port() for _ in range(total)]
        self.nodes = [
            RedisServer(binary, data_dir / f"node{i}", extra_args=[
                "--cluster-enabled", "yes", "--cluster-config-file", str(data_dir / f"node{i}" / "nodes.conf"),
                "--cluster-port", str(bus), "--cluster-node-timeout", str(node_timeout_ms),
                # A replica takes over however long it was cut off: a failover test wants one.
                "--cluster-replica-validity-factor", "0"])
            for i, bus in enumerate(self.bus_ports)
        ]
        self.url = self.nodes[0].url  # any node will do: clients discover the rest

    def start(self) -> RedisCluster:
        for node in self.nodes:
            node.start()
        clients = [node.client() for node in self.nodes]
        step = 16384 // self.size
        for i, c in enumerate(clients[:self.size]):
            last = 16383 if i == self.size - 1 else (i + 1) * step - 1
            c.execute_command("CLUSTER", "ADDSLOTSRANGE", i * step, last)
        for node, bus in zip(self.nodes[1:], self.bus_ports[1:]):
            clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", node.port, bus)
        if len(self.nodes) > self.size:
            ids = [c.execute_command("CLUSTER", "MYID") for c in clients[:self.size]]
            wait_until(lambda: all(len(c.execute_command("CLUSTER", "NODES").splitlines()) == len(clients)
                                   for c in clients), timeout=30, interval=0.05, message="every node to know the others")
            for j, c in enumerate(clients[self.size:]):
                c.execute_command("CLUSTER", "REPLICATE", ids[j % self.size])

        def ok() -> bool:
            return all(c.execute_command("CLUSTER", "INFO").count("cluster_state:ok") for c in clients)

        wait_until(ok, timeout=30, interval=0.05, message="cluster_state:ok on every node")
        for node in self.nodes[self.size:]:
            wait_until(lambda: self.synced_replica(node), timeout=30, interval=0.05,
                       message=f"the replica on {node.port} to sync")
        for c in clients:
            c.close()
        return self

    def synced_replica(self, node: RedisServer) -> bool:
        """node is a replica with its link to its primary up and its first sync done."""
        try:
            with node.client() as c:
                info = c.info("replication")
        except redis.RedisError:
            return False
        return (info.get("role") == "slave" and info.get("master_link_status") == "up"
                and int(info.get("master_sync_in_progress", 1)) == 0)

    def live(self) -> list[RedisServer]:
        return [n for n in self.nodes if n.proc is not None and n.proc.poll() is None]

    def slot_owner(self, slot: int) -> RedisServer | None:
        """The node serving ``slot`` as a live node sees it (None while none does)."""
        for node in self.live():
            try:
                with node.client() as c:
                    for start, end, primary, *_ in c.execute_command("CLUSTER", "SLOTS"):
                        if start <= slot <= end:
                            return next(n for n in self.nodes if n.port == int(primary[1]))
            except redis.RedisError:
                continue
            return None
        return None

    def healthy(self) -> bool:
        """Every live node says cluster_state:ok and every primary serving slots is live."""
        for node in self.live():
            try:
                with node.client() as c:
                    if "cluster_state:ok" not in c.execute_command("CLUSTER", "INFO"):
                        return False
                    owners = {int(p[1]) for _, _, p, *_ in c.execute_command("CLUSTER", "SLOTS")}
            except redis.RedisError:
                return False
            if owners - {n.port for n in self.live()}:
                return False
        return True

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def begin_move(self, slot: int, source: RedisServer, target: RedisServer) -> None:
        """Marks ``slot`` migrating from source to target (new keys go to the target: ASK)."""
        with source.client() as s, target.client() as t:
            t.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", s.execute_command("CLUSTER", "MYID"))
            s.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", t.execute_command("CLUSTER", "MYID"))

    def finish_move(self, slot: int, source: RedisServer, target: RedisServer) -> None:
        """Migrates the slot's keys and gives the slot to target on every node."""
        with source.client() as s, target.client() as t:
            while keys := s.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100):
                s.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *keys)
            target_id = t.execute_command("CLUSTER", "MYID")
        for node in [target, source, *(n for n in self.nodes if n not in (source, target))]:
            with node.client() as c:
                c.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)

    def move_slot(self, slot: int, source: RedisServer, target: RedisServer) -> None:
        self.begin_move(slot, source, target)
        self.finish_move(slot, source, target)

    def owner(self, key: str) -> RedisServer:
        """The node serving key's slot now."""
        owner = self.slot_owner(key_slot(key.encode()))
        assert owner is not None, f"slot of {key!r} not served"
        return owner


class ServerProcess:
    """A concord-server subprocess, started the way users start it."""

    def __init__(self, *args: str, env: dict[str, str] | None = None, port: int | None = None,
                 credentials: grpc.ChannelCredentials | None = None) -> None:
        self.credentials = credentials  # a TLS server's health checks need them
        self._port_chosen = port is None  # a free port taken by another process first is chosen again
        self.port = port or free_port()
        self.target = f"127.0.0.1:{self.port}"
        self.args = ["--listen", self.target, *args]
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None

    def start(self, log_path: Path) -> ServerProcess:
        self.log_path = log_path
        for attempt in range(3):
            with open(log_path, "ab") as log:
                self.proc = subprocess.Popen([sys.executable, "-m", "concord_server", *self.args],
                                             stdout=log, stderr=subprocess.STDOUT, env=self.env)
            try:
                wait_until(lambda: self.health() == health_pb2.HealthCheckResponse.SERVING, timeout=30,
                           message=f"concord-server on {self.target} (log: {log_path})")
                return self
            except pytest.fail.Exception:
                # free_port() closes the port it found; another worker's process may bind it first.
                if not (self._port_chosen and attempt < 2 and "is already in use" in self.log_text()):
                    raise
                self.port = free_port()
                self.target = f"127.0.0.1:{self.port}"
                self.args[1] = self.target
        return self

    def health(self, service: str = ""):
        assert self.proc is not None
        if self.proc.poll() is not None:
            pytest.fail(f"concord-server exited with {self.proc.returncode}; log: {self.log_text()}")
        with (grpc.secure_channel(self.target, self.credentials) if self.credentials
              else grpc.insecure_channel(self.target)) as ch:
            try:
                return health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=service), timeout=1).status
            except grpc.RpcError:
                return None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path else ""

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def stop(self, timeout: float = 30) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()




class TcpProxy:
    """A TCP proxy for fault injection, e.g. between concord-server and Redis.

    ``delay(ms)`` holds every chunk that long in each direction (latency, not a
    bandwidth cap); ``cut()`` resets every open connection and resets new ones at
    once until ``resume()``. It runs its own event loop in a thread, so sync and
    async tests drive it alike; ``stop()`` (or leaving ``with``) ends it.
    """

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}"
        self._delay = 0.0
        self._cut = False
        self._open: set[asyncio.StreamWriter] = set()
        self._handlers: set[asyncio.Task] = set()
        self.accepted = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tcp-proxy", daemon=True)
        self._server: asyncio.base_events.Server | None = None

    def start(self) -> TcpProxy:
        self._thread.start()
        self._server = self._run(asyncio.start_server(self._handle, "127.0.0.1", self.port))
        return self

    def _run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    def delay(self, ms: float) -> None:
        """Latency added to data forwarded from now on (0: none)."""
        self._delay = ms / 1000

    def cut(self) -> None:
        """Resets every open connection, and each new one, until resume()."""
        async def cut() -> None:
            self._cut = True
            for w in list(self._open):
                w.transport.abort()
        self._run(cut())

    def resume(self) -> None:
        async def resume() -> None:
            self._cut = False
        self._run(resume())

    @property
    def connections(self) -> int:
        """Open proxied connections (each counts both its sockets as one)."""
        return len(self._open) // 2

    async def _handle(self, down_r: asyncio.StreamReader, down_w: asyncio.StreamWriter) -> None:
        self.accepted += 1
        if self._cut:
            down_w.transport.abort()
            return
        me = asyncio.current_task()
        self._handlers.add(me)
        try:
            up_r, up_w = await asyncio.open_connection(*self.target)
        except OSError:
            self._handlers.discard(me)
            down_w.transport.abort()
            return
        pair = {down_w, up_w}
        self._open |= pair
        pumps = [asyncio.create_task(self._pump(down_r, up_w)), asyncio.create_task(self._pump(up_r, down_w))]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in pumps:
                t.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            self._open -= pair
            self._handlers.discard(me)
            for w in pair:
                w.transport.abort()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Forwards one direction; each chunk leaves ``delay`` after it arrived, in order."""
        loop = asyncio.get_running_loop()
        chunks: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()

        async def forward() -> None:
            while (item := await chunks.get()) is not None:
                due, data = item
                if due > loop.time():
                    await asyncio.sleep(due - loop.time())
                writer.write(data)
                await writer.drain()

        sender = asyncio.create_task(forward())
        try:
            while data := await reader.read(65536):
                chunks.put_nowait((loop.time() + self._delay, data))
            chunks.put_nowait(None)
            await sender
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)

    def stop(self) -> None:
        if not self._thread.is_alive():
            return

        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            for w in list(self._open):
                w.transport.abort()
            if self._handlers:  # each ends by itself once its sockets are gone
                await asyncio.wait(set(self._handlers), timeout=5)

        self._run(stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.asynccontextmanager
async def wired_primitive(kind, url: str, *, process_id: str = "test-proc", liveness_ms: int = 5000,
                          interval: float = 1.0, prefix: str | None = None):
    """A primitive (Locks, Semaphores) wired like the server wires it, without gRPC."""
    commands = AutoPipeline(Endpoint.from_url(url))
    bus = NotificationBus(Endpoint.from_url(url))
    primitive = kind(commands, KeySpace(prefix or f"t{uuid.uuid4().hex[:8]}"), Waiters(bus, interval=interval),
                     process_id=process_id, liveness_ms=liveness_ms)
    try:
        yield primitive
    finally:
        await primitive.drain(1.0)
        await bus.close()
        await commands.aclose()


@contextlib.asynccontextmanager
async def _doorbell_wiring(url: str, *, broadcast: bool, interval: float, prefix: str | None):
    """(commands, keyspace, doorbells) wired like the server wires them; the caller
    drains its primitive before this closes them."""
    commands = AutoPipeline(Endpoint.from_url(url))
    bus = NotificationBus(Endpoint.from_url(url))
    doorbells = Doorbells(bus, interval=interval, broadcast=broadcast)
    try:
        yield commands, KeySpace(prefix or f"t{uuid.uuid4().hex[:8]}"), doorbells
    finally:
        doorbells.close()
        await doorbells.aclose()
        await bus.close()
        await commands.aclose()


@contextlib.asynccontextmanager
async def queue_primitive(url: str, *, prefix: str | None = None, interval: float = 1.0, **kw):
    """A Queues primitive wired like the server wires it, without gRPC."""
    async with _doorbell_wiring(url, broadcast=False, interval=interval, prefix=prefix) as (commands, keys, bells):
        outcomes = Outcomes(bells.bus)
        watch_bells = Doorbells(bells.bus, broadcast=True, interval=10.0)
        queues = Queues(commands, keys, bells, outcomes, watch_bells, **kw)
        try:
            yield queues
        finally:
            bells.close()
            outcomes.close()
            watch_bells.close()
            await queues.drain(1.0)
            await outcomes.aclose()
            await watch_bells.aclose()


@contextlib.asynccontextmanager
async def chat_primitive(url: str, *, prefix: str | None = None, **kw):
    """(Chats, Feeds) wired like the server wires them, without gRPC."""
    async with _doorbell_wiring(url, broadcast=True, interval=10.0, prefix=prefix) as (commands, keys, bells):
        chats = Chats(commands, keys, **kw)
        feeds = Feeds(chats, keys, bells)
        try:
            yield chats, feeds
        finally:
            bells.close()
            await feeds.drain(1.0)


def lock_primitive(url: str, **kw):
    return wired_primitive(Locks, url, **kw)


def semaphore_primitive(url: str, **kw):
    return wired_primitive(Semaphores, url, **kw)


async def async_wait_until(predicate, timeout: float = 10.0, interval: float = 0.01, message: str = "condition"):
    """wait_until for coroutine predicates."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if loop.time() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {message}")
        await asyncio.sleep(interval)
