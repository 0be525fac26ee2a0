"""A synchronous Client's sessions: acquire, release and refresh of all its locks, of
all its semaphores and of all its read-write locks go as messages on one Session
stream per service, as an AsyncClient's do (_session.py), with threads instead of tasks.

In grpcio a unary call from a sync client costs each end a call's set-up, headers and
trailers, a completion queue and hand-offs between the caller's thread and gRPC's
core; a message on an open stream costs a fraction of that, and a lock handoff is two
of them, so a lock passes between threads and processes sooner this way
(bench/scenarios/handoff_clients.py, impl "concord-sync"). ``SessionStub`` stands in
for the service's stub as on the AsyncClient, so client.py's retries and waits work
on it unchanged and its errors are those of the calls.

Each open stream is a grpc stream_stream call fed by a queue-backed request iterator
(gRPC's own thread takes the requests off the queue and writes them, one at a time);
one reader thread per stream hands each answer, by id, to the thread waiting for it
(a concurrent.futures.Future). A caller that stops waiting (past its timeout:
DeadlineExceeded, as on the AsyncClient) is forgotten; if it was an Acquire the server
is told to give it up (``cancel``), and a grant that beat the cancel is released at
once. A stream that breaks fails every request waiting on it with the error its call
would have failed with; the next request opens a new stream. Client.close() ends the
streams and their threads.
"""

from __future__ import annotations

import concurrent.futures
import functools
import itertools
import queue
import threading
from typing import Any

import grpc

from ._session import Answer, Kind, no_answer, outcome
from .errors import Cancelled, ConcordError, Unavailable, from_rpc_error

_END = object()  # ends the request iterator, and so the stream's writing side


class _Stream:
    """One open Session call, the requests waiting for its answers and its reader thread."""

    def __init__(self, open_call: Any, kind: Kind) -> None:
        self._kind = kind
        self._requests: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()  # guards waiting and ended
        self.waiting: dict[int, Answer] = {}
        self.ended = False
        self._closing = False
        self.call = open_call(iter(self._requests.get, _END))
        self._reader = threading.Thread(target=self._read, name=f"concord-{kind.name}-session", daemon=True)
        self._reader.start()

    def wait_for(self, rid: int, deliver: Answer) -> bool:
        """Registers ``deliver`` for the answer to ``rid``; False if the stream has ended."""
        with self._lock:
            if self.ended:
                return False
            self.waiting[rid] = deliver
            return True

    def instead(self, rid: int, deliver: Answer, other: Answer | None) -> bool:
        """``other`` (None: nothing) gets the answer to ``rid`` instead of ``deliver``;
        False if ``deliver`` already had it (or the stream's end)."""
        with self._lock:
            if self.waiting.get(rid) is not deliver:
                return False
            if other is None:
                del self.waiting[rid]
            else:
                self.waiting[rid] = other
            return True

    def send(self, request: Any) -> None:
        self._requests.put(request)

    def _read(self) -> None:
        error: ConcordError = Unavailable(f"the {self._kind.name} session ended")
        try:
            for answer in self.call:
                with self._lock:
                    deliver = self.waiting.pop(answer.id, None)
                if deliver is not None:
                    deliver(answer)
        except grpc.RpcError as exc:
            error = Cancelled("the client was closed") if self._closing else from_rpc_error(exc)
        finally:
            with self._lock:
                self.ended = True
                waiting, self.waiting = self.waiting, {}
            self._requests.put(_END)  # gRPC's thread taking requests off the queue ends too
            for deliver in waiting.values():
                deliver(error)

    def close(self, within: float) -> None:
        self._closing = True
        self.call.cancel()
        self._requests.put(_END)
        self._reader.join(within)


class Session:
    """The Session stream of one service (``kind``) of a synchronous Client; any
    number of threads may make requests at once."""

    def __init__(self, stub: Any, kind: Kind) -> None:
        self._stub = stub
        self._kind = kind
        self._stream: _Stream | None = None
        self._ids = itertools.count(1)
        self._lock = threading.Lock()  # guards _stream and _closed; taken before a _Stream's
        self._closed = False

    def _waiting_on(self, rid: int, deliver: Answer) -> _Stream:
        """The open stream (opened if there is none, or it ended), ``deliver`` waiting on it."""
        with self._lock:
            if self._closed:
                raise Cancelled("the client was closed")
            while True:
                if self._stream is None or self._stream.ended:
                    self._stream = _Stream(self._stub.Session, self._kind)
                if self._stream.wait_for(rid, deliver):
                    return self._stream

    def request(self, op: str, message: Any, timeout: float | None) -> Any:
        """The answer to one request (op: acquire, release, refresh), or its error."""
        rid = next(self._ids)
        answered: concurrent.futures.Future[Any] = concurrent.futures.Future()
        deliver: Answer = answered.set_result
        stream = self._waiting_on(rid, deliver)
        stream.send(self._kind.pb.SessionRequest(id=rid, **{op: message}))
        try:
            answer = answered.result(timeout)
        except TimeoutError:
            acquire = message if op == "acquire" else None
            release = None if acquire is None else functools.partial(self._release_granted, acquire)
            if stream.instead(rid, deliver, release):
                if acquire is not None:
                    stream.send(self._kind.pb.SessionRequest(id=next(self._ids), cancel=rid))
            else:  # answered just as the wait ended
                self._release_granted(acquire, answered.result())
            raise no_answer(self._kind, op, timeout) from None
        return outcome(op, answer)

    def _release_granted(self, acquire: Any | None, answer: Any) -> None:
        """Releases what ``answer`` granted to the abandoned ``acquire``, without waiting
        for the answer (this runs on a reader thread, which must go on reading)."""
        if acquire is None or (release := self._kind.release_of(acquire, answer)) is None:
            return
        rid = next(self._ids)
        try:
            stream = self._waiting_on(rid, lambda _answer: None)
        except Cancelled:  # the client was closed
            return
        stream.send(self._kind.pb.SessionRequest(id=rid, release=release))

    def close(self, within: float) -> None:
        """Ends the stream and its reader (waiting up to ``within`` s for it); requests
        waiting fail with Cancelled, as do any made after."""
        with self._lock:
            self._closed = True
            stream, self._stream = self._stream, None
        if stream is not None:
            stream.close(within)
