"""Consume streams: the server pushes tasks as the client grants credits.

    with client.queue("email").consume(prefetch=4) as tasks:
        for task in tasks:
            send(task.json())
            task.ack()          # settled over the stream; grants one more credit

At most ``prefetch`` tasks are unsettled at once. ack() and nack() travel on the
stream and wait for the server's answer (raising TaskLeaseNotHeld like the unary
calls); extend() and release() are unary calls. close() (or leaving the ``with``
block) hands every task the stream still holds back to its queue at once, the
attempt counted. A stream that ends any other way (the process dies, the connection
breaks, the server ends it) leaves the tasks it delivered leased until their leases
expire: a consumer still working on one may ack it by its lease meanwhile.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import grpc

from ._convert import duration
from .errors import Cancelled, ConcordError, from_reason, from_rpc_error
from .queue.v1 import queue_pb2 as pb
from .tasks import Task, encode_result, task_from, truncate_error

_END = object()


def _start(queues: Sequence[str], lease_ttl: float, prefetch: int) -> pb.ConsumeRequest:
    if prefetch < 1:
        raise ValueError("prefetch must be at least 1")
    return pb.ConsumeRequest(start=pb.ConsumeStart(queues=list(queues), lease_ttl=duration(lease_ttl),
                                                   credits=prefetch))


def _settle(task: Task, failed: bool, error: str = "", retry_delay: float | None = None,
            result: Any = None, retryable: bool = True) -> pb.ConsumeRequest:
    data, kind = encode_result(result)
    s = pb.Settle(queue=task.queue, task_id=task.task_id, lease=task.lease, failed=failed,
                  error=truncate_error(error), result=data, result_type=kind)
    if not retryable:
        s.retryable = False
    if retry_delay is not None:
        s.retry_delay.CopyFrom(duration(retry_delay))
    return pb.ConsumeRequest(settle=s)


_CREDIT = pb.ConsumeRequest(credit=1)


def _check(settled: pb.Settled) -> None:
    if settled.error_reason:
        raise from_reason(settled.error_reason, settled.error_message)


class Consumer:
    """A Consume stream on a synchronous Client; iterate it for tasks."""

    def __init__(self, client: Any, queues: Sequence[str], *, lease_ttl: float = 30.0, prefetch: int = 1) -> None:
        self._client = client
        self._rpc = client._service("queue")
        self._requests: queue.Queue[Any] = queue.Queue()
        self._requests.put(_start(queues, lease_ttl, prefetch))
        self._call = self._rpc.open("Consume")(iter(self._requests.get, _END))
        self._tasks: queue.Queue[Any] = queue.Queue()
        self._pending: dict[str, concurrent.futures.Future[pb.Settled]] = {}
        self._error: ConcordError | None = None
        self._closed = False
        self._reader = threading.Thread(target=self._read, name="concord-consume", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            for resp in self._call:
                if resp.HasField("task"):
                    self._tasks.put(task_from(resp.task, self))
                elif (fut := self._pending.pop(resp.settled.task_id, None)) is not None:
                    fut.set_result(resp.settled)
        except grpc.RpcError as exc:
            if not self._closed:
                self._error = from_rpc_error(exc)
        finally:
            for fut in self._pending.values():
                fut.set_exception(self._error or Cancelled("the Consume stream ended"))
            self._tasks.put(_END)

    def __iter__(self) -> Iterator[Task]:
        while (item := self._tasks.get()) is not _END:
            yield item
        self._tasks.put(_END)  # later iterations end too
        if self._error is not None:
            raise self._error

    def _send_settle(self, request: pb.ConsumeRequest, task_id: str) -> None:
        fut: concurrent.futures.Future[pb.Settled] = concurrent.futures.Future()
        self._pending[task_id] = fut
        self._requests.put(request)
        try:
            _check(fut.result(timeout=self._client.timeout))
        finally:
            self._requests.put(_CREDIT)

    def ack(self, task: Task, result: Any = None) -> None:
        self._send_settle(_settle(task, False, result=result), task.task_id)

    def progress(self, task: Task, value: float | None = None, data: Any = None, *,
                 lease_ttl: float | None = None) -> Task:
        return self._client.queue(task.queue).progress(task, value, data, lease_ttl=lease_ttl)

    def nack(self, task: Task, error: str = "", *, retry_delay: float | None = None, retryable: bool = True) -> None:
        self._send_settle(_settle(task, True, error, retry_delay, retryable=retryable), task.task_id)

    def extend(self, task: Task, lease_ttl: float) -> Task:
        return self._client.queue(task.queue).extend(task, lease_ttl)

    def release(self, task: Task) -> None:
        self._client.queue(task.queue).release(task)
        self._requests.put(_CREDIT)

    def close(self) -> None:
        """Ends the stream; the server hands back the tasks it still holds."""
        if self._closed:
            return
        self._closed = True
        self._requests.put(_END)
        self._reader.join(self._client.timeout)
        self._call.cancel()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncConsumer:
    """A Consume stream on an AsyncClient: ``async with ... as tasks: async for task in tasks``."""

    def __init__(self, client: Any, queues: Sequence[str], *, lease_ttl: float = 30.0, prefetch: int = 1) -> None:
        self._client = client
        self._rpc = client._service("queue")
        self._start = _start(queues, lease_ttl, prefetch)
        self._call: Any = None
        self._tasks: asyncio.Queue[Any] = asyncio.Queue()
        self._pending: dict[str, asyncio.Future[pb.Settled]] = {}
        self._error: ConcordError | None = None
        self._reader: asyncio.Task[None] | None = None
        self._closed = False

    async def _open(self) -> None:
        if self._call is None:
            self._call = self._rpc.open("Consume")()
            await self._call.write(self._start)
            self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            while (resp := await self._call.read()) is not grpc.aio.EOF:
                if resp.HasField("task"):
                    self._tasks.put_nowait(task_from(resp.task, self))
                elif (fut := self._pending.pop(resp.settled.task_id, None)) is not None and not fut.done():
                    fut.set_result(resp.settled)
        except grpc.RpcError as exc:
            if not self._closed:
                self._error = from_rpc_error(exc)
        except asyncio.CancelledError:
            pass
        finally:
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(self._error or Cancelled("the Consume stream ended"))
            self._tasks.put_nowait(_END)

    def __aiter__(self) -> AsyncIterator[Task]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Task]:
        await self._open()
        while (item := await self._tasks.get()) is not _END:
            yield item
        self._tasks.put_nowait(_END)
        if self._error is not None:
            raise self._error

    async def _write(self, request: pb.ConsumeRequest) -> None:
        """Sends on the stream; once it has ended (say its server died), the stream's
        own error, not grpc's InvalidStateError: the server hands its tasks back."""
        try:
            await self._call.write(request)
        except asyncio.InvalidStateError as exc:
            raise self._error or Cancelled("the Consume stream ended") from exc
        except grpc.RpcError as exc:
            raise self._error or from_rpc_error(exc) from exc

    async def _send_settle(self, request: pb.ConsumeRequest, task_id: str) -> None:
        fut: asyncio.Future[pb.Settled] = asyncio.get_running_loop().create_future()
        self._pending[task_id] = fut
        try:
            await self._write(request)
            _check(await asyncio.wait_for(fut, self._client.timeout))
        finally:
            self._pending.pop(task_id, None)
            if not self._call.done():  # the task's credit comes back, settled or refused
                await self._write(_CREDIT)

    async def ack(self, task: Task, result: Any = None) -> None:
        await self._send_settle(_settle(task, False, result=result), task.task_id)

    async def progress(self, task: Task, value: float | None = None, data: Any = None, *,
                       lease_ttl: float | None = None) -> Task:
        return await self._client.queue(task.queue).progress(task, value, data, lease_ttl=lease_ttl)

    async def nack(self, task: Task, error: str = "", *, retry_delay: float | None = None, retryable: bool = True) -> None:
        await self._send_settle(_settle(task, True, error, retry_delay, retryable=retryable), task.task_id)

    async def extend(self, task: Task, lease_ttl: float) -> Task:
        return await self._client.queue(task.queue).extend(task, lease_ttl)

    async def release(self, task: Task) -> None:
        await self._client.queue(task.queue).release(task)
        await self._write(_CREDIT)

    async def close(self) -> None:
        if self._closed or self._call is None:
            self._closed = True
            return
        self._closed = True
        try:
            await self._call.done_writing()
            if self._reader is not None:
                await asyncio.wait_for(asyncio.shield(self._reader), self._client.timeout)
        except (grpc.RpcError, TimeoutError):
            pass
        finally:
            self._call.cancel()

    async def __aenter__(self) -> AsyncConsumer:
        await self._open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
