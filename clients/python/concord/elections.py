"""Leader election for the Python client.

    election = client.election("scheduler")
    with election.campaign(b"host-a:8080") as leadership:
        while not leadership.lost:
            run_one_round(term=leadership.term)

``campaign()`` opens a Lead stream: the server queues this candidate (FIFO among
candidates), keeps the leadership alive while the block runs, and tells this client
the moment it is no longer the leader: ``leadership.lost`` turns true and
``leadership.wait_lost(timeout)`` returns. Leaving the block resigns at once; so
does a client that dies, because its stream ends. Leaving the block after the
leadership was lost raises LeadershipLost: the work inside was not protected. Pass
``leadership.term`` to what the leader writes, which should refuse older terms.

    for change in election.observe():
        print(change.leader.candidate if change.leader else "nobody leads")

``observe()`` yields the leader now, then every change in order, and resumes after
the last change it gave if the connection drops. ``async with``/``async for`` on an
AsyncClient's election do the same.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import grpc

from ._convert import duration, when
from ._resume import AsyncResuming, Resuming
from ._retry import Budget, backoff
from .election.v1 import election_pb2 as pb
from .errors import ElectionTimeout, LeadershipLost, NotLeader, Unavailable, from_rpc_error


@dataclass(frozen=True)
class Leader:
    candidate: str
    value: bytes
    term: int
    expires_at: datetime | None

    @staticmethod
    def of(m: pb.Leadership, present: bool) -> Leader | None:
        if not present:
            return None
        return Leader(m.candidate, m.value, m.term, when(m.expires_at) if m.HasField("expires_at") else None)


@dataclass(frozen=True)
class ElectionSummary:
    """One election as client.list_elections() shows it."""

    election: str
    leader: Leader | None  # its value cut to 1024 bytes when value_truncated (leader() has it whole)
    value_truncated: bool
    candidates: int  # entries in its queue, candidates of a dead server too until skipped


def _summary(m: pb.ElectionSummary) -> ElectionSummary:
    return ElectionSummary(m.election, Leader.of(m.leader, m.HasField("leader")), m.value_truncated, m.candidates)


# client.list_elections(): _listing.every_page's arguments after the call.
LISTING = ("ListElections", pb.ListElectionsRequest, "elections", "election", _summary)


@dataclass(frozen=True)
class Change:
    """One change of leadership as an observer sees it."""

    leader: Leader | None  # None: nobody leads from here on
    position: int  # pass to observe(after=...) to resume after it
    gap: bool  # changes before this one were no longer kept: this is the state now


class Leadership:
    """This candidate's term as leader; ``lost`` turns true the moment it ends."""

    def __init__(self, election: Any, term: int, expires_at: datetime | None) -> None:
        self.election = election
        self.name = election.name
        self.term = term
        self.expires_at = expires_at
        self._ended = threading.Event()

    @property
    def lost(self) -> bool:
        return self._ended.is_set()

    def wait_lost(self, timeout: float | None = None) -> bool:
        """Blocks until the leadership is lost (True) or timeout seconds pass (False)."""
        return self._ended.wait(timeout)

    def proclaim(self, value: bytes) -> Any:
        """Replaces the leader's value; raises NotLeader if this term has ended."""
        return self.election.proclaim(self.term, value)

    def __repr__(self) -> str:
        return f"Leadership(election={self.name!r}, term={self.term}, lost={self.lost})"


class _ElectionBase:
    def __init__(self, client: Any, name: str, *, ttl: float = 10.0, candidate: str = "") -> None:
        self.client = client
        self._rpc = client._service("election")
        self.name = name
        self.ttl = ttl
        self.candidate = candidate

    def _campaign_request(self, value: bytes) -> Callable[[float], pb.CampaignRequest]:
        return lambda wait: pb.CampaignRequest(election=self.name, candidate=self.candidate, value=value,
                                               ttl=duration(self.ttl), wait_timeout=duration(wait))

    def _lead_request(self, value: bytes, wait: float) -> pb.LeadRequest:
        return pb.LeadRequest(election=self.name, candidate=self.candidate, value=value, ttl=duration(self.ttl),
                              wait_timeout=duration(wait))

    def _won(self, resp: pb.CampaignResponse) -> Leadership | None:
        return Leadership(self, resp.term, when(resp.expires_at)) if resp.elected else None

    def _observer_args(self, after: int) -> tuple[Any, Any, int]:
        def open_after(position: int) -> Any:
            return self._rpc.open("Observe")(pb.ObserveRequest(election=self.name, after=position))

        def item(m: pb.ObserveResponse) -> tuple[Change, int]:
            return Change(Leader.of(m.leader, m.HasField("leader")), m.position, m.gap), m.position

        return open_after, item, after

    def _timeout(self, timeout: float | None) -> ElectionTimeout:
        return ElectionTimeout(f"election {self.name!r} was not won within {timeout}s")

    @staticmethod
    def _lost(leadership: Leadership) -> LeadershipLost:
        return LeadershipLost(f"leadership of {leadership.name!r} (term {leadership.term}) was lost while held")


