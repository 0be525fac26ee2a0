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

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ._convert import duration, seconds, when
from ._holding import AsyncHolder, Handle, SyncHolder
from .errors import LockLost, LockNotHeld, LockTimeout
from .lock.v1 import lock_pb2 as pb


@dataclass(frozen=True)
class LockInfo:
    held: bool
    owner: str
    fencing_token: int
    ttl_remaining: float
    waiters: int
    expires_at: datetime | None


class Lease(Handle):
    """Proof that this client holds a lock.

    ``fencing_token`` strictly increases with every grant of the lock's name: hand
    it to the resource you protect and have it reject any token older than the
    newest it has seen.
    """

    def __init__(self, lock: Any, token: str, fencing_token: int, expires_at: datetime) -> None:
        super().__init__(lock, token)
        self.lock = lock
        self.fencing_token = fencing_token
        self.expires_at = expires_at

    def __repr__(self) -> str:
        return f"Lease(name={self.name!r}, fencing_token={self.fencing_token}, lost={self._lost})"


class _LockBase:
    not_held = LockNotHeld

    def __init__(self, client: Any, name: str, *, ttl: float = 30.0, timeout: float | None = None, owner: str = "") -> None:
        self.client = client
        self._rpc = client._service("lock")
        self.name = name
        self.ttl = ttl
        self.timeout = timeout
        self.owner = owner

    def _acquire_request(self, wait: float) -> pb.AcquireRequest:
        return pb.AcquireRequest(name=self.name, ttl=duration(self.ttl), wait_timeout=duration(wait), owner=self.owner)

    def _lease(self, resp: pb.AcquireResponse) -> Lease | None:
        return Lease(self, resp.lease, resp.fencing_token, when(resp.expires_at)) if resp.acquired else None

    def _refresh_request(self, lease: Lease, ttl: float | None) -> pb.RefreshRequest:
        return pb.RefreshRequest(name=self.name, lease=lease.token, ttl=duration(ttl or self.ttl))

    @staticmethod
    def _info(resp: pb.DescribeResponse) -> LockInfo:
        return LockInfo(resp.held, resp.owner, resp.fencing_token, seconds(resp.ttl_remaining), resp.waiters,
                        when(resp.expires_at) if resp.held else None)

    def _timeout_error(self) -> LockTimeout:
        return LockTimeout(f"lock {self.name!r} was not acquired within {self.timeout}s")

    def _lost_error(self, lease: Lease) -> LockLost:
        return LockLost(f"lock {self.name!r} was lost while held (fencing token {lease.fencing_token})")


class Lock(_LockBase, SyncHolder):
    """A lock name on a synchronous :class:`~concord.Client`."""

    def acquire(self, timeout: float | None = 0) -> Lease | None:
        """Takes the lock, waiting up to ``timeout`` seconds (0: try once, None: forever).

        Returns the Lease, or None if the lock stayed taken. Does not renew.
        Rides out a Redis outage shorter than the timeout (see concord._retry).
        """
        return self._rpc.wait_for("Acquire", self._acquire_request, timeout, self._lease)

    def release(self, lease: Lease) -> None:
        """Frees the lock. Raises LockNotHeld if the lease no longer holds it."""
        self._rpc.call_safe("Release", pb.ReleaseRequest(name=self.name, lease=lease.token))

    def refresh(self, lease: Lease, ttl: float | None = None, *, within: float | None = None) -> Lease:
        """Resets the lock's TTL (default: the lock's ttl). Raises LockNotHeld if lost.
        within: seconds to keep retrying while UNAVAILABLE (default: the client's timeout)."""
        resp = self._rpc.call_safe("Refresh", self._refresh_request(lease, ttl), within)
        lease.expires_at = when(resp.expires_at)
        return lease

    def describe(self) -> LockInfo:
        """Who holds the lock, until when, and how many wait for it."""
        return self._info(self._rpc.call_safe("Describe", pb.DescribeRequest(name=self.name)))


