"""One driver per service, through the real Python client (concord.AsyncClient), every
call recorded in a History.

Actors (coroutines, one per simulated process) are spread over the servers round
robin. Each loops until ``stop`` is set, with small random think times and a short
back-off after a failure; every call has a deadline (the client's timeout on top of
any wait), so every loop iteration is bounded.

- locks:      Acquire / Refresh / Release with short TTLs (sometimes held past the TTL),
              and Hold streams (raw stub: the library renews with Refresh instead);
- semaphores: the same with several permits per holder, and Hold streams;
- queues:     producers (batches, priorities, delays, max attempts, 1 among them: a
              task that dies must have been delivered), Dequeue workers over one or
              two queues that ack, nack, settle late on purpose (asleep for part of
              the lease first) or "crash" (drop the task: its lease expires), Consume
              streams over two or three queues, reopened every 1-4 s, that ack or nack
              over the stream (by unary call, on the same lease, when the stream has
              ended meanwhile), settle late, release, or vanish with tasks held (their
              own channel is closed under them); each task a stream brings is recorded
              when it arrives, before the consumer gets to it;
- chat:       senders (bodies embed a uuid, so each is unique) and subscribers in both
              ack modes that disconnect now and then, explicit ones sometimes before
              acking;
- autocomplete: recent-contact and name-index writers and readers (the sets only grow).

``queues_only`` (the Redis Cluster topology) runs only the queue actors.

``final()`` runs after quiesce: drains the queues (acking all) and reads their
dead-letter lists (with each dead task's attempt) and stats, reads every explicit subscriber's pending messages and
every chat's history, and reads every autocomplete key once more.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

import concord
from concord._convert import duration
from concord.client import Service
from concord.consume import AsyncConsumer
from concord.queues import _nack_request
from concord.lock.v1 import lock_pb2
from concord.semaphore.v1 import semaphore_pb2

from .history import Event, History, ts


class _ByTerm:
    """An election as _hold_and_release drives a lock: refresh and release one leadership."""

    def __init__(self, election: Any) -> None:
        self.election = election

    async def refresh(self, won: concord.Leadership) -> concord.Leadership:
        won.expires_at = await self.election.refresh(won.term)
        return won

    async def release(self, won: concord.Leadership) -> None:
        await self.election.resign(won.term)

CALL_TIMEOUT = 8.0  # the client's timeout: a call's gRPC deadline is its wait + this (> socket_timeout 5 s)
CHANNEL_OPTIONS = [  # reconnect quickly to a restarted server
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]
SEM_LIMIT = 3
RATE_LIMIT = (40, 1.0, 8)  # the limiters' GCRA key: 40 units a second, up to 8 at once
RATE_WAIT = (10, 1.0, 2)  # the waiters' key: 10 a second, 2 at once, so most Waits wait
RATE_WAIT_S = 1.0  # each Wait's timeout
NAMES_CAP = 300  # names per index: a Suggest with limit 1000 returns all of them
LETTERS = "abcd"
QUEUES = ["queue-a", "queue-b", "queue-c"]
LATE_SETTLE = 0.25  # share of tasks settled late on purpose: asleep for 30-90 % of the lease first

_EVENTS = {1: "acquired", 2: "refreshed", 3: "lost"}


async def _pump(source: Any, out: asyncio.Queue,
                seen: Callable[[str, Any], None] = lambda kind, item: None) -> None:
    """Copies a stream into a queue: ("msg", item) ..., then ("end", None) or ("error", exc),
    calling ``seen(kind, item)`` as each arrives. ``source`` is a grpc.aio call (read())
    or an async iterable."""

    def put(kind: str, item: Any) -> None:
        seen(kind, item)
        out.put_nowait((kind, item))

    try:
        if hasattr(source, "read"):
            while (msg := await source.read()) is not grpc.aio.EOF:
                put("msg", msg)
        else:
            async for item in source:
                put("msg", item)
        put("end", None)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        put("error", asyncio.CancelledError())  # the call itself was cancelled
    except Exception as exc:  # noqa: BLE001 - handed to the reader
        put("error", exc)


async def _next(q: asyncio.Queue, timeout: float) -> tuple[str, Any] | None:
    try:
        return await asyncio.wait_for(q.get(), max(0.0, timeout))
    except TimeoutError:
        return None


class _Once:
    """Ack and nack by unary call without the client library's retries (concord._retry),
    so a TASK_LEASE_NOT_HELD answer is this call's own and not a repeat's after a first
    try whose reply was lost: the checker holds the server to it."""

    def __init__(self, queue: Any) -> None:
        self.queue = queue

    async def ack(self, task: concord.Task) -> None:
        await self.queue._rpc.call("Ack", self.queue._ack_request(task, None))

    async def nack(self, task: concord.Task, error: str, *, retry_delay: float | None = None) -> None:
        await self.queue._rpc.call("Nack", _nack_request(task, error, retry_delay, True))


def _ended(stream: AsyncConsumer) -> bool:
    """The Consume stream's call is over (its end may not have been read yet)."""
    call = getattr(stream, "_call", None)
    return call is None or call.done()


async def _stop_pump(pump: asyncio.Task) -> None:
    pump.cancel()
    await asyncio.gather(pump, return_exceptions=True)