def _elected(first: pb.LeadResponse) -> bool:
    return first.event == pb.LEAD_EVENT_ELECTED


def _retry_in(err: Exception, budget: Budget, attempt: int, election: _ElectionBase, timeout: float | None) -> float | None:
    """After a Lead stream failed before electing: the pause before campaigning again
    (None: at once, the wait simply ran out), or raises when the caller's timeout is
    spent or the failure is not one to ride out."""
    if not isinstance(err, (ElectionTimeout, Unavailable)):
        raise err
    if budget.left() <= 0:
        raise election._timeout(timeout)
    return backoff(attempt) if isinstance(err, Unavailable) else None


class Election(_ElectionBase):
    """An election name on a synchronous :class:`~concord.Client`."""

    def campaign(self, value: bytes = b"", *, timeout: float | None = None) -> _Campaign:
        """A ``with`` block that leads: waits up to ``timeout`` seconds (None:
        forever) to be elected, holds the leadership while it runs (a Lead stream),
        and resigns on exit. Raises ElectionTimeout if not elected in time."""
        return _Campaign(self, value, timeout)

    def elect(self, value: bytes = b"", timeout: float | None = 0) -> Leadership | None:
        """One Campaign call: the Leadership, or None if another still led after
        ``timeout`` seconds (0: try once). Nothing renews it: refresh() it, or
        use ``with campaign()``."""
        return self._rpc.wait_for("Campaign", self._campaign_request(value), timeout, self._won)

    def leader(self) -> Leader | None:
        """Who leads now, or None."""
        resp = self._rpc.call_safe("Leader", pb.LeaderRequest(election=self.name))
        return Leader.of(resp.leader, resp.HasField("leader"))

    def observe(self, after: int = 0) -> Resuming[Change, int]:
        """The leader now, then every change, in order (see Change)."""
        return Resuming(*self._observer_args(after))

    def proclaim(self, term: int, value: bytes) -> None:
        self._rpc.call_safe("Proclaim", pb.ProclaimRequest(election=self.name, term=term, value=value))

    def refresh(self, term: int, ttl: float | None = None) -> datetime:
        resp = self._rpc.call_safe("Refresh", pb.RefreshRequest(election=self.name, term=term,
                                                                ttl=duration(ttl or self.ttl)))
        return when(resp.expires_at)

    def resign(self, term: int) -> None:
        """Ends the term; the next candidate leads. Raises NotLeader if it had ended."""
        self._rpc.call("Resign", pb.ResignRequest(election=self.name, term=term))


class _Campaign:
    """``with election.campaign(value)``: one Lead stream."""

    def __init__(self, election: Election, value: bytes, timeout: float | None) -> None:
        self._election, self._value, self._timeout = election, value, timeout
        self._call: Any = None
        self._reader: threading.Thread | None = None
        self._leadership: Leadership | None = None

    def __enter__(self) -> Leadership:
        e = self._election
        budget, attempt = Budget(self._timeout), 0
        while True:
            call = e._rpc.open("Lead")(e._lead_request(self._value, budget.chunk()))
            try:
                first = next(iter(call))
            except StopIteration:
                first = None
            except grpc.RpcError as exc:
                if (pause := _retry_in(from_rpc_error(exc), budget, attempt, e, self._timeout)) is not None:
                    time.sleep(pause)
                    attempt += 1
                continue
            if first is None or not _elected(first):
                call.cancel()
                raise e._timeout(self._timeout)
            break
        self._call = call
        self._leadership = leadership = Leadership(e, first.term, when(first.expires_at))
        self._reader = threading.Thread(target=self._follow, args=(call, leadership), daemon=True,
                                        name=f"concord-lead {e.name}")
        self._reader.start()
        return leadership

    @staticmethod
    def _follow(call: Any, leadership: Leadership) -> None:
        try:
            for m in call:
                if m.event == pb.LEAD_EVENT_LOST:
                    break
                leadership.expires_at = when(m.expires_at)
        except grpc.RpcError:
            pass
        leadership._ended.set()

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        assert self._leadership is not None and self._reader is not None, "__exit__ without __enter__"
        leadership, lost_before = self._leadership, self._leadership.lost
        self._call.cancel()  # the server resigns as the stream ends
        self._reader.join()
        if lost_before and exc_type is None:
            raise self._election._lost(leadership)


