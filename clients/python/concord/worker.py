"""A worker that runs queued tasks with callbacks: the book's task worker, made reliable.

    worker = concord.Worker(client, ["urgent", "email"], concurrency=8)

    @worker.task("send_welcome")
    def send_welcome(task):
        mail(**task.json())

    worker.run()   # until SIGINT/SIGTERM or worker.stop()

Tasks are taken from the queues strictly in the order given, at most
``concurrency`` at a time, each run in a thread. A callback that returns acks the
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
"""

from __future__ import annotations

import logging
import signal
import threading
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc

from .errors import ConcordError, InvalidArgument, TaskLeaseNotHeld, from_rpc_error
from .queues import dequeue_request
from .tasks import Task, encode_result, task_from

log = logging.getLogger(__name__)

Handler = Callable[[Task], Any]


class UnrecoverableError(Exception):
    """Raised by a task callback for an error that retrying cannot cure (bad input):
    the task is dead-lettered at once, dead_reason "not_retryable"."""


class Worker:
    def __init__(self, client: Any, queues: Sequence[str], *, concurrency: int = 4, lease_ttl: float = 30.0,
                 grace: float = 30.0, handlers: dict[str, Handler] | None = None) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.client = client
        self._rpc = client._service("queue")
        self.queues = list(queues)
        self.concurrency = concurrency
        self.lease_ttl = lease_ttl
        self.grace = grace
        self.handlers: dict[str, Handler] = dict(handlers or {})
        self._stopping = threading.Event()
        self._finished = threading.Event()
        self._fetching: Any = None
        self._changed = threading.Condition()
        self._running: dict[tuple[str, str], Task] = {}
        self.processed = 0  # callbacks that returned
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
        call = self._fetching
        if call is not None:
            call.cancel()
        with self._changed:
            self._changed.notify_all()

    def run(self, *, install_signal_handlers: bool = True) -> None:
        """Runs tasks until stop(), SIGINT or SIGTERM."""
        restore = self._install_signals() if install_signal_handlers else {}
        renewer = threading.Thread(target=self._renew, name="concord-worker-renew", daemon=True)
        renewer.start()
        pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="concord-worker")
        try:
            while not self._stopping.is_set():
                with self._changed:
                    while len(self._running) >= self.concurrency and not self._stopping.is_set():
                        self._changed.wait()
                    free = self.concurrency - len(self._running)
                if self._stopping.is_set():
                    break
                for task in self._fetch(free):
                    if self._stopping.is_set():
                        self._give_back(task)
                        continue
                    with self._changed:
                        self._running[(task.queue, task.task_id)] = task
                    pool.submit(self._execute, task)
        finally:
            self._stopping.set()
            with self._changed:
                self._changed.wait_for(lambda: not self._running, timeout=self.grace)
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

    def _fetch(self, max_tasks: int) -> list[Task]:
        """One server-side wait of up to a second for tasks. stop() cancels it; tasks
        that raced the cancel are handed back by the server."""
        request = dequeue_request(self.queues, max_tasks, self.lease_ttl, 1.0)
        call = self._fetching = self._rpc.open("Dequeue").future(request, timeout=1.0 + self.client.timeout)
        if self._stopping.is_set():
            call.cancel()
        try:
            resp = call.result()
        except grpc.FutureCancelledError:
            return []
        except grpc.RpcError as exc:
            log.warning("dequeue failed: %s", from_rpc_error(exc))
            self._stopping.wait(0.5)  # back off before retrying an unavailable server
            return []
        finally:
            self._fetching = None
        return [task_from(t, self.client.queue(t.queue)) for t in resp.tasks]

    def _execute(self, task: Task) -> None:
        ok = False
        try:
            handler = self.handlers.get(task.type)
            if handler is None:
                self._nack(task, f"no handler for task type {task.type!r}")
                return
            try:
                result = handler(task)
                encode_result(result)
            except Exception as exc:
                self._nack(task, "".join(traceback.format_exception_only(exc)).strip() + "\n" +
                           "".join(traceback.format_tb(exc.__traceback__)[-5:]),
                           retryable=not isinstance(exc, UnrecoverableError))
                return
            ok = True
            try:
                task.ack(result)
            except InvalidArgument as exc:  # the result is too large: say so where it shows
                ok = False
                self._nack(task, f"could not store the result: {exc}")
            except TaskLeaseNotHeld:
                log.warning("task %s of %s finished after its lease expired; it may run again", task.task_id,
                            task.queue)
            except ConcordError as exc:
                log.warning("could not ack task %s of %s: %s", task.task_id, task.queue, exc)
        finally:
            with self._changed:
                if ok:
                    self.processed += 1
                else:
                    self.failed += 1
                self._running.pop((task.queue, task.task_id), None)
                self._changed.notify_all()

    def _nack(self, task: Task, error: str, retryable: bool = True) -> None:
        try:
            task.nack(error, retryable=retryable)
        except ConcordError as exc:
            log.warning("could not nack task %s of %s: %s", task.task_id, task.queue, exc)

    def _give_back(self, task: Task) -> None:
        try:
            task.release()
        except ConcordError as exc:
            log.warning("could not return task %s of %s: %s", task.task_id, task.queue, exc)

    def _renew(self) -> None:
        """Extends every running task's lease each lease_ttl/3 until run() returns."""
        while not self._finished.wait(self.lease_ttl / 3):
            with self._changed:
                running = list(self._running.values())
            for task in running:
                try:
                    task.extend(self.lease_ttl)
                except TaskLeaseNotHeld:
                    log.warning("task %s of %s lost its lease while running", task.task_id, task.queue)
                except ConcordError as exc:
                    log.warning("could not extend task %s of %s: %s", task.task_id, task.queue, exc)
