"""The QueueService Consume stream: pushes tasks while the client's credits last,
settles what the client sends, and at its end hands back what the consumer cannot
still be holding. The servicer (api/queue.py) validates the `start` request and hands
this module everything else it needs as arguments.

What a lease means when a stream ends. A task's lease, once its message is handed to
the transport, is the consumer's until it settles it or the lease expires: the
consumer cannot know the stream ended until it reads the end, and it may still be
working on the task, then settle it by its lease on a new stream or a unary call (the
Worker does). So a stream the server ends (a Redis error in its pusher, a bad request,
shutdown) or that breaks (the client vanished, the connection was cut) leaves those
leases to run to their expiry; handing them back early let a second consumer lease a
task the first still held. Only the consumer's own half-close says it is done: what it
still holds then goes back at once, the attempt counted. Tasks leased for the stream
but never handed to the transport go back at once in every case, their attempt not
counted (the consumer never saw them).

A batched stream (ConsumeStart.batched) pushes every task one dequeue leased as one
TaskBatch message, and takes SettleBatch messages: one script call per queue for all
their settles, then their credit, so a busy worker costs a few messages per many
tasks instead of two per task."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from concord.queue.v1 import queue_pb2 as pb

from ..errors import ConcordError, InvalidArgument
from ..primitives.queue import Queues, Settling, TaskRecord
from .status import check_decoded

CONSUME_WAIT_MS = 30_000  # a Consume stream's waits, re-armed until it ends
CANCEL_SETTLE = 0.05  # seconds a request stream's end waits for a cancellation that caused it


async def next_request(requests) -> pb.ConsumeRequest | None:
    """The stream's next request; None once the client half-closed."""
    request = await anext(requests, None)
    check_decoded(request)
    return request


