"""The autocomplete page: the tenant's name indexes with their sizes (ListIndexes'
summaries, one ZCARD each: the first MAX_INDEXES by name), and the suggestion box's
endpoint:

  POST /api/autocomplete/suggest {"index", "prefix", "limit"?, "order"?: "name"|"score"}
    -> {"suggestions": [{"name", "score"}], "truncated"}

the same read as Suggest (validated as api/autocomplete.py does; at most
MAX_SUGGESTIONS names), run in the viewer's tenant, allowed to any token that may
call Suggest (a read: read-only tokens too). The page sends it as the viewer types,
debounced.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from ..api import validation as v
from ..errors import InvalidArgument
from .capped import first_summaries

MAX_INDEXES = 200  # indexes one view lists
MAX_SUGGESTIONS = 20  # names one suggestion request returns
SUGGEST = "/concord.autocomplete.v1.AutocompleteService/Suggest"


async def indexes_view(autocomplete: Any) -> dict[str, Any]:
    found, more = await first_summaries(autocomplete.summaries, MAX_INDEXES, lambda s: s.index)
    rows = [{"name": s.index, "size": s.size} for s in found]
    return {"items": rows, "more": more, "limit": MAX_INDEXES, "suggest_limit": MAX_SUGGESTIONS}


class SuggestBox:
    """The suggestion box's endpoint on a console (app.Console)."""

    def __init__(self, console: Any) -> None:
        self._console = console

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/api/autocomplete/suggest", self._suggest)

    async def _suggest(self, request: web.Request) -> web.Response:
        console = self._console
        viewer = console.viewer(request)
        body = await console.json_body(request)
        viewer.check(SUGGEST)
        index, prefix = body.get("index"), body.get("prefix", "")
        limit, order = body.get("limit", 10), body.get("order", "name")
        if not isinstance(index, str):
            raise InvalidArgument("index must be a string", field="index")
        if not isinstance(prefix, str):
            raise InvalidArgument("prefix must be a string", field="prefix")
        if not isinstance(limit, int) or isinstance(limit, bool):
            raise InvalidArgument("limit must be an integer", field="limit")
        if order not in ("name", "score"):
            raise InvalidArgument('order must be "name" or "score"', field="order")
        index, prefix = v.name(index, "index"), v.label(prefix, "prefix")
        limit = v.count(limit, "limit", minimum=1, maximum=MAX_SUGGESTIONS)
        ac = console.primitives.autocomplete
        if order == "score":
            found, truncated = await console.run_as(viewer, lambda: ac.suggest_best(index, prefix, limit))
        else:
            found, truncated = await console.run_as(viewer, lambda: ac.suggest(index, prefix, limit)), False
        return web.json_response({"suggestions": [{"name": s.name, "score": s.score} for s in found],
                                  "truncated": truncated})
