"""The first entries of a listing, by name, at a bounded cost: what every view of
the console lists from (views.py reads names, the views of the other kinds read
summaries: primitives/listing.py scan_names and scan_summaries)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

S = TypeVar("S")

LIST_PAGE = 200  # entries asked for per listing page
AT_ONCE = 64  # reads in flight for one view


async def first_names(lister: Callable[[str, int], Awaitable[tuple[list[str], str]]], cap: int
                      ) -> tuple[list[str], bool]:
    """The first ``cap`` names (sorted) of a primitive's listing index (its ``names``),
    and whether there are more; reads at most about cap + LIST_PAGE names."""
    seen: dict[str, None] = {}  # HSCAN may return a name twice
    token = ""
    while len(seen) <= cap:
        page, token = await lister(token, LIST_PAGE)
        seen.update(dict.fromkeys(page))
        if not token:
            break
    return sorted(seen)[:cap], bool(token) or len(seen) > cap


async def first_summaries(lister: Callable[[str, int], Awaitable[tuple[list[S], str]]], cap: int,
                          name: Callable[[S], str]) -> tuple[list[S], bool]:
    """The first ``cap`` summaries by name of a primitive's listing (its ``summaries``),
    and whether there are more; reads at most about cap + LIST_PAGE of them (each
    summary one bounded read, listing.scan_summaries)."""
    seen: dict[str, S] = {}  # HSCAN may return a name twice: the later summary wins
    token = ""
    while len(seen) <= cap:
        page, token = await lister(token, min(LIST_PAGE, cap + 1))
        seen.update((name(s), s) for s in page)
        if not token:
            break
    return [seen[n] for n in sorted(seen)[:cap]], bool(token) or len(seen) > cap

