"""Autocomplete for the Python client: ``client.autocomplete``.

    ac = client.autocomplete
    ac.add_recent("jason22", "Thomas Müller")
    ac.suggest_recent("jason22", "tho")                 # ["Thomas Müller"]

    ac.add_names("guild:7", ["Åsa", "asa", ("Astrid", 12.0)])
    ac.suggest("guild:7", "as")                         # name order, original spelling
    ac.increment_score("guild:7", "Åsa")                # popularity
    ac.suggest("guild:7", "a", order="score")           # best first

Matching ignores case and Unicode presentation (NFKC + case folding).

The generated stubs of concord.autocomplete.v1 are the subpackage v1; gen_stubs.py only
creates this __init__.py when it is missing, never rewrites it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .._listing import every_page, every_page_async
from .v1 import autocomplete_pb2 as pb

_ORDERS = {"name": pb.SUGGEST_ORDER_NAME, "score": pb.SUGGEST_ORDER_SCORE}
# The reads, retried on UNAVAILABLE (concord._retry); the writes are not.
_SAFE = frozenset({"SuggestRecent", "Suggest", "Count"})
_LISTING = ("ListIndexes", pb.ListIndexesRequest, "indexes", "index", lambda m: IndexSummary(m.index, m.size))


@dataclass(frozen=True)
class IndexSummary:
    """A name index as list_indexes() shows it."""

    index: str
    size: int  # names it holds


@dataclass(frozen=True)
class Suggestion:
    name: str
    score: float


class Suggestions(list[Suggestion]):
    """Suggest's matches; ``truncated`` is true when a best-score search over a very
    common prefix was cut short (the best of the names examined, not of all)."""

    truncated: bool = False


def _entries(names: Iterable[str | tuple[str, float]]) -> list[pb.NameEntry]:
    out = []
    for n in names:
        out.append(pb.NameEntry(name=n) if isinstance(n, str) else pb.NameEntry(name=n[0], score=n[1]))
    return out


def _suggestions(resp: pb.SuggestResponse) -> Suggestions:
    found = Suggestions(Suggestion(s.name, s.score) for s in resp.suggestions)
    found.truncated = resp.truncated
    return found


class _Requests:
    """Each RPC as (stub method name, request, reply -> result), for both clients."""

    @staticmethod
    def add_recent(user: str, contact: str):
        return "AddRecent", pb.AddRecentRequest(user=user, contact=contact), lambda r: r.size

    @staticmethod
    def remove_recent(user: str, contact: str):
        return "RemoveRecent", pb.RemoveRecentRequest(user=user, contact=contact), lambda r: r.removed

    @staticmethod
    def suggest_recent(user: str, prefix: str, limit: int, include_infix: bool):
        return ("SuggestRecent", pb.SuggestRecentRequest(user=user, prefix=prefix, limit=limit,
                                                         include_infix=include_infix), lambda r: list(r.contacts))

    @staticmethod
    def add_names(index: str, names: Iterable[str | tuple[str, float]]):
        return "AddNames", pb.AddNamesRequest(index=index, names=_entries(names)), lambda r: r.added

    @staticmethod
    def remove_names(index: str, names: Iterable[str]):
        return "RemoveNames", pb.RemoveNamesRequest(index=index, names=list(names)), lambda r: r.removed

    @staticmethod
    def increment_score(index: str, name: str, delta: float):
        return "IncrementScore", pb.IncrementScoreRequest(index=index, name=name, delta=delta), lambda r: r.score

    @staticmethod
    def suggest(index: str, prefix: str, limit: int, order: str):
        if order not in _ORDERS:
            raise ValueError("order must be 'name' or 'score'")
        return "Suggest", pb.SuggestRequest(index=index, prefix=prefix, limit=limit, order=_ORDERS[order]), _suggestions

    @staticmethod
    def count(index: str, prefix: str):
        return "Count", pb.CountRequest(index=index, prefix=prefix), lambda r: r.count


class Autocomplete:
    """``client.autocomplete`` on a synchronous Client."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._rpc = client._service("autocomplete")

    def _run(self, spec: tuple[str, Any, Callable[[Any], Any]]) -> Any:
        method, request, result = spec
        call = self._rpc.call_safe if method in _SAFE else self._rpc.call
        return result(call(method, request))

    def add_recent(self, user: str, contact: str) -> int:
        """Moves contact to the front of user's recent contacts; returns how many there are."""
        return self._run(_Requests.add_recent(user, contact))

    def remove_recent(self, user: str, contact: str) -> bool:
        return self._run(_Requests.remove_recent(user, contact))

    def suggest_recent(self, user: str, prefix: str = "", limit: int = 10, *, include_infix: bool = False) -> list[str]:
        """Recent contacts starting with prefix, most recent first (then, with
        include_infix, those containing it)."""
        return self._run(_Requests.suggest_recent(user, prefix, limit, include_infix))

    def add_names(self, index: str, names: Iterable[str | tuple[str, float]]) -> int:
        """Adds names (or (name, score) pairs); returns how many were new."""
        return self._run(_Requests.add_names(index, names))

    def remove_names(self, index: str, names: Iterable[str]) -> int:
        return self._run(_Requests.remove_names(index, names))

    def increment_score(self, index: str, name: str, delta: float = 1.0) -> float:
        """Adds delta to the name's score; NameNotFound if the index lacks it."""
        return self._run(_Requests.increment_score(index, name, delta))

    def suggest(self, index: str, prefix: str = "", limit: int = 10, *, order: str = "name") -> Suggestions:
        """Names starting with prefix: order="name" (normalized) or "score" (best first)."""
        return self._run(_Requests.suggest(index, prefix, limit, order))

    def count(self, index: str, prefix: str = "") -> int:
        return self._run(_Requests.count(index, prefix))

    def list_indexes(self) -> list[IndexSummary]:
        """Every name index that holds names, with its size, by name (all pages of ListIndexes)."""
        return every_page(self._rpc.call_safe, *_LISTING)


class AsyncAutocomplete:
    """``client.autocomplete`` on an AsyncClient: the same methods, awaited."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._rpc = client._service("autocomplete")

    async def _run(self, spec: tuple[str, Any, Callable[[Any], Any]]) -> Any:
        method, request, result = spec
        call = self._rpc.call_safe if method in _SAFE else self._rpc.call
        return result(await call(method, request))

    async def add_recent(self, user: str, contact: str) -> int:
        return await self._run(_Requests.add_recent(user, contact))

    async def remove_recent(self, user: str, contact: str) -> bool:
        return await self._run(_Requests.remove_recent(user, contact))

    async def suggest_recent(self, user: str, prefix: str = "", limit: int = 10, *,
                             include_infix: bool = False) -> list[str]:
        return await self._run(_Requests.suggest_recent(user, prefix, limit, include_infix))

    async def add_names(self, index: str, names: Iterable[str | tuple[str, float]]) -> int:
        return await self._run(_Requests.add_names(index, names))

    async def remove_names(self, index: str, names: Iterable[str]) -> int:
        return await self._run(_Requests.remove_names(index, names))

    async def increment_score(self, index: str, name: str, delta: float = 1.0) -> float:
        return await self._run(_Requests.increment_score(index, name, delta))

    async def suggest(self, index: str, prefix: str = "", limit: int = 10, *, order: str = "name") -> Suggestions:
        return await self._run(_Requests.suggest(index, prefix, limit, order))

    async def count(self, index: str, prefix: str = "") -> int:
        return await self._run(_Requests.count(index, prefix))

    async def list_indexes(self) -> list[IndexSummary]:
        return await every_page_async(self._rpc.call_safe, *_LISTING)
