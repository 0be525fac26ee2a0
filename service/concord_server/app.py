"""Wires one server process: Redis client, notification bus, primitives, servicers,
health and reflection; serves until told to stop, then drains."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import signal
from dataclasses import dataclass
from typing import Any

import grpc
import redis.asyncio as aioredis
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2_grpc

from concord.autocomplete.v1 import autocomplete_pb2_grpc
from concord.chat.v1 import chat_pb2_grpc
from concord.election.v1 import election_pb2_grpc
from concord.files.v1 import files_pb2_grpc
from concord.lock.v1 import lock_pb2_grpc
from concord.queue.v1 import queue_pb2_grpc
from concord.ratelimit.v1 import ratelimit_pb2_grpc
from concord.rwlock.v1 import rwlock_pb2_grpc
from concord.semaphore.v1 import semaphore_pb2_grpc

from .api.decoding import add_servicer
from .api.status import calls_in_progress
from .api.autocomplete import AutocompleteServicer
from .api.chat import ChatServicer
from .api.election import ElectionServicer
from .api.files import FileServicer
from .api.lock import LockServicer
from .api.queue import QueueServicer
from .api.ratelimit import RateLimitServicer
from .api.rwlock import ReadWriteLockServicer
from .api.semaphore import SemaphoreServicer
from . import quotas, tenants
from .store.autopipeline import AutoPipeline
from .store.cluster import ClusterBus, ClusterCommands
from .config import Settings
from .wakeups.doorbells import Doorbells
from .wakeups.listener import Listeners
from .wakeups.outcomes import Outcomes
from .keys import KeySpace
from .gc_policy import GcPolicy
from .loop_monitor import LoopMonitor, from_settings as start_loop_monitor
from .edge import auth, tls, tracing, undecodable
from .edge.first_message import FirstMessageInterceptor
from .edge.limits import SharedRate
from .edge.methods import SERVICES
from .edge.rpc_metrics import RpcMetrics
from .metrics import Metrics
from .store.notifications import NotificationBus
from .primitives import (autocomplete, chat, chat_feeds, deadlocks, election, files, lock, lock_activity, queue,
                         queue_history, ratelimit, rwlock, schedules, semaphore)
from .process_figures import ProcessFigures
from .process_registry import ProcessRegistry
from .process_registry import SCRIPTS as REGISTRY_SCRIPTS
from .primitives.schedule_ticker import Ticker
from .store.health import RedisHealth
from .store.client import connect_cluster
from .store.link import Endpoint
from .store.replica_acks import ReplicaAcks
from .store.sentinel import SwitchWatch
from .wakeups.waiters import Waiters

log = logging.getLogger(__name__)

REPLY_SLACK = 64 * 1024  # a reply's bytes beyond what its tasks' reply_bytes count
SERVICE_NAMES = tuple(SERVICES.values())  # Concord's own, as the protos name them (edge/methods.py)


def server_options(settings: Settings) -> list[tuple[str, int]]:
    return [
        ("grpc.max_send_message_length", settings.max_message_size),
        ("grpc.max_receive_message_length", settings.max_message_size),
        # Find dead clients (and so release their Hold streams) without waiting for TCP.
        ("grpc.keepalive_time_ms", 30_000),
        ("grpc.keepalive_timeout_ms", 10_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
        ("grpc.http2.max_pings_without_data", 0),
        # A burst of calls waits in gRPC's backlog until the loop takes them; the
        # defaults (1,000 soft, 3,000 hard) cancel a burst of blocking Acquires. Each
        # pending call holds memory before any check has run, so the backlog is bounded.
        ("grpc.server.max_pending_requests", settings.max_pending_calls),
        ("grpc.server.max_pending_requests_hard_limit", 2 * settings.max_pending_calls),
        # HTTP/2 rapid reset (CVE-2023-44487): the core counts streams the client reset
        # until the server lets them go, refuses new ones past this (overload protection,
        # on by default), and tarpits the refusals; with no limit nothing is counted.
        ("grpc.max_concurrent_streams", settings.max_streams_per_connection),
        ("grpc.http.overload_protection", 1),  # GRPC_ARG_MAX_CONCURRENT_STREAMS_OVERLOAD_PROTECTION
        ("grpc.http.tarpit", 1),  # GRPC_ARG_HTTP_ALLOW_TARPIT: refusals answered after a random delay
        ("grpc.http2.max_requests_per_read", 32),  # new streams taken per read: one connection cannot hog the core
        # A call the loop has not taken up within this is cancelled by the core.
        ("grpc.server_max_unrequested_time_in_server", 30),
        # Only --workers shares the port; otherwise a second server must fail to bind.
        ("grpc.so_reuseport", 1 if settings.workers > 1 else 0),
    ]


@dataclass(frozen=True)
class Primitives:
    """What build() makes: every primitive over one key space (once, or once per
    tenant: tenants.py)."""

    locks: lock.Locks
    semaphores: semaphore.Semaphores
    queues: queue.Queues
    schedules: schedules.Schedules
    chats: chat.Chats
    feeds: chat_feeds.Feeds
    autocomplete: autocomplete.Autocomplete
    files: files.Files
    elections: election.Elections
    rwlocks: rwlock.RWLocks
    ratelimits: ratelimit.RateLimits
    history: queue_history.QueueHistory  # the console's samples of queue counts
    lock_activity: lock_activity.LockActivity  # the console's handoffs and deadlocks broken, per interval


@dataclass
class Server:
    """A started server; ``port`` is the bound port (useful with port 0)."""

    grpc_server: grpc.aio.Server
    health: health.aio.HealthServicer
    port: int
    settings: Settings
    redis: aioredis.RedisCluster | None  # the slot map reader, on a cluster
    commands: AutoPipeline | ClusterCommands
    bus: NotificationBus | ClusterBus
    waiters: Waiters
    listeners: tuple[Listeners, ...]  # doorbells and outcomes: closed at shutdown
    primitives: tuple[lock.Locks, semaphore.Semaphores, queue.Queues, chat_feeds.Feeds, autocomplete.Autocomplete,
                      files.Files, election.Elections, rwlock.RWLocks, ratelimit.RateLimits]
    loop_monitor: LoopMonitor | None = None  # --loop-stall-report
    gc_policy: GcPolicy | None = None
    metrics: Metrics | None = None  # --metrics-listen
    auth: auth.AuthInterceptor | None = None  # --auth-tokens; reloaded on SIGHUP
    redis_health: RedisHealth | None = None  # health NOT_SERVING while Redis is unreachable
    ticker: Ticker | None = None  # runs the queues' schedules
    sentinel_watch: SwitchWatch | None = None  # redis+sentinel://: drops links to a demoted primary
    console: Any = None  # --console-listen: console.app.Console
    registry: ProcessRegistry | None = None  # this process's record in Redis, for every replica's console
    sampler: Any = None  # --console-listen: console.sampler.HistorySampler

    async def stop(self) -> None:
        """Health goes NOT_SERVING; blocked waits end with UNAVAILABLE at once (their
        clients can retry on another replica); other calls and Hold streams get the
        grace period; releases they leave behind reach Redis before it is closed."""
        if self.redis_health is not None:  # first: it must not set SERVING again
            await self.redis_health.aclose()
        if self.registry is not None:  # every console shows this process draining
            await self.registry.draining()
        await self.health.enter_graceful_shutdown()
        if self.console is not None:
            await self.console.aclose()
        self.waiters.close()
        for listeners in self.listeners:
            listeners.close()
        if self.ticker is not None:
            await self.ticker.aclose()
        await self.grpc_server.stop(self.settings.shutdown_grace)
        for primitive in self.primitives:
            await primitive.drain(timeout=5.0)
        await self.waiters.aclose()
        for listeners in self.listeners:
            await listeners.aclose()
        if self.sampler is not None:
            await self.sampler.aclose()
        if self.registry is not None:  # last of the writes: the record goes before the link closes
            await self.registry.aclose()
        if self.sentinel_watch is not None:
            await self.sentinel_watch.aclose()
        await self.bus.close()
        await self.commands.aclose()
        if self.redis is not None:
            await self.redis.aclose()
        if self.loop_monitor is not None:
            await self.loop_monitor.aclose()
        if self.metrics is not None:
            self.metrics.close()
        if self.gc_policy is not None:
            await self.gc_policy.aclose()


async def start(settings: Settings) -> Server:
    acks = None
    if settings.redis_replica_acks or settings.redis_aof_acks:
        acks = ReplicaAcks(settings.redis_replica_acks, max(1, round(settings.redis_replica_ack_timeout * 1000)),
                           aof=settings.redis_aof_acks)
    endpoint = Endpoint.from_url(settings.redis_url or "redis://127.0.0.1:6379", replica_acks=acks)
    redis: aioredis.RedisCluster | None = None
    if settings.redis_cluster:  # same interfaces, routed to the node serving each slot
        redis = connect_cluster(settings.redis_url or "", settings.redis_max_connections)
        commands: AutoPipeline | ClusterCommands = ClusterCommands(redis, endpoint)
        bus: NotificationBus | ClusterBus = ClusterBus(commands)
    else:
        commands = AutoPipeline(endpoint)
        bus = NotificationBus(endpoint)
    sentinel_watch = None
    if endpoint.sentinels is not None:  # a failover Sentinel announces: leave the old primary at once
        def switched(host: str, port: int) -> None:
            commands.reset(f"Sentinel moved the primary to {host}:{port}")
            bus.reset(f"Sentinel moved the primary to {host}:{port}")

        sentinel_watch = SwitchWatch(endpoint, switched).start()
    waiters = Waiters(bus)
    doorbells = Doorbells(bus)
    # Broadcast: chats, file groups and queue watchers; each safety ring re-reads.
    chat_bells = Doorbells(bus, broadcast=True, interval=10.0)
    outcomes = Outcomes(bus)
    keyspace, process_id = KeySpace(settings.key_prefix), secrets.token_hex(8)
    if settings.semaphore_limit_from_acquire:
        log.warning("--semaphore-limit-from-acquire is deprecated and goes in the next release: every "
                    "semaphore Acquire puts its limit in force; see the README's Semaphore API for "
                    "how to migrate (SetLimit)")

    def build(keyspace: KeySpace) -> Primitives:  # once, or once per tenant (tenants.py)
        locks = lock.Locks(commands, keyspace, waiters, process_id=process_id,
                           deadlocks=None if settings.no_deadlock_detection else deadlocks.Deadlocks(commands, keyspace))
        semaphores = semaphore.Semaphores(commands, keyspace, waiters, process_id=process_id,
                                          limit_from_acquire=settings.semaphore_limit_from_acquire)
        queues = queue.Queues(commands, keyspace, doorbells, outcomes, chat_bells,
                              priority_aging_ms=int(settings.queue_priority_aging * 1000),
                              retry_backoff_ms=int(settings.queue_retry_backoff * 1000),
                              max_reply_bytes=settings.max_message_size - REPLY_SLACK)
        ticks = schedules.Schedules(commands, keyspace, queues.weight)
        chats = chat.Chats(commands, keyspace, max_messages=settings.chat_max_messages,
                           max_bytes=settings.chat_max_bytes, max_members=settings.chat_max_members)
        feeds = chat_feeds.Feeds(chats, keyspace, chat_bells)
        completer = autocomplete.Autocomplete(commands, keyspace, recent_max=settings.recent_contacts_max)
        shipper = files.Files(commands, keyspace, chat_bells, chats, chunk_size=settings.file_chunk_size,
                              group_bound=settings.file_group_bound,
                              upload_lease_ms=int(settings.file_upload_lease * 1000),
                              max_line=settings.max_message_size // 2)
        elections = election.Elections(commands, keyspace, waiters, chat_bells, process_id=process_id)
        rwlocks = rwlock.RWLocks(commands, keyspace, waiters, process_id=process_id)
        limits = ratelimit.RateLimits(commands, keyspace, doorbells, cluster=settings.redis_cluster)
        history = queue_history.QueueHistory(commands, keyspace, queues.weight)
        activity = lock_activity.LockActivity(commands, keyspace)
        return Primitives(locks, semaphores, queues, ticks, chats, feeds, completer, shipper, elections, rwlocks,
                          limits, history, activity)

    p = tenants.route(keyspace, build, tenanted=bool(settings.auth_tokens))
    locks, semaphores, queues, chats, feeds = p.locks, p.semaphores, p.queues, p.chats, p.feeds
    completer, shipper = p.autocomplete, p.files
    try:  # load scripts up front; a Redis that is down now is retried on first use
        for s in (*lock.SCRIPTS, *semaphore.SCRIPTS, *queue.SCRIPTS, *schedules.SCRIPTS, *chat.SCRIPTS,
                  *autocomplete.SCRIPTS, *files.SCRIPTS, *election.SCRIPTS, *deadlocks.SCRIPTS, *rwlock.SCRIPTS,
                  *ratelimit.SCRIPTS, *queue_history.SCRIPTS, *lock_activity.SCRIPTS, *REGISTRY_SCRIPTS):
            await s.load(commands)
    except Exception as exc:
        log.warning("Redis not reachable at start-up (%s); serving UNAVAILABLE until it is", exc)

    monitor = start_loop_monitor(settings.loop_stall_report, settings.workers)
    observer = None
    if settings.metrics_listen or settings.console_listen:  # the console shows calls per second from them
        observer = Metrics(RpcMetrics)
        monitor = monitor or LoopMonitor(None).start()  # its stall readings are exported too
    interceptors = [*tracing.interceptors(settings), *([observer.interceptor] if observer else [])]
    # The tenant rate across replicas: its own key space, out of every tenant's reach.
    shared_rate = SharedRate(ratelimit.RateLimits(commands, keyspace.server_limits(),
                                                  cluster=settings.redis_cluster))
    auth_interceptor, security = auth.interceptors(settings, shared_rate)  # --auth-tokens, limits
    quotas.install(quotas.from_interceptors(security))  # storage_bytes of each tenant
    # Outermost: a unary call's message is read within --first-message-timeout (edge/first_message.py).
    first_message = FirstMessageInterceptor(settings.first_message_timeout)
    server = grpc.aio.server(options=server_options(settings), interceptors=[first_message, *interceptors, *security])
    add_servicer(server, lock_pb2_grpc.add_LockServiceServicer_to_server, LockServicer(locks, settings))
    add_servicer(server, semaphore_pb2_grpc.add_SemaphoreServiceServicer_to_server,
                 SemaphoreServicer(semaphores, settings))
    add_servicer(server, queue_pb2_grpc.add_QueueServiceServicer_to_server, QueueServicer(queues, p.schedules, settings))
    add_servicer(server, chat_pb2_grpc.add_ChatServiceServicer_to_server, ChatServicer(chats, feeds, settings))
    add_servicer(server, autocomplete_pb2_grpc.add_AutocompleteServiceServicer_to_server,
                 AutocompleteServicer(completer, settings))
    add_servicer(server, files_pb2_grpc.add_FileServiceServicer_to_server, FileServicer(shipper))
    add_servicer(server, election_pb2_grpc.add_ElectionServiceServicer_to_server, ElectionServicer(p.elections, settings))
    add_servicer(server, rwlock_pb2_grpc.add_ReadWriteLockServiceServicer_to_server,
                 ReadWriteLockServicer(p.rwlocks, settings))
    add_servicer(server, ratelimit_pb2_grpc.add_RateLimitServiceServicer_to_server, RateLimitServicer(p.ratelimits, settings))
    health_servicer = health.aio.HealthServicer()
    add_servicer(server, health_pb2_grpc.add_HealthServicer_to_server, health_servicer, wrap=undecodable.reject)
    add_servicer(server, reflection_pb2_grpc.add_ServerReflectionServicer_to_server, reflection.aio.ReflectionServicer(
        (*SERVICE_NAMES, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME)),
        wrap=undecodable.reject)
    # SERVING or NOT_SERVING as Redis answers now, so the first answer is true; then it follows Redis.
    redis_health = await RedisHealth(commands, health_servicer, SERVICE_NAMES).start()
    figures = ProcessFigures(waiters, (doorbells, chat_bells), observer, monitor, settings.workers)
    registry = ProcessRegistry(commands, keyspace, process_id, figures, redis_health, listen=settings.listen,
                               console=None)
    console, console_port, sampler = None, 0, None
    if settings.console_listen:  # listening before the gRPC port: once health answers, the console does too
        from .console.app import Console  # aiohttp is imported only with the console on
        from .console.sampler import SCRIPTS as SAMPLER_SCRIPTS
        from .console.sampler import HistorySampler
        from .console.views import Overview

        console = Console(p, Overview(commands, redis_health, registry, interval=1.0), auth_interceptor,
                          history_interval=settings.console_history_interval)
        console_port = await console.start(settings.console_listen)
        registry.console = f"{settings.console_listen.rpartition(':')[0]}:{console_port}"
        for s in SAMPLER_SCRIPTS:
            with contextlib.suppress(Exception):  # a Redis that is down now is retried on first use
                await s.load(commands)

        def known_tenants() -> list[str | None]:  # whose queues are sampled: the token table's tenants
            if auth_interceptor is None:
                return [None]
            return sorted({identity.tenant for _, identity in auth_interceptor.table.entries})

        sampler = HistorySampler(commands, keyspace, process_id, p, known_tenants,
                                 settings.console_history_interval)
    port = tls.add_port(server, settings)  # TLS with --tls-cert
    registry.listen = f"{settings.listen.rpartition(':')[0]}:{port}"
    await registry.first_beat()  # listed before the port serves: a caller finds the record there
    await server.start()
    registry.start()
    if sampler is not None:
        sampler.start()
    log.info("concord-server serving on %s (port %d)", settings.listen, port)
    if console is not None:
        host = (settings.console_listen or "").rpartition(":")[0].strip("[]")
        log.info("web console at http://%s:%d/", f"[{host}]" if ":" in host else (host or "0.0.0.0"), console_port)
    if observer is not None:
        observer.watch(waiters, doorbells, chat_bells, queues, monitor)
    if observer is not None and settings.metrics_listen:
        log.info("metrics at http://%s/metrics (port %d)", settings.metrics_listen,
                 observer.serve(settings.metrics_listen or ""))
    # Every process ticks every queue's schedules; the scripts let one claim each tick.
    ticker = Ticker(commands, keyspace, bus, p.queues.weight).start()
    collector = GcPolicy(calls_in_progress)  # full collections stalled the loop for seconds under load
    collector.start()
    return Server(server, health_servicer, port, settings, redis, commands, bus, waiters, (doorbells, chat_bells, outcomes),
                  (locks, semaphores, queues, feeds, completer, shipper, p.elections, p.rwlocks, p.ratelimits),
                  monitor, collector, observer, auth=auth_interceptor, redis_health=redis_health, ticker=ticker,
                  sentinel_watch=sentinel_watch, console=console, registry=registry, sampler=sampler)


async def serve(settings: Settings) -> None:
    """Runs until SIGTERM or SIGINT, then health goes NOT_SERVING and calls drain."""
    server = await start(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if server.auth is not None:
        loop.add_signal_handler(signal.SIGHUP, server.auth.reload)
    await stop.wait()
    log.info("shutting down: draining calls for up to %.1fs", settings.shutdown_grace)
    await server.stop()
