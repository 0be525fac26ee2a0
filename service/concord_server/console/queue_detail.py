"""The console's detail pages (issue 34): one queue, one task with its event history,
and one lock's waiters page by page. Read over HTTP only while a page shows them,
never in the 1 s snapshot, and each read bounded by what it names.

Routes (GET, JSON; errors as app.py's, plus ``field`` for a bad parameter):
  /api/queues/<queue>?limit=&delayed_after=&leased_after=&dead_after=&groups_after=
      the queue's counts (Stats), its flow-control and retry settings (GetQueuePolicy),
      the event stream's numbers, one page (limit, at most MAX_LIST, default
      DEFAULT_LIST) of each of its delayed tasks (by due time), leased tasks (by lease
      expiry, with the lease's Dequeue call) and dead tasks (by time of death), each
      read as SearchTasks reads one state and paged by its score cursor
      (``next``, "<set>:<score>:<id>"); a page of its groups by name (ListGroups: cap,
      weight, rate, leased now, paused, what holds it); its first MAX_SCHEDULES
      schedules. 404 NOT_FOUND for a queue with no task, schedule, group or event.
  /api/tasks/<queue>/<task id>?before=
      the task as GetTask reads it (payload and result cut to PREVIEW_BYTES) and its
      events from the queue's event stream, newest first: one script looks at no more
      than EVENTS_LOOK events below ``before`` (0: from the newest) and stops at the
      task's first one; the reply says whether the history is whole, where to look on,
      or that older events were trimmed. 404 TASK_NOT_FOUND for a task that is gone.
  /api/locks/<lock>/waiters?offset=&limit=
      one page (limit at most MAX_WAITERS_PAGE) of the lock's waiters in FIFO order from
      queue position ``offset`` (lock_waiters_page.lua), and the next page's offset.

Reads need what their gRPC methods need (Stats, GetTask, ListLocks...: a read-only
token may), in the viewer's tenant: another tenant's queue is simply not there.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ..api import validation as v
from ..errors import InvalidArgument, NotFound
from ..primitives.queue import TaskRecord
from ..primitives.task_search import SET_OF_STATE, Cursor, SearchQuery
from .queue_actions import schedule_json

if TYPE_CHECKING:
    from .app import Console

QUEUE = "/concord.queue.v1.QueueService/"
STATS, GET_POLICY, LIST_GROUPS = QUEUE + "Stats", QUEUE + "GetQueuePolicy", QUEUE + "ListGroups"
SEARCH_TASKS, GET_TASK, WATCH_QUEUE = QUEUE + "SearchTasks", QUEUE + "GetTask", QUEUE + "WatchQueue"
LIST_SCHEDULES = QUEUE + "ListSchedules"
LIST_LOCKS = "/concord.lock.v1.LockService/ListLocks"

LISTS = ("delayed", "leased", "dead")  # the task lists of a queue's page, each paged by its score cursor
DEFAULT_LIST, MAX_LIST = 20, 50  # tasks (or groups) per list and page
MAX_SCHEDULES = 50
LIST_REPLY_BYTES = 512 * 1024  # of a list's Redis reply (payloads are read, not shown): a page ends before
EVENTS_LOOK = 1000  # events of the stream one task request looks at, newest first
EVENTS_MOST = 200  # of the task's own, per request
DEFAULT_WAITERS_PAGE, MAX_WAITERS_PAGE = 100, 100
PREVIEW_BYTES = 512  # of a payload or result, shown as text
ERROR_CHARS = 1000  # of a last error, in a list


def _with_field(handler: Callable[[Any, web.Request], Awaitable[web.StreamResponse]]
                ) -> Callable[[Any, web.Request], Awaitable[web.StreamResponse]]:
    """app.py's error JSON, with the bad parameter's name (``field``) for a 400."""
    @functools.wraps(handler)
    async def wrapped(self: Any, request: web.Request) -> web.StreamResponse:
        try:
            return await handler(self, request)
        except InvalidArgument as exc:
            return web.json_response({"code": exc.code, "reason": exc.reason, "message": exc.message,
                                      "field": exc.metadata.get("field", "")}, status=400)
    return wrapped


class QueueDetail:
    def __init__(self, console: Console) -> None:
        self._console = console

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/api/queues/{queue:.+}", self._queue)
        app.router.add_get("/api/tasks/{queue:.+}/{task_id:[^/]+}", self._task)
        app.router.add_get("/api/locks/{name:.+}/waiters", self._waiters)

    # -- a queue

    @_with_field
    async def _queue(self, request: web.Request) -> web.Response:
        viewer = self._console.viewer(request)
        viewer.check(STATS)
        viewer.check(SEARCH_TASKS)
        queue = v.name(request.match_info["queue"], "queue")
        limit = _int(request, "limit", DEFAULT_LIST, 1, MAX_LIST)
        cursors = {state: _cursor(request, state) for state in LISTS}
        groups_after = request.query.get("groups_after", "")
        if groups_after:
            v.name(groups_after, "groups_after")
        p = self._console.primitives
        show_groups, show_policy = viewer.may(LIST_GROUPS), viewer.may(GET_POLICY)
        show_schedules = viewer.may(LIST_SCHEDULES)

        async def read() -> dict[str, Any]:
            stats = await p.queues.stats(queue)  # first: its sweep makes due tasks ready, expired leases end
            events, _ = await p.queues.task_events(queue, "", 0, 0, 1)
            pages = [await p.queues.search(queue, SearchQuery(states=frozenset({state})), limit, cursors[state],
                                           reply_bytes=LIST_REPLY_BYTES) for state in LISTS]
            groups = await p.queues.groups(queue, groups_after, limit) if show_groups else None
            policy = await p.queues.get_policy(queue) if show_policy else None
            schedules = await p.schedules.list(queue, "", MAX_SCHEDULES) if show_schedules else None
            return {"stats": stats, "events": events, "pages": pages, "groups": groups, "policy": policy,
                    "schedules": schedules}

        r = await self._console.run_as(viewer, read)
        s, events = r["stats"], r["events"]
        known = (s.ready or s.delayed or s.leased or s.dead or s.finished or s.paused or events.last
                 or any(page.tasks for page in r["pages"]) or r["groups"] or (r["schedules"] and r["schedules"][0]))
        if not known:
            raise NotFound(f"queue {queue!r} holds no task, schedule, group or event", queue=queue)
        now = events.now_ms
        reply: dict[str, Any] = {
            "queue": queue, "now_ms": now, "limit": limit,
            "stats": {"ready": s.ready, "delayed": s.delayed, "leased": s.leased, "dead": s.dead, "done": s.finished,
                      "paused": s.paused, "oldest_ready_age_ms": s.oldest_ready_age_ms},
            "events": {"last": events.last, "first_kept": events.first_kept},
        }
        for state, page in zip(LISTS, r["pages"]):
            reply[state] = {"tasks": [_row(t, now) for t in page.tasks],
                            "next": page.next.token() if page.next and page.next.set == SET_OF_STATE[state] else ""}
        groups = r["groups"]
        reply["groups"] = None if groups is None else {
            "items": [_group(g) for g in groups], "next": groups[-1].name if len(groups) == limit else ""}
        reply["policy"] = None if r["policy"] is None else _policy(r["policy"])
        schedules = r["schedules"]
        reply["schedules"] = None if schedules is None else {
            "items": [schedule_json(x) for x in schedules[0]], "more": bool(schedules[1])}
        return web.json_response(reply)

    # -- a task and its history

    @_with_field
    async def _task(self, request: web.Request) -> web.Response:
        viewer = self._console.viewer(request)
        viewer.check(GET_TASK)
        queue = v.name(request.match_info["queue"], "queue")
        task_id = v.token(request.match_info["task_id"], "task_id")
        before = _int(request, "before", 0, 0, 2**53)
        show_events = viewer.may(WATCH_QUEUE)
        queues = self._console.primitives.queues

        async def read() -> tuple[TaskRecord, Any]:
            task = await queues.get_task(queue, task_id)  # TASK_NOT_FOUND (404) once it is gone
            history = await queues.task_events(queue, task_id, before, EVENTS_LOOK, EVENTS_MOST) if show_events \
                else None
            return task, history

        task, history = await self._console.run_as(viewer, read)
        reply: dict[str, Any] = {"queue": queue, "task": _task_json(task)}
        if history is None:
            reply["events"] = None
        else:
            r, events = history
            reply["now_ms"] = r.now_ms
            reply["events"] = {
                "items": [_event(e) for e in events], "last": r.last, "first_kept": r.first_kept,
                "looked": r.looked, "whole": bool(r.whole), "next_before": r.go_on,
                # Looked down to the oldest kept event without finding the task's first one:
                # its older events were dropped (the stream keeps the queue's latest).
                "trimmed": not r.whole and not r.go_on,
                "look_limit": EVENTS_LOOK}
        return web.json_response(reply)

    # -- a lock's waiters, page by page

    @_with_field
    async def _waiters(self, request: web.Request) -> web.Response:
        viewer = self._console.viewer(request)
        viewer.check(LIST_LOCKS)
        name = v.name(request.match_info["name"], "name")
        offset = _int(request, "offset", 0, 0, 2**31)
        limit = _int(request, "limit", DEFAULT_WAITERS_PAGE, 1, MAX_WAITERS_PAGE)
        locks = self._console.primitives.locks
        now, queued, page = await self._console.run_as(viewer, lambda: locks.waiters_page(name, offset, limit))
        return web.json_response({
            "name": name, "now_ms": now, "queued": queued, "offset": offset, "limit": limit,
            "next_offset": offset + limit if offset + limit < queued else None,
            "waiters": [{"position": at, "owner": owner, "since_ms": since, "waited_ms": max(now - since, 0)}
                        for at, owner, since in page]})


def _int(request: web.Request, field: str, default: int, minimum: int, maximum: int) -> int:
    text = request.query.get(field, "")
    if not text:
        return default
    if not text.isascii() or not text.isdigit() or len(text) > 16:
        raise InvalidArgument(f"{field} must be a whole number", field=field)
    return v.count(int(text), field, minimum=minimum, maximum=maximum)


def _cursor(request: web.Request, state: str) -> Cursor | None:
    field = f"{state}_after"
    try:
        cursor = Cursor.parse(request.query.get(field, ""))
    except InvalidArgument:
        raise InvalidArgument(f"{field} is not a position this server handed out", field=field) from None
    if cursor is not None and cursor.set != SET_OF_STATE[state]:
        raise InvalidArgument(f"{field} is a position in another list", field=field)
    return cursor


def _worker(lease: str) -> str:
    """What the queue records of who holds a task: its lease, whose first part is one per
    Dequeue call (a Consume stream makes many). Only its first 8 hex digits: enough to
    tell calls apart, not the lease itself (which Ack and Nack take)."""
    return lease.split(".", 1)[0][:8] if lease else ""


def _row(t: TaskRecord, now: int) -> dict[str, Any]:
    return {"task_id": t.task_id, "type": t.type, "state": t.state, "priority": t.priority, "attempt": t.attempt,
            "max_attempts": t.max_attempts, "group": t.group, "schedule": t.schedule,
            "last_error": t.last_error[:ERROR_CHARS], "enqueued_at_ms": t.enqueued_ms, "ready_at_ms": t.ready_ms,
            "due_in_ms": t.ready_ms - now if t.state == "delayed" else None,
            "lease_expires_at_ms": t.lease_expires_ms,
            "expires_in_ms": t.lease_expires_ms - now if t.lease_expires_ms is not None and t.state == "leased"
            else None, "worker": _worker(t.lease) if t.state == "leased" else "", "payload_bytes": len(t.payload)}


def _task_json(t: TaskRecord) -> dict[str, Any]:
    progress = None
    if t.progress is not None:
        progress = {"value": t.progress.value, "json": t.progress.json[:PREVIEW_BYTES],
                    "reported_at_ms": t.progress.reported_ms}
    return {"task_id": t.task_id, "type": t.type, "state": t.state, "priority": t.priority, "attempt": t.attempt,
            "max_attempts": t.max_attempts, "group": t.group, "schedule": t.schedule,
            "scheduled_at_ms": t.scheduled_ms, "last_error": t.last_error, "dead_reason": t.dead_reason,
            "wait_reason": t.wait_reason, "enqueued_at_ms": t.enqueued_ms, "ready_at_ms": t.ready_ms,
            "leased_at_ms": t.leased_ms, "lease_expires_at_ms": t.lease_expires_ms, "finished_at_ms": t.finished_ms,
            "worker": _worker(t.lease) if t.state == "leased" else "", "progress": progress,
            "payload_bytes": len(t.payload), "payload_preview": t.payload[:PREVIEW_BYTES].decode(errors="replace"),
            "result_bytes": len(t.result), "result_type": t.result_type,
            "result_preview": t.result[:PREVIEW_BYTES].decode(errors="replace")}


def _event(e: Any) -> dict[str, Any]:
    return {"position": e.position, "kind": e.kind, "at_ms": e.at_ms, "attempt": e.attempt, "type": e.type,
            "ready_at_ms": e.ready_ms, "error": e.error, "dead_reason": e.dead_reason, "schedule": e.schedule,
            "progress": None if e.progress is None else {"value": e.progress.value, "json": e.progress.json}}


def _rate(r: Any) -> dict[str, int] | None:
    return None if r is None else {"count": r.count, "period_ms": r.period_ms, "burst": r.burst}


def _group(g: Any) -> dict[str, Any]:
    return {"name": g.name, "ready": g.ready, "leased": g.leased, "paused": g.paused, "max_leased": g.max_leased,
            "weight": g.own.weight or 1, "rate": _rate(g.rate), "wait_reason": g.wait_reason,
            "own": {"max_leased": g.own.max_leased, "weight": g.own.weight, "rate": _rate(g.own.rate)}}


def _policy(p: Any) -> dict[str, Any]:
    retry = p.retry
    return {"max_leased": p.max_leased, "rate": _rate(p.rate), "group_max_leased": p.group_max_leased,
            "group_rate": _rate(p.group_rate), "keep_events": p.keep_events,
            "max_attempts": retry.max_attempts if retry else None, "backoff": retry.backoff if retry else None,
            "backoff_initial_ms": retry.initial_ms if retry else None, "backoff_cap_ms": retry.cap_ms if retry else None,
            "succeeded_kept": None if p.succeeded is None else {"count": p.succeeded.max_count,
                                                                 "age_ms": p.succeeded.max_age_ms},
            "dead_kept": None if p.dead is None else {"count": p.dead.max_count, "age_ms": p.dead.max_age_ms}}

