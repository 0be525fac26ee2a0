"""Read-write locks for the Python client.

    rw = client.rwlock("catalog", ttl=10, timeout=5)
    with rw.read() as lease:        # shared with other readers
        render(catalog, fencing_token=lease.fencing_token)
    with rw.write() as lease:       # exclusive
        update(catalog, fencing_token=lease.fencing_token)

Readers share the lock, a writer excludes everyone. Waiters are served in FIFO order:
a writer queued behind readers is not overtaken by readers that come later, and the
readers queued behind a writer enter together once it is done. Each hold has its own
TTL and fencing token (tokens strictly increase over every grant of the name, in
either mode).

``read()`` and ``write()`` return a fresh context manager each time, which behaves as
a Lock's ``with`` block does (concord/_holding.py): it waits (``timeout`` seconds,
None = forever), renews in the background every ttl/3, releases on exit, and raises
LockLost on exit if the hold was lost meanwhile. ``async with`` on an AsyncClient's
rwlock does the same. Explicit ``acquire(mode)``/``release``/``refresh``/``describe``
are there for everything else.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from ._convert import duration, seconds, when
from ._holding import AsyncHolder, Handle, SyncHolder
from .errors import LockLost, LockNotHeld, LockTimeout
from .rwlock.v1 import rwlock_pb2 as pb

Mode = Literal["read", "write"]
_MODES = {"read": pb.MODE_READ, "write": pb.MODE_WRITE}
_NAMES = {v: k for k, v in _MODES.items()}


@dataclass(frozen=True)
class RWHolder:
    owner: str
    fencing_token: int
    ttl_remaining: float


@dataclass(frozen=True)
class RWWaiter:
    owner: str
    mode: Mode


@dataclass(frozen=True)
class RWLockSummary:
    """One read-write lock as client.list_rwlocks() shows it (describe() has the
    readers and waiters themselves)."""

    name: str
    writer: RWHolder | None
    readers: int
    waiters: int  # entries in its queue, waiters of a dead server too until skipped


def _summary(m: pb.ReadWriteLockSummary) -> RWLockSummary:
    writer = m.writer if m.HasField("writer") else None
    return RWLockSummary(m.name, RWHolder(writer.owner, writer.fencing_token, seconds(writer.ttl_remaining))
                         if writer is not None else None, m.readers, m.waiters)


# client.list_rwlocks(): _listing.every_page's arguments after the call.
LISTING = ("ListReadWriteLocks", pb.ListReadWriteLocksRequest, "locks", "name", _summary)


@dataclass(frozen=True)
class RWLockInfo:
    writer: RWHolder | None
    readers: list[RWHolder]
    waiters: list[RWWaiter]  # first in line first

    @property
    def held(self) -> bool:
        return self.writer is not None or bool(self.readers)


class RWLease(Handle):
    """Proof that this client holds a read-write lock in ``mode`` ("read" or "write").

    ``fencing_token`` strictly increases with every grant of the lock's name, readers'
    and writers' alike: hand it to the resource you protect.
    """

    def __init__(self, side: Any, token: str, mode: Mode, fencing_token: int, expires_at: datetime) -> None:
        super().__init__(side, token)
        self.mode = mode
        self.fencing_token = fencing_token
        self.expires_at = expires_at

    @property
    def lease(self) -> str:
        return self.token

    def __repr__(self) -> str:
        return f"RWLease(name={self.name!r}, mode={self.mode!r}, fencing_token={self.fencing_token}, lost={self._lost})"


def _mode(mode: str) -> int:
    if mode not in _MODES:
        raise ValueError(f"mode must be 'read' or 'write', not {mode!r}")
    return _MODES[mode]


class _RWBase:
    """What the sync and async handles share: requests and responses."""

    not_held = LockNotHeld

    def __init__(self, client: Any, name: str, *, ttl: float = 30.0, timeout: float | None = None, owner: str = "") -> None:
        self.client = client
        self._rpc = client._service("rwlock")
        self.name = name
        self.ttl = ttl
        self.timeout = timeout
        self.owner = owner

    def _acquire_request(self, mode: str, ttl: float) -> Any:
        m = _mode(mode)
        return lambda wait: pb.AcquireRequest(name=self.name, mode=m, ttl=duration(ttl), wait_timeout=duration(wait),
                                              owner=self.owner)

    def _lease(self, side: Any, mode: Mode) -> Any:
        return lambda resp: (RWLease(side, resp.lease, mode, resp.fencing_token, when(resp.expires_at))
                             if resp.acquired else None)

    def _refresh_request(self, lease: RWLease, ttl: float | None) -> pb.RefreshRequest:
        return pb.RefreshRequest(name=self.name, lease=lease.token, ttl=duration(ttl or self.ttl))

    @staticmethod
    def _info(resp: pb.DescribeResponse) -> RWLockInfo:
        def holder(h: pb.Holder) -> RWHolder:
            return RWHolder(h.owner, h.fencing_token, seconds(h.ttl_remaining))

        return RWLockInfo(holder(resp.writer) if resp.HasField("writer") else None,
                          [holder(h) for h in resp.readers],
                          [RWWaiter(w.owner, _NAMES.get(w.mode, "read")) for w in resp.waiters])


class _Side:
    """One ``with`` block's worth of a mode: what _holding's holders call back."""

    not_held = LockNotHeld

    def __init__(self, lock: Any, mode: Mode, ttl: float | None, timeout: float | None) -> None:
        self.lock = lock
        self.client = lock.client
        self.name = lock.name
        self.mode = mode
        self.ttl = ttl or lock.ttl
        self.timeout = lock.timeout if timeout is None else timeout

    def _timeout_error(self) -> LockTimeout:
        return LockTimeout(f"read-write lock {self.name!r} was not acquired for {self.mode} within {self.timeout}s")

    def _lost_error(self, lease: RWLease) -> LockLost:
        return LockLost(f"read-write lock {self.name!r} ({self.mode}) was lost while held "
                        f"(fencing token {lease.fencing_token})")


class RWLockHold(_Side, SyncHolder):
    """``with rw.read()`` / ``with rw.write()``: acquire, renew, release (see Lock)."""

    def acquire(self, timeout: float | None = 0) -> RWLease | None:
        return self.lock._acquire(self, self.mode, self.ttl, timeout)

    def release(self, lease: RWLease) -> None:
        self.lock.release(lease)

    def refresh(self, lease: RWLease, ttl: float | None = None, *, within: float | None = None) -> RWLease:
        return self.lock.refresh(lease, ttl or self.ttl, within=within)


class AsyncRWLockHold(_Side, AsyncHolder):
    """``async with rw.read()`` / ``async with rw.write()``."""

    async def acquire(self, timeout: float | None = 0) -> RWLease | None:
        return await self.lock._acquire(self, self.mode, self.ttl, timeout)

    async def release(self, lease: RWLease) -> None:
        await self.lock.release(lease)

    async def refresh(self, lease: RWLease, ttl: float | None = None, *, within: float | None = None) -> RWLease:
        return await self.lock.refresh(lease, ttl or self.ttl, within=within)


class RWLock(_RWBase):
    """A read-write lock name on a synchronous :class:`~concord.Client`."""

    def read(self, *, ttl: float | None = None, timeout: float | None = None) -> RWLockHold:
        """A ``with`` block holding the lock shared (ttl, timeout: the handle's unless given)."""
        return RWLockHold(self, "read", ttl, timeout)

    def write(self, *, ttl: float | None = None, timeout: float | None = None) -> RWLockHold:
        """A ``with`` block holding the lock exclusively."""
        return RWLockHold(self, "write", ttl, timeout)

    def acquire(self, mode: Mode, timeout: float | None = 0) -> RWLease | None:
        """Takes the lock in ``mode`` ("read" or "write"), waiting up to ``timeout``
        seconds (0: try once, None: forever) in FIFO order. Returns the RWLease, or
        None if it did not fit in time. Does not renew."""
        return self._acquire(RWLockHold(self, mode, None, None), mode, self.ttl, timeout)

    def _acquire(self, side: Any, mode: Mode, ttl: float, timeout: float | None) -> RWLease | None:
        return self._rpc.wait_for("Acquire", self._acquire_request(mode, ttl), timeout, self._lease(side, mode))

    def release(self, lease: RWLease) -> None:
        """Gives the hold back. Raises LockNotHeld if the lease no longer holds it."""
        self._rpc.call_safe("Release", pb.ReleaseRequest(name=self.name, lease=lease.token))

    def refresh(self, lease: RWLease, ttl: float | None = None, *, within: float | None = None) -> RWLease:
        """Resets the hold's TTL (default: the handle's ttl). Raises LockNotHeld if lost."""
        resp = self._rpc.call_safe("Refresh", self._refresh_request(lease, ttl), within)
        lease.expires_at = when(resp.expires_at)
        return lease

    def describe(self) -> RWLockInfo:
        """The writer or the readers, and the waiters in order with their modes."""
        return self._info(self._rpc.call_safe("Describe", pb.DescribeRequest(name=self.name)))


class AsyncRWLock(_RWBase):
    """A read-write lock name on an :class:`~concord.AsyncClient`; ``async with rw.read()``."""

    def read(self, *, ttl: float | None = None, timeout: float | None = None) -> AsyncRWLockHold:
        return AsyncRWLockHold(self, "read", ttl, timeout)

    def write(self, *, ttl: float | None = None, timeout: float | None = None) -> AsyncRWLockHold:
        return AsyncRWLockHold(self, "write", ttl, timeout)

    async def acquire(self, mode: Mode, timeout: float | None = 0) -> RWLease | None:
        return await self._acquire(AsyncRWLockHold(self, mode, None, None), mode, self.ttl, timeout)

    async def _acquire(self, side: Any, mode: Mode, ttl: float, timeout: float | None) -> RWLease | None:
        return await self._rpc.wait_for("Acquire", self._acquire_request(mode, ttl), timeout, self._lease(side, mode))

    async def release(self, lease: RWLease) -> None:
        await self._rpc.call_safe("Release", pb.ReleaseRequest(name=self.name, lease=lease.token))

    async def refresh(self, lease: RWLease, ttl: float | None = None, *, within: float | None = None) -> RWLease:
        resp = await self._rpc.call_safe("Refresh", self._refresh_request(lease, ttl), within)
        lease.expires_at = when(resp.expires_at)
        return lease

    async def describe(self) -> RWLockInfo:
        return self._info(await self._rpc.call_safe("Describe", pb.DescribeRequest(name=self.name)))
