"""A worker that runs queued tasks with callbacks: the book's task worker, made reliable.

    worker = concord.Worker(client, ["urgent", "email"], concurrency=8)

    @worker.task("send_welcome")
    def send_welcome(task):
        mail(**task.json())

    worker.run()   # until SIGINT/SIGTERM or worker.stop()

Tasks are taken from the queues strictly in the order given, at most
``concurrency`` at a time, each run in a thread. Tasks are fetched ahead so a thread
that finishes finds its next one waiting: ``prefetch`` of them, or by default about
AHEAD seconds of work at the rate tasks have been finishing (at least one, at most
ten per thread), so short tasks stream through and long ones are not hoarded away
from other workers. Tasks fetched ahead are handed back unstarted on stop. A callback that returns acks the
task with its return value as the result (bytes, str, or anything JSON can encode;
``handle.result()`` and ``queue.get_task()`` give it back); a callback may report
``task.progress(...)`` as it goes. One that raises nacks it with the exception's
text, so it is retried per the queue's retry policy and dead-lettered after its max
attempts (at once for ``concord.UnrecoverableError``); a task type with no callback is
nacked too. Leases of running tasks are extended every lease_ttl/3, so a long task
is not handed to another worker. On stop, the worker takes no new tasks, lets the
running ones finish for up to ``grace`` seconds, and returns any it fetched but did
not start. A worker that dies without stopping loses nothing: its leases expire and
the tasks run again elsewhere.

Tasks come over one batched Consume stream (_Stream below): the server pushes what it
leases while the worker has free slots, and the acks and nacks of tasks that finished
meanwhile travel back as one message that also frees their slots. So a busy worker
costs the server a few messages per many tasks, not an RPC per task; an idle one
costs nothing until a task is ready. When the stream breaks (the server went away),
the settles it still owed wait, with those of tasks that finish meanwhile, and go
first on the next stream (the leases outlive a short outage); a stopping worker
settles what is left with unary calls.
"""

from __future__ import annotations

import logging
import queue
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import grpc

from ._convert import duration
from .errors import ConcordError, TaskLeaseNotHeld, from_reason, from_rpc_error
from .queue.v1 import queue_pb2 as pb
from .tasks import Task, encode_result, task_from, truncate_error

log = logging.getLogger(__name__)

Handler = Callable[[Task], Any]

MAX_SETTLES = 500  # settles one message carries at most (the server's default --queue-max-batch is larger)
AHEAD = 0.05  # seconds of work a Worker fetches ahead by default (at its recent rate)
MAX_AHEAD_PER_THREAD = 10
RETRY_SETTLE = 0.5  # seconds between tries of an ack or nack that found the server or Redis away
_END = object()


class UnrecoverableError(Exception):
    """Raised by a task callback for an error that retrying cannot cure (bad input):
    the task is dead-lettered at once, dead_reason "not_retryable"."""


@dataclass
class _Done:
    """A task whose callback finished, until its ack or nack is answered."""
    task: Task
    ok: bool  # the callback returned (else it raised, or there was none)
    result: Any = None
    error: str = ""
    retryable: bool = True
    give_back: bool = False  # never started (the worker is stopping): released, its attempt not counted

    def settle(self) -> pb.Settle:
        t = self.task
        if self.give_back:
            return pb.Settle(queue=t.queue, task_id=t.task_id, lease=t.lease, release=True)
        if self.ok:
            data, kind = encode_result(self.result)
            return pb.Settle(queue=t.queue, task_id=t.task_id, lease=t.lease, result=data, result_type=kind)
        s = pb.Settle(queue=t.queue, task_id=t.task_id, lease=t.lease, failed=True, error=truncate_error(self.error))
        if not self.retryable:
            s.retryable = False
        return s

    def unary(self) -> None:
        """The same settle as a unary call (raises as Task.ack / Task.nack do)."""
        if self.give_back:
            self.task.release()
        elif self.ok:
            self.task.ack(self.result)
        else:
            self.task.nack(self.error, retryable=self.retryable)