class AsyncLock(_LockBase, AsyncHolder):
    """A lock name on an :class:`~concord.AsyncClient`; use ``async with``."""

    async def acquire(self, timeout: float | None = 0) -> Lease | None:
        """Takes the lock, waiting up to ``timeout`` seconds (0: try once, None: forever)."""
        return await self._rpc.wait_for("Acquire", self._acquire_request, timeout, self._lease)

    async def release(self, lease: Lease) -> None:
        await self._rpc.call_safe("Release", pb.ReleaseRequest(name=self.name, lease=lease.token))

    async def refresh(self, lease: Lease, ttl: float | None = None, *, within: float | None = None) -> Lease:
        resp = await self._rpc.call_safe("Refresh", self._refresh_request(lease, ttl), within)
        lease.expires_at = when(resp.expires_at)
        return lease

    async def describe(self) -> LockInfo:
        return self._info(await self._rpc.call_safe("Describe", pb.DescribeRequest(name=self.name)))


class MultiLease(Handle):
    """Proof that this client holds every lock of a MultiLock, with one fencing
    token per name (``fencing_tokens[name]``)."""

    def __init__(self, lock: Any, token: str, fencing_tokens: dict[str, int], expires_at: datetime) -> None:
        super().__init__(lock, token)
        self.fencing_tokens = fencing_tokens
        self.expires_at = expires_at

    def __repr__(self) -> str:
        return f"MultiLease(names={list(self.fencing_tokens)!r}, lost={self._lost})"


class _MultiLockBase:
    not_held = LockNotHeld

    def __init__(self, client: Any, names: list[str], *, ttl: float = 30.0, timeout: float | None = None,
                 owner: str = "") -> None:
        self.client = client
        self._rpc = client._service("lock")
        self.names = list(names)
        self.name = ",".join(self.names)
        self.ttl = ttl
        self.timeout = timeout
        self.owner = owner

    def _acquire_request(self, wait: float) -> pb.AcquireManyRequest:
        return pb.AcquireManyRequest(names=self.names, ttl=duration(self.ttl), wait_timeout=duration(wait),
                                     owner=self.owner)

    def _lease(self, resp: pb.AcquireManyResponse) -> MultiLease | None:
        if not resp.acquired:
            return None
        return MultiLease(self, resp.lease, dict(zip(self.names, resp.fencing_tokens)), when(resp.expires_at))

    def _refresh_request(self, lease: MultiLease, ttl: float | None) -> pb.RefreshManyRequest:
        return pb.RefreshManyRequest(names=self.names, lease=lease.token, ttl=duration(ttl or self.ttl))

    def _release_request(self, lease: MultiLease) -> pb.ReleaseManyRequest:
        return pb.ReleaseManyRequest(names=self.names, lease=lease.token)

    def _timeout_error(self) -> LockTimeout:
        return LockTimeout(f"locks {self.names!r} were not all acquired within {self.timeout}s")

    def _lost_error(self, lease: MultiLease) -> LockLost:
        return LockLost(f"one of the locks {self.names!r} was lost while held")


class MultiLock(_MultiLockBase, SyncHolder):
    """Several lock names taken all or none (``client.multilock([...])``): ``with`` it,
    or call acquire/release/refresh. While it waits it holds none of them, so two
    multilocks over the same names in any order cannot deadlock."""

    def acquire(self, timeout: float | None = 0) -> MultiLease | None:
        return self._rpc.wait_for("AcquireMany", self._acquire_request, timeout, self._lease)

    def release(self, lease: MultiLease) -> None:
        self._rpc.call_safe("ReleaseMany", self._release_request(lease))

    def refresh(self, lease: MultiLease, ttl: float | None = None, *, within: float | None = None) -> MultiLease:
        lease.expires_at = when(self._rpc.call_safe("RefreshMany", self._refresh_request(lease, ttl), within).expires_at)
        return lease


class AsyncMultiLock(_MultiLockBase, AsyncHolder):
    """MultiLock on an AsyncClient; use ``async with``."""

    async def acquire(self, timeout: float | None = 0) -> MultiLease | None:
        return await self._rpc.wait_for("AcquireMany", self._acquire_request, timeout, self._lease)

    async def release(self, lease: MultiLease) -> None:
        await self._rpc.call_safe("ReleaseMany", self._release_request(lease))

    async def refresh(self, lease: MultiLease, ttl: float | None = None, *, within: float | None = None) -> MultiLease:
        resp = await self._rpc.call_safe("RefreshMany", self._refresh_request(lease, ttl), within)
        lease.expires_at = when(resp.expires_at)
        return lease
