"""concord.election.v1.ElectionService: validates requests, calls primitives.election, maps errors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import replace
from functools import partial

from concord.election.v1 import election_pb2 as pb
from concord.election.v1 import election_pb2_grpc

from ..config import Settings
from ..errors import ElectionWaitTimeout, InvalidArgument
from ..primitives.election import Elections, ElectionSummary, Leadership
from . import validation as v
from .convert import timestamp, wait_budget_ms
from .holding import ACQUIRED, LOST, hold_events
from .status import rpc

MAX_VALUE_BYTES = 64 * 1024


class ElectionServicer(election_pb2_grpc.ElectionServiceServicer):
    def __init__(self, elections: Elections, settings: Settings) -> None:
        self._elections = elections
        self._durations = v.Durations(settings.max_ttl, settings.max_wait)

    def _campaign_args(self, request: pb.CampaignRequest | pb.LeadRequest, context) -> tuple[str, str, bytes, int, int]:
        election = v.name(request.election, "election")
        candidate = v.label(request.candidate, "candidate") or context.peer()
        ttl = self._durations.ttl(request)
        wait = self._durations.wait(request)
        return election, candidate, _value(request.value), ttl, wait_budget_ms(wait, context)

    @rpc
    async def Campaign(self, request: pb.CampaignRequest, context) -> pb.CampaignResponse:
        election, candidate, value, ttl, wait = self._campaign_args(request, context)
        won = await self._elections.campaign(election, candidate, value, ttl, wait)
        if won is None:
            return pb.CampaignResponse(elected=False)
        return pb.CampaignResponse(elected=True, term=won.term, expires_at=timestamp(won.expires_at_ms))

    @rpc
    async def Lead(self, request: pb.LeadRequest, context) -> AsyncIterator[pb.LeadResponse]:
        election, candidate, value, ttl, wait = self._campaign_args(request, context)
        won = await self._elections.campaign(election, candidate, value, ttl, wait)
        if won is None:
            raise ElectionWaitTimeout(f"election {election!r} was not won within wait_timeout", election=election)
        renewals = (replace(won, expires_at_ms=expires) async for expires in
                    self._elections.keep_leading(election, won, ttl))
        events = hold_events(won, renewals, partial(self._elections.let_go, election, won.lease, ttl))
        async with aclosing(events):
            async for event, t in events:
                if event == LOST:
                    yield pb.LeadResponse(event=pb.LEAD_EVENT_LOST, term=t.term)
                else:
                    yield pb.LeadResponse(event=pb.LEAD_EVENT_ELECTED if event == ACQUIRED else pb.LEAD_EVENT_REFRESHED,
                                          term=t.term, expires_at=timestamp(t.expires_at_ms))

    @rpc
    async def Leader(self, request: pb.LeaderRequest, context) -> pb.LeaderResponse:
        state = await self._elections.leader(v.name(request.election, "election"))
        return pb.LeaderResponse(leader=_leadership(state.leader), candidates=state.candidates)

    @rpc
    async def ListElections(self, request: pb.ListElectionsRequest, context) -> pb.ListElectionsResponse:
        found, next_token = await self._elections.summaries(*v.page(request.page_token, request.page_size))
        return pb.ListElectionsResponse(elections=[_summary(s) for s in found], next_page_token=next_token)

    @rpc
    async def Observe(self, request: pb.ObserveRequest, context) -> AsyncIterator[pb.ObserveResponse]:
        election = v.name(request.election, "election")
        async for change in self._elections.observe(election, request.after):
            yield pb.ObserveResponse(leader=_leadership(change.leader), position=change.position, gap=change.gap)

    @rpc
    async def Proclaim(self, request: pb.ProclaimRequest, context) -> pb.ProclaimResponse:
        await self._elections.proclaim(v.name(request.election, "election"), _term(request.term), _value(request.value))
        return pb.ProclaimResponse()

    @rpc
    async def Refresh(self, request: pb.RefreshRequest, context) -> pb.RefreshResponse:
        election, term = v.name(request.election, "election"), _term(request.term)
        expires = await self._elections.refresh(election, term, self._durations.ttl(request))
        return pb.RefreshResponse(expires_at=timestamp(expires))

    @rpc
    async def Resign(self, request: pb.ResignRequest, context) -> pb.ResignResponse:
        await self._elections.resign(v.name(request.election, "election"), _term(request.term))
        return pb.ResignResponse()


def _term(term: int) -> int:
    if term <= 0:
        raise InvalidArgument("term is required: the one Campaign returned", field="term")
    return term


def _value(value: bytes) -> bytes:
    if len(value) > MAX_VALUE_BYTES:
        raise InvalidArgument(f"value is {len(value)} bytes; at most {MAX_VALUE_BYTES}", field="value")
    return value


def _leadership(leader: Leadership | None) -> pb.Leadership | None:
    if leader is None:
        return None
    return pb.Leadership(candidate=leader.candidate, value=leader.value, term=leader.term,
                         expires_at=timestamp(leader.expires_at_ms) if leader.expires_at_ms else None)


def _summary(s: ElectionSummary) -> pb.ElectionSummary:
    return pb.ElectionSummary(election=s.election, leader=_leadership(s.leader), value_truncated=s.value_cut,
                              candidates=s.candidates)