class _Stream:
    """One batched Consume call. Settles queue up in ``out``; the request iterator
    (run by grpc on its own thread) sends all that are waiting as one SettleBatch
    once the previous one is answered (Nagle's rule): at once when idle, and under
    load everything that finished during a round trip in one message."""

    def __init__(self, rpc: Any, queues: list[str], lease_ttl: float, credits: int,
                 credit_for: Callable[[_Stream, int], int]) -> None:
        self.out: queue.Queue[Any] = queue.Queue()
        self.owed: dict[str, _Done] = {}  # task id -> settle posted, not yet answered
        self.closed = False
        self.answered = threading.Event()  # no SettleBatch is waiting for its answer
        self.answered.set()
        self.granted = credits  # tasks the server was allowed to push
        self.received = 0  # tasks it pushed
        self._credit_for = credit_for
        start = pb.ConsumeRequest(start=pb.ConsumeStart(queues=queues, lease_ttl=duration(lease_ttl),
                                                        credits=credits, batched=True))
        self.call = rpc.open("Consume")(self._requests(start))

    def _requests(self, start: pb.ConsumeRequest) -> Iterator[pb.ConsumeRequest]:
        yield start
        while (item := self.out.get()) is not _END:
            self.answered.wait()
            batch = [item]
            while len(batch) < MAX_SETTLES:
                try:
                    item = self.out.get_nowait()
                except queue.Empty:
                    break
                if item is _END:
                    self.out.put(_END)
                    break
                batch.append(item)
            credit = self._credit_for(self, len(batch))
            self.answered.clear()
            yield pb.ConsumeRequest(settles=pb.SettleBatch(settles=[d.settle() for d in batch], credit=credit))

    def post(self, done: _Done) -> None:
        self.owed[done.task.task_id] = done
        self.out.put(done)

    def close(self) -> None:
        """Half-closes: the server answers what it got, hands back what it holds, and ends."""
        if not self.closed:
            self.closed = True
            self.out.put(_END)
            self.answered.set()