class ConsumeStream:
    """One Consume call over ``queues`` (the primitive) for the queues ``names``.

    ``max_batch`` bounds one dequeue and one SettleBatch; ``read_settle`` validates a
    Settle into its queue and what to do, ``encode`` makes a task's message."""

    def __init__(self, queues: Queues, names: list[str], lease_ms: int, credits: int, *, batched: bool,
                 max_batch: int, read_settle: Callable[[pb.Settle], tuple[str, Settling]],
                 encode: Callable[[TaskRecord], pb.Task],
                 when_done: Callable[[Callable[[bool], None]], None] = lambda then: then(False)) -> None:
        self._queues, self._names, self._lease_ms, self._max_batch = queues, names, lease_ms, max_batch
        self._batched = batched
        self._read_settle, self._encode = read_settle, encode
        self._when_done = when_done  # calls back with whether the call was cancelled, once it is over
        self._credits = credits
        self._credited = asyncio.Event()
        self._held: dict[tuple[str, str], str] = {}  # (queue, task id) -> lease, until settled
        self._sent: set[tuple[str, str]] = set()  # held tasks handed to the transport
        self._out: asyncio.Queue[pb.ConsumeResponse] = asyncio.Queue()

    async def run(self, requests) -> AsyncIterator[pb.ConsumeResponse]:
        reader = asyncio.create_task(self._read(requests))
        pusher = asyncio.create_task(self._push())
        get: asyncio.Future[pb.ConsumeResponse] | None = None
        half_closed = False
        try:
            while True:
                get = asyncio.ensure_future(self._out.get())
                done, _ = await asyncio.wait({get, reader, pusher}, return_when=asyncio.FIRST_COMPLETED)
                if get in done:
                    yield self._sending(get.result())
                    continue
                get.cancel()
                for t in (reader, pusher):
                    if t in done and t.exception() is not None:
                        raise t.exception()
                if reader in done:  # the client half-closed: answer its settles, push nothing more
                    pusher.cancel()
                    await asyncio.gather(pusher, return_exceptions=True)
                    # A cancelled call (RST_STREAM) also ends its request stream, and gRPC
                    # may show the handler that end a moment before the cancellation: wait
                    # that moment, so a cancel (this task cancelled here) is not taken for
                    # the consumer saying it is done.
                    await asyncio.sleep(CANCEL_SETTLE)
                    half_closed = True
                    while not self._out.empty():
                        response = self._out.get_nowait()
                        if not self._carries_tasks(response):
                            yield response
                    return
        finally:
            if get is not None:  # the stream was closed while waiting: no task left pending
                get.cancel()
            for t in (reader, pusher):
                t.cancel()
            await asyncio.gather(reader, pusher, *([get] if get is not None else []), return_exceptions=True)
            self._let_go(half_closed)

    @staticmethod
    def _carries_tasks(response: pb.ConsumeResponse) -> bool:
        return response.WhichOneof("kind") in ("task", "tasks")

    def _sending(self, response: pb.ConsumeResponse) -> pb.ConsumeResponse:
        """Marks the tasks of a response about to go to the transport as the consumer's
        (whether it got there is unknowable if the stream breaks now: assume it did)."""
        kind = response.WhichOneof("kind")
        if kind == "task":
            self._sent.add((response.task.queue, response.task.task_id))
        elif kind == "tasks":
            self._sent.update((t.queue, t.task_id) for t in response.tasks.tasks)
        return response

    def _let_go(self, half_closed: bool) -> None:
        """At the stream's end (see the module docstring): tasks never sent go back
        uncounted at once; sent ones go back counted only if the consumer half-closed.
        A cancelled call can show the handler its request stream's end before the
        cancellation, so that is decided once the call is over."""
        let_go = self._queues.let_go  # the calling tenant's queues: the callback runs outside the call
        sent = {key: lease for key, lease in self._held.items() if key in self._sent}
        for key, lease in self._held.items():
            if key not in sent:
                let_go(*key, lease, count_attempt=False)

        def give_back(cancelled: bool) -> None:
            if not cancelled:
                for key, lease in sent.items():
                    let_go(*key, lease, count_attempt=True, error="consumer stream ended")

        if half_closed and sent:
            self._when_done(give_back)

    async def _read(self, requests) -> None:
        while (request := await next_request(requests)) is not None:
            kind = request.WhichOneof("kind")
            if kind == "credit":
                self._credit(request.credit)
            elif kind == "settle":
                (settled,) = await self._settle([request.settle])
                self._out.put_nowait(pb.ConsumeResponse(settled=settled))
            elif kind == "settles":
                if len(request.settles.settles) > self._max_batch:
                    raise InvalidArgument(f"a SettleBatch holds at most {self._max_batch} settles",
                                          field="settles.settles")
                settled = await self._settle(request.settles.settles)
                self._out.put_nowait(pb.ConsumeResponse(settled_batch=pb.SettledBatch(settled=settled)))
                self._credit(request.settles.credit)
            else:
                raise InvalidArgument("`start` may only be the first Consume request", field="start")

    def _credit(self, n: int) -> None:
        if n:
            self._credits += n
            self._credited.set()

    async def _settle(self, settles) -> list[pb.Settled]:
        """Each settle's answer, in order: the ones that validate are settled with one
        script call per queue, all queues at once."""
        answers: list[pb.Settled | None] = [None] * len(settles)
        by_queue: dict[str, list[tuple[int, Settling]]] = {}
        for i, s in enumerate(settles):
            try:
                queue, settling = self._read_settle(s)
            except ConcordError as exc:
                answers[i] = pb.Settled(task_id=s.task_id, error_reason=exc.reason, error_message=exc.message)
                continue
            by_queue.setdefault(queue, []).append((i, settling))

        async def settle(queue: str, group: list[tuple[int, Settling]]) -> None:
            try:
                outcomes = await self._queues.settle_many(queue, [x for _, x in group])
            except ConcordError as exc:
                outcomes = [exc] * len(group)
            for (i, x), outcome in zip(group, outcomes):
                if isinstance(outcome, ConcordError):
                    answers[i] = pb.Settled(task_id=x.task_id, error_reason=outcome.reason,
                                            error_message=outcome.message)
                else:
                    self._held.pop((queue, x.task_id), None)
                    self._sent.discard((queue, x.task_id))
                    answers[i] = pb.Settled(task_id=x.task_id)

        await asyncio.gather(*(settle(q, g) for q, g in by_queue.items()))
        return answers  # type: ignore[return-value]

    async def _push(self) -> None:
        while True:
            while self._credits <= 0:
                self._credited.clear()
                await self._credited.wait()
            tasks = await self._queues.dequeue(self._names, min(self._credits, self._max_batch),
                                               self._lease_ms, CONSUME_WAIT_MS)
            for t in tasks:
                self._held[(t.queue, t.task_id)] = t.lease
            self._credits -= len(tasks)
            if self._batched:
                if tasks:
                    self._out.put_nowait(pb.ConsumeResponse(tasks=pb.TaskBatch(tasks=map(self._encode, tasks))))
            else:
                for t in tasks:
                    self._out.put_nowait(pb.ConsumeResponse(task=self._encode(t)))
