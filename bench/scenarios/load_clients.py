"""The client side of the load scenario: one process opens its share of every kind of
blocked call and stream, over a few grpc.aio channels with the generated stubs, and
on command releases them all and counts what completed.

Resource i of a kind (a lock, a semaphore, a queue, a chat, a file group) belongs to
process i mod nprocs, with every call on it: a lock's Hold stream and its waiters are
in one process. Call k of a process goes out on channel k mod channels.

  hold       Hold stream on lock i (acquired at once); open when ACQUIRED arrives
  subscribe  Subscribe stream (ack mode auto) of each member of chat i; open at caught_up
  consume    Consume streams on consume-queue i (credits 1, the queue empty); open: see
             ``_barrier``
  download   one Upload stream on group i, sent its header and exactly one chunk and
             then kept open, and Download streams (lines) of that file in progress;
             open when the first lines arrive (then they wait for the rest)
  lock       Acquire calls on lock i, held by its Hold stream; open when Describe
             counts them all queued
  semaphore  Acquire calls (1 permit) on semaphore i, whose permits the process took
             at setup; open when Describe counts them all queued
  dequeue    Dequeue calls (1 task) on empty queue i; open: see ``_barrier``

Release: the Hold streams are cancelled (the server lets their locks go), the
semaphores' permits released, each queue gets one task per waiter (one Enqueue), each
chat one message, each upload its second chunk and end. Lock and semaphore waiters
release what they are granted at once, Dequeue and Consume ack their task, so every
call ends by itself; the report counts those that ended as they should.

Protocol with the parent (load.py) over a Pipe: child "ready" (after a warm-up round
of the whole cycle at a small size and the setup), parent ("open", kind) -> child
("opened", kind, calls), parent ("release",) -> child ("released", report); on any
failure the child sends ("error", traceback) instead.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from collections import Counter
from dataclasses import dataclass
from multiprocessing.connection import Connection

import grpc

from concord._convert import duration
from concord.chat.v1 import chat_pb2, chat_pb2_grpc
from concord.files.v1 import files_pb2, files_pb2_grpc
from concord.lock.v1 import lock_pb2, lock_pb2_grpc
from concord.queue.v1 import queue_pb2, queue_pb2_grpc
from concord.semaphore.v1 import semaphore_pb2, semaphore_pb2_grpc

STREAM_KINDS = ("hold", "subscribe", "consume", "download")
BLOCKED_KINDS = ("lock", "semaphore", "dequeue")
KINDS = STREAM_KINDS + BLOCKED_KINDS  # opening order: the Hold streams hold the locks the Acquires wait for
WAIT_S = 600.0  # wait_timeout of blocked calls: longer than a whole run, nobody may give up
HOLD_TTL_S = 60.0
FILL_TTL_S = 900.0  # the permits that keep the semaphores full
OPEN_TIMEOUT = 180.0
RELEASE_TIMEOUT = 300.0
LINE = 16  # bytes per line of the uploaded files: "line 0000000042\n"
# Each channel gets its own TCP connection (by default equal channels share one).
CHANNEL_OPTIONS = [("grpc.use_local_subchannel_pool", 1)]
RELEASE_BODY = "release"


@dataclass(frozen=True)
class Plan:
    """How many resources of each kind, and how many calls on each."""

    locks: int
    lock_waiters: int
    semaphores: int
    sem_limit: int
    sem_waiters: int
    queues: int
    dequeuers: int
    consume_queues: int
    consumers: int
    chats: int
    members: int
    groups: int
    downloads: int  # per group, besides its one Upload stream

    def shape(self, kind: str) -> tuple[int, int]:
        """(resources, calls per resource) of a kind."""
        return {"hold": (self.locks, 1), "lock": (self.locks, self.lock_waiters),
                "semaphore": (self.semaphores, self.sem_waiters), "dequeue": (self.queues, self.dequeuers),
                "consume": (self.consume_queues, self.consumers), "subscribe": (self.chats, self.members),
                "download": (self.groups, self.downloads + 1)}[kind]

    def calls(self, kind: str, proc: int = 0, nprocs: int = 1) -> int:
        resources, per = self.shape(kind)
        return len(range(proc, resources, nprocs)) * per


@dataclass(frozen=True)
class Spec:
    target: str
    plan: Plan
    warm: Plan  # the warm-up round: the same cycle at a small size, before "ready"
    proc: int
    nprocs: int
    channels: int
    chunk: int  # the server's --file-chunk-size: an upload's first chunk is exactly this


def main(conn: Connection, spec: Spec) -> None:
    from ..harness import _die_with_parent

    _die_with_parent()
    try:
        import uvloop  # as the server: less client CPU on a 2-core machine

        uvloop.run(_main(conn, spec))
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        raise


class Stubs:
    def __init__(self, channel) -> None:
        self.lock = lock_pb2_grpc.LockServiceStub(channel)
        self.sem = semaphore_pb2_grpc.SemaphoreServiceStub(channel)
        self.queue = queue_pb2_grpc.QueueServiceStub(channel)
        self.chat = chat_pb2_grpc.ChatServiceStub(channel)
        self.files = files_pb2_grpc.FileServiceStub(channel)


async def _main(conn: Connection, spec: Spec) -> None:
    channels = [grpc.aio.insecure_channel(spec.target, options=CHANNEL_OPTIONS) for _ in range(spec.channels)]
    stubs = [Stubs(c) for c in channels]
    try:
        warm = Workload(stubs, spec, spec.warm, "warm")
        await warm.setup()
        for kind in KINDS:
            await warm.open(kind)
        report = await warm.release()
        short = {k: r for k, r in report["kinds"].items() if r["completed"] != r["expected"]}
        if short or not all(report["checks"].values()):
            raise RuntimeError(f"the warm-up round did not complete: {short} {report['checks']}")
        load = Workload(stubs, spec, spec.plan, "load")
        await load.setup()
        conn.send("ready")
        while True:
            msg = await asyncio.to_thread(conn.recv)
            if msg[0] == "open":
                conn.send(("opened", msg[1], await load.open(msg[1])))
            elif msg[0] == "release":
                conn.send(("released", await load.release()))
                return
    finally:
        for c in channels:
            await c.close()


def _lines(first: int, count: int) -> bytes:
    return b"".join(b"line %010d\n" % i for i in range(first, first + count))


class Workload:
    """This process's share of one plan, named under ``prefix``."""

    def __init__(self, stubs: list[Stubs], spec: Spec, plan: Plan, prefix: str) -> None:
        self._stubs = stubs
        self._spec = spec
        self.plan = plan
        self._prefix = prefix
        self._next = 0
        self.tasks: dict[str, list[asyncio.Task]] = {k: [] for k in KINDS}
        self._opened: dict[str, list[asyncio.Future]] = {k: [] for k in KINDS}
        self._hold_calls: list = []
        self._releasing = False
        self._release = asyncio.Event()
        self._fill: list[tuple[str, str]] = []  # (semaphore, permit id) keeping the semaphores full
        self._lines = spec.chunk // LINE  # lines per chunk; a file is two chunks

    # -- names and channels --------------------------------------------------------

    def _mine(self, kind: str) -> range:
        return range(self._spec.proc, self.plan.shape(kind)[0], self._spec.nprocs)

    def _name(self, kind: str, i: int) -> str:
        return f"bench:load:{self._prefix}:{kind}:{i}"

    def _user(self, chat: int, member: int) -> str:
        return f"{self._prefix}-c{chat}-m{member}"

    def _stub(self) -> Stubs:
        self._next += 1
        return self._stubs[self._next % len(self._stubs)]

    def _spawn(self, kind: str, coro_fn, *args) -> None:
        """One call as a task; its ``opened`` future fails if the call ends before it is open."""
        opened = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(coro_fn(self._stub(), opened, *args))

        def ended(t: asyncio.Task) -> None:
            if not opened.done():
                exc = None if t.cancelled() else t.exception()
                opened.set_exception(exc or RuntimeError(f"a {kind} call ended before it was open"))
                opened.exception()  # retrieved: open() raises it, if it is still waiting

        task.add_done_callback(ended)
        self.tasks[kind].append(task)
        self._opened[kind].append(opened)

    # -- setup -------------------------------------------------------------------

    async def setup(self) -> None:
        """The chats of subscribers and file groups, and the semaphores' permits."""

        async def chat(chat_id: str, members: list[str]) -> None:
            await self._stub().chat.CreateChat(chat_pb2.CreateChatRequest(
                sender=members[0], recipients=members[1:], message="hello", chat_id=chat_id), timeout=60)

        async def fill(name: str) -> None:
            for _ in range(self.plan.sem_limit):
                got = await self._stub().sem.Acquire(semaphore_pb2.AcquireRequest(
                    name=name, limit=self.plan.sem_limit, permits=1, ttl=duration(FILL_TTL_S)), timeout=60)
                if not got.acquired:
                    raise RuntimeError(f"semaphore {name} was not free at setup")
                self._fill.append((name, got.permit_id))

        await asyncio.gather(
            *(chat(self._name("subscribe", c), [self._user(c, m) for m in range(self.plan.members)])
              for c in self._mine("subscribe")),
            *(chat(self._name("download", g), [f"{self._prefix}-g{g}-sender", f"{self._prefix}-g{g}-worker"])
              for g in self._mine("download")),
            *(fill(self._name("semaphore", s)) for s in self._mine("semaphore")))

    # -- open --------------------------------------------------------------------

    async def open(self, kind: str) -> int:
        """Sends every call of the kind and returns once all are open at the server."""
        await getattr(self, f"_open_{kind}")()
        for opened in self._opened[kind]:
            if not opened.done():  # blocked calls: open by Describe or the barrier
                opened.set_result(None)
        calls = self.tasks[kind]
        if len(calls) != self.plan.calls(kind, self._spec.proc, self._spec.nprocs):
            raise RuntimeError(f"{kind}: opened {len(calls)} calls, planned otherwise")
        return len(calls)

    async def _all_opened(self, kind: str) -> None:
        await asyncio.wait_for(asyncio.gather(*self._opened[kind]), OPEN_TIMEOUT)

    async def _until(self, kind: str, condition) -> None:
        """Polls ``condition()`` until true; a call of the kind that ended meanwhile fails it."""
        deadline = time.monotonic() + OPEN_TIMEOUT
        while not await condition():
            ended = [t for t in self.tasks[kind] if t.done()]
            if ended:
                raise RuntimeError(f"a {kind} call ended before the release") from (
                    None if ended[0].cancelled() else ended[0].exception())
            if time.monotonic() > deadline:
                raise RuntimeError(f"{kind} calls not all queued within {OPEN_TIMEOUT}s")
            await asyncio.sleep(0.05)

    async def _open_hold(self) -> None:
        for i in self._mine("hold"):
            self._spawn("hold", self._hold, self._name("lock", i))
        await self._all_opened("hold")

    async def _open_subscribe(self) -> None:
        for c in self._mine("subscribe"):
            for m in range(self.plan.members):
                self._spawn("subscribe", self._subscriber, self._user(c, m))
        await self._all_opened("subscribe")

    async def _open_consume(self) -> None:
        for q in self._mine("consume"):
            for _ in range(self.plan.consumers):
                self._spawn("consume", self._consumer, self._name("consume", q))
        await self._all_opened("consume")  # each has written its start
        await self._barrier("consume", [self._name("consume", q) for q in self._mine("consume")])

    async def _open_download(self) -> None:
        groups = {g: self._name("download", g) for g in self._mine("download")}
        for g, group in groups.items():
            self._spawn("download", self._uploader, group, f"{self._prefix}-g{g}-sender")

        async def file_of(group: str) -> str:
            deadline = time.monotonic() + OPEN_TIMEOUT
            while True:  # the upload's first chunk is stored once ListFiles shows its size
                got = await self._stub().files.ListFiles(files_pb2.ListFilesRequest(group=group), timeout=60)
                ready = [f.file_id for f in got.files if f.size >= self._spec.chunk]
                if ready:
                    return ready[0]
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the upload to {group} did not store its first chunk")
                await asyncio.sleep(0.05)

        file_ids = await asyncio.gather(*(file_of(group) for group in groups.values()))
        for fid in file_ids:
            for _ in range(self.plan.downloads):
                self._spawn("download", self._downloader, fid)
        await self._all_opened("download")

    async def _open_lock(self) -> None:
        names = [self._name("lock", i) for i in self._mine("lock")]
        for name in names:
            for _ in range(self.plan.lock_waiters):
                self._spawn("lock", self._lock_waiter, name)
        await self._until("lock", lambda: self._all_queued(
            names, lambda stub, name: stub.lock.Describe(lock_pb2.DescribeRequest(name=name), timeout=60),
            self.plan.lock_waiters))

    async def _open_semaphore(self) -> None:
        names = [self._name("semaphore", i) for i in self._mine("semaphore")]
        for name in names:
            for _ in range(self.plan.sem_waiters):
                self._spawn("semaphore", self._sem_waiter, name)
        await self._until("semaphore", lambda: self._all_queued(
            names, lambda stub, name: stub.sem.Describe(semaphore_pb2.DescribeRequest(name=name), timeout=60),
            self.plan.sem_waiters))

    async def _open_dequeue(self) -> None:
        names = [self._name("dequeue", q) for q in self._mine("dequeue")]
        for name in names:
            for _ in range(self.plan.dequeuers):
                self._spawn("dequeue", self._dequeuer, name)
        await self._barrier("dequeue", names)

    async def _all_queued(self, names: list[str], describe, expected: int) -> bool:
        got = await asyncio.gather(*(describe(self._stub(), name) for name in names))
        return all(d.waiters >= expected for d in got)

    async def _barrier(self, kind: str, queues: list[str]) -> None:
        """A blocked Dequeue or Consume leaves no trace outside the server to count, so
        this is the best evidence available that they arrived: a Stats call sent on
        every channel after them has been answered. The server takes calls off a
        connection in order, so each of them has been accepted and started; the one
        step it may still have ahead (its first claim script) was issued before
        Stats's, and both pass through the server's one Redis pipeline in order. A
        call that already ended fails the open."""
        if not queues:
            return
        await asyncio.gather(*(s.queue.Stats(queue_pb2.StatsRequest(queue=queues[0]), timeout=60) for s in self._stubs))
        ended = [t for t in self.tasks[kind] if t.done()]
        if ended:
            raise RuntimeError(f"a {kind} call ended before the release") from (
                None if ended[0].cancelled() else ended[0].exception())

    # -- the calls -----------------------------------------------------------------

    async def _hold(self, stub: Stubs, opened: asyncio.Future, name: str) -> str:
        call = stub.lock.Hold(lock_pb2.HoldRequest(name=name, ttl=duration(HOLD_TTL_S), wait_timeout=duration(10)))
        self._hold_calls.append(call)
        try:
            async for r in call:
                if r.event == lock_pb2.HOLD_EVENT_ACQUIRED:
                    opened.set_result(None)
                elif r.event == lock_pb2.HOLD_EVENT_LOST:
                    raise RuntimeError("a Hold stream lost its lock")
        except asyncio.CancelledError:
            if self._releasing and call.cancelled():
                return "released"
            raise
        raise RuntimeError("a Hold stream ended before the release")

    async def _subscriber(self, stub: Stubs, opened: asyncio.Future, user: str) -> str:
        call = stub.chat.Subscribe(chat_pb2.SubscribeRequest(recipient=user, ack_mode=chat_pb2.ACK_MODE_AUTO))
        try:
            async for r in call:
                if r.caught_up:
                    opened.set_result(None)
                if any(m.body == RELEASE_BODY for m in r.messages):
                    return "delivered"
        finally:
            call.cancel()
        raise RuntimeError("a Subscribe stream ended before the release message")

    async def _consumer(self, stub: Stubs, opened: asyncio.Future, queue: str) -> tuple[str, str]:
        call = stub.queue.Consume()
        try:
            await call.write(queue_pb2.ConsumeRequest(start=queue_pb2.ConsumeStart(
                queues=[queue], lease_ttl=duration(60), credits=1)))
            opened.set_result(None)
            first = await call.read()
            if first.WhichOneof("kind") != "task" or not self._releasing:
                raise RuntimeError(f"a Consume stream got {first.WhichOneof('kind')} before any task was enqueued")
            t = first.task
            await call.write(queue_pb2.ConsumeRequest(
                settle=queue_pb2.Settle(queue=t.queue, task_id=t.task_id, lease=t.lease)))
            settled = await call.read()
            if settled.WhichOneof("kind") != "settled" or settled.settled.error_reason:
                raise RuntimeError(f"a Consume stream's ack was not settled: {settled}")
            await call.done_writing()
            if await call.read() is not grpc.aio.EOF:
                raise RuntimeError("a Consume stream sent more than one task on one credit")
            return t.queue, t.task_id
        finally:
            call.cancel()

    async def _uploader(self, stub: Stubs, opened: asyncio.Future, group: str, sender: str) -> str:
        call = stub.files.Upload()
        await call.write(files_pb2.UploadRequest(
            header=files_pb2.UploadHeader(group=group, sender=sender, name="load.log")))
        await call.write(files_pb2.UploadRequest(data=_lines(0, self._lines)))  # exactly one chunk: stored at once
        opened.set_result(None)  # open() waits for ListFiles to show the chunk
        await self._release.wait()
        await call.write(files_pb2.UploadRequest(data=_lines(self._lines, self._lines)))
        await call.done_writing()
        done = await call
        if done.size != 2 * self._lines * LINE:
            raise RuntimeError(f"upload stored {done.size} bytes")
        return done.file_id

    async def _downloader(self, stub: Stubs, opened: asyncio.Future, fid: str) -> int:
        call = stub.files.Download(files_pb2.DownloadRequest(file_id=fid, lines=True))
        n = 0
        try:
            async for r in call:
                for line in r.lines:
                    if line != b"line %010d" % n:
                        raise RuntimeError(f"download line {n} was {line!r}")
                    n += 1
                if n and not opened.done():
                    opened.set_result(None)  # now waiting for the upload's next chunk
        finally:
            call.cancel()
        if n != 2 * self._lines:
            raise RuntimeError(f"a download got {n} lines of {2 * self._lines}")
        return n

    async def _lock_waiter(self, stub: Stubs, opened: asyncio.Future, name: str) -> tuple[str, float, int]:
        got = await stub.lock.Acquire(lock_pb2.AcquireRequest(
            name=name, ttl=duration(HOLD_TTL_S), wait_timeout=duration(WAIT_S)), timeout=WAIT_S + 30)
        granted = time.monotonic()
        if not got.acquired or not self._releasing:
            raise RuntimeError("a lock waiter was granted before the release" if got.acquired
                               else "a lock waiter gave up")
        await stub.lock.Release(lock_pb2.ReleaseRequest(name=name, lease=got.lease), timeout=60)
        return name, granted, got.fencing_token

    async def _sem_waiter(self, stub: Stubs, opened: asyncio.Future, name: str) -> str:
        got = await stub.sem.Acquire(semaphore_pb2.AcquireRequest(
            name=name, limit=self.plan.sem_limit, permits=1, ttl=duration(HOLD_TTL_S),
            wait_timeout=duration(WAIT_S)), timeout=WAIT_S + 30)
        if not got.acquired or not self._releasing:
            raise RuntimeError("a semaphore waiter was granted before the release" if got.acquired
                               else "a semaphore waiter gave up")
        await stub.sem.Release(semaphore_pb2.ReleaseRequest(name=name, permit_id=got.permit_id), timeout=60)
        return got.permit_id

    async def _dequeuer(self, stub: Stubs, opened: asyncio.Future, queue: str) -> tuple[str, str]:
        got = await stub.queue.Dequeue(queue_pb2.DequeueRequest(
            queues=[queue], max_tasks=1, lease_ttl=duration(60), wait_timeout=duration(WAIT_S)),
            timeout=WAIT_S + 30)
        if len(got.tasks) != 1 or not self._releasing:
            raise RuntimeError(f"a Dequeue returned {len(got.tasks)} tasks"
                               + ("" if self._releasing else " before the release"))
        t = got.tasks[0]
        await stub.queue.Ack(queue_pb2.AckRequest(queue=t.queue, task_id=t.task_id, lease=t.lease), timeout=60)
        return t.queue, t.task_id

    # -- release -------------------------------------------------------------------

    async def release(self) -> dict:
        """Lets everything go, waits until every call has ended, and reports."""
        self._releasing = True
        t0 = time.monotonic()
        self._release.set()  # the uploads send their second chunk

        async def enqueue(queue: str, n: int) -> None:
            tasks = [queue_pb2.NewTask(type="load", payload=b"%d" % i) for i in range(n)]
            await self._stub().queue.Enqueue(queue_pb2.EnqueueRequest(queue=queue, tasks=tasks), timeout=60)

        for call in self._hold_calls:
            call.cancel()  # the server lets the lock go: its first waiter is granted
        await asyncio.gather(
            *(self._stub().sem.Release(semaphore_pb2.ReleaseRequest(name=n, permit_id=p), timeout=60)
              for n, p in self._fill),
            *(enqueue(self._name("dequeue", q), self.plan.dequeuers) for q in self._mine("dequeue")),
            *(enqueue(self._name("consume", q), self.plan.consumers) for q in self._mine("consume")),
            *(self._stub().chat.SendMessage(chat_pb2.SendMessageRequest(
                chat_id=self._name("subscribe", c), sender=self._user(c, 0), body=RELEASE_BODY), timeout=60)
              for c in self._mine("subscribe")))
        every = [t for tasks in self.tasks.values() for t in tasks]
        await asyncio.wait(every, timeout=RELEASE_TIMEOUT)
        t1 = time.monotonic()
        for t in every:
            t.cancel()
        await asyncio.gather(*every, return_exceptions=True)
        return {"kinds": {k: self._tally(k) for k in KINDS}, "checks": await self._checks(),
                "release_s": t1 - t0, "t0": t0, "t1": t1}

    def _tally(self, kind: str) -> dict:
        errors: Counter[str] = Counter()
        completed = 0
        for t in self.tasks[kind]:
            if t.cancelled():
                errors["not finished by the deadline"] += 1
            elif t.exception() is not None:
                errors[f"{type(t.exception()).__name__}: {str(t.exception())[:200]}"] += 1
            else:
                completed += 1
        return {"expected": self.plan.calls(kind, self._spec.proc, self._spec.nprocs), "completed": completed,
                "errors": dict(errors)}

    async def _checks(self) -> dict:
        """What must hold beyond every call having ended well."""
        def results(kind: str) -> list:
            return [t.result() for t in self.tasks[kind] if t.done() and not t.cancelled() and not t.exception()]

        grants: dict[str, list[tuple[float, int]]] = {}
        for name, at, fence in results("lock"):
            grants.setdefault(name, []).append((at, fence))
        fences_ok = all([f for _, f in sorted(g)] == sorted({f for _, f in g}) for g in grants.values())
        dequeued, consumed = results("dequeue"), results("consume")
        queues = [self._name("dequeue", q) for q in self._mine("dequeue")] + \
                 [self._name("consume", q) for q in self._mine("consume")]
        stats = await asyncio.gather(*(self._stub().queue.Stats(queue_pb2.StatsRequest(queue=q), timeout=60)
                                       for q in queues))
        return {
            "lock fences increase in grant order": fences_ok,
            "every task delivered once": len(set(dequeued)) == len(dequeued) and len(set(consumed)) == len(consumed),
            "queues left empty": all(s.ready == 0 and s.leased == 0 for s in stats),
            "semaphore permits distinct": len(set(results("semaphore"))) == len(results("semaphore")),
        }


