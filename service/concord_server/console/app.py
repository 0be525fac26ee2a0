"""The console's aiohttp application: routes, force-release, errors as JSON.

Routes:
  GET  /                          the page (static/index.html; static/ for the rest)
  GET  /api/me                    who is logged in, what they may do, whether a token is needed
  POST /api/login  {"token"}      a session cookie for an API token (sessions.py: kept in Redis; failed
                                  logins throttled: 429 with Retry-After)
  POST /api/logout
  GET  /api/snapshot              the viewer's snapshot once (JSON)
  GET  /api/events                the same, live: Server-Sent Events (live.py)
  POST /api/queues/history {"queues"}   the named queues' kept samples (views.queue_histories)
  POST /api/locks/force-release {"name"}   an admin's release of a lock (the next waiter gets it)
  POST /api/queues/...           task search and queue actions: queue_actions.py
  GET  /api/queues/<queue>, /api/tasks/<queue>/<id>, /api/locks/<name>/waiters
                                  a queue's page, a task's history, a lock's waiters: queue_detail.py
  POST /api/autocomplete/suggest  the suggestion box (a read): views_autocomplete.py
  POST /api/limits/reset, /api/limits/delete   a rate limit's reset and delete: views_limits.py

An action needs what its gRPC method needs (ForceRelease: an admin token; auth.py),
else 403 with reason PERMISSION_DENIED; each one, done or refused, is logged with
who asked. POSTs must carry JSON (a cross-site form cannot) and a same-origin Origin
when one is sent, on top of the SameSite=Strict cookie. Errors are JSON
``{"code", "reason", "message"}``, the gRPC status code and ErrorInfo reason the API
would give.

The server processes (the snapshot's ``processes`` part: every replica's record from
the process registry, with host names, addresses and server-wide call rates) are the
server's, not a tenant's: only admin tokens see them (and everyone without
--auth-tokens, where every viewer may do everything); other viewers get the overview's
Redis part alone.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import math
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web

from .. import tenants
from ..api import validation as v
from ..errors import ConcordError, InvalidArgument, PermissionDenied, Unauthenticated
from .auth import COOKIE, Viewer
from .sessions import SessionStore, middleware, viewer_of_request
from .live import KEEPALIVE, Hub
from .queue_actions import QueueActions
from .queue_actions import may as queue_may
from .queue_detail import QueueDetail
from . import extra_views
from .views import MAX_QUEUES, Overview, locks_view, queue_histories, queues_view, semaphores_view

log = logging.getLogger("concord_server.console")

STATIC = Path(__file__).parent / "static"
LIST_LOCKS = "/concord.lock.v1.LockService/ListLocks"
FORCE_RELEASE = "/concord.lock.v1.LockService/ForceRelease"
LIST_SEMAPHORES = "/concord.semaphore.v1.SemaphoreService/ListSemaphores"
LIST_QUEUES = "/concord.queue.v1.QueueService/ListQueues"
# Each part of a snapshot, its reader, and the method a token must be allowed to see it.
VIEWS = (("locks", LIST_LOCKS, lambda p: locks_view(p.locks, p.lock_activity)),
         ("semaphores", LIST_SEMAPHORES, lambda p: semaphores_view(p.semaphores)),
         ("queues", LIST_QUEUES, lambda p: queues_view(p.queues)),
         *extra_views.VIEWS)  # read-write locks, elections, chats, autocomplete, files, limits
PARTS = frozenset(part for part, _, _ in VIEWS)
HTTP_STATUS = {"INVALID_ARGUMENT": 400, "UNAUTHENTICATED": 401, "PERMISSION_DENIED": 403, "NOT_FOUND": 404,
               "FAILED_PRECONDITION": 409, "RESOURCE_EXHAUSTED": 429, "UNAVAILABLE": 503, "DEADLINE_EXCEEDED": 504}
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
                               "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}

T = TypeVar("T")


class Console:
    """The console of one server process; ``start`` binds it, ``aclose`` ends it."""

    def __init__(self, primitives: Any, overview: Overview, sessions: SessionStore, *,
                 history_interval: float = 10.0) -> None:
        self.primitives = primitives
        self._overview = overview
        self.sessions = sessions  # in Redis, with the login throttle (sessions.py)
        self.hub = Hub(lambda: self._snapshot)
        self.queue_actions = QueueActions(self)
        self.json_body = _json_body
        self._runner: web.AppRunner | None = None
        self.port: int | None = None
        self.history_interval = history_interval

    def application(self) -> web.Application:
        app = web.Application(middlewares=[_errors, middleware(self.sessions)], client_max_size=64 * 1024)
        app.router.add_get("/", self._index)
        app.router.add_get("/api/me", self._me)
        app.router.add_post("/api/login", self._login)
        app.router.add_post("/api/logout", self._logout)
        app.router.add_get("/api/snapshot", self._snapshot_once)
        app.router.add_get("/api/events", self._events)
        app.router.add_post("/api/locks/force-release", self._force_release)
        app.router.add_post("/api/queues/history", self._queue_history)
        self.queue_actions.add_routes(app)
        QueueDetail(self).add_routes(app)  # GET: a queue's page, a task's history, a lock's waiters
        extra_views.add_routes(self, app)  # POST /api/autocomplete/suggest, /api/limits/*
        app.router.add_static("/static/", STATIC, follow_symlinks=False)
        app.on_response_prepare.append(_secure_headers)
        return app

    async def start(self, listen: str) -> int:
        host, _, port = listen.rpartition(":")
        self._runner = web.AppRunner(self.application(), access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host.strip("[]") or None, int(port), reuse_address=True)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self.port

    async def aclose(self) -> None:
        await self.hub.aclose()  # every event stream ends first, so the runner need not wait for them
        if self._runner is not None:
            await self._runner.cleanup()
        await self.sessions.aclose()

    def acted(self, viewer: Viewer, request: web.Request, did: str) -> None:
        """After an action: logged with who did it, and the viewer's pages shown it at once."""
        log.info("console: %s from %s %s", viewer.who, request.remote, did)
        self.hub.poke(viewer.tenant)

    # -- who is asking

    def viewer(self, request: web.Request) -> Viewer:
        """The request's viewer, found by the sessions middleware; Unauthenticated if none."""
        return viewer_of_request(request)

    async def run_as(self, viewer: Viewer, work: Callable[[], Awaitable[T]]) -> T:
        """Runs work in the viewer's tenant (tenants.current), in a context of its own."""
        async def run() -> T:  # work() itself runs in the context: a Routed primitive is resolved there
            return await work()

        context = contextvars.copy_context()
        context.run(tenants.current.set, viewer.tenant)
        return await asyncio.create_task(run(), context=context)

    # -- what the page shows

    async def _snapshot(self, parts: frozenset[str] = PARTS) -> dict[str, Any]:
        """One tenant's snapshot (run in its feed's context, live.py): the overview and
        the named parts of VIEWS."""
        snapshot: dict[str, Any] = dict(await self._overview.read())  # overview, processes
        for part, _, read in VIEWS:  # one after the other: each bounds its own Redis work
            if part not in parts:
                continue
            try:
                snapshot[part] = await read(self.primitives)
            except ConcordError as exc:
                snapshot[part] = {"error": exc.message, "code": exc.code}
        return snapshot

    @staticmethod
    def _hidden(viewer: Viewer) -> tuple[str, ...]:
        hidden = tuple(part for part, method, _ in VIEWS if not viewer.may(method))
        return hidden if sees_processes(viewer) else (*hidden, "processes")

    async def _index(self, request: web.Request) -> web.StreamResponse:
        return web.FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    async def _me(self, request: web.Request) -> web.Response:
        try:
            viewer = self.viewer(request)
        except Unauthenticated:  # Redis away is 503, not "logged out"
            return web.json_response({"logged_in": False, "needs_token": self.sessions.needs_token})
        return web.json_response(_me(viewer, self.sessions.needs_token))

    async def _snapshot_once(self, request: web.Request) -> web.Response:
        viewer = self.viewer(request)
        snapshot = await self.run_as(viewer, self._snapshot)
        return web.json_response({k: v for k, v in snapshot.items() if k not in self._hidden(viewer)})

    async def _events(self, request: web.Request) -> web.StreamResponse:
        viewer = self.viewer(request)
        hidden = self._hidden(viewer)
        asked = request.query.get("parts")  # the page's parts, "locks,semaphores"; none given: all
        parts = PARTS if asked is None else frozenset(asked.split(",")) & PARTS
        async with self.hub.subscribe(viewer.tenant, parts) as (feed, queue):
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                                   "X-Accel-Buffering": "no"})
            await response.prepare(request)
            try:
                await response.write(b"retry: 2000\n\n")
                while True:
                    try:
                        snapshot = await asyncio.wait_for(queue.get(), KEEPALIVE)
                    except asyncio.TimeoutError:
                        await response.write(b": keepalive\n\n")
                        continue
                    if snapshot is None:  # the console is closing
                        break
                    # The viewer is checked again for each event: a revoked token's stream ends,
                    # and a session logged out on any replica.
                    try:
                        await self.sessions.viewer(request.cookies.get(COOKIE))
                    except Unauthenticated:
                        break
                    except ConcordError:  # Redis away: the snapshot says so; the stream goes on
                        pass
                    await response.write(feed.payload(hidden))
            except ConnectionResetError:  # the page went away
                pass
        return response

    async def _queue_history(self, request: web.Request) -> web.Response:
        """The named queues' kept samples, for the queues page's charts (asked once per
        history interval while the page shows them, not pushed with each snapshot: up to
        queue_history.KEEP samples a queue)."""
        viewer = self.viewer(request)
        body = await _json_body(request)
        names = body.get("queues")
        if not isinstance(names, list) or len(names) > MAX_QUEUES or not all(isinstance(n, str) for n in names):
            raise InvalidArgument(f"queues must be a list of at most {MAX_QUEUES} queue names", field="queues")
        for name in names:
            v.name(name)
        viewer.check(LIST_QUEUES)
        found = await self.run_as(viewer, lambda: queue_histories(self.primitives.history, names))
        return web.json_response({**found, "interval_ms": int(self.history_interval * 1000)})

    # -- log in and out

    async def _login(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        token = body.get("token")
        if not isinstance(token, str) or not token.strip():
            raise InvalidArgument("token must be a non-empty string", field="token")
        session, viewer = await self.sessions.login(token.strip(), request.remote, request.cookies.get(COOKIE))
        log.info("console: %s logged in from %s", viewer.who, request.remote)
        response = web.json_response(_me(viewer, True))
        response.set_cookie(COOKIE, session, max_age=self.sessions.lifetime, path="/", httponly=True,
                            samesite="Strict", secure=request.secure)
        return response

    async def _logout(self, request: web.Request) -> web.Response:
        await _json_body(request)
        await self.sessions.logout(request.cookies.get(COOKIE))
        response = web.json_response({"logged_in": False, "needs_token": self.sessions.needs_token})
        response.del_cookie(COOKIE, path="/")
        return response

    # -- actions

    async def _force_release(self, request: web.Request) -> web.Response:
        viewer = self.viewer(request)
        body = await _json_body(request)
        name = body.get("name")
        if not isinstance(name, str):
            raise InvalidArgument("name must be a string", field="name")
        try:
            viewer.check(FORCE_RELEASE)
        except ConcordError:
            log.warning("console: %s from %s was refused force-releasing lock %r (needs an admin token)",
                        viewer.who, request.remote, name)
            raise
        v.name(name)
        removed = await self.run_as(viewer, lambda: self.primitives.locks.force_release(name))
        if removed is None:
            log.info("console: %s from %s force-released lock %r: nobody held it", viewer.who, request.remote, name)
            reply: dict[str, Any] = {"released": False}
        else:
            log.info("console: %s from %s force-released lock %r from owner %r (fencing token %d)",
                     viewer.who, request.remote, name, removed[0], removed[1])
            reply = {"released": True, "owner": removed[0], "fencing_token": removed[1]}
        self.hub.poke(viewer.tenant)
        return web.json_response(reply)


def _me(viewer: Viewer, needs_token: bool) -> dict[str, Any]:
    return {"logged_in": True, "needs_token": needs_token, "who": viewer.who, "tenant": viewer.identity.tenant,
            "role": viewer.identity.role,
            "may": {"list_locks": viewer.may(LIST_LOCKS), "force_release": viewer.may(FORCE_RELEASE),
                    "list_semaphores": viewer.may(LIST_SEMAPHORES), "list_queues": viewer.may(LIST_QUEUES),
                    "see_processes": sees_processes(viewer),
                    **queue_may(viewer), **extra_views.may(viewer)}}


def sees_processes(viewer: Viewer) -> bool:
    """Server processes are the server's: admin tokens see them (and every viewer
    without --auth-tokens, whose identity is an admin's)."""
    return viewer.identity.role == "admin"


async def _json_body(request: web.Request) -> dict[str, Any]:
    """The request's JSON object; a POST that is not JSON, or comes from another origin, is refused."""
    origin = request.headers.get("Origin")
    if origin is not None and origin != f"{request.scheme}://{request.host}":
        raise PermissionDenied("cross-origin request refused")
    if request.content_type != "application/json":
        raise InvalidArgument("send a JSON body (Content-Type: application/json)", field="body")
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InvalidArgument("the body is not JSON", field="body") from None
    if not isinstance(body, dict):
        raise InvalidArgument("the body must be a JSON object", field="body")
    return body


@web.middleware
async def _errors(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                  ) -> web.StreamResponse:
    try:
        return await handler(request)
    except ConcordError as exc:
        retry = getattr(exc, "retry_delay", None)  # a throttled login: when to try again
        return web.json_response({"code": exc.code, "reason": exc.reason, "message": exc.message},
                                 status=HTTP_STATUS.get(exc.code, 500),
                                 headers={"Retry-After": str(max(1, math.ceil(retry)))} if retry else None)
    except web.HTTPException:
        raise
    except (ConnectionResetError, asyncio.CancelledError):
        raise
    except Exception:
        log.exception("console: %s %s failed", request.method, request.path)
        return web.json_response({"code": "INTERNAL", "reason": "INTERNAL", "message": "internal error"}, status=500)


async def _secure_headers(request: web.Request, response: web.StreamResponse) -> None:
    response.headers.update(SECURITY_HEADERS)
