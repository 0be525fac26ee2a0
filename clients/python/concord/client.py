"""Client and AsyncClient: two gRPC connections each (prompt calls; waits and streams:
see Service), and the entry points to every primitive."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import grpc

from ._auth import Pem, SyncToken, aio_token_interceptors, tls_credentials
from ._retry import WAIT_CHUNK, Budget, backoff, refused, retry, retry_async
from ._session import KINDS, Session, SessionStub
from ._session_sync import Session as SyncSession
from .autocomplete import AsyncAutocomplete, Autocomplete
from .autocomplete.v1 import autocomplete_pb2_grpc
from .chat.v1 import chat_pb2_grpc
from .chats import AsyncChat, Chat
from .election.v1 import election_pb2_grpc
from ._listing import every_page, every_page_async
from . import elections, ratelimits, rwlocks
from .elections import AsyncElection, Election, ElectionSummary
from .errors import from_rpc_error
from .files import Files
from .files.v1 import files_pb2_grpc
from .lock.v1 import lock_pb2_grpc
from .locks import AsyncLock, AsyncMultiLock, Lock, MultiLock
from .queue.v1 import queue_pb2_grpc
from .queues import AsyncQueue, Queue, Task, dequeue_async, dequeue_sync
from .ratelimit.v1 import ratelimit_pb2_grpc
from .ratelimits import AsyncRateLimit, Limit, LimitSummary, RateLimit
from .rwlock.v1 import rwlock_pb2_grpc
from .rwlocks import AsyncRWLock, RWLock, RWLockSummary
from .semaphore.v1 import semaphore_pb2_grpc
from .semaphores import AsyncSemaphore, Semaphore

DEFAULT_TARGET = "127.0.0.1:50051"

# Detect a dead server on an idle channel; the server accepts pings this often.
_CHANNEL_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
]


class Service:
    """One gRPC service of a connection (``client._service("lock")``): the whole of
    what concord's modules use to call the server, besides ``client.timeout``.

    ``method`` is the RPC's name ("Acquire"). On a Client each method returns the
    response; on an AsyncClient, an awaitable. Errors are concord.errors types.

    Calls that wait or stay open (``wait_for``, ``open``) go on a connection of their
    own (``waiting_stub``): a server admits only so many calls per connection
    (``--max-streams-per-connection``), and a release must never queue behind the
    blocked acquires it would end.
    """

    def __init__(self, connection: _Connection, stub: Any, waiting_stub: Any = None) -> None:
        self._connection = connection
        self._stub = stub
        self._waiting_stub = stub if waiting_stub is None else waiting_stub

    def call(self, method: str, request: Any) -> Any:
        """One try: for calls that are not safe to repeat (see concord._retry)."""
        return self._connection._call(getattr(self._stub, method), request)

    def call_safe(self, method: str, request: Any, within: float | None = None) -> Any:
        """A call safe to repeat, retried on UNAVAILABLE for up to ``within`` seconds
        (default: the client's timeout)."""
        return self._connection._call_safe(getattr(self._stub, method), request, within)

    def wait_for(self, method: str, request_for: Any, timeout: float | None, result: Any) -> Any:
        """A blocking call made of server-side waits that together last ``timeout``
        (None: forever), each request built by ``request_for(wait)``, until
        ``result(response)`` is not None; retried on UNAVAILABLE within the wait."""
        return self._connection._wait_for(getattr(self._waiting_stub, method), request_for, timeout, result)

    def open(self, method: str) -> Any:
        """The stub's own callable, for streams and futures; the caller maps its
        grpc.RpcError (errors.from_rpc_error) and sets its timeout."""
        return getattr(self._waiting_stub, method)


class _Connection:
    """The channel and stubs; Client and AsyncClient differ only in grpc vs grpc.aio.

    concord's modules reach the server only through ``_service(name)`` (a Service:
    call, call_safe, wait_for, open) and read ``timeout``. Behind it, calls go
    through ``_call`` (one try), ``_call_safe`` (retried on UNAVAILABLE within the
    client's timeout) and ``_wait_for`` (a blocking call, retried within its wait).
    Which calls may be retried, and why, is in concord._retry.
    """

    _grpc: Any
    _session_type: Any  # _session.Session or _session_sync.Session

    def __init__(
        self,
        target: str = DEFAULT_TARGET,
        *,
        timeout: float = 10.0,
        credentials: grpc.ChannelCredentials | None = None,
        options: Sequence[tuple[str, Any]] = (),
        tls: bool = False,
        root_certificates: Pem | None = None,
        client_cert: Pem | None = None,
        client_key: Pem | None = None,
        token: str | None = None,
    ) -> None:
        """tls: connect over TLS (implied by root_certificates or client_cert);
        root_certificates: the CA to trust (PEM bytes or a file path; None: the system's);
        client_cert/client_key: this client's certificate for mutual TLS;
        token: sent as ``authorization: Bearer <token>`` on every call.
        ``credentials`` (grpc.ChannelCredentials) replaces the TLS arguments."""
        self.timeout = timeout
        opts = [*_CHANNEL_OPTIONS, *options]
        if credentials is None and (tls or root_certificates is not None or client_cert is not None):
            credentials = tls_credentials(root_certificates, client_cert, client_key)
        self._channel = self._open_channel(target, credentials, opts, token)
        # Waits and streams on a connection of their own (see Service): a channel with
        # other arguments does not share the first one's connection.
        self._waiting_channel = self._open_channel(target, credentials, [*opts, ("concord.connection", "waiting")],
                                                   token)
        self._services = {name: Service(self, stub(self._channel), stub(self._waiting_channel)) for name, stub in (
            ("lock", lock_pb2_grpc.LockServiceStub),
            ("semaphore", semaphore_pb2_grpc.SemaphoreServiceStub),
            ("queue", queue_pb2_grpc.QueueServiceStub),
            ("chat", chat_pb2_grpc.ChatServiceStub),
            ("autocomplete", autocomplete_pb2_grpc.AutocompleteServiceStub),
            ("files", files_pb2_grpc.FileServiceStub),
            ("rwlock", rwlock_pb2_grpc.ReadWriteLockServiceStub),
            ("ratelimit", ratelimit_pb2_grpc.RateLimitServiceStub),
            ("election", election_pb2_grpc.ElectionServiceStub))}
        # Acquire, release and refresh of locks, semaphores and read-write locks go as
        # messages on one Session stream per service (_session.py, _session_sync.py).
        self._sessions = {kind.name: self._session_type(self._services[kind.name]._waiting_stub, kind)
                          for kind in KINDS.values()}
        for name, session in self._sessions.items():
            service = self._services[name]
            self._services[name] = Service(self, SessionStub(service._stub, session),
                                           SessionStub(service._waiting_stub, session))
        self._enqueuers: dict[str, Any] = {}  # queue name -> the Coalescer its puts share (queues.py)

    def _open_channel(self, target: str, credentials: grpc.ChannelCredentials | None,
                      opts: list[tuple[str, Any]], token: str | None) -> Any:
        # The token goes in by interceptor on either kind of channel (see _auth.py).
        if self._grpc is grpc:
            channel = (grpc.secure_channel(target, credentials, options=opts) if credentials is not None
                       else grpc.insecure_channel(target, options=opts))
            return grpc.intercept_channel(channel, SyncToken(token)) if token else channel
        interceptors = aio_token_interceptors(token) if token else None
        return (grpc.aio.secure_channel(target, credentials, options=opts, interceptors=interceptors)
                if credentials is not None
                else grpc.aio.insecure_channel(target, options=opts, interceptors=interceptors))

    def _service(self, name: str) -> Service:
        """The service of the proto package ``name``: lock, semaphore, queue, chat,
        autocomplete or files."""
        return self._services[name]


class Client(_Connection):
    """A synchronous connection to a Concord server.

    >>> with concord.Client("127.0.0.1:50051") as client:
    ...     with client.lock("orders:42", ttl=10) as lease:
    ...         print(lease.fencing_token)

    ``timeout`` bounds every call in seconds, on top of any time it spends waiting
    on purpose (a lock's wait timeout). Errors are raised as concord.errors types.
    Calls that are safe to repeat ride out short outages: they are retried while
    the server answers UNAVAILABLE, within their wait timeout or else ``timeout``
    (see concord._retry for which calls, and why).
    """

    _grpc = grpc
    _session_type = SyncSession

    @property
    def chat(self) -> Chat:
        """Group chat: create, send, fetch_pending, subscribe, join, leave, ... (concord.chats)."""
        return Chat(self)

    @property
    def autocomplete(self) -> Autocomplete:
        """Recent contacts and name indexes (concord.autocomplete)."""
        return Autocomplete(self)

    @property
    def files(self) -> Files:
        """File distribution to a chat's members (concord.files)."""
        return Files(self)

    def lock(self, name: str, *, ttl: float = 30.0, timeout: float | None = None, owner: str = "") -> Lock:
        """A handle on the lock ``name``: ``with`` it, or call acquire/release/describe.

        ttl: seconds the lock lives without renewal. timeout: seconds ``with`` waits
        for it (None: forever). owner: a label shown by describe().
        """
        return Lock(self, name, ttl=ttl, timeout=timeout, owner=owner)

    def multilock(self, names: Sequence[str], *, ttl: float = 30.0, timeout: float | None = None,
                  owner: str = "") -> MultiLock:
        """Several locks taken all or none: ``with client.multilock(["a", "b"]) as lease``.
        Waiting, it holds none of them. ttl, timeout, owner: as for lock()."""
        return MultiLock(self, list(names), ttl=ttl, timeout=timeout, owner=owner)

    def semaphore(self, name: str, *, limit: int = 0, permits: int = 1, ttl: float = 30.0,
                  timeout: float | None = None, owner: str = "") -> Semaphore:
        """A handle on the semaphore ``name``: ``with`` it, or call acquire/release/describe/set_limit.

        limit: most permits held at once. It must be the semaphore's stored limit, which
        ``set_limit`` sets (or the first acquire that finds none; only set_limit changes it,
        else SemaphoreLimitMismatch); leave it out to use the stored one.
        permits: how many this handle takes at once. ttl, timeout, owner: as for lock().
        """
        return Semaphore(self, name, limit=limit, permits=permits, ttl=ttl, timeout=timeout, owner=owner)

    def rwlock(self, name: str, *, ttl: float = 30.0, timeout: float | None = None, owner: str = "") -> RWLock:
        """A handle on the read-write lock ``name``: ``with rw.read()`` (shared) or
        ``with rw.write()`` (exclusive), or call acquire(mode)/release/describe.
        ttl, timeout, owner: as for lock() (see concord.rwlocks).
        """
        return RWLock(self, name, ttl=ttl, timeout=timeout, owner=owner)

    def list_rwlocks(self) -> list[RWLockSummary]:
        """Every read-write lock held or waited for, with its writer, reader count and
        queue length, by name (all pages of ListReadWriteLocks)."""
        return every_page(self._service("rwlock").call_safe, *rwlocks.LISTING)

    def rate_limit(self, key: str, rate: int | None = None, per: float = 1.0, *, burst: int = 0,
                   algorithm: str = "gcra", drain: bool = False, timeout: float | None = None) -> RateLimit:
        """The rate limit of ``key``: ``rate`` units per ``per`` seconds, up to ``burst``
        at once (0: rate); ``with`` it or decorate with it to wait for one unit (up to
        ``timeout`` seconds, None: as long as it takes), or call check/wait (see
        concord.ratelimits). Leave ``rate`` out to use the limit stored by set_limit."""
        limit = None if rate is None else Limit(rate, per, burst, algorithm, drain)
        return RateLimit(self, key, limit, timeout)

    def list_rate_limits(self) -> list[LimitSummary]:
        """Every key with a stored limit (set_limit), with what it allows now and its
        waiters, by key (all pages of ListLimits). Keys whose limit travels with each
        call are not listed."""
        return every_page(self._service("ratelimit").call_safe, *ratelimits.LISTING)

    def election(self, name: str, *, ttl: float = 10.0, candidate: str = "") -> Election:
        """The election ``name``: ``with election.campaign(value) as leadership``,
        ``election.observe()``, ``election.leader()`` (see concord.elections).

        ttl: seconds a leadership lasts without renewal (a campaign renews it; a
        crashed leader is replaced at once when its stream ends, else after ttl).
        candidate: a label observers see; defaults to this client's address.
        """
        return Election(self, name, ttl=ttl, candidate=candidate)

    def list_elections(self) -> list[ElectionSummary]:
        """Every election with a leader or candidates, with its leader, by name (all
        pages of ListElections)."""
        return every_page(self._service("election").call_safe, *elections.LISTING)

    def queue(self, name: str) -> Queue:
        """The task queue ``name``: put, get, ack, stats, ... (see concord.queues)."""
        return Queue(self, name)

    def dequeue(self, queues: Sequence[str], max_tasks: int = 1, *, lease_ttl: float = 30.0,
                timeout: float | None = 0) -> list[Task]:
        """Leases up to max_tasks tasks from the queues, strictly in the order given,
        waiting up to timeout seconds (0: try once, None: forever). [] if none came."""
        return dequeue_sync(self, queues, max_tasks, lease_ttl, timeout)

    def _once(self, method: Any, request: Any, deadline: float) -> Any:
        """One call; a stream the server refused unseen (_retry.refused) is sent again."""
        budget, attempt = Budget(deadline), 0
        while True:
            try:
                return method(request, timeout=budget.left())
            except grpc.RpcError as exc:
                if not refused(exc) or (pause := backoff(attempt)) >= budget.left():
                    raise from_rpc_error(exc) from None
            time.sleep(pause)
            attempt += 1

    def _call(self, method: Any, request: Any, wait: float = 0.0) -> Any:
        """One try: for calls that are not safe to repeat (see concord._retry)."""
        return self._once(method, request, wait + self.timeout)

    def _call_safe(self, method: Any, request: Any, within: float | None = None) -> Any:
        """A call safe to repeat, retried on UNAVAILABLE for up to ``within`` seconds
        (default: the client's timeout); each try gets what is left as its deadline."""
        budget = Budget(self.timeout if within is None else within)
        return retry(lambda: self._once(method, request, budget.left()), budget)

    def _wait_for(self, method: Any, request_for: Any, timeout: float | None, result: Any) -> Any:
        """A blocking call (Service.wait_for); retried within its wait."""
        wait = Budget(timeout)
        while True:
            last = wait.left() <= WAIT_CHUNK

            def once() -> Any:
                w = wait.chunk()  # less on each retry: the wait's time is spent either way
                return self._once(method, request_for(w), w + self.timeout)

            got = result(retry(once, wait, waits=True))
            if got is not None or last:
                return got

    def close(self) -> None:
        for session in self._sessions.values():
            session.close(self.timeout)
        self._channel.close()
        self._waiting_channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient(_Connection):
    """An asyncio connection to a Concord server.

    >>> async with concord.AsyncClient("127.0.0.1:50051") as client:
    ...     async with client.lock("orders:42", ttl=10) as lease:
    ...         print(lease.fencing_token)
    """

    _grpc = grpc.aio
    _session_type = Session

    @property
    def chat(self) -> AsyncChat:
        """Group chat; its methods are awaited and subscribe() is an async iterator."""
        return AsyncChat(self)

    @property
    def autocomplete(self) -> AsyncAutocomplete:
        """Recent contacts and name indexes; methods are awaited."""
        return AsyncAutocomplete(self)

    def lock(self, name: str, *, ttl: float = 30.0, timeout: float | None = None, owner: str = "") -> AsyncLock:
        """A handle on the lock ``name``: ``async with`` it, or await its methods."""
        return AsyncLock(self, name, ttl=ttl, timeout=timeout, owner=owner)

    def multilock(self, names: Sequence[str], *, ttl: float = 30.0, timeout: float | None = None,
                  owner: str = "") -> AsyncMultiLock:
        """Several locks taken all or none: ``async with client.multilock([...])``."""
        return AsyncMultiLock(self, list(names), ttl=ttl, timeout=timeout, owner=owner)

    def semaphore(self, name: str, *, limit: int = 0, permits: int = 1, ttl: float = 30.0,
                  timeout: float | None = None, owner: str = "") -> AsyncSemaphore:
        """A handle on the semaphore ``name``: ``async with`` it, or await its methods."""
        return AsyncSemaphore(self, name, limit=limit, permits=permits, ttl=ttl, timeout=timeout, owner=owner)

    def rwlock(self, name: str, *, ttl: float = 30.0, timeout: float | None = None, owner: str = "") -> AsyncRWLock:
        """A handle on the read-write lock ``name``: ``async with rw.read()`` / ``rw.write()``."""
        return AsyncRWLock(self, name, ttl=ttl, timeout=timeout, owner=owner)

    async def list_rwlocks(self) -> list[RWLockSummary]:
        return await every_page_async(self._service("rwlock").call_safe, *rwlocks.LISTING)

    def rate_limit(self, key: str, rate: int | None = None, per: float = 1.0, *, burst: int = 0,
                   algorithm: str = "gcra", drain: bool = False, timeout: float | None = None) -> AsyncRateLimit:
        """As Client.rate_limit, awaited: ``async with`` it, or await check/wait."""
        limit = None if rate is None else Limit(rate, per, burst, algorithm, drain)
        return AsyncRateLimit(self, key, limit, timeout)

    async def list_rate_limits(self) -> list[LimitSummary]:
        return await every_page_async(self._service("ratelimit").call_safe, *ratelimits.LISTING)

    def election(self, name: str, *, ttl: float = 10.0, candidate: str = "") -> AsyncElection:
        return AsyncElection(self, name, ttl=ttl, candidate=candidate)

    async def list_elections(self) -> list[ElectionSummary]:
        return await every_page_async(self._service("election").call_safe, *elections.LISTING)

    def queue(self, name: str) -> AsyncQueue:
        """The task queue ``name``; its methods are awaited."""
        return AsyncQueue(self, name)

    async def dequeue(self, queues: Sequence[str], max_tasks: int = 1, *, lease_ttl: float = 30.0,
                      timeout: float | None = 0) -> list[Task]:
        """Client.dequeue, awaited."""
        return await dequeue_async(self, queues, max_tasks, lease_ttl, timeout)

    async def _once(self, method: Any, request: Any, deadline: float) -> Any:
        """Client._once, awaited."""
        budget, attempt = Budget(deadline), 0
        while True:
            try:
                return await method(request, timeout=budget.left())
            except grpc.RpcError as exc:
                if not refused(exc) or (pause := backoff(attempt)) >= budget.left():
                    raise from_rpc_error(exc) from None
            await asyncio.sleep(pause)
            attempt += 1

    async def _call(self, method: Any, request: Any, wait: float = 0.0) -> Any:
        """One try: for calls that are not safe to repeat (see concord._retry)."""
        return await self._once(method, request, wait + self.timeout)

    async def _call_safe(self, method: Any, request: Any, within: float | None = None) -> Any:
        """Client._call_safe, awaited."""
        budget = Budget(self.timeout if within is None else within)
        return await retry_async(lambda: self._once(method, request, budget.left()), budget)

    async def _wait_for(self, method: Any, request_for: Any, timeout: float | None, result: Any) -> Any:
        """Client._wait_for, awaited."""
        wait = Budget(timeout)
        while True:
            last = wait.left() <= WAIT_CHUNK

            def once() -> Any:
                w = wait.chunk()
                return self._once(method, request_for(w), w + self.timeout)

            got = result(await retry_async(once, wait, waits=True))
            if got is not None or last:
                return got

    async def close(self) -> None:
        await self._channel.close()
        await self._waiting_channel.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