class AsyncLeadership(Leadership):
    """Leadership on an AsyncClient: ``await wait_lost()``."""

    def __init__(self, election: Any, term: int, expires_at: datetime | None) -> None:
        super().__init__(election, term, expires_at)
        self._async_ended = asyncio.Event()

    @property
    def lost(self) -> bool:
        return self._async_ended.is_set()

    async def wait_lost(self, timeout: float | None = None) -> bool:  # type: ignore[override]
        try:
            await asyncio.wait_for(self._async_ended.wait(), timeout)
            return True
        except TimeoutError:
            return False


class AsyncElection(_ElectionBase):
    """An election name on an :class:`~concord.AsyncClient`; ``async with campaign()``."""

    def campaign(self, value: bytes = b"", *, timeout: float | None = None) -> _AsyncCampaign:
        return _AsyncCampaign(self, value, timeout)

    async def elect(self, value: bytes = b"", timeout: float | None = 0) -> Leadership | None:
        return await self._rpc.wait_for("Campaign", self._campaign_request(value), timeout, self._won)

    async def leader(self) -> Leader | None:
        resp = await self._rpc.call_safe("Leader", pb.LeaderRequest(election=self.name))
        return Leader.of(resp.leader, resp.HasField("leader"))

    def observe(self, after: int = 0) -> AsyncResuming[Change, int]:
        return AsyncResuming(*self._observer_args(after))

    async def proclaim(self, term: int, value: bytes) -> None:
        await self._rpc.call_safe("Proclaim", pb.ProclaimRequest(election=self.name, term=term, value=value))

    async def refresh(self, term: int, ttl: float | None = None) -> datetime:
        resp = await self._rpc.call_safe("Refresh", pb.RefreshRequest(election=self.name, term=term,
                                                                      ttl=duration(ttl or self.ttl)))
        return when(resp.expires_at)

    async def resign(self, term: int) -> None:
        await self._rpc.call("Resign", pb.ResignRequest(election=self.name, term=term))


class _AsyncCampaign:
    def __init__(self, election: AsyncElection, value: bytes, timeout: float | None) -> None:
        self._election, self._value, self._timeout = election, value, timeout
        self._call: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._leadership: AsyncLeadership | None = None

    async def __aenter__(self) -> AsyncLeadership:
        e = self._election
        budget, attempt = Budget(self._timeout), 0
        while True:
            call = e._rpc.open("Lead")(e._lead_request(self._value, budget.chunk()))
            try:
                first = await call.read()
            except grpc.RpcError as exc:
                if (pause := _retry_in(from_rpc_error(exc), budget, attempt, e, self._timeout)) is not None:
                    await asyncio.sleep(pause)
                    attempt += 1
                continue
            if first is grpc.aio.EOF or not _elected(first):
                call.cancel()
                raise e._timeout(self._timeout)
            break
        self._call = call
        self._leadership = leadership = AsyncLeadership(e, first.term, when(first.expires_at))
        self._reader = asyncio.create_task(self._follow(call, leadership), name=f"concord-lead {e.name}")
        return leadership

    @staticmethod
    async def _follow(call: Any, leadership: AsyncLeadership) -> None:
        try:
            while (m := await call.read()) is not grpc.aio.EOF and m.event != pb.LEAD_EVENT_LOST:
                leadership.expires_at = when(m.expires_at)
        except grpc.RpcError:
            pass
        finally:
            leadership._async_ended.set()
            leadership._ended.set()

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        assert self._leadership is not None and self._reader is not None, "__aexit__ without __aenter__"
        leadership, lost_before = self._leadership, self._leadership.lost
        self._call.cancel()
        await asyncio.gather(self._reader, return_exceptions=True)
        if lost_before and exc_type is None:
            raise self._election._lost(leadership)


__all__ = ["AsyncElection", "AsyncLeadership", "Change", "Election", "Leader", "Leadership", "NotLeader"]