class Workloads:
    def __init__(self, history: History, targets: list[str], seed: int, stop: asyncio.Event, *,
                 scale: int = 1, queues_only: bool = False) -> None:
        self.h = history
        self.targets = targets
        self.seed = seed
        self.stop = stop
        self.scale = scale
        self.clients: list[concord.AsyncClient] = []
        self.locks = ["lock-a", "lock-b"]
        self.sems = ["sem-a"]
        self.elections = ["election-a"]
        self.rwlocks = ["rw-a"]
        self.queues = list(QUEUES)
        self.queues_only = queues_only
        self.chats = ["chat-a", "chat-b"]
        self.senders = ["s0", "s1"]
        self.explicit = ["e0", "e1"]
        self.auto = ["a0", "a1"]
        self.ac_users = ["u0"]
        self.indexes = ["idx0"]
        self.names: dict[str, list[str]] = {ix: [] for ix in self.indexes}
        self._n = 0

    # ------------------------------------------------------------ plumbing

    def _rng(self, proc: str) -> random.Random:
        return random.Random(f"{self.seed}:{proc}")

    def _pick(self) -> tuple[int, concord.AsyncClient]:
        i = self._n % len(self.clients)
        self._n += 1
        return i, self.clients[i]

    def _client(self, server: int) -> concord.AsyncClient:
        return concord.AsyncClient(self.targets[server], timeout=CALL_TIMEOUT, options=CHANNEL_OPTIONS)

    async def open(self) -> None:
        self.clients = [self._client(i) for i in range(len(self.targets))]

    async def close(self) -> None:
        for c in self.clients:
            await c.close()

    async def _think(self, rng: random.Random, lo: float = 0.005, hi: float = 0.05) -> None:
        await asyncio.sleep(rng.uniform(lo, hi))

    async def _backoff(self, rng: random.Random) -> None:
        await asyncio.sleep(rng.uniform(0.05, 0.2))

    async def call(self, proc: str, op: str, fn: Callable[[], Awaitable[Any]], server: int, **kw: Any) -> Event:
        return await self.h.call(proc, op, fn, server=server, **kw)

    def mono(self, when: Any) -> float | None:
        return self.h.to_mono(ts(when))

    def actors(self) -> list[Awaitable[None]]:
        s = self.scale
        out: list[Awaitable[None]] = []
        if self.queues_only:
            return ([self.producer(k) for k in range(3 * s)] + [self.dequeuer(k) for k in range(3 * s)]
                    + [self.consumer(k) for k in range(4 * s)] + [self.queue_watcher(q) for q in self.queues])
        out += [self.lock_client(k) for k in range(4 * s)]
        out += [self.holder("lock", k) for k in range(2 * s)]
        out += [self.sem_client(k) for k in range(4 * s)]
        out += [self.holder("sem", k) for k in range(1 * s)]
        out += [self.elector(k) for k in range(3 * s)]
        out += [self.rw_client(k) for k in range(3 * s)]
        out += [self.election_observer(k) for k in range(2)]
        out += [self.producer(k) for k in range(2 * s)]
        out += [self.dequeuer(k) for k in range(2 * s)]
        out += [self.consumer(k) for k in range(3 * s)]
        out += [self.queue_watcher(q) for q in self.queues]
        out += [self.chat_sender(u) for u in self.senders]
        out += [self.subscriber(u, "explicit") for u in self.explicit]
        out += [self.subscriber(u, "auto") for u in self.auto]
        out += [self.recent_writer(u) for u in self.ac_users] + [self.recent_reader(u) for u in self.ac_users]
        out += [self.names_writer(ix) for ix in self.indexes] + [self.names_reader(ix) for ix in self.indexes]
        out += [self.limiter(k) for k in range(3 * s)]
        out += [self.rate_waiter(k) for k in range(2 * s)]
        return out

    async def setup(self, deadline: float = 30.0) -> None:
        """The chats (every sender and subscriber a member of each), created before any fault."""
        members = self.senders + self.explicit + self.auto
        for chat in [] if self.queues_only else self.chats:
            srv, c = 0, self.clients[0]
            end = time.monotonic() + deadline
            while True:
                body = f"{members[0]}|create|{uuid.uuid4().hex}"
                ev = await self.call("setup", "chat.create",
                                     lambda: c.chat.create(members[0], members[1:], body, chat_id=chat), srv,
                                     summary=lambda cid: {"chat_id": cid, "message_id": 1},
                                     chat=chat, sender=members[0], recipients=members[1:], body=body)
                if ev.ok:
                    break
                assert time.monotonic() < end, f"could not create {chat}: {ev.brief()}"
                await asyncio.sleep(0.1)

    # ------------------------------------------------------------ locks and semaphores

    def _lease(self, lease: concord.Lease | None) -> dict[str, Any]:
        if lease is None:
            return {"acquired": False}
        return {"acquired": True, "lease": lease.token, "token": lease.fencing_token,
                "expires": self.mono(lease.expires_at)}

    def _permit(self, permit: concord.Permit | None) -> dict[str, Any]:
        if permit is None:
            return {"acquired": False}
        return {"acquired": True, "permit_id": permit.permit_id, "expires": self.mono(permit.expires_at)}

    async def lock_client(self, k: int) -> None:
        proc, rng = f"lock{k}", self._rng(f"lock{k}")
        srv, c = self._pick()
        while not self.stop.is_set():
            name, ttl, wait = rng.choice(self.locks), rng.choice([0.3, 0.5, 1.0, 2.0]), rng.choice([0, 0.2, 0.5, 1.5])
            lock = c.lock(name, ttl=ttl, owner=proc)
            ev = await self.call(proc, "lock.acquire", lambda: lock.acquire(timeout=wait), srv, summary=self._lease,
                                 name=name, ttl=ttl, wait=wait)
            if not ev.ok:
                await self._backoff(rng)
                continue
            if ev.raw is None:
                await self._think(rng)
                continue
            await self._hold_and_release(proc, rng, srv, lock, ev.raw, "lock", name, ttl, lease=ev.raw.token)

    async def _hold_and_release(self, proc: str, rng: random.Random, srv: int, handle: Any, held: Any, kind: str,
                                name: str, ttl: float, **key: str) -> None:
        for _ in range(rng.choice([0, 0, 1, 2])):
            await asyncio.sleep(ttl * rng.uniform(0.15, 0.5))
            r = await self.call(proc, f"{kind}.refresh", lambda: handle.refresh(held), srv,
                                summary=lambda h: {"expires": self.mono(h.expires_at)}, name=name, ttl=ttl, **key)
            if not r.ok:
                break
        # Now and then hold past the TTL: the lease expires under us and Release says so.
        await asyncio.sleep(ttl * 1.3 if rng.random() < 0.07 else rng.uniform(0, ttl * 0.2))
        await self.call(proc, f"{kind}.release", lambda: handle.release(held), srv, name=name, **key)
        await self._think(rng)

    async def elector(self, k: int) -> None:
        """Campaigns (unary), refreshes and resigns by term: the lock workload's shape,
        recorded as election.acquire/refresh/release with the term as lease and token."""
        proc, rng = f"elector{k}", self._rng(f"elector{k}")
        srv, c = self._pick()
        while not self.stop.is_set():
            name, ttl, wait = rng.choice(self.elections), rng.choice([0.3, 0.5, 1.0, 2.0]), rng.choice([0, 0.5, 1.5])
            e = c.election(name, ttl=ttl, candidate=proc)
            ev = await self.call(proc, "election.acquire", lambda: e.elect(proc.encode(), timeout=wait), srv,
                                 summary=self._term, name=name, ttl=ttl, wait=wait)
            if not ev.ok:
                await self._backoff(rng)
                continue
            if ev.raw is None:
                await self._think(rng)
                continue
            await self._hold_and_release(proc, rng, srv, _ByTerm(e), ev.raw, "election", name, ttl,
                                         lease=str(ev.raw.term))

    async def rw_client(self, k: int) -> None:
        """Read-write locks: mostly readers, some writers, refreshes and releases."""
        proc, rng = f"rw{k}", self._rng(f"rw{k}")
        srv, c = self._pick()
        while not self.stop.is_set():
            name, ttl, wait = rng.choice(self.rwlocks), rng.choice([0.3, 0.5, 1.0, 2.0]), rng.choice([0, 0.2, 0.5, 1.5])
            mode = rng.choice(["read", "read", "write"])
            rw = c.rwlock(name, ttl=ttl, owner=proc)
            ev = await self.call(proc, "rw.acquire", lambda: rw.acquire(mode, timeout=wait), srv, summary=self._lease,
                                 name=name, ttl=ttl, wait=wait, mode=mode)
            if not ev.ok:
                await self._backoff(rng)
                continue
            if ev.raw is None:
                await self._think(rng)
                continue
            await self._hold_and_release(proc, rng, srv, rw, ev.raw, "rw", name, ttl, lease=ev.raw.token)

    def _term(self, won: concord.Leadership | None) -> dict[str, Any]:
        if won is None:
            return {"acquired": False}
        return {"acquired": True, "lease": str(won.term), "token": won.term, "expires": self.mono(won.expires_at)}

    async def election_observer(self, k: int) -> None:
        """Observe, resuming after reconnects: each change is a note (position, term, gap)."""
        proc = f"observer{k}"
        srv, c = k % len(self.clients), self.clients[k % len(self.clients)]
        name = self.elections[0]
        async with c.election(name).observe() as changes:
            closer = asyncio.create_task(self.stop.wait())
            closer.add_done_callback(lambda _: changes.close())
            try:
                async for change in changes:
                    self.h.note(proc, "election.observe.change", server=srv, name=name, position=change.position,
                                term=change.leader.term if change.leader else 0, gap=change.gap)
            except concord.ConcordError as exc:  # the stream was refused (not UNAVAILABLE): recorded, not fatal
                self.h.note(proc, "election.observe.error", server=srv, name=name, reason=exc.reason)
            finally:
                closer.cancel()

    async def sem_client(self, k: int) -> None:
        proc, rng = f"sem{k}", self._rng(f"sem{k}")
        srv, c = self._pick()
        while not self.stop.is_set():
            name, ttl, wait = rng.choice(self.sems), rng.choice([0.3, 0.5, 1.0, 2.0]), rng.choice([0, 0.2, 0.5, 1.5])
            permits = rng.choice([1, 1, 2])
            sem = c.semaphore(name, limit=SEM_LIMIT, permits=permits, ttl=ttl, owner=proc)
            ev = await self.call(proc, "sem.acquire", lambda: sem.acquire(timeout=wait), srv, summary=self._permit,
                                 name=name, limit=SEM_LIMIT, permits=permits, ttl=ttl, wait=wait)
            if not ev.ok:
                await self._backoff(rng)
                continue
            if ev.raw is None:
                await self._think(rng)
                continue
            await self._hold_and_release(proc, rng, srv, sem, ev.raw, "sem", name, ttl, permit_id=ev.raw.permit_id)

    async def holder(self, kind: str, k: int) -> None:
        """Hold streams: ACQUIRED, REFRESHED ... until this holder closes the stream."""
        proc, rng = f"{kind}hold{k}", self._rng(f"{kind}hold{k}")
        srv, c = self._pick()
        while not self.stop.is_set():
            ttl, wait = rng.choice([0.6, 1.0, 2.0]), rng.choice([0.3, 0.5, 1.5])
            if kind == "lock":
                name = rng.choice(self.locks)
                args = dict(name=name, ttl=ttl, wait=wait)
                call = c._service("lock").open("Hold")(lock_pb2.HoldRequest(
                    name=name, ttl=duration(ttl), wait_timeout=duration(wait), owner=proc))
            else:
                name, permits = rng.choice(self.sems), rng.choice([1, 2])
                args = dict(name=name, ttl=ttl, wait=wait, limit=SEM_LIMIT, permits=permits)
                call = c._service("semaphore").open("Hold")(semaphore_pb2.HoldRequest(
                    name=name, limit=SEM_LIMIT, permits=permits, ttl=duration(ttl), wait_timeout=duration(wait),
                    owner=proc))
            ok = await self._hold(proc, kind, srv, call, wait, rng.uniform(0.1, 1.5), args)
            await (self._think(rng) if ok else self._backoff(rng))

    async def _hold(self, proc: str, kind: str, srv: int, call: Any, wait: float, hold_for: float,
                    args: dict[str, Any]) -> bool:
        ev = self.h.invoke(proc, f"{kind}.hold", server=srv, **args)
        q: asyncio.Queue = asyncio.Queue()
        pump = asyncio.create_task(_pump(call, q))
        loop = asyncio.get_running_loop()
        give_up = loop.time() + wait + CALL_TIMEOUT
        acquired_at: float | None = None
        try:
            while True:
                now = loop.time()
                if acquired_at is None:
                    left = give_up - now
                    if left <= 0:
                        self.h.fail(ev, code="CLIENT_TIMEOUT", message=f"no answer within wait + {CALL_TIMEOUT}s")
                        return False
                else:
                    left = acquired_at + hold_for - now
                    if left <= 0 or self.stop.is_set():
                        break
                item = await _next(q, min(left, 0.5))
                if item is None:
                    continue
                what, msg = item
                if what == "msg":
                    expires = msg.expires_at.ToNanoseconds() / 1e9 if msg.HasField("expires_at") else None
                    note = {"kind": _EVENTS.get(msg.event, str(msg.event)), "expires": self.h.to_mono(expires)}
                    if kind == "lock":
                        note.update(lease=msg.lease, token=msg.fencing_token)
                    else:
                        note["permit_id"] = msg.permit_id
                    if note["kind"] == "acquired" and acquired_at is not None:
                        note["kind"] = "acquired-again"  # never expected; the checker ignores it
                    self.h.note(proc, f"{kind}.hold.event", server=srv, parent=ev.id, **note)
                    if note["kind"] == "acquired":
                        acquired_at = loop.time()
                elif what == "end":
                    self.h.ok(ev, {"ended": "by the server"})
                    return acquired_at is not None
                else:
                    self.h.fail(ev, msg)
                    return False
            self.h.note(proc, f"{kind}.hold.close", server=srv, parent=ev.id)
            call.cancel()
            self.h.ok(ev, {"closed": True})
            return True
        finally:
            if ev.outcome == "pending":
                self.h.fail(ev, code="CLIENT_CANCELLED", message="the harness stopped")
            call.cancel()
            await _stop_pump(pump)

    # ------------------------------------------------------------ queues

    def _tasks(self, tasks: list[concord.Task]) -> dict[str, Any]:
        return {"tasks": [self._task(t) for t in tasks]}

    def _task(self, t: concord.Task) -> dict[str, Any]:
        return {"queue": t.queue, "task_id": t.task_id, "lease": t.lease, "attempt": t.attempt,
                "max_attempts": t.max_attempts,
                "payload": t.payload.decode(errors="replace"), "lease_expires": self.mono(t.lease_expires_at)}

    async def producer(self, k: int) -> None:
        proc, rng = f"producer{k}", self._rng(f"producer{k}")
        srv, c = self._pick()
        while not self.stop.is_set():
            qname = rng.choice(self.queues)
            specs = [{"payload": f"{proc}|{uuid.uuid4().hex}", "priority": rng.randint(0, 2),
                      "delay": rng.choice([None, None, None, 0.1]), "max_attempts": rng.choice([1, 1, 2, 3, 5])}
                     for _ in range(rng.randint(1, 4))]
            batch = [concord.NewTask("t", s["payload"], priority=s["priority"], delay=s["delay"],
                                     max_attempts=s["max_attempts"]) for s in specs]
            ev = await self.call(proc, "queue.enqueue", lambda: c.queue(qname).put_many(batch), srv,
                                 summary=lambda rs: {"task_ids": [r.task_id for r in rs]}, queue=qname, tasks=specs)
            await (self._think(rng, 0.02, 0.1) if ev.ok else self._backoff(rng))

    async def _settle(self, proc: str, rng: random.Random, srv: int, settler: Any, task: concord.Task,
                      roll: float, **kw: Any) -> Event:
        key = dict(queue=task.queue, task_id=task.task_id, lease=task.lease, attempt=task.attempt)
        if roll < 0.35:
            retry = rng.choice([0.0, 0.1])
            return await self.call(proc, "queue.nack", lambda: settler.nack(task, "flaky", retry_delay=retry), srv,
                                   retry_delay=retry, **key, **kw)
        return await self.call(proc, "queue.ack", lambda: settler.ack(task), srv, **key, **kw)

    async def _late(self, rng: random.Random, lease_ttl: float) -> None:
        """Now and then the work takes most of the lease: the lease must still be the
        holder's when it settles, however its stream or Redis fared meanwhile."""
        if rng.random() < LATE_SETTLE:
            await asyncio.sleep(lease_ttl * rng.uniform(0.3, 0.9))

    async def dequeuer(self, k: int) -> None:
        proc, rng = f"dequeuer{k}", self._rng(f"dequeuer{k}")
        srv, c = self._pick()
        while not self.stop.is_set():
            # Often two queues and room for several tasks: a claim that leases from the
            # first and then fails on the second must still deliver what it leased.
            names, n = rng.sample(self.queues, rng.choice([1, 2, 2])), rng.randint(1, 4)
            lease_ttl, wait = rng.choice([1.0, 2.0]), rng.choice([0, 0.5, 1.5])
            ev = await self.call(proc, "queue.dequeue",
                                 lambda: c.dequeue(names, n, lease_ttl=lease_ttl, timeout=wait), srv,
                                 summary=self._tasks, queue=names[0], queues=names, max=n, lease_ttl=lease_ttl,
                                 wait=wait)
            if not ev.ok:
                await self._backoff(rng)
                continue
            for task in ev.raw:
                await self._think(rng, 0, 0.05)
                roll = rng.random()
                if roll < 0.15:
                    continue  # crash: forget the task, its lease runs out
                await self._late(rng, lease_ttl)
                await self._settle(proc, rng, srv, c.queue(task.queue), task, roll)
            await self._think(rng)

    async def consumer(self, k: int) -> None:
        """Consume streams over two or three queues, each on a channel of its own
        (closing the channel with tasks held is a consumer process vanishing), reopened
        every 1-4 s. A task is recorded when it arrives (``_consume_pump``); the
        consumer gets to it after the ones before it, settles it over the stream, or
        by unary call on its lease when the stream has ended meanwhile."""
        proc, rng = f"consumer{k}", self._rng(f"consumer{k}")
        srv, c = self._pick()
        loop = asyncio.get_running_loop()
        while not self.stop.is_set():
            names = rng.sample(self.queues, rng.choice([2, 2, 3]))
            # Mostly several credits: a claim that fails while the stream holds tasks.
            lease_ttl, prefetch = rng.choice([1.0, 1.5, 2.0]), rng.choice([1, 2, 3, 4, 4])
            client = self._client(srv)
            stream = AsyncConsumer(client, names, lease_ttl=lease_ttl, prefetch=prefetch)
            ev = self.h.invoke(proc, "queue.consume", server=srv, queue=names[0], queues=names,
                               lease_ttl=lease_ttl, prefetch=prefetch)
            q: asyncio.Queue = asyncio.Queue()
            pump = asyncio.create_task(self._consume_pump(proc, srv, ev, stream, q))
            session_end = loop.time() + rng.uniform(1.0, 4.0)
            how = "graceful"
            try:
                while not self.stop.is_set() and loop.time() < session_end:
                    item = await _next(q, min(0.5, session_end - loop.time()))
                    if item is None:
                        continue
                    what, task = item
                    if what == "end":
                        how = "ended"
                        self.h.ok(ev, {"ended": "by the server"})
                        break
                    if what == "error":
                        how = "failed"
                        self.h.fail(ev, task)
                        break
                    await self._think(rng, 0, 0.05)
                    roll = rng.random()
                    if roll < 0.02:
                        how = "crash"
                        break
                    await self._late(rng, lease_ttl)
                    if roll < 0.07:
                        await self.call(proc, "queue.release", lambda: stream.release(task), srv, queue=task.queue,
                                        task_id=task.task_id, lease=task.lease, attempt=task.attempt)
                        continue
                    # Once the stream has ended the lease is still ours until it expires:
                    # settle it by unary call (as the Worker does), once the server answers.
                    if not _ended(stream):
                        done = await self._settle(proc, rng, srv, stream, task, roll, via="stream", parent=ev.id)
                        if not (done.failed and done.reason != "TASK_LEASE_NOT_HELD" and _ended(stream)):
                            continue
                    await self._reachable(proc, srv, c, task)
                    await self._settle(proc, rng, srv, _Once(c.queue(task.queue)), task, roll, via="once")
                if how in ("graceful", "crash"):
                    self.h.note(proc, "queue.consume.close", server=srv, parent=ev.id, how=how)
                    if how == "graceful":
                        await stream.close()
                        # What arrived before the server saw the half-close is recorded too.
                        await asyncio.wait([pump], timeout=2.0)
                    await client.close()  # a crash: the channel goes, tasks held and all
                    self.h.ok(ev, {"closed": how})
            finally:
                if ev.outcome == "pending":
                    self.h.fail(ev, code="CLIENT_CANCELLED", message="the harness stopped")
                await client.close()
                await _stop_pump(pump)
            await (self._backoff(rng) if how == "failed" else self._think(rng))

    async def _reachable(self, proc: str, srv: int, c: concord.AsyncClient, task: concord.Task) -> None:
        """Waits (until the task's lease expires at most) for its queue to answer a Stats
        call: a settle sent while Redis is down would fail UNAVAILABLE and say nothing."""
        expires = self.mono(task.lease_expires_at)
        while expires is None or time.monotonic() < expires:
            ev = await self.call(proc, "queue.stats", lambda: c.queue(task.queue).stats(), srv,
                                 summary=lambda st: {"ready": st.ready}, queue=task.queue)
            if ev.ok:
                return
            await asyncio.sleep(0.05)

    async def queue_watcher(self, qname: str) -> None:
        """Records when the server leased each task of ``qname`` and at which attempt
        (WatchQueue from the oldest event kept, resuming after reconnects), so the
        dead-task rule can tell when a lease no client saw was taken; a gap is noted."""
        proc = f"watch-{qname}"
        async with self.clients[0].queue(qname).watch(from_oldest=True) as events:
            closer = asyncio.create_task(self.stop.wait())
            closer.add_done_callback(lambda _: events.close())
            try:
                async for e in events:
                    if e.kind == "leased":
                        self.h.note(proc, "queue.event.leased", server=0, queue=qname, task_id=e.task_id,
                                    attempt=e.attempt, when=self.mono(e.at))
                    elif e.kind == "gap":
                        self.h.note(proc, "queue.event.gap", server=0, queue=qname)
            except concord.ConcordError as exc:  # refused (not UNAVAILABLE): recorded, not fatal
                self.h.note(proc, "queue.event.gap", server=0, queue=qname, reason=exc.reason)
            finally:
                closer.cancel()

    async def _consume_pump(self, proc: str, srv: int, ev: Event, stream: AsyncConsumer, out: asyncio.Queue) -> None:
        """Copies a Consume stream into ``out`` like _pump, recording each task as it
        arrives (its lease is held from then, whether the consumer has got to it or
        not) and the stream's end as the client saw it."""

        def arrived(kind: str, item: Any) -> None:
            if kind == "msg":
                self.h.note(proc, "queue.consume.task", server=srv, parent=ev.id, **self._task(item))
            else:
                self.h.note(proc, "queue.consume.end", server=srv, parent=ev.id, how=kind,
                            error=type(item).__name__ if item is not None else None)

        await _pump(stream, out, arrived)

    # ------------------------------------------------------------ chat

    async def chat_sender(self, user: str) -> None:
        proc, rng = f"sender-{user}", self._rng(f"sender-{user}")
        srv, c = self._pick()
        while not self.stop.is_set():
            chat, body = rng.choice(self.chats), f"{user}|{uuid.uuid4().hex}"
            ev = await self.call(proc, "chat.send", lambda: c.chat.send(chat, user, body), srv,
                                 summary=lambda mid: {"message_id": mid}, chat=chat, sender=user, body=body)
            await (self._think(rng, 0.02, 0.1) if ev.ok else self._backoff(rng))

    async def subscriber(self, user: str, mode: str) -> None:
        proc, rng = f"sub-{user}", self._rng(f"sub-{user}")
        srv, c = self._pick()
        while not self.stop.is_set():
            ok = await self._subscription(proc, rng, srv, c, user, mode, rng.uniform(1.0, 5.0))
            await (self._think(rng) if ok else self._backoff(rng))

    async def _subscription(self, proc: str, rng: random.Random | None, srv: int, c: concord.AsyncClient,
                            user: str, mode: str, seconds: float, final: bool = False) -> bool:
        """One Subscribe stream for ``seconds`` (a final one: until caught up and quiet).
        Explicit mode acks each message; a random subscriber sometimes drops the stream,
        before acking or after."""
        loop = asyncio.get_running_loop()
        sub = c.chat.subscribe(user, ack_mode=mode)
        ev = self.h.invoke(proc, "chat.subscribe", server=srv, user=user, mode=mode, final=final)
        q: asyncio.Queue = asyncio.Queue()
        pump = asyncio.create_task(_pump(sub, q))
        end = loop.time() + seconds
        noted_caught_up = False
        quiet_since = loop.time()
        try:
            while loop.time() < end and (final or not self.stop.is_set()):
                if sub.caught_up and not noted_caught_up:
                    noted_caught_up = True
                    self.h.note(proc, "chat.caught_up", server=srv, parent=ev.id)
                if final and noted_caught_up and q.empty() and loop.time() - quiet_since > 0.5:
                    break
                item = await _next(q, min(0.2, end - loop.time()))
                if item is None:
                    continue
                quiet_since = loop.time()
                what, msg = item
                if what == "end":
                    self.h.ok(ev, {"ended": "by the server"})
                    return False
                if what == "error":
                    self.h.fail(ev, msg)
                    return False
                if isinstance(msg, concord.Gap):
                    self.h.note(proc, "chat.gap", server=srv, parent=ev.id, chat=msg.chat_id,
                                first_available_id=msg.first_available_id)
                    continue
                self.h.note(proc, "chat.deliver", server=srv, parent=ev.id, chat=msg.chat_id,
                            message_id=msg.message_id, sender=msg.sender, body=msg.body)
                if mode == "explicit":
                    if rng is not None and rng.random() < 0.04:
                        break  # "crash" before acking: it must come again
                    await self.call(proc, "chat.ack", lambda: c.chat.ack(user, msg.chat_id, msg.message_id), srv,
                                    user=user, chat=msg.chat_id, up_to=msg.message_id)
                if rng is not None and rng.random() < 0.03:
                    break  # disconnect
            self.h.note(proc, "chat.subscribe.close", server=srv, parent=ev.id)
            sub.close()
            self.h.ok(ev, {"closed": True, "caught_up": noted_caught_up})
            return True
        finally:
            if ev.outcome == "pending":
                self.h.fail(ev, code="CLIENT_CANCELLED", message="the harness stopped")
            sub.close()
            await _stop_pump(pump)

    # ------------------------------------------------------------ autocomplete

    async def recent_writer(self, user: str) -> None:
        proc, rng = f"recentw-{user}", self._rng(f"recentw-{user}")
        srv, c = self._pick()
        pool = [f"{rng.choice(LETTERS)}{i}-{user}" for i in range(20)]
        while not self.stop.is_set():
            contact = rng.choice(pool)
            ev = await self.call(proc, "ac.add_recent", lambda: c.autocomplete.add_recent(user, contact), srv,
                                 summary=lambda size: {"size": size}, user=user, contact=contact)
            await (self._think(rng, 0.02, 0.1) if ev.ok else self._backoff(rng))

    async def _read_recent(self, proc: str, srv: int, c: concord.AsyncClient, user: str, prefix: str) -> Event:
        return await self.call(proc, "ac.suggest_recent", lambda: c.autocomplete.suggest_recent(user, prefix, 1000),
                               srv, summary=lambda cs: {"contacts": list(cs)}, user=user, prefix=prefix)

    async def recent_reader(self, user: str) -> None:
        proc, rng = f"recentr-{user}", self._rng(f"recentr-{user}")
        srv, c = self._pick()
        while not self.stop.is_set():
            ev = await self._read_recent(proc, srv, c, user, rng.choice(["", *LETTERS]))
            await (self._think(rng, 0.02, 0.1) if ev.ok else self._backoff(rng))

    async def limiter(self, k: int) -> None:
        """Checks on one shared GCRA key from every server (RATE_LIMIT below): the
        checker counts what was allowed in every window (ratelimit_within_limit)."""
        proc, rng = f"limiter{k}", self._rng(f"limiter{k}")
        srv, c = self._pick()
        key, (rate, per, burst) = "rl-a", RATE_LIMIT
        limit = c.rate_limit(key, rate, per, burst=burst)
        while not self.stop.is_set():
            hits = rng.choice([1, 1, 1, 2])
            ev = await self.call(proc, "ratelimit.check", lambda: limit.check(hits), srv,
                                 summary=lambda d: {"allowed": d.allowed, "remaining": d.remaining},
                                 key=key, rate=rate, per=per, burst=burst, hits=hits)
            await (self._think(rng, 0.005, 0.03) if ev.ok else self._backoff(rng))

    async def rate_waiter(self, k: int) -> None:
        """Waits (RateLimitService.Wait, in the server, FIFO) on one shared key from every
        server: what they were allowed counts against the key's limit
        (ratelimit_within_limit), and each answers within its wait + slack
        (blocked_calls_answer_in_time), whatever Redis does meanwhile."""
        proc, rng = f"ratewaiter{k}", self._rng(f"ratewaiter{k}")
        srv, c = self._pick()
        key, (rate, per, burst) = "rl-w", RATE_WAIT
        limit = c.rate_limit(key, rate, per, burst=burst)

        async def wait_once() -> bool:
            try:
                return (await limit.wait(1, timeout=RATE_WAIT_S)).allowed
            except concord.RateLimitTimeout:
                return False

        while not self.stop.is_set():
            ev = await self.call(proc, "ratelimit.wait", wait_once, srv, summary=lambda ok: {"allowed": ok},
                                 key=key, rate=rate, per=per, burst=burst, hits=1, wait=RATE_WAIT_S)
            await (self._think(rng, 0.0, 0.05) if ev.ok else self._backoff(rng))

    async def names_writer(self, index: str) -> None:
        proc, rng = f"namesw-{index}", self._rng(f"namesw-{index}")
        srv, c = self._pick()
        mine = self.names[index]
        while not self.stop.is_set():
            if len(mine) < NAMES_CAP:
                batch = [f"{rng.choice(LETTERS)}{uuid.uuid4().hex[:10]}" for _ in range(rng.randint(1, 3))]
                mine += batch
            else:
                batch = rng.sample(mine, 2)  # known names again: no change
            ev = await self.call(proc, "ac.add_names", lambda: c.autocomplete.add_names(index, batch), srv,
                                 summary=lambda n: {"added": n}, index=index, names=batch)
            await (self._think(rng, 0.02, 0.1) if ev.ok else self._backoff(rng))

    async def _read_names(self, proc: str, srv: int, c: concord.AsyncClient, index: str, prefix: str,
                          count: bool) -> Event:
        if count:
            return await self.call(proc, "ac.count", lambda: c.autocomplete.count(index, prefix), srv,
                                   summary=lambda n: {"count": n}, index=index, prefix=prefix)
        return await self.call(proc, "ac.suggest", lambda: c.autocomplete.suggest(index, prefix, 1000), srv,
                               summary=lambda ss: {"names": [s.name for s in ss]}, index=index, prefix=prefix)

    async def names_reader(self, index: str) -> None:
        proc, rng = f"namesr-{index}", self._rng(f"namesr-{index}")
        srv, c = self._pick()
        while not self.stop.is_set():
            ev = await self._read_names(proc, srv, c, index, rng.choice(["", *LETTERS]), rng.random() < 0.5)
            await (self._think(rng, 0.02, 0.1) if ev.ok else self._backoff(rng))

    # ------------------------------------------------------------ after quiesce

    async def final(self, deadline: float = 30.0) -> list[str]:
        """The final reads (all recorded, process "final"); returns what could not be done."""
        problems: list[str] = []
        end = time.monotonic() + deadline
        c, srv = self.clients[0], 0
        for qname in self.queues:
            if not await self._drain(c, srv, qname, end):
                problems.append(f"queue {qname!r} did not drain before the deadline")
            for op, fn, summary in (
                ("queue.final_dead", lambda: self._all_dead(c, qname),
                 lambda dead: {"task_ids": [t for t, _ in dead], "attempts": dict(dead)}),
                ("queue.final_stats", lambda: c.queue(qname).stats(),
                 lambda s: {"ready": s.ready, "delayed": s.delayed, "leased": s.leased, "dead": s.dead}),
            ):
                if not await self._until_ok(lambda: self.call("final", op, fn, srv, summary=summary, queue=qname), end):
                    problems.append(f"{op} {qname!r} failed until the deadline")
        if self.queues_only:
            return problems
        for user in self.explicit:
            ok = False
            while not ok and time.monotonic() < end:
                left = min(10.0, end - time.monotonic())
                ok = await self._subscription("final", None, srv, c, user, "explicit", left, final=True)
            if not ok:
                problems.append(f"final subscription of {user} failed until the deadline")
        for chat in self.chats:
            after = 0
            while time.monotonic() < end:
                ev = await self.call("final", "chat.history", lambda: c.chat.history(chat, after=after, limit=1000),
                                     srv, summary=lambda ms: {"messages": [
                                         {"message_id": m.message_id, "sender": m.sender, "body": m.body}
                                         for m in ms]}, chat=chat, after=after)
                if ev.ok and not ev.raw:
                    break
                if ev.code == "NOT_FOUND":
                    # The chat itself is gone: a failover without replica acks promoted a
                    # replica that never had it. Nothing more to read; what it held is
                    # judged by the rules (explicit members never receive it: loss, or a
                    # violation with acks), not by retrying until the deadline.
                    break
                if ev.ok:
                    after = ev.raw[-1].message_id
                else:
                    await asyncio.sleep(0.1)
            else:
                problems.append(f"history of {chat!r} not read before the deadline")
        for user in self.ac_users:
            for prefix in ["", *LETTERS]:
                await self._until_ok(lambda: self._read_recent("final", srv, c, user, prefix), end)
        for index in self.indexes:
            for prefix in ["", *LETTERS]:
                for count in (False, True):
                    await self._until_ok(lambda: self._read_names("final", srv, c, index, prefix, count), end)
        return problems

    async def _until_ok(self, attempt: Callable[[], Awaitable[Event]], end: float) -> bool:
        while time.monotonic() < end:
            if (await attempt()).ok:
                return True
            await asyncio.sleep(0.1)
        return False

    async def _all_dead(self, c: concord.AsyncClient, qname: str) -> list[tuple[str, int]]:
        """(task id, the attempt it died at) of every dead task."""
        dead: list[tuple[str, int]] = []
        while True:
            page = await c.queue(qname).dead(limit=1000, offset=len(dead))
            dead += [(t.task_id, t.attempt) for t in page]
            if len(page) < 1000:
                return dead

    async def _drain(self, c: concord.AsyncClient, srv: int, qname: str, end: float) -> bool:
        """Dequeues and acks until nothing is ready, delayed or leased (leases of crashed
        workers run out meanwhile)."""
        while time.monotonic() < end:
            ev = await self.call("final", "queue.dequeue", lambda: c.dequeue([qname], 20, lease_ttl=10, timeout=0.5),
                                 srv, summary=self._tasks, queue=qname, max=20, lease_ttl=10, wait=0.5)
            if not ev.ok:
                await asyncio.sleep(0.1)
                continue
            # A batch's settles together: with replica acks their changes share one WAIT
            # (one after another, a long run's backlog outlasted the deadline).
            await asyncio.gather(*(self._settle("final", random.Random(0), srv, c.queue(task.queue), task, 1.0)
                                   for task in ev.raw))
            if ev.raw:
                continue
            st = await self.call("final", "queue.stats", lambda: c.queue(qname).stats(), srv,
                                 summary=lambda s: {"ready": s.ready, "delayed": s.delayed, "leased": s.leased},
                                 queue=qname)
            if st.ok and st.raw.ready + st.raw.delayed + st.raw.leased == 0:
                return True
        return False


def client_retries() -> bool:
    """Whether this concord client library retries calls on UNAVAILABLE (concord._retry):
    the checker then reads some answers differently (checker.RETRIED_OPS)."""
    return hasattr(Service, "call_safe")


async def lag_monitor(history: History, stop: asyncio.Event, period: float = 0.05, threshold: float = 0.02) -> None:
    """Records each time this process's event loop ran a timer late by more than
    ``threshold``: the blocked-call rule does not blame the server for those."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        due = loop.time() + period
        await asyncio.sleep(period)
        late = loop.time() - due
        if late > threshold:
            history.note("harness", "harness.lag", lag=round(late, 4))
