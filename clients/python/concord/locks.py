"""Distributed locks for the Python client.

    with client.lock("orders:42", ttl=10) as lease:
        charge(order, fencing_token=lease.fencing_token)

The ``with`` block waits for the lock (``timeout`` seconds, None = forever), renews
it in the background every ttl/3 while the block runs, and releases it on exit. If
the lock is lost meanwhile, ``lease.lost`` turns true and leaving the block raises
LockLost, because the work inside was not protected. ``async with`` on an
AsyncClient's lock does the same. Explicit ``acquire``/``release``/``refresh``/
``describe`` calls are there for everything else.

A Lock object is a handle on a name; one ``with`` at a time may use a given handle.
``client.lock(...)`` is cheap: make one per thread or task.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ._convert import duration, seconds, when
from .errors import ConcordError, LockLost, LockNotHeld, LockTimeout
from .lock.v1 import lock_pb2 as pb

if TYPE_CHECKING:
    from .client import AsyncClient, Client

# timeout=None waits in server-side waits of this length; each one keeps its FIFO place.
WAIT_CHUNK = 300.0


@dataclass(frozen=True)
class LockInfo:
    held: bool
    owner: str
    fencing_token: int
    ttl_remaining: float
    waiters: int
    expires_at: datetime | None


class Lease:
    """Proof that this client holds a lock.

    ``fencing_token`` strictly increases with every grant of the lock's name: hand
    it to the resource you protect and have it reject any token older than the
    newest it has seen.
    """

    def __init__(self, lock: _LockBase, token: str, fencing_token: int, expires_at: datetime) -> None:
        self.lock = lock
        self.name = lock.name
        self.token = token
        self.fencing_token = fencing_token
        self.expires_at = expires_at
        self._lost = False

    @property
    def lost(self) -> bool:
        """True once the background renewal found the lock gone (or could not renew it in time)."""
        return self._lost

    def release(self) -> Any:
        return self.lock.release(self)

    def refresh(self, ttl: float | None = None) -> Any:
        return self.lock.refresh(self, ttl)

    def __repr__(self) -> str:
        return f"Lease(name={self.name!r}, fencing_token={self.fencing_token}, lost={self._lost})"


class _Renewal:
    """When to renew next, and when an unrenewable lease must be taken as lost."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self.period = ttl / 3
        self.valid_until = time.monotonic() + ttl

    def renewed(self, sent_at: float) -> float:
        self.valid_until = sent_at + self.ttl
        return self.period

    def failed(self) -> float | None:
        """The next delay, or None when the lease may already have expired."""
        left = self.valid_until - time.monotonic()
        return None if left <= 0 else min(self.period, max(0.01, left / 4))


class _LockBase:
    def __init__(self, client: Any, name: str, *, ttl: float = 30.0, timeout: float | None = None, owner: str = "") -> None:
        self.client = client
        self.name = name
        self.ttl = ttl
        self.timeout = timeout
        self.owner = owner

    def _acquire_request(self, wait: float) -> pb.AcquireRequest:
        return pb.AcquireRequest(name=self.name, ttl=duration(self.ttl), wait_timeout=duration(wait), owner=self.owner)

    def _lease(self, resp: pb.AcquireResponse) -> Lease | None:
        if not resp.acquired:
            return None
        return Lease(self, resp.lease, resp.fencing_token, when(resp.expires_at))

    def _refresh_request(self, lease: Lease, ttl: float | None) -> pb.RefreshRequest:
        return pb.RefreshRequest(name=self.name, lease=lease.token, ttl=duration(ttl or self.ttl))

    @staticmethod
    def _info(resp: pb.DescribeResponse) -> LockInfo:
        return LockInfo(resp.held, resp.owner, resp.fencing_token, seconds(resp.ttl_remaining), resp.waiters,
                        when(resp.expires_at) if resp.held else None)

    def _timeout_error(self) -> LockTimeout:
        return LockTimeout(f"lock {self.name!r} was not acquired within {self.timeout}s", reason="LOCK_WAIT_TIMEOUT")

    def _lost_error(self, lease: Lease) -> LockLost:
        return LockLost(f"lock {self.name!r} was lost while held (fencing token {lease.fencing_token})",
                        reason="LOCK_NOT_HELD")

    @staticmethod
    def _chunks(timeout: float | None):
        """Server-side waits that together make up ``timeout`` (None: forever)."""
        if timeout is None:
            while True:
                yield WAIT_CHUNK
        deadline = time.monotonic() + timeout
        while True:
            left = max(0.0, deadline - time.monotonic())
            yield min(left, WAIT_CHUNK)
            if left <= WAIT_CHUNK:
                return


