"""The limits page: the tenant's keys with a stored rate limit (SetLimit), the first
MAX_LIMITS by key of its listing index (ListLimits'), each with its limit, what it
allows now (a peek: the check script with 0 hits, which writes nothing), how long
until it is full again and how many Wait callers queue on it; and the admin's reset
and delete, each confirmed in the page and logged with who did it.

Keys whose limit travels with each call are noted nowhere (a check costs no extra
write), so this page cannot show them; it says so.

Routes (POST, JSON, as app.py's):
  /api/limits/reset   {key}: forget what the key counted (RateLimitService.Reset)
  /api/limits/delete  {key}: forget its stored limit too (RateLimitService.DeleteLimit)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from ..api import validation as v
from ..errors import InvalidArgument
from .auth import Viewer
from .capped import first_summaries

if TYPE_CHECKING:
    from .app import Console

SERVICE = "/concord.ratelimit.v1.RateLimitService/"
LIST_LIMITS, RESET, DELETE = SERVICE + "ListLimits", SERVICE + "Reset", SERVICE + "DeleteLimit"
MAX_LIMITS = 50  # keys one view lists


async def limits_view(limits: Any) -> dict[str, Any]:
    found, more = await first_summaries(limits.summaries, MAX_LIMITS, lambda s: s.key)
    return {"items": [_row(s) for s in found], "more": more, "limit": MAX_LIMITS}


def _row(s: Any) -> dict[str, Any]:
    limit = s.limit
    # What "full" holds: the burst where there is one (GCRA, token bucket), else the rate.
    capacity = limit.burst or limit.rate
    return {"name": s.key, "algorithm": limit.algorithm.name.lower(), "rate": limit.rate,
            "period_ms": limit.period_ms, "burst": limit.burst, "drain": limit.drain, "capacity": capacity,
            "remaining": s.remaining, "reset_ms": s.reset_ms, "waiters": s.waiters}


def may(viewer: Viewer) -> dict[str, bool]:
    """What /api/me says of this page."""
    return {"list_limits": viewer.may(LIST_LIMITS), "reset_limit": viewer.may_act(RESET),
            "delete_limit": viewer.may_act(DELETE)}


class LimitActions:
    def __init__(self, console: Console) -> None:
        self._console = console

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/api/limits/reset", self._reset)
        app.router.add_post("/api/limits/delete", self._delete)

    async def _asked(self, request: web.Request, method: str, doing: str) -> tuple[Viewer, str]:
        viewer = self._console.viewer(request)
        body = await self._console.json_body(request)
        key = body.get("key")
        if not isinstance(key, str):
            raise InvalidArgument("key must be a string", field="key")
        viewer.check_act(method, request.remote, f"{doing} rate limit {key!r}")
        return viewer, v.name(key, "key")

    async def _reset(self, request: web.Request) -> web.Response:
        viewer, key = await self._asked(request, RESET, "resetting")
        await self._console.run_as(viewer, lambda: self._console.primitives.ratelimits.reset(key))
        self._console.acted(viewer, request, f"reset rate limit {key!r}")
        return web.json_response({"reset": True})

    async def _delete(self, request: web.Request) -> web.Response:
        viewer, key = await self._asked(request, DELETE, "deleting")
        before = await self._console.run_as(viewer, lambda: self._console.primitives.ratelimits.delete_limit(key))
        self._console.acted(viewer, request, f"deleted rate limit {key!r}" if before else
                            f"deleted rate limit {key!r}: none was stored")
        return web.json_response({"deleted": before is not None})
