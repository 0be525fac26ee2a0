"""An AsyncClient's lock session: acquire, release and refresh of all its locks go as
messages on one LockService.Session stream instead of one call each.

A message on an open stream costs both ends far less than a call in grpcio, and a
lock handoff is two of them, so a lock passes between asyncio clients markedly
sooner this way (bench/scenarios/handoff.py measures it). ``SessionStub`` stands in
for the LockServiceStub: its Acquire, Release and Refresh take the unary methods'
arguments (request, timeout=...) and go over the session; every other method is
the stub's own. So client.py's retries and waits work on it unchanged, and its
errors are those of the calls: an answer's Error becomes the same typed error
(concord.errors.from_reason) and a stream that breaks fails each request on it as
its call would have failed (from_rpc_error), UNAVAILABLE without ErrorInfo included,
which is not retried (concord._retry).

The stream opens with the first request and again with the first one after it
ended. A request whose caller stops waiting (cancelled, or past its timeout) is
forgotten; if it was an Acquire the server is told to give it up (``cancel``), and
if the lock was granted before that arrived it is released at once, so an
abandoned wait never leaves the lock held. The synchronous Client makes unary calls.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

import grpc

from .errors import Cancelled, ConcordError, DeadlineExceeded, Unavailable, from_reason, from_rpc_error
from .lock.v1 import lock_pb2 as pb

Answer = Callable[[pb.SessionResponse | ConcordError], None]  # what to do with a request's answer


class _Stream:
    """One open Session call, the requests waiting for its answers and its reader."""

    def __init__(self, call: Any) -> None:
        self.call = call
        self.waiting: dict[int, Answer] = {}
        self.ended = False
        self._writing = asyncio.Lock()  # grpc.aio allows one write at a time
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def send(self, request: pb.SessionRequest) -> None:
        async with self._writing:
            await self.call.write(request)

    async def _read(self) -> None:
        error: ConcordError = Unavailable("the lock session ended")
        try:
            while (answer := await self.call.read()) is not grpc.aio.EOF:
                if (deliver := self.waiting.pop(answer.id, None)) is not None:
                    deliver(answer)
        except grpc.RpcError as exc:
            error = from_rpc_error(exc)
        except asyncio.CancelledError:
            error = Cancelled("the client was closed")
            raise
        finally:
            self.ended = True
            waiting, self.waiting = self.waiting, {}
            for deliver in waiting.values():
                deliver(error)


class LockSession:
    def __init__(self, stub: Any) -> None:
        self._stub = stub
        self._stream: _Stream | None = None
        self._ids = itertools.count(1)

    def _open(self) -> _Stream:
        if self._stream is None or self._stream.ended:
            self._stream = _Stream(self._stub.Session())
        return self._stream

    async def request(self, op: str, message: Any, timeout: float | None) -> Any:
        """The answer to one request (op: acquire, release, refresh), or its error."""
        stream = self._open()
        rid = next(self._ids)
        answered: asyncio.Future[pb.SessionResponse | ConcordError] = asyncio.get_running_loop().create_future()
        stream.waiting[rid] = lambda answer: answered.done() or answered.set_result(answer)
        sent = False
        try:
            await stream.send(pb.SessionRequest(id=rid, **{op: message}))
            sent = True
            async with asyncio.timeout(timeout):
                answer = await answered
        except (grpc.RpcError, asyncio.InvalidStateError):  # the stream ended: its reader fails
            answer = await answered                         # every request on it
        except (TimeoutError, asyncio.CancelledError) as exc:
            if answered.cancelled() or not answered.done():  # (awaiting it cancels it)
                self._abandon(stream, rid, message if op == "acquire" and sent else None)
            if isinstance(exc, TimeoutError):
                raise DeadlineExceeded(f"no answer to the lock {op} within {timeout}s") from None
            raise
        if isinstance(answer, ConcordError):
            raise answer
        if answer.WhichOneof("result") == "error":
            e = answer.error
            raise from_reason(e.reason, e.message, dict(e.metadata))
        return getattr(answer, op)

    def _abandon(self, stream: _Stream, rid: int, acquire: pb.AcquireRequest | None) -> None:
        """Nobody waits for this answer any more. If it is an Acquire that was sent, it is
        given up in the server, and a grant that beat the cancel is released."""
        if acquire is None or stream.ended:
            stream.waiting.pop(rid, None)
            return

        def release_if_granted(answer: pb.SessionResponse | ConcordError) -> None:
            if isinstance(answer, pb.SessionResponse) and answer.acquire.acquired:
                _background(self.request("release", pb.ReleaseRequest(name=acquire.name, lease=answer.acquire.lease),
                                         None))

        stream.waiting[rid] = release_if_granted
        _background(stream.send(pb.SessionRequest(id=next(self._ids), cancel=rid)))


_tasks: set[asyncio.Task[Any]] = set()


def _background(coro: Any) -> None:
    """Runs coro to its end, whatever it raises (the session reports nothing back)."""
    async def quietly() -> None:
        try:
            await coro
        except (ConcordError, grpc.RpcError, asyncio.InvalidStateError):  # the stream ended
            pass

    task = asyncio.get_running_loop().create_task(quietly())
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


class SessionStub:
    """A LockServiceStub whose Acquire, Release and Refresh go over a LockSession."""

    def __init__(self, stub: Any) -> None:
        self._stub = stub
        self._session = LockSession(stub)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stub, name)

    def Acquire(self, request: pb.AcquireRequest, timeout: float | None = None) -> Any:
        return self._session.request("acquire", request, timeout)

    def Release(self, request: pb.ReleaseRequest, timeout: float | None = None) -> Any:
        return self._session.request("release", request, timeout)

    def Refresh(self, request: pb.RefreshRequest, timeout: float | None = None) -> Any:
        return self._session.request("refresh", request, timeout)