class Lock(_LockBase):
    """A lock name on a synchronous :class:`~concord.Client`."""

    client: Client

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held: tuple[Lease, threading.Event, threading.Thread] | None = None

    def acquire(self, timeout: float | None = 0) -> Lease | None:
        """Takes the lock, waiting up to ``timeout`` seconds (0: try once, None: forever).

        Returns the Lease, or None if the lock stayed taken. Does not renew.
        """
        for wait in self._chunks(timeout):
            lease = self._lease(self.client._call(self.client._locks.Acquire, self._acquire_request(wait), wait))
            if lease is not None:
                return lease
        return None

    def release(self, lease: Lease) -> None:
        """Frees the lock. Raises LockNotHeld if the lease no longer holds it."""
        self.client._call(self.client._locks.Release, pb.ReleaseRequest(name=self.name, lease=lease.token))

    def refresh(self, lease: Lease, ttl: float | None = None) -> Lease:
        """Resets the lock's TTL (default: the lock's ttl). Raises LockNotHeld if lost."""
        resp = self.client._call(self.client._locks.Refresh, self._refresh_request(lease, ttl))
        lease.expires_at = when(resp.expires_at)
        return lease

    def describe(self) -> LockInfo:
        """Who holds the lock, until when, and how many wait for it."""
        return self._info(self.client._call(self.client._locks.Describe, pb.DescribeRequest(name=self.name)))

    def __enter__(self) -> Lease:
        lease = self.acquire(self.timeout)
        if lease is None:
            raise self._timeout_error()
        stop = threading.Event()
        renewer = threading.Thread(target=self._renew, args=(lease, stop), name=f"concord-renew {self.name}", daemon=True)
        renewer.start()
        self._held = (lease, stop, renewer)
        return lease

    def _renew(self, lease: Lease, stop: threading.Event) -> None:
        plan = _Renewal(self.ttl)
        delay: float | None = plan.period
        while not stop.wait(delay):
            sent = time.monotonic()
            try:
                self.refresh(lease)
                delay = plan.renewed(sent)
            except LockNotHeld:
                delay = None
            except ConcordError:
                delay = plan.failed()
            if delay is None:
                lease._lost = True
                return

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        assert self._held is not None, "__exit__ without __enter__"
        lease, stop, renewer = self._held
        self._held = None
        stop.set()
        renewer.join()
        if not lease.lost:
            try:
                self.release(lease)
            except LockNotHeld:
                lease._lost = True
        if lease.lost and exc_type is None:
            raise self._lost_error(lease)


class AsyncLock(_LockBase):
    """A lock name on an :class:`~concord.AsyncClient`; use ``async with``."""

    client: AsyncClient

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held: tuple[Lease, asyncio.Task[None]] | None = None

    async def acquire(self, timeout: float | None = 0) -> Lease | None:
        """Takes the lock, waiting up to ``timeout`` seconds (0: try once, None: forever)."""
        for wait in self._chunks(timeout):
            resp = await self.client._call(self.client._locks.Acquire, self._acquire_request(wait), wait)
            if (lease := self._lease(resp)) is not None:
                return lease
        return None

    async def release(self, lease: Lease) -> None:
        await self.client._call(self.client._locks.Release, pb.ReleaseRequest(name=self.name, lease=lease.token))

    async def refresh(self, lease: Lease, ttl: float | None = None) -> Lease:
        resp = await self.client._call(self.client._locks.Refresh, self._refresh_request(lease, ttl))
        lease.expires_at = when(resp.expires_at)
        return lease

    async def describe(self) -> LockInfo:
        return self._info(await self.client._call(self.client._locks.Describe, pb.DescribeRequest(name=self.name)))

    async def __aenter__(self) -> Lease:
        lease = await self.acquire(self.timeout)
        if lease is None:
            raise self._timeout_error()
        self._held = (lease, asyncio.create_task(self._renew(lease), name=f"concord-renew {self.name}"))
        return lease

    async def _renew(self, lease: Lease) -> None:
        plan = _Renewal(self.ttl)
        delay: float | None = plan.period
        while delay is not None:
            await asyncio.sleep(delay)
            sent = time.monotonic()
            try:
                await self.refresh(lease)
                delay = plan.renewed(sent)
            except LockNotHeld:
                delay = None
            except ConcordError:
                delay = plan.failed()
        lease._lost = True

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        assert self._held is not None, "__aexit__ without __aenter__"
        lease, renewer = self._held
        self._held = None
        renewer.cancel()
        await asyncio.gather(renewer, return_exceptions=True)
        if not lease.lost:
            try:
                await self.release(lease)
            except LockNotHeld:
                lease._lost = True
        if lease.lost and exc_type is None:
            raise self._lost_error(lease)
