"""An AsyncClient's sessions: acquire, release and refresh of all its locks, of all its
semaphores and of all its read-write locks go as messages on one Session stream per
service (LockService, SemaphoreService, ReadWriteLockService) instead of one call each.

A message on an open stream costs both ends far less than a call in grpcio, and a
lock handoff is two of them, so a lock passes between asyncio clients markedly
sooner this way (bench/scenarios/handoff.py measures it). ``SessionStub`` stands in
for the service's stub: its Acquire, Release and Refresh take the unary methods'
arguments (request, timeout=...) and go over the session; every other method is
the stub's own. So client.py's retries and waits work on it unchanged, and its
errors are those of the calls: an answer's Error becomes the same typed error
(concord.errors.from_reason) and a stream that breaks fails each request on it as
its call would have failed (from_rpc_error), UNAVAILABLE without ErrorInfo included,
which is not retried (concord._retry).

The three services' Session messages have one shape, so one machinery serves them;
a ``Kind`` says what differs: the generated module, and the field of an
AcquireResponse (and ReleaseRequest) naming the grant (``lease``, or ``permit_id``
for semaphores).

The stream opens with the first request and again with the first one after it
ended. A request whose caller stops waiting (cancelled, or past its timeout) is
forgotten; if it was an Acquire the server is told to give it up (``cancel``), and
if it was granted before that arrived the grant is released at once, so an
abandoned wait never leaves the lock or the permits held. The synchronous Client
does the same with threads (_session_sync.py).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import grpc

from .errors import Cancelled, ConcordError, DeadlineExceeded, Unavailable, from_reason, from_rpc_error
from .lock.v1 import lock_pb2
from .rwlock.v1 import rwlock_pb2
from .semaphore.v1 import semaphore_pb2

Answer = Callable[[Any], None]  # what to do with a request's answer (a SessionResponse or a ConcordError)


@dataclass(frozen=True)
class Kind:
    """What differs between the services' sessions."""

    name: str  # as in client._service(name)
    pb: ModuleType  # the generated module: SessionRequest, SessionResponse, ReleaseRequest
    grant: str  # the AcquireResponse's (and ReleaseRequest's) field naming the grant

    def release_of(self, acquire: Any, answer: Any) -> Any | None:
        """The ReleaseRequest giving back what ``answer`` granted to ``acquire``, or
        None if it granted nothing (not acquired, an error, or the stream ended)."""
        if not isinstance(answer, self.pb.SessionResponse) or not answer.acquire.acquired:
            return None
        return self.pb.ReleaseRequest(name=acquire.name, **{self.grant: getattr(answer.acquire, self.grant)})


KINDS = {k.name: k for k in (Kind("lock", lock_pb2, "lease"), Kind("semaphore", semaphore_pb2, "permit_id"),
                             Kind("rwlock", rwlock_pb2, "lease"))}


def outcome(op: str, answer: Any) -> Any:
    """The response in ``answer`` to a request ``op``, or its error raised."""
    if isinstance(answer, ConcordError):
        raise answer
    if answer.WhichOneof("result") == "error":
        e = answer.error
        raise from_reason(e.reason, e.message, dict(e.metadata))
    return getattr(answer, op)


def no_answer(kind: Kind, op: str, timeout: float | None) -> DeadlineExceeded:
    return DeadlineExceeded(f"no answer to the {kind.name} {op} within {timeout}s")


class _Stream:
    """One open Session call, the requests waiting for its answers and its reader."""

    def __init__(self, call: Any, kind: Kind) -> None:
        self.call = call
        self.waiting: dict[int, Answer] = {}
        self.ended = False
        self._kind = kind
        self._writing = asyncio.Lock()  # grpc.aio allows one write at a time
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def send(self, request: Any) -> None:
        async with self._writing:
            await self.call.write(request)

    async def _read(self) -> None:
        error: ConcordError = Unavailable(f"the {self._kind.name} session ended")
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


class Session:
    """The Session stream of one service (``kind``) of an AsyncClient."""

    def __init__(self, stub: Any, kind: Kind) -> None:
        self._stub = stub
        self._kind = kind
        self._stream: _Stream | None = None
        self._ids = itertools.count(1)

    def _open(self) -> _Stream:
        if self._stream is None or self._stream.ended:
            self._stream = _Stream(self._stub.Session(), self._kind)
        return self._stream

    async def request(self, op: str, message: Any, timeout: float | None) -> Any:
        """The answer to one request (op: acquire, release, refresh), or its error."""
        stream = self._open()
        rid = next(self._ids)
        answered: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        stream.waiting[rid] = lambda answer: answered.done() or answered.set_result(answer)
        sent = False
        try:
            await stream.send(self._kind.pb.SessionRequest(id=rid, **{op: message}))
            sent = True
            async with asyncio.timeout(timeout):
                # shielded: a timeout or cancel must not cancel ``answered``, or an answer
                # arriving before this task runs again would be dropped (and its grant kept)
                answer = await asyncio.shield(answered)
        except (grpc.RpcError, asyncio.InvalidStateError):  # the stream ended: its reader fails
            answer = await answered                         # every request on it
        except (TimeoutError, asyncio.CancelledError) as exc:
            acquire = message if op == "acquire" and sent else None
            if answered.done():  # answered just as the wait ended
                self._release_granted(acquire, answered.result())
            else:
                self._abandon(stream, rid, acquire)
            if isinstance(exc, TimeoutError):
                raise no_answer(self._kind, op, timeout) from None
            raise
        return outcome(op, answer)

    def _abandon(self, stream: _Stream, rid: int, acquire: Any | None) -> None:
        """Nobody waits for this answer any more. If it is an Acquire that was sent, it is
        given up in the server, and a grant that beat the cancel is released."""
        if acquire is None or stream.ended:
            stream.waiting.pop(rid, None)
            return
        stream.waiting[rid] = lambda answer: self._release_granted(acquire, answer)
        _background(stream.send(self._kind.pb.SessionRequest(id=next(self._ids), cancel=rid)))

    def _release_granted(self, acquire: Any | None, answer: Any) -> None:
        if acquire is not None and (release := self._kind.release_of(acquire, answer)) is not None:
            _background(self.request("release", release, None))


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
    """A service's stub whose Acquire, Release and Refresh go over ``session`` (a
    Session here, or a _session_sync.Session: its ``request`` is awaited or not)."""

    def __init__(self, stub: Any, session: Any) -> None:
        self._stub = stub
        self._session = session

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stub, name)

    def Acquire(self, request: Any, timeout: float | None = None) -> Any:
        return self._session.request("acquire", request, timeout)

    def Release(self, request: Any, timeout: float | None = None) -> Any:
        return self._session.request("release", request, timeout)

    def Refresh(self, request: Any, timeout: float | None = None) -> Any:
        return self._session.request("refresh", request, timeout)
