"""The console's task search and queue actions, over the same primitives and checks as
the gRPC API (issue 34).

Routes (POST, JSON, as app.py's):
  /api/queues/search          {queue, task_id, type, type_prefix, states[], error, payload, page_token}
                              a page of SearchTasks; pages on by itself (at most SEARCH_CALLS
                              bounded calls) while it has found nothing, so a sparse search
                              answers with matches or a token to go on
  /api/queues/schedules       {queue}: the queue's first MAX_SCHEDULES schedules
  /api/queues/retry-dead      {queue, task_id | task_ids[]}: dead tasks back to ready
  /api/queues/delete-dead     {queue, task_ids[]}: dead tasks deleted
  /api/queues/retry-matching  {queue, filters as search, page_token}: every dead task a search
  /api/queues/delete-matching finds, BULK_CALLS search calls per request; the page calls again
                              with the next_page_token it gets until that is empty
  /api/queues/cancel          {queue, task_id}
  /api/queues/purge           {queue, include_dead}
  /api/queues/pause           {queue, paused}: pause or resume the queue
  /api/queues/schedule-pause  {queue, name, paused}: pause or resume a schedule

Reads need what their gRPC method needs (SearchTasks, ListSchedules: read-only).
Every action needs an admin token (the console's rule: people act here as operators),
and the token must also be allowed the gRPC method that does the same; otherwise 403
PERMISSION_DENIED. Each action, done or refused, is logged with who asked.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from aiohttp import web

from concord.queue.v1 import queue_pb2 as pb

from ..api import validation as v
from ..api.queue import search_query
from ..errors import InvalidArgument
from ..primitives.queue import SearchPage, TaskRecord
from ..primitives.task_search import DEFAULT_PAGE, MAX_PAGE, Cursor, SearchQuery
from .auth import Viewer

if TYPE_CHECKING:
    from .app import Console


QUEUE = "/concord.queue.v1.QueueService/"
SEARCH_TASKS, LIST_SCHEDULES = QUEUE + "SearchTasks", QUEUE + "ListSchedules"
RETRY_DEAD, CANCEL, PURGE = QUEUE + "RetryDead", QUEUE + "Cancel", QUEUE + "Purge"
PAUSE_QUEUE, RESUME_QUEUE = QUEUE + "PauseQueue", QUEUE + "ResumeQueue"
PAUSE_SCHEDULE, RESUME_SCHEDULE = QUEUE + "PauseSchedule", QUEUE + "ResumeSchedule"
SEARCH_CALLS = 5  # SearchTasks calls one search request makes while it finds nothing
BULK_CALLS = 5  # SearchTasks calls (of MAX_PAGE matches) one retry- or delete-matching request makes
MAX_SELECTED = 100  # task ids one request may name
MAX_SCHEDULES = 50
PREVIEW_BYTES = 160  # of a payload, shown as text
STATES = {"ready": pb.TASK_STATE_READY, "delayed": pb.TASK_STATE_DELAYED, "leased": pb.TASK_STATE_LEASED,
          "dead": pb.TASK_STATE_DEAD, "succeeded": pb.TASK_STATE_SUCCEEDED, "cancelled": pb.TASK_STATE_CANCELLED}


def may(viewer: Viewer) -> dict[str, bool]:
    """What /api/me tells the page this viewer may do here."""
    return {"search_tasks": viewer.may(SEARCH_TASKS), "list_schedules": viewer.may(LIST_SCHEDULES),
            **{action: viewer.may_act(method) for action, method in (
                ("retry_dead", RETRY_DEAD), ("delete_dead", CANCEL), ("cancel", CANCEL), ("purge", PURGE),
                ("pause_queue", PAUSE_QUEUE), ("pause_schedule", PAUSE_SCHEDULE))}}


class QueueActions:
    def __init__(self, console: Console) -> None:
        self._console = console

    def add_routes(self, app: web.Application) -> None:
        for path, handler in (("search", self._search), ("schedules", self._schedules),
                              ("retry-dead", self._retry_dead), ("delete-dead", self._delete_dead),
                              ("retry-matching", self._retry_matching), ("delete-matching", self._delete_matching),
                              ("cancel", self._cancel), ("purge", self._purge), ("pause", self._pause),
                              ("schedule-pause", self._schedule_pause)):
            app.router.add_post(f"/api/queues/{path}", handler)

    # -- who may

    async def _asked(self, request: web.Request) -> tuple[Viewer, dict[str, Any], str]:
        viewer = self._console.viewer(request)
        body = await self._console.json_body(request)
        return viewer, body, v.name(_string(body, "queue"), "queue")

    @staticmethod
    def _allow(viewer: Viewer, request: web.Request, method: str, doing: str) -> None:
        viewer.check_act(method, request.remote, doing)

    def _done(self, viewer: Viewer, request: web.Request, did: str) -> None:
        self._console.acted(viewer, request, did)

    # -- reads

    async def _search(self, request: web.Request) -> web.Response:
        viewer, body, queue = await self._asked(request)
        viewer.check(SEARCH_TASKS)
        query, size, cursor = _search_args(body)
        tasks: list[TaskRecord] = []
        examined = 0
        for _ in range(SEARCH_CALLS):
            page = await self._page(viewer, queue, query, size, cursor)
            tasks, examined, cursor = tasks + page.tasks, examined + page.examined, page.next
            if tasks or cursor is None:
                break
        return web.json_response({"tasks": [_task(t) for t in tasks], "examined": examined,
                                  "next_page_token": cursor.token() if cursor else ""})

    async def _page(self, viewer: Viewer, queue: str, query: SearchQuery, size: int,
                    cursor: Cursor | None) -> SearchPage:
        queues = self._console.primitives.queues
        return await self._console.run_as(viewer, lambda: queues.search(queue, query, size, cursor))

    async def _schedules(self, request: web.Request) -> web.Response:
        viewer, _, queue = await self._asked(request)
        viewer.check(LIST_SCHEDULES)
        schedules = self._console.primitives.schedules
        found, more = await self._console.run_as(viewer, lambda: schedules.list(queue, "", MAX_SCHEDULES))
        return web.json_response({"schedules": [schedule_json(s) for s in found], "more": bool(more)})

    # -- actions on dead tasks

    async def _retry_dead(self, request: web.Request) -> web.Response:
        viewer, body, queue = await self._asked(request)
        ids = _task_ids(body)
        self._allow(viewer, request, RETRY_DEAD, f"retrying dead task {_named(ids)} of queue {queue!r}")
        queues = self._console.primitives.queues
        retried = await self._console.run_as(viewer, lambda: queues.retry_dead(queue, ids, len(ids)))
        self._done(viewer, request, f"retried dead task {_named(ids)} of queue {queue!r}: " + (
            "back to ready" if len(ids) == 1 and retried else
            "it was not dead" if len(ids) == 1 else f"{retried} back to ready"))
        return web.json_response({"retried": retried})

    async def _delete_dead(self, request: web.Request) -> web.Response:
        viewer, body, queue = await self._asked(request)
        ids = _task_ids(body)
        self._allow(viewer, request, CANCEL, f"deleting dead task {_named(ids)} of queue {queue!r}")
        queues = self._console.primitives.queues
        deleted = await self._console.run_as(viewer, lambda: queues.delete_dead(queue, ids))
        self._done(viewer, request, f"deleted dead task {_named(ids)} of queue {queue!r}: {deleted} deleted")
        return web.json_response({"deleted": deleted})

    async def _retry_matching(self, request: web.Request) -> web.Response:
        return await self._matching(request, "retry")

    async def _delete_matching(self, request: web.Request) -> web.Response:
        return await self._matching(request, "delete")

    async def _matching(self, request: web.Request, verb: str) -> web.Response:
        """One bounded step of retrying or deleting every dead task a search finds."""
        viewer, body, queue = await self._asked(request)
        query, _, cursor = _search_args(body)
        query = dataclasses.replace(query, states=frozenset({"dead"}))  # dead ones only, whatever was asked
        shown = _filters(query)
        doing, did = ("retrying", "retried") if verb == "retry" else ("deleting", "deleted")
        self._allow(viewer, request, RETRY_DEAD if verb == "retry" else CANCEL,
                    f"{doing} the dead tasks of queue {queue!r} matching {shown}")
        queues = self._console.primitives.queues
        done = examined = 0
        for _ in range(BULK_CALLS):
            page = await self._page(viewer, queue, query, MAX_PAGE, cursor)
            ids = [t.task_id for t in page.tasks]
            if ids:
                act = (lambda: queues.retry_dead(queue, ids, len(ids))) if verb == "retry" else (
                    lambda: queues.delete_dead(queue, ids))
                done += await self._console.run_as(viewer, act)
            examined, cursor = examined + page.examined, page.next
            if cursor is None:
                break
        self._done(viewer, request, f"{did} {done} dead task(s) of queue "
                   f"{queue!r} matching {shown} ({examined} looked at{', more to go' if cursor else ''})")
        return web.json_response({"retried" if verb == "retry" else "deleted": done, "examined": examined,
                                  "next_page_token": cursor.token() if cursor else ""})

    # -- actions on a task, a queue, a schedule

    async def _cancel(self, request: web.Request) -> web.Response:
        viewer, body, queue = await self._asked(request)
        task_id = v.token(_string(body, "task_id"), "task_id")
        self._allow(viewer, request, CANCEL, f"cancelling task {task_id!r} of queue {queue!r}")
        queues = self._console.primitives.queues
        await self._console.run_as(viewer, lambda: queues.cancel(queue, task_id))
        self._done(viewer, request, f"cancelled task {task_id!r} of queue {queue!r}")
        return web.json_response({"cancelled": True})

    async def _purge(self, request: web.Request) -> web.Response:
        viewer, body, queue = await self._asked(request)
        include_dead = _flag(body, "include_dead")
        what = "ready, delayed, dead and finished" if include_dead else "ready and delayed"
        self._allow(viewer, request, PURGE, f"purging queue {queue!r} ({what} tasks)")
        queues = self._console.primitives.queues
        deleted = await self._console.run_as(viewer, lambda: queues.purge(queue, include_dead))
        self._done(viewer, request, f"purged queue {queue!r}: {deleted} {what} task(s) deleted")
        return web.json_response({"deleted": deleted})

    async def _pause(self, request: web.Request) -> web.Response:
        viewer, body, queue = await self._asked(request)
        paused = _flag(body, "paused")
        verb = "pausing" if paused else "resuming"
        self._allow(viewer, request, PAUSE_QUEUE if paused else RESUME_QUEUE, f"{verb} queue {queue!r}")
        queues = self._console.primitives.queues
        was = await self._console.run_as(viewer, lambda: queues.pause(queue, paused))
        self._done(viewer, request, f"{'paused' if paused else 'resumed'} queue {queue!r} "
                   f"(it was {'paused' if was else 'running'})")
        return web.json_response({"was_paused": was})

    async def _schedule_pause(self, request: web.Request) -> web.Response:
        viewer, body, queue = await self._asked(request)
        name = v.name(_string(body, "name"), "name")
        paused = _flag(body, "paused")
        self._allow(viewer, request, PAUSE_SCHEDULE if paused else RESUME_SCHEDULE,
                    f"{'pausing' if paused else 'resuming'} schedule {name!r} of queue {queue!r}")
        schedules = self._console.primitives.schedules
        s = await self._console.run_as(viewer, lambda: (schedules.pause if paused else schedules.resume)(queue, name))
        self._done(viewer, request, f"{'paused' if paused else 'resumed'} schedule {name!r} of queue {queue!r}")
        return web.json_response({"name": s.name, "paused": s.paused, "next_run_ms": s.next_ms})


def schedule_json(s: Any) -> dict[str, Any]:
    """A schedule as the page shows it (here and on a queue's page, queue_detail.py)."""
    return {"name": s.name, "paused": s.paused, "next_run_ms": s.next_ms, "last_run_ms": s.last_ms, "runs": s.runs,
            "when": f"cron {s.spec.timing.cron} ({s.spec.timing.timezone})" if s.spec.timing.cron
            else f"every {s.spec.timing.every_ms // 1000} s", "type": s.spec.type}


def _string(body: dict[str, Any], field: str) -> str:
    value = body.get(field, "")
    if not isinstance(value, str):
        raise InvalidArgument(f"{field} must be a string", field=field)
    return value


def _flag(body: dict[str, Any], field: str) -> bool:
    value = body.get(field, False)
    if not isinstance(value, bool):
        raise InvalidArgument(f"{field} must be true or false", field=field)
    return value


def _task_ids(body: dict[str, Any]) -> list[str]:
    """task_ids (1 to MAX_SELECTED), or one task_id."""
    ids = body.get("task_ids")
    if ids is None:
        ids = [_string(body, "task_id")]
    if not isinstance(ids, list) or not 1 <= len(ids) <= MAX_SELECTED or not all(isinstance(i, str) for i in ids):
        raise InvalidArgument(f"task_ids must list 1 to {MAX_SELECTED} task ids", field="task_ids")
    return [v.token(i, "task_ids") for i in dict.fromkeys(ids)]


def _named(ids: list[str]) -> str:
    return repr(ids[0]) if len(ids) == 1 else f"{len(ids)} tasks {', '.join(ids[:10])}{'…' if len(ids) > 10 else ''}"


def _search_args(body: dict[str, Any]) -> tuple[SearchQuery, int, Cursor | None]:
    """The search's filters, page size and position, checked as SearchTasks checks them."""
    states = body.get("states", [])
    if not isinstance(states, list) or not all(isinstance(s, str) and s in STATES for s in states):
        raise InvalidArgument(f"states must list some of {', '.join(STATES)}", field="states")
    size = body.get("page_size", DEFAULT_PAGE)
    if not isinstance(size, int) or isinstance(size, bool):
        raise InvalidArgument("page_size must be a number", field="page_size")
    request = pb.SearchTasksRequest(task_id=_string(body, "task_id"), type=_string(body, "type"),
                                    type_prefix=_string(body, "type_prefix"), states=[STATES[s] for s in states],
                                    error_contains=_string(body, "error"),
                                    payload_contains=_string(body, "payload").encode())
    return (search_query(request), v.count(size, "page_size", minimum=1, maximum=MAX_PAGE),
            Cursor.parse(_string(body, "page_token")))


def _filters(q: SearchQuery) -> str:
    """A search's filters, for the log."""
    shown = {"task_id": q.task_id, "type": q.type, "type_prefix": q.type_prefix, "error": q.error_contains,
             "payload": q.payload_contains.decode(errors="replace")}
    return "{" + ", ".join(f"{k}={val!r}" for k, val in shown.items() if val) + "}"


def _task(t: TaskRecord) -> dict[str, Any]:
    preview = t.payload[:PREVIEW_BYTES].decode(errors="replace")
    return {"task_id": t.task_id, "type": t.type, "state": t.state, "priority": t.priority, "attempt": t.attempt,
            "max_attempts": t.max_attempts, "last_error": t.last_error, "group": t.group,
            "enqueued_at_ms": t.enqueued_ms, "ready_at_ms": t.ready_ms, "lease_expires_at_ms": t.lease_expires_ms,
            "payload_bytes": len(t.payload), "payload_preview": preview}
