"""The QueueService Consume stream: pushes tasks while the client's credits last,
settles what the client sends, and hands back every task it still holds when the
stream ends. The servicer (api/queue.py) validates the `start` request and hands
this module everything else it needs as arguments."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from concord.queue.v1 import queue_pb2 as pb

from ..errors import ConcordError, InvalidArgument
from ..primitives.queue import Queues, TaskRecord
from .decoding import Undecodable

CONSUME_WAIT_MS = 30_000  # a Consume stream's waits, re-armed until it ends


async def next_request(requests) -> pb.ConsumeRequest | None:
    """The stream's next request; None once the client half-closed."""
    request = await anext(requests, None)
    if isinstance(request, Undecodable):
        raise InvalidArgument(f"request could not be parsed: {request.reason}")
    return request


class ConsumeStream:
    """One Consume call over ``queues`` (the primitive) for the queues ``names``.

    ``max_batch`` bounds one dequeue; ``read_settle``, ``read_nack`` and ``read_result``
    validate a Settle (queue, task id, lease; retry delay, error, retryable; result, its type),
    ``encode`` makes a task's message."""

    def __init__(self, queues: Queues, names: list[str], lease_ms: int, credits: int, *, max_batch: int,
                 read_settle: Callable[[pb.Settle], tuple[str, str, str]],
                 read_nack: Callable[[pb.Settle], tuple[int | None, str, bool]],
                 read_result: Callable[[pb.Settle], tuple[bytes, str]],
                 encode: Callable[[TaskRecord], pb.Task]) -> None:
        self._queues, self._names, self._lease_ms, self._max_batch = queues, names, lease_ms, max_batch
        self._read_settle, self._read_nack, self._read_result = read_settle, read_nack, read_result
        self._encode = encode
        self._credits = credits
        self._credited = asyncio.Event()
        self._held: dict[tuple[str, str], str] = {}  # (queue, task id) -> lease
        self._out: asyncio.Queue[pb.ConsumeResponse] = asyncio.Queue()
        self._ended = asyncio.Event()

    async def run(self, requests) -> AsyncIterator[pb.ConsumeResponse]:
        reader = asyncio.create_task(self._read(requests))
        pusher = asyncio.create_task(self._push())
        get: asyncio.Future[pb.ConsumeResponse] | None = None
        try:
            while True:
                get = asyncio.ensure_future(self._out.get())
                done, _ = await asyncio.wait({get, reader, pusher}, return_when=asyncio.FIRST_COMPLETED)
                if get in done:
                    yield get.result()
                    continue
                get.cancel()
                for t in (reader, pusher):
                    if t in done and t.exception() is not None:
                        raise t.exception()
                if reader in done:  # the client half-closed: finish what is queued, then end
                    while not self._out.empty():
                        yield self._out.get_nowait()
                    return
        finally:
            if get is not None:  # the stream was closed while waiting: no task left pending
                get.cancel()
            for t in (reader, pusher):
                t.cancel()
            await asyncio.gather(reader, pusher, *([get] if get is not None else []), return_exceptions=True)
            for (queue, task_id), lease in self._held.items():
                self._queues.let_go(queue, task_id, lease, count_attempt=True, error="consumer stream ended")

    async def _read(self, requests) -> None:
        while (request := await next_request(requests)) is not None:
            kind = request.WhichOneof("kind")
            if kind == "credit":
                self._credits += request.credit
                self._credited.set()
            elif kind == "settle":
                self._out.put_nowait(pb.ConsumeResponse(settled=await self._settle(request.settle)))
            else:
                raise InvalidArgument("`start` may only be the first Consume request", field="start")

    async def _settle(self, s: pb.Settle) -> pb.Settled:
        try:
            queue, task_id, lease = self._read_settle(s)
            if s.failed:
                await self._queues.nack(queue, task_id, lease, *self._read_nack(s))
            else:
                await self._queues.ack(queue, task_id, lease, *self._read_result(s))
            self._held.pop((queue, task_id), None)
            return pb.Settled(task_id=s.task_id)
        except ConcordError as exc:
            return pb.Settled(task_id=s.task_id, error_reason=exc.reason, error_message=exc.message)

    async def _push(self) -> None:
        while True:
            while self._credits <= 0:
                self._credited.clear()
                await self._credited.wait()
            tasks = await self._queues.dequeue(self._names, min(self._credits, self._max_batch),
                                               self._lease_ms, CONSUME_WAIT_MS)
            for t in tasks:
                self._held[(t.queue, t.task_id)] = t.lease
                self._credits -= 1
                self._out.put_nowait(pb.ConsumeResponse(task=self._encode(t)))
