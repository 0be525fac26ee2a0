"""The Session stream of LockService, SemaphoreService and ReadWriteLockService:
Acquire, Release and Refresh as messages on one long-lived stream, each answered by
id as soon as it is done. The three services' Session messages have one shape (id;
acquire, release, refresh or cancel; the answer or an Error), so one class serves
them all.

Why a stream: in grpcio a unary call costs each end a call's set-up, headers and
trailers, and several hand-offs between gRPC's threads and the event loop, which
on a small machine cost more than the Redis script they carry. A message on an open
stream costs a fraction of that, and a handoff is two of them (the holder's release
in, the waiter's grant out) instead of two halves of two calls.

Each request runs as its own task through the servicer's own acquire/release/
refresh, admitted by the server's limits as that unary call would be
(sub_calls.py), so validation, limits, waiting and errors are exactly the unary
methods'; an error answers its request (concord.error.v1.Error) instead of ending
the stream. A waiting Acquire is cancelled by a ``cancel`` message or by the stream
going away, and lets go in the background as a cancelled unary Acquire does
(fifo_acquire.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from .. import sub_calls
from ..errors import ConcordError, InvalidArgument, ResourceExhausted
from .status import as_concord_error, check_decoded, rpc, to_error_message

MAX_IN_FLIGHT = 1024  # requests one session may have running at once
OPS = ("acquire", "release", "refresh")


class Session:
    """One Session call of ``servicer``, which serves ``service`` of the generated
    module ``pb`` and has the unary methods' bodies as ``acquire``, ``release`` and
    ``refresh`` (api/lock.py, api/semaphore.py, api/rwlock.py)."""

    def __init__(self, servicer: Any, pb: Any, service: str) -> None:
        self._pb = pb
        self._ops: dict[str, Callable[[Any, Any], Awaitable[Any]]] = {op: getattr(servicer, op) for op in OPS}
        full_name = pb.DESCRIPTOR.services_by_name[service].full_name
        self._methods = {op: f"/{full_name}/{op.capitalize()}" for op in OPS}  # the unary calls' names
        self._running: dict[int, tuple[str, asyncio.Task[None]]] = {}  # id -> (op, its task)
        self._cancelled: set[int] = set()  # ids of running Acquires that a cancel message gave up
        self._answers: asyncio.Queue[Any] = asyncio.Queue()

    async def run(self, requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        reader = asyncio.create_task(self._read(requests, context))
        try:
            while (answer := await self._answers.get()) is not None:
                yield answer
            await reader  # its error, if a request did not parse, ends the stream
        finally:
            reader.cancel()
            for _, task in self._running.values():
                task.cancel()

    async def _read(self, requests: AsyncIterator[Any], context: Any) -> None:
        try:
            async for request in requests:
                check_decoded(request)
                self._start(request, context)
            while self._running:  # half-closed: answer everything in flight first
                await asyncio.wait([task for _, task in self._running.values()])
        finally:
            self._answers.put_nowait(None)

    def _start(self, request: Any, context: Any) -> None:
        rid, op = request.id, request.WhichOneof("op")
        if op == "cancel":
            running_op, task = self._running.get(request.cancel, ("", None))
            if running_op == "acquire" and request.cancel not in self._cancelled:
                self._cancelled.add(request.cancel)
                task.cancel()
            return
        if op is None:
            return self._answer(rid, InvalidArgument("request: set one of acquire, release, refresh, cancel",
                                                     field="op"))
        if rid in self._running:
            return self._answer(rid, InvalidArgument(f"id: {rid} is already in flight", field="id"))
        if len(self._running) >= MAX_IN_FLIGHT:
            return self._answer(rid, ResourceExhausted(f"session has {MAX_IN_FLIGHT} requests in flight, its limit"))
        self._running[rid] = (op, asyncio.create_task(self._serve(rid, op, getattr(request, op), context)))

    async def _serve(self, rid: int, op: str, request: Any, context: Any) -> None:
        try:
            with sub_calls.admit.get()(self._methods[op]):
                result: Any = await self._ops[op](request, context)
        except asyncio.CancelledError:
            if rid not in self._cancelled:
                raise  # the stream is going away: nobody to answer
            result = self._pb.AcquireResponse(acquired=False)
        except Exception as exc:
            result = as_concord_error(exc, f"{self._methods[op]} in a Session")
        finally:
            del self._running[rid]
            self._cancelled.discard(rid)
        self._answer(rid, result, op)

    def _answer(self, rid: int, result: Any, op: str = "") -> None:
        if isinstance(result, ConcordError):
            self._answers.put_nowait(self._pb.SessionResponse(id=rid, error=to_error_message(result)))
        else:
            self._answers.put_nowait(self._pb.SessionResponse(id=rid, **{op: result}))


def method(pb: Any, service: str) -> Callable[..., AsyncIterator[Any]]:
    """The ``Session`` method of a servicer of ``service`` (``Session = session.method(pb, ...)``
    in its class body): one Session object per stream."""

    async def serve(self: Any, requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        async for answer in Session(self, pb, service).run(requests, context):
            yield answer

    serve.__name__, serve.__qualname__ = "Session", f"{service}.Session"  # as @rpc's logs name it
    return rpc(serve)