class Worker:
    def __init__(self, client: Any, queues: Sequence[str], *, concurrency: int = 4, prefetch: int | None = None,
                 lease_ttl: float = 30.0, grace: float = 30.0, handlers: dict[str, Handler] | None = None) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if prefetch is not None and prefetch < 0:
            raise ValueError("prefetch must be at least 0")
        self._prefetch = prefetch
        self._rate = 0.0  # tasks finished per second, smoothed over the settle batches
        self._rate_at = 0.0
        self.client = client
        self._rpc = client._service("queue")
        self.queues = list(queues)
        self.concurrency = concurrency
        self.lease_ttl = lease_ttl
        self.grace = grace
        self.handlers: dict[str, Handler] = dict(handlers or {})
        self._stopping = threading.Event()
        self._finished = threading.Event()
        self._changed = threading.Condition()  # guards everything below
        self._stream: _Stream | None = None
        self._running: dict[tuple[str, str], Task] = {}  # callbacks under way or fetched ahead
        self._settling = 0  # callbacks finished, settles not yet answered
        self._parked: list[_Done] = []  # settles waiting for a stream (the last one broke)
        self._queues: dict[str, Any] = {}
        self.processed = 0  # callbacks that returned (counted once their ack is answered)
        self.failed = 0  # callbacks that raised, or tasks with no callback

    def task(self, type: str) -> Callable[[Handler], Handler]:
        """Decorator: registers the callback for tasks of this type."""

        def register(fn: Handler) -> Handler:
            self.handlers[type] = fn
            return fn

        return register

    def stop(self) -> None:
        """Asks run() to finish: no new tasks; running ones get ``grace`` seconds."""
        self._stopping.set()
        with self._changed:
            self._close_if_idle()
            stream = self._stream
            self._changed.notify_all()
        if stream is not None:  # past the grace, the stream is cut and its tasks come back
            timer = threading.Timer(self.grace, stream.call.cancel)
            timer.daemon = True
            timer.start()

    def run(self, *, install_signal_handlers: bool = True) -> None:
        """Runs tasks until stop(), SIGINT or SIGTERM."""
        restore = self._install_signals() if install_signal_handlers else {}
        renewer = threading.Thread(target=self._renew, name="concord-worker-renew", daemon=True)
        renewer.start()
        pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="concord-worker")
        try:
            while not self._stopping.is_set():
                self._consume(pool)
                self._stopping.wait(0.5)  # back off before reconnecting to an unavailable server
        finally:
            self._stopping.set()
            with self._changed:
                parked, self._parked = self._parked, []
            threading.Thread(target=lambda: [self._settle_unary(d) for d in parked], daemon=True).start()
            with self._changed:
                self._changed.wait_for(lambda: not self._running and not self._settling, timeout=self.grace)
                if self._running:
                    log.warning("%d tasks still running after %.0fs; their leases will expire and they will run "
                                "again", len(self._running), self.grace)
            self._finished.set()
            pool.shutdown(wait=False, cancel_futures=True)
            for sig, handler in restore.items():
                signal.signal(sig, handler)

    def _install_signals(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, lambda *_: self.stop())
        return previous

    def _consume(self, pool: ThreadPoolExecutor) -> None:
        """One stream, until it ends (stop) or breaks; the settles it still owed are
        parked and go first on the next one, which starts with every slot known."""
        with self._changed:
            ahead = self.concurrency if self._prefetch is None else self._prefetch  # until a rate is known
            credits = max(0, self.concurrency + ahead - len(self._running) - self._settling)
            stream = self._stream = _Stream(self._rpc, self.queues, self.lease_ttl, credits, self._credit_for)
            parked, self._parked = self._parked, []
            for done in parked:
                stream.post(done)
            self._close_if_idle()
        try:
            for resp in stream.call:
                kind = resp.WhichOneof("kind")
                if kind == "tasks":
                    with self._changed:
                        stream.received += len(resp.tasks.tasks)
                    for m in resp.tasks.tasks:
                        self._start(pool, task_from(m, self._queue(m.queue)))
                elif kind == "settled_batch":
                    for answer in resp.settled_batch.settled:
                        self._answered(stream, answer)
                    stream.answered.set()
        except grpc.RpcError as exc:
            if not (self._stopping.is_set() and exc.code() == grpc.StatusCode.CANCELLED):
                log.warning("the task stream failed: %s", from_rpc_error(exc))
        finally:
            with self._changed:
                self._stream = None
                stream.close()
                self._parked += stream.owed.values()

    def _credit_for(self, stream: _Stream, settling: int) -> int:
        """The credit a SettleBatch of ``settling`` settles grants: what brings the
        tasks held here or on their way up to concurrency + the tasks to fetch ahead."""
        with self._changed:
            if self._stopping.is_set():
                return 0
            now = time.monotonic()
            if self._rate_at:
                sample = settling / max(now - self._rate_at, 1e-3)
                self._rate = sample if not self._rate else 0.7 * self._rate + 0.3 * sample
            self._rate_at = now
            ahead = self._prefetch
            if ahead is None:
                ahead = min(MAX_AHEAD_PER_THREAD * self.concurrency, max(1, int(self._rate * AHEAD)))
            held = len(self._running) + self._settling - settling + stream.granted - stream.received
            credit = max(0, self.concurrency + ahead - held)
            stream.granted += credit
            return credit

    def _queue(self, name: str) -> Any:
        q = self._queues.get(name)
        if q is None:
            q = self._queues[name] = self.client.queue(name)
        return q

    def _start(self, pool: ThreadPoolExecutor, task: Task) -> None:
        with self._changed:
            self._running[(task.queue, task.task_id)] = task
        if self._stopping.is_set():
            self._post(_Done(task, False, give_back=True))
            return
        pool.submit(self._execute, task)

    def _execute(self, task: Task) -> None:
        if self._stopping.is_set():  # fetched ahead, never started: back to the queue
            self._post(_Done(task, False, give_back=True))
            return
        done = _Done(task, False)
        try:
            handler = self.handlers.get(task.type)
            if handler is None:
                done.error = f"no handler for task type {task.type!r}"
                return
            try:
                done.result = handler(task)
                encode_result(done.result)
                done.ok = True
            except Exception as exc:
                done.error = ("".join(traceback.format_exception_only(exc)).strip() + "\n" +
                              "".join(traceback.format_tb(exc.__traceback__)[-5:]))
                done.retryable = not isinstance(exc, UnrecoverableError)
        finally:
            self._post(done)

    def _post(self, done: _Done) -> None:
        with self._changed:
            if self._running.pop((done.task.queue, done.task.task_id), None) is not None:
                self._settling += 1
            stream = self._stream
            if stream is not None and not stream.closed:
                stream.post(done)
                return
            if not self._stopping.is_set():
                self._parked.append(done)  # the stream broke: the next one takes it
                return
        self._settle_unary(done)  # stopping, no stream to come: settle on our own

    def _answered(self, stream: _Stream, answer: pb.Settled) -> None:
        done = stream.owed.pop(answer.task_id, None)
        if done is None:
            return
        if answer.error_reason:
            self._failed_settle(done, from_reason(answer.error_reason, answer.error_message))
        else:
            self._settled(done)

    def _settle_unary(self, done: _Done) -> None:
        try:
            done.unary()
        except ConcordError as exc:
            self._failed_settle(done, exc)
        else:
            self._settled(done)

    def _failed_settle(self, done: _Done, exc: ConcordError) -> None:
        t = done.task
        if isinstance(exc, TaskLeaseNotHeld):
            if not done.give_back:
                log.warning("task %s of %s finished after its lease expired; it may run again", t.task_id, t.queue)
        elif done.ok and exc.code == grpc.StatusCode.INVALID_ARGUMENT:  # the result is too large: say so where it shows
            retry = _Done(t, False, error=f"could not store the result: {exc}")
            with self._changed:
                self._settling -= 1  # _post counts it again
            self._post(retry)
            return
        elif exc.code == grpc.StatusCode.UNAVAILABLE and not self._finished.is_set():
            # Redis or the server away: try again until it is back or the lease is gone
            # (then TASK_LEASE_NOT_HELD ends it), on whichever stream is open by then.
            timer = threading.Timer(RETRY_SETTLE, self._post, [done])
            timer.daemon = True
            timer.start()
            return
        else:
            log.warning("could not %s task %s of %s: %s", "return" if done.give_back else "ack" if done.ok else "nack",
                        t.task_id, t.queue, exc)
        self._settled(done, counted_ok=done.ok and isinstance(exc, TaskLeaseNotHeld))

    def _settled(self, done: _Done, counted_ok: bool | None = None) -> None:
        with self._changed:
            self._settling -= 1
            if done.give_back:
                pass
            elif done.ok if counted_ok is None else counted_ok:
                self.processed += 1
            else:
                self.failed += 1
            self._close_if_idle()
            self._changed.notify_all()

    def _close_if_idle(self) -> None:
        """Stopping and nothing left to answer: the stream may end (under _changed)."""
        if self._stopping.is_set() and not self._running and not self._settling and self._stream is not None:
            self._stream.close()

    def _renew(self) -> None:
        """Extends every running task's lease each lease_ttl/3 until run() returns."""
        while not self._finished.wait(self.lease_ttl / 3):
            with self._changed:
                running = list(self._running.values())
            for task in running:
                try:
                    task.extend(self.lease_ttl)
                except TaskLeaseNotHeld:
                    with self._changed:  # else it finished (and was settled) since the list was taken
                        lost = (task.queue, task.task_id) in self._running
                    if lost:
                        log.warning("task %s of %s lost its lease while running", task.task_id, task.queue)
                except ConcordError as exc:
                    log.warning("could not extend task %s of %s: %s", task.task_id, task.queue, exc)
