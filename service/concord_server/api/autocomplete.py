"""concord.autocomplete.v1.AutocompleteService: validates requests, calls
primitives.autocomplete, maps errors."""

from __future__ import annotations

import math

from concord.autocomplete.v1 import autocomplete_pb2 as pb
from concord.autocomplete.v1 import autocomplete_pb2_grpc

from ..config import Settings
from ..errors import InvalidArgument
from ..primitives.autocomplete import Autocomplete, Suggestion
from . import validation as v
from .status import rpc

DEFAULT_LIMIT = 10
MAX_LIMIT = 1000
MAX_BATCH = 10_000


def _prefix(value: str) -> str:
    return v.label(value, "prefix")


def _limit(value: int) -> int:
    return v.count(value or DEFAULT_LIMIT, "limit", minimum=1, maximum=MAX_LIMIT)


def _score(value: float, field: str) -> float:
    if not math.isfinite(value) or abs(value) > 1e15:
        raise InvalidArgument(f"{field} must be a finite number of magnitude at most 1e15", field=field)
    return value


def _batch(items, field: str) -> None:
    if not 1 <= len(items) <= MAX_BATCH:
        raise InvalidArgument(f"{field} must hold 1 to {MAX_BATCH} names", field=field)


def _names(values: list[str], field: str) -> list[str]:
    """v.name on each (v.names: a few passes over them all in the usual case, a
    batch of 10,000 being the norm)."""
    return v.names(values, field)


def _suggestions(found: list[Suggestion]) -> list[pb.Suggestion]:
    return [pb.Suggestion(name=s.name, score=s.score) for s in found]


class AutocompleteServicer(autocomplete_pb2_grpc.AutocompleteServiceServicer):
    def __init__(self, autocomplete: Autocomplete, settings: Settings) -> None:
        self._ac = autocomplete

    @rpc
    async def AddRecent(self, request: pb.AddRecentRequest, context) -> pb.AddRecentResponse:
        size = await self._ac.add_recent(v.name(request.user, "user"), v.name(request.contact, "contact"))
        return pb.AddRecentResponse(size=size)

    @rpc
    async def RemoveRecent(self, request: pb.RemoveRecentRequest, context) -> pb.RemoveRecentResponse:
        removed = await self._ac.remove_recent(v.name(request.user, "user"), v.name(request.contact, "contact"))
        return pb.RemoveRecentResponse(removed=removed)

    @rpc
    async def SuggestRecent(self, request: pb.SuggestRecentRequest, context) -> pb.SuggestRecentResponse:
        contacts = await self._ac.suggest_recent(v.name(request.user, "user"), _prefix(request.prefix),
                                                 _limit(request.limit), request.include_infix)
        return pb.SuggestRecentResponse(contacts=contacts)

    @rpc
    async def AddNames(self, request: pb.AddNamesRequest, context) -> pb.AddNamesResponse:
        index = v.name(request.index, "index")
        _batch(request.names, "names")
        entries = request.names
        names = _names([e.name for e in entries], "names")
        scores = [_score(e.score, "names.score") if e.HasField("score") else None for e in entries]
        return pb.AddNamesResponse(added=await self._ac.add_names(index, list(zip(names, scores))))

    @rpc
    async def RemoveNames(self, request: pb.RemoveNamesRequest, context) -> pb.RemoveNamesResponse:
        index = v.name(request.index, "index")
        _batch(request.names, "names")
        names = _names(list(request.names), "names")
        return pb.RemoveNamesResponse(removed=await self._ac.remove_names(index, names))

    @rpc
    async def IncrementScore(self, request: pb.IncrementScoreRequest, context) -> pb.IncrementScoreResponse:
        index, name = v.name(request.index, "index"), v.name(request.name, "name")
        score = await self._ac.increment(index, name, _score(request.delta, "delta"))
        return pb.IncrementScoreResponse(score=score)

    @rpc
    async def Suggest(self, request: pb.SuggestRequest, context) -> pb.SuggestResponse:
        index, prefix, limit = v.name(request.index, "index"), _prefix(request.prefix), _limit(request.limit)
        if request.order == pb.SUGGEST_ORDER_SCORE:
            found, truncated = await self._ac.suggest_best(index, prefix, limit)
            return pb.SuggestResponse(suggestions=_suggestions(found), truncated=truncated)
        if request.order not in (pb.SUGGEST_ORDER_UNSPECIFIED, pb.SUGGEST_ORDER_NAME):
            raise InvalidArgument("order must be SUGGEST_ORDER_NAME or SUGGEST_ORDER_SCORE", field="order")
        return pb.SuggestResponse(suggestions=_suggestions(await self._ac.suggest(index, prefix, limit)))

    @rpc
    async def ListIndexes(self, request: pb.ListIndexesRequest, context) -> pb.ListIndexesResponse:
        found, next_token = await self._ac.summaries(*v.page(request.page_token, request.page_size))
        return pb.ListIndexesResponse(indexes=[pb.IndexSummary(index=s.index, size=s.size) for s in found],
                                      next_page_token=next_token)

    @rpc
    async def Count(self, request: pb.CountRequest, context) -> pb.CountResponse:
        count = await self._ac.count(v.name(request.index, "index"), _prefix(request.prefix))
        return pb.CountResponse(count=count)
