"""Counting semaphores for the Python client.

    client.semaphore("api:tenant-7").set_limit(5)   # once, at deploy (returns the previous limit)
    with client.semaphore("api:tenant-7") as permit:
        call_the_api()

At most ``limit`` permits are held at once across every client; waiters are served
in FIFO order, and ``permits=n`` takes n at once, all or none. The ``with`` block
waits (``timeout`` seconds, None = forever), renews in the background every ttl/3,
releases on exit, and raises PermitLost on exit if the permit was lost meanwhile.
``async with`` on an AsyncClient's semaphore does the same.

The limit is the semaphore's, stored by the server: ``set_limit(n)`` sets it (kept
until the next set_limit), or else the first acquire that finds none stores its own
``limit`` (kept while the semaphore is in use). Only set_limit changes it: an acquire
whose ``limit`` differs raises SemaphoreLimitMismatch and takes nothing. Leave
``limit`` out (0) to use the stored one (NotFound if there is none). A lower limit
evicts nobody; a higher one admits waiters at once. One ``with`` at a time may use a
given Semaphore object.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ._convert import duration, seconds, when
from ._holding import AsyncHolder, Handle, SyncHolder
from .errors import PermitLost, PermitNotHeld, SemaphoreTimeout
from .semaphore.v1 import semaphore_pb2 as pb


@dataclass(frozen=True)
class HolderInfo:
    permit_id: str
    owner: str
    permits: int
    ttl_remaining: float


@dataclass(frozen=True)
class SemaphoreInfo:
    limit: int
    held: int
    holders: list[HolderInfo]
    waiters: int


class Permit(Handle):
    """Proof that this client holds ``permits`` permits of a semaphore."""

    def __init__(self, semaphore: Any, permit_id: str, permits: int, expires_at: datetime) -> None:
        super().__init__(semaphore, permit_id)
        self.semaphore = semaphore
        self.permit_id = permit_id
        self.permits = permits
        self.expires_at = expires_at

    def __repr__(self) -> str:
        return f"Permit(name={self.name!r}, permits={self.permits}, lost={self._lost})"


class _SemaphoreBase:
    not_held = PermitNotHeld

    def __init__(self, client: Any, name: str, *, limit: int = 0, permits: int = 1, ttl: float = 30.0,
                 timeout: float | None = None, owner: str = "") -> None:
        self.client = client
        self._rpc = client._service("semaphore")
        self.name = name
        self.limit = limit  # 0: the stored one
        self.permits = permits
        self.ttl = ttl
        self.timeout = timeout
        self.owner = owner

    def _acquire_request(self, wait: float) -> pb.AcquireRequest:
        return pb.AcquireRequest(name=self.name, limit=self.limit, permits=self.permits, ttl=duration(self.ttl),
                                 wait_timeout=duration(wait), owner=self.owner)

    def _set_limit_request(self, limit: int) -> pb.SetLimitRequest:
        return pb.SetLimitRequest(name=self.name, limit=limit)

    def _limit_set(self, limit: int, resp: pb.SetLimitResponse) -> int:
        if self.limit:  # this handle's acquires pass the new limit from now on
            self.limit = limit
        return resp.previous_limit

    def _permit(self, resp: pb.AcquireResponse) -> Permit | None:
        return Permit(self, resp.permit_id, self.permits, when(resp.expires_at)) if resp.acquired else None

    def _refresh_request(self, permit: Permit, ttl: float | None) -> pb.RefreshRequest:
        return pb.RefreshRequest(name=self.name, permit_id=permit.permit_id, ttl=duration(ttl or self.ttl))

    @staticmethod
    def _info(resp: pb.DescribeResponse) -> SemaphoreInfo:
        holders = [HolderInfo(h.permit_id, h.owner, h.permits, seconds(h.ttl_remaining)) for h in resp.holders]
        return SemaphoreInfo(resp.limit, resp.held, holders, resp.waiters)

    def _timeout_error(self) -> SemaphoreTimeout:
        return SemaphoreTimeout(f"semaphore {self.name!r} had no room within {self.timeout}s")

    def _lost_error(self, permit: Permit) -> PermitLost:
        return PermitLost(f"semaphore {self.name!r}: the permit was lost while held")


class Semaphore(_SemaphoreBase, SyncHolder):
    """A semaphore name on a synchronous :class:`~concord.Client`."""

    def acquire(self, timeout: float | None = 0) -> Permit | None:
        """Takes the permits, waiting up to ``timeout`` seconds (0: try once, None:
        forever). Returns the Permit, or None if there was no room. Does not renew.
        Rides out a Redis outage shorter than the timeout (see concord._retry)."""
        return self._rpc.wait_for("Acquire", self._acquire_request, timeout, self._permit)

    def release(self, permit: Permit) -> None:
        """Returns the permits. Raises PermitNotHeld if they were already lost."""
        self._rpc.call_safe("Release", pb.ReleaseRequest(name=self.name, permit_id=permit.permit_id))

    def refresh(self, permit: Permit, ttl: float | None = None, *, within: float | None = None) -> Permit:
        """Resets the permit's TTL (default: the semaphore's ttl). Raises PermitNotHeld if lost.
        within: seconds to keep retrying while UNAVAILABLE (default: the client's timeout)."""
        permit.expires_at = when(self._rpc.call_safe("Refresh", self._refresh_request(permit, ttl), within).expires_at)
        return permit

    def describe(self) -> SemaphoreInfo:
        """The limit in force, the holders and how many wait."""
        return self._info(self._rpc.call_safe("Describe", pb.DescribeRequest(name=self.name)))

    def set_limit(self, limit: int) -> int:
        """Sets the semaphore's limit (1 to the server's max), kept until the next
        set_limit; returns the limit before (0: none). A lower one evicts no holder;
        a higher one admits the waiters that now fit at once. This handle's own acquires
        use the new limit (if it had one). Retried on UNAVAILABLE, as setting it twice is
        setting it once (a repeat after a lost reply returns the new limit as the one before)."""
        return self._limit_set(limit, self._rpc.call_safe("SetLimit", self._set_limit_request(limit)))


class AsyncSemaphore(_SemaphoreBase, AsyncHolder):
    """A semaphore name on an :class:`~concord.AsyncClient`; use ``async with``."""

    async def acquire(self, timeout: float | None = 0) -> Permit | None:
        return await self._rpc.wait_for("Acquire", self._acquire_request, timeout, self._permit)

    async def release(self, permit: Permit) -> None:
        await self._rpc.call_safe("Release", pb.ReleaseRequest(name=self.name, permit_id=permit.permit_id))

    async def refresh(self, permit: Permit, ttl: float | None = None, *, within: float | None = None) -> Permit:
        resp = await self._rpc.call_safe("Refresh", self._refresh_request(permit, ttl), within)
        permit.expires_at = when(resp.expires_at)
        return permit

    async def describe(self) -> SemaphoreInfo:
        return self._info(await self._rpc.call_safe("Describe", pb.DescribeRequest(name=self.name)))

    async def set_limit(self, limit: int) -> int:
        """Semaphore.set_limit, awaited."""
        return self._limit_set(limit, await self._rpc.call_safe("SetLimit", self._set_limit_request(limit)))
