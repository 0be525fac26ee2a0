"""`concord queue`: counts, groups, pause/resume, tasks, dead letters, retention, schedules."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .._convert import duration
from ..queue.v1 import queue_pb2
from ..tasks import STATE_NAMES, STATE_VALUES
from ._common import (
    UNLIMITED, Base, Command, _age, _bytes_text, _dict, _fields, human_duration, parse_duration, _seconds,
    _table, _time,
)


# `concord queue wait`: how the task ended (besides 0 succeeded, 1 error, 2 usage).
WAIT_DEAD, WAIT_CANCELLED, WAIT_NOT_FINISHED, WAIT_INTERRUPTED = 3, 4, 5, 130
WAIT_EXIT_CODES = f"""exit codes:
  0    the task succeeded (its result is printed)
  1    error: no such task (never enqueued, or its queue's retention dropped it), server unreachable...
  2    usage
  {WAIT_DEAD}    the task is dead (out of attempts, its last lease ran out, or not retryable)
  {WAIT_CANCELLED}    the task was cancelled
  {WAIT_NOT_FINISHED}    it had not finished within --timeout (it is printed as it is)
  {WAIT_INTERRUPTED}  interrupted (Ctrl-C) before it finished"""


def _retention_age(text: str) -> float:
    """--succeeded-for / --dead-for: a duration, or "unlimited" (or 0): no age limit."""
    return 0.0 if text.strip().lower() == UNLIMITED else parse_duration(text)


def _retention_count(text: str) -> int | str:
    """--keep-succeeded / --keep-dead: a count (0 keeps none) or "unlimited"."""
    if text.strip().lower() == UNLIMITED:
        return UNLIMITED
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count (a number, or {UNLIMITED})") from None
    if count < 0:
        raise argparse.ArgumentTypeError(f"{count} is negative")
    return count


GROUPS_SHOWN = 100  # queue describe's group table
SEARCH_PAGE = 100  # SearchTasks' largest page
_WAITING = {queue_pb2.WAIT_REASON_GROUP_PAUSED: "paused", queue_pb2.WAIT_REASON_GROUP_AT_CAP: "at cap",
            queue_pb2.WAIT_REASON_GROUP_RATE_LIMITED: "rate limited"}


def _group_row(g: queue_pb2.Group) -> dict[str, Any]:
    e = g.effective
    rate = (f"{e.rate.limit}/{human_duration(e.rate.period.ToNanoseconds() / 1e9)} (burst {e.rate.burst})"
            if e.HasField("rate") else "-")
    return {"group": g.name, "ready": g.ready, "leased": g.leased,
            "cap": e.max_leased if e.HasField("max_leased") else "-", "weight": e.weight or 1, "rate": rate,
            "waiting": _WAITING.get(g.wait_reason, "-")}


def _retry_row(m: queue_pb2.RetryPolicy) -> dict[str, Any]:
    """A RetryPolicy as a table row; fields it does not set are left blank."""
    row: dict[str, Any] = {"max_attempts": m.max_attempts or ""}
    if m.backoff:
        row["backoff"] = queue_pb2.Backoff.Name(m.backoff).removeprefix("BACKOFF_").lower()
    for name in ("initial_delay", "max_delay"):
        if m.HasField(name):
            row[name] = human_duration(getattr(m, name).ToNanoseconds() / 1e9)
    if m.HasField("jitter"):
        row["jitter"] = "yes" if m.jitter else "no"
    return row


_RETRY_COLUMNS = ["max_attempts", "backoff", "initial_delay", "max_delay", "jitter"]
_MISSED = {"once": queue_pb2.MISSED_TICKS_RUN_ONCE, "skip": queue_pb2.MISSED_TICKS_SKIP}
_MISSED_NAMES = {queue_pb2.MISSED_TICKS_UNSPECIFIED: "once", **{v: k for k, v in _MISSED.items()}}
SCHEDULE_COLUMNS = ["name", "when", "next_run", "last_run", "runs", "paused"]


def _schedule_when(spec: queue_pb2.ScheduleSpec) -> str:
    """How a schedule ticks, for a table: the cron expression and its time zone, or the interval."""
    if spec.WhichOneof("timing") == "cron":
        return f"{spec.cron} {spec.time_zone or 'UTC'}"
    return f"every {human_duration(spec.every.ToNanoseconds() / 1e9)}"


def _schedule_row(s: queue_pb2.Schedule) -> dict[str, Any]:
    return {"name": s.name, "when": _schedule_when(s.spec), "next_run": _time(s, "next_run_at") or "-",
            "last_run": _time(s, "last_run_at") or "-", "runs": s.runs, "paused": "yes" if s.paused else "no"}


def _schedule_text(s: queue_pb2.Schedule) -> str:
    """A schedule: what the list shows in a table, then the task it enqueues and its history."""
    spec = s.spec
    pairs = [("type", spec.type), ("payload", _bytes_text(spec.payload)), ("priority", str(spec.priority)),
             ("max_attempts", str(spec.max_attempts) if spec.max_attempts else "the queue's"),
             ("missed", _MISSED_NAMES.get(spec.missed, "once")), ("grace", _age(spec, "grace", "0s"))]
    if spec.HasField("start_at"):
        pairs.append(("start_at", _time(spec, "start_at")))
    if s.last_task_id:
        pairs.append(("last_task_id", s.last_task_id))
    pairs += [(name, _time(s, name)) for name in ("last_missed_at", "created_at", "updated_at") if s.HasField(name)]
    pairs.append(("version", str(s.version)))
    return _table([_schedule_row(s)], SCHEDULE_COLUMNS) + "\n\n" + _fields(pairs)


_SPEC_OPTIONS = ("cron", "every", "tz", "type", "payload", "priority", "max_attempts", "missed", "grace")


def _change_spec(spec: queue_pb2.ScheduleSpec, args: argparse.Namespace) -> None:
    """Sets what the options of `queue schedule` name; the rest stays as it is."""
    if args.cron is not None:
        spec.cron = args.cron  # the oneof: clears every
        spec.ClearField("start_at")  # for intervals only
    if args.every is not None:
        spec.every.CopyFrom(duration(args.every))  # clears cron
        spec.time_zone = ""  # for cron only
    if args.tz is not None:
        spec.time_zone = args.tz
    if args.type is not None:
        spec.type = args.type
    if args.payload is not None:
        spec.payload = args.payload.encode()
    if args.priority is not None:
        spec.priority = args.priority
    if args.max_attempts is not None:
        spec.max_attempts = args.max_attempts
    if args.missed is not None:
        spec.missed = _MISSED[args.missed]
    if args.grace is not None:
        spec.grace.CopyFrom(duration(args.grace))


def _check_schedule(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """`queue schedule`: without options it shows the schedule; creating one needs its
    timing; --update needs something to change. Exits 2 otherwise."""
    named = [o for o in _SPEC_OPTIONS if getattr(args, o) is not None]
    if args.update:
        if not named and not args.paused:
            p.error("--update needs an option naming what to change")
    elif (named or args.paused) and args.cron is None and args.every is None:
        p.error("creating a schedule needs --cron or --every (--update changes one)")


def _task_text(t: queue_pb2.Task) -> str:
    """A task as GetTask reports it: its identity in a table, then every field it has."""
    state = STATE_NAMES.get(t.state, queue_pb2.TaskState.Name(t.state))
    head = _table([{"queue": t.queue, "task_id": t.task_id, "type": t.type, "state": state, "attempt": t.attempt,
                    "max_attempts": t.max_attempts, "priority": t.priority}],
                  ["queue", "task_id", "type", "state", "attempt", "max_attempts", "priority"])
    pairs = [(name, _time(t, name)) for name in ("enqueued_at", "ready_at", "leased_at", "lease_expires_at",
                                                 "finished_at") if t.HasField(name)]
    if t.dead_reason:
        pairs.append(("dead_reason", t.dead_reason))
    if t.last_error:  # a worker's may hold a traceback: shown whole, line by line
        pairs.append(("last_error", t.last_error.rstrip()))
    if t.HasField("progress"):
        p = t.progress
        shown = [f"{p.value:g}" if p.HasField("value") else "", _bytes_text(p.json.encode()) if p.json else "",
                 f"(reported {_time(p, 'reported_at')})"]
        pairs.append(("progress", "  ".join(s for s in shown if s)))
    if t.state == queue_pb2.TASK_STATE_SUCCEEDED or t.result or t.result_type:
        kind = f"  ({t.result_type})" if t.result_type else ""
        pairs.append(("result", ("(none)" if not t.result and not t.result_type else _bytes_text(t.result)) + kind))
    pairs.append(("payload", _bytes_text(t.payload)))
    if t.HasField("retry"):
        row = _retry_row(t.retry)
        pairs.append(("retry", ", ".join(f"{k} {v}" for k, v in row.items() if v != "")))
    return head + "\n\n" + _fields(pairs)


def _policy_text(queue: str, p: queue_pb2.QueuePolicy) -> str:
    rows = [{"finished": kind, "keep": r.max_count if r.HasField("max_count") else UNLIMITED,
             "for": _age(r, "max_age")} for kind, r in (("succeeded, cancelled", p.succeeded), ("dead", p.dead))]
    return (f"queue {queue!r} keeps finished tasks:\n" + _table(rows, ["finished", "keep", "for"])
            + "\n\nretries failed attempts:\n" + _table([_retry_row(p.retry)], _RETRY_COLUMNS))


def _set_retention(r: queue_pb2.Retention, count: int | str | None, age: float | None) -> None:
    """Changes what was given; the rest stays as it is. max_age is always sent (0: no
    age limit), so the server never reads the retention as unset (its default)."""
    if count == UNLIMITED:
        r.ClearField("max_count")
    elif count is not None:
        r.max_count = count
    if age is not None:
        r.max_age.CopyFrom(duration(age))
    r.max_age.SetInParent()


class Commands(Base):
    def queue_list(self, args: argparse.Namespace) -> None:
        self.list_names("queues", "queue", "ListQueues", queue_pb2.ListQueuesRequest)

    def queue_describe(self, args: argparse.Namespace) -> None:
        r = self.call("queue", "Stats", queue_pb2.StatsRequest(queue=args.name))
        d = {"queue": args.name, **_dict(r)}
        groups = self.call("queue", "ListGroups", queue_pb2.ListGroupsRequest(queue=args.name, page_size=GROUPS_SHOWN))
        rows = [_group_row(g) for g in groups.groups]
        if rows:
            d["groups"] = [_dict(g) for g in groups.groups]
        if not (r.ready or r.delayed or r.leased or r.dead or r.finished or rows):
            self.emit(d, f"queue {args.name!r} holds no tasks" + (" (paused)" if r.paused else ""))
            return
        text = _table([d], ["queue", "ready", "delayed", "leased", "dead", "finished", "oldest_ready_age", "paused"])
        if rows:
            more = f"\n(the first {GROUPS_SHOWN} groups by name)" if groups.next_page_token else ""
            text += "\n\n" + _table(rows, ["group", "ready", "leased", "cap", "weight", "rate", "waiting"]) + more
        self.emit(d, text)

    @staticmethod
    def _group_field(args: argparse.Namespace) -> dict[str, str]:
        return {"group": args.group} if args.group else {}

    @staticmethod
    def _paused_what(args: argparse.Namespace) -> str:
        return f"group {args.group!r} of queue {args.name!r}" if args.group else f"queue {args.name!r}"

    def queue_pause(self, args: argparse.Namespace) -> None:
        r = self.call("queue", "PauseQueue", queue_pb2.PauseQueueRequest(queue=args.name, group=args.group))
        self.emit({"queue": args.name, **self._group_field(args), "paused": True, "was_paused": r.was_paused},
                  f"{self._paused_what(args)} {'was already' if r.was_paused else 'is now'} paused")

    def queue_resume(self, args: argparse.Namespace) -> None:
        r = self.call("queue", "ResumeQueue", queue_pb2.ResumeQueueRequest(queue=args.name, group=args.group))
        self.emit({"queue": args.name, **self._group_field(args), "paused": False, "was_paused": r.was_paused},
                  f"{self._paused_what(args)} {'resumed' if r.was_paused else 'was not paused'}")

    def queue_task(self, args: argparse.Namespace) -> None:
        r = self.call("queue", "GetTask", queue_pb2.GetTaskRequest(queue=args.name, task_id=args.task_id))
        self.emit(_dict(r.task), _task_text(r.task))

    def queue_wait(self, args: argparse.Namespace) -> int:
        """One look; unless the task has finished, WaitTask until it does or --timeout
        passes (none: forever), in server-side waits of at most a few minutes each.
        The exit code says how it ended."""
        def request(wait: float) -> queue_pb2.WaitTaskRequest:
            return queue_pb2.WaitTaskRequest(queue=args.name, task_id=args.task_id, wait_timeout=duration(wait))

        r = self.call("queue", "WaitTask", request(0))
        if not r.finished and args.wait != 0:
            # On stderr, like chat tail's: stdout keeps the outcome alone.
            print(f"waiting for task {args.task_id} of {args.name!r} to finish (Ctrl-C to stop)", file=sys.stderr,
                  flush=True)
            last = [r]

            def finished(response: queue_pb2.WaitTaskResponse) -> queue_pb2.WaitTaskResponse | None:
                last[:] = [response]
                return response if response.finished else None

            try:
                self.client._service("queue").wait_for("WaitTask", request, args.wait, finished)
            except KeyboardInterrupt:
                print(f"concord: interrupted: task {args.task_id} of {args.name!r} had not finished",
                      file=sys.stderr)
                return WAIT_INTERRUPTED
            r = last[-1]
        t, state = r.task, STATE_NAMES.get(r.task.state, "")
        if not r.finished:
            headline, code = (f"task {t.task_id} of {args.name!r} has not finished within "
                              f"{human_duration(args.wait or 0)} (it is {state})"), WAIT_NOT_FINISHED
        elif t.state == queue_pb2.TASK_STATE_SUCCEEDED:
            headline, code = f"task {t.task_id} of {args.name!r} succeeded", 0
        elif t.state == queue_pb2.TASK_STATE_CANCELLED:
            headline, code = f"task {t.task_id} of {args.name!r} was cancelled", WAIT_CANCELLED
        else:
            error = t.last_error.strip().splitlines()[0] if t.last_error.strip() else "no error given"
            headline, code = f"task {t.task_id} of {args.name!r} died ({t.dead_reason}): {error}", WAIT_DEAD
        self.emit(_dict(r), headline + "\n\n" + _task_text(t))
        return code

    def queue_policy(self, args: argparse.Namespace) -> None:
        """Shows the policy; with options, changes what they name and keeps the rest
        (SetQueuePolicy replaces the whole policy, so this sends the current one, changed)."""
        policy = self.call("queue", "GetQueuePolicy", queue_pb2.GetQueuePolicyRequest(queue=args.name)).policy
        changes = (args.keep_succeeded, args.succeeded_for, args.keep_dead, args.dead_for)
        if any(c is not None for c in changes):
            _set_retention(policy.succeeded, args.keep_succeeded, args.succeeded_for)
            _set_retention(policy.dead, args.keep_dead, args.dead_for)
            policy = self.call("queue", "SetQueuePolicy",
                               queue_pb2.SetQueuePolicyRequest(queue=args.name, policy=policy)).policy
        self.emit({"queue": args.name, **_dict(policy)}, _policy_text(args.name, policy))

    def queue_schedules(self, args: argparse.Namespace) -> None:
        found: list[queue_pb2.Schedule] = []
        seen: set[str] = set()
        token = ""
        while True:  # pages by position in next-tick order, which ticks change: a repeat is dropped
            page = self.call("queue", "ListSchedules",
                             queue_pb2.ListSchedulesRequest(queue=args.name, page_size=1000, page_token=token))
            found += [s for s in page.schedules if not (s.name in seen or seen.add(s.name))]
            token = page.next_page_token
            if not token:
                break
        self.emit([_dict(s) for s in found], _table([_schedule_row(s) for s in found], SCHEDULE_COLUMNS) if found
                  else f"(no schedules in {args.name!r})")

    def queue_schedule(self, args: argparse.Namespace) -> None:
        """Shows the schedule; with --cron or --every creates it; with --update changes
        what the options name and keeps the rest (UpdateSchedule replaces the whole
        spec, so this sends the current one, changed)."""
        named = {"queue": args.name, "name": args.schedule}
        if args.update:
            current = self.call("queue", "GetSchedule", queue_pb2.GetScheduleRequest(**named)).schedule
            spec = current.spec
            _change_spec(spec, args)
            request = queue_pb2.UpdateScheduleRequest(**named, spec=spec)
            if args.paused:
                request.paused = True
            s, done = self.call("queue", "UpdateSchedule", request).schedule, "updated"
        elif args.cron is not None or args.every is not None:
            spec = queue_pb2.ScheduleSpec(type=args.schedule)
            _change_spec(spec, args)
            s = self.call("queue", "CreateSchedule",
                          queue_pb2.CreateScheduleRequest(**named, spec=spec, paused=args.paused)).schedule
            done = "created"
        else:
            s = self.call("queue", "GetSchedule", queue_pb2.GetScheduleRequest(**named)).schedule
            self.emit(_dict(s), _schedule_text(s))
            return
        self.emit(_dict(s), f"{done} schedule {s.name!r} of queue {s.queue!r}\n\n{_schedule_text(s)}")

    def queue_schedule_pause(self, args: argparse.Namespace) -> None:
        s = self.call("queue", "PauseSchedule", queue_pb2.PauseScheduleRequest(queue=args.name, name=args.schedule))
        self.emit(_dict(s.schedule), f"schedule {args.schedule!r} of queue {args.name!r} is paused")

    def queue_schedule_resume(self, args: argparse.Namespace) -> None:
        s = self.call("queue", "ResumeSchedule",
                      queue_pb2.ResumeScheduleRequest(queue=args.name, name=args.schedule)).schedule
        self.emit(_dict(s), f"schedule {args.schedule!r} of queue {args.name!r} runs again, next at "
                  f"{_time(s, 'next_run_at')}")

    def queue_schedule_delete(self, args: argparse.Namespace) -> None:
        self.call("queue", "DeleteSchedule", queue_pb2.DeleteScheduleRequest(queue=args.name, name=args.schedule))
        self.emit({"queue": args.name, "name": args.schedule, "deleted": True},
                  f"deleted schedule {args.schedule!r} of queue {args.name!r} (the tasks it enqueued stay)")

    def queue_dead(self, args: argparse.Namespace) -> None:
        r = self.call("queue", "ListDead", queue_pb2.ListDeadRequest(queue=args.name, limit=args.limit))
        tasks = [_dict(t) for t in r.tasks]
        rows = [{**t, "error": t.get("last_error", "")} for t in tasks]
        self.emit(tasks, _table(rows, ["task_id", "type", "attempt", "max_attempts", "error"]) if tasks
                  else f"(no dead tasks in {args.name!r})")

    def queue_search(self, args: argparse.Namespace) -> None:
        """Pages through SearchTasks (each call bounded by the server) until --limit matches
        or the end of the queue."""
        request = queue_pb2.SearchTasksRequest(
            queue=args.name, task_id=args.task_id, type=args.type, type_prefix=args.type_prefix,
            states=[STATE_VALUES[s] for s in args.state], error_contains=args.error,
            payload_contains=args.payload.encode(), page_size=min(args.limit, SEARCH_PAGE))
        tasks: list[dict[str, Any]] = []
        examined = 0
        while len(tasks) < args.limit:
            r = self.call("queue", "SearchTasks", request)
            tasks += [_dict(t) for t in r.tasks][:args.limit - len(tasks)]
            examined += r.examined
            if not r.next_page_token:
                break
            request.page_token = r.next_page_token
        rows = [{**t, "state": t["state"].removeprefix("TASK_STATE_").lower(), "error": t.get("last_error", "")}
                for t in tasks]
        more = " (--limit reached; there may be more)" if len(tasks) >= args.limit else ""
        self.emit(tasks, (_table(rows, ["task_id", "state", "type", "attempt", "max_attempts", "error"])
                          + f"\n{len(tasks)} found{more}") if tasks
                  else f"(no task of {args.name!r} matches; {examined} looked at)")

    def queue_retry_dead(self, args: argparse.Namespace) -> None:
        r = self.call("queue", "RetryDead",
                      queue_pb2.RetryDeadRequest(queue=args.name, task_ids=args.task_ids, limit=args.limit))
        self.emit({"queue": args.name, "retried": r.retried}, f"retried {r.retried} dead task(s) of {args.name!r}")


def add_commands(kinds: argparse._SubParsersAction, command: Command) -> None:
    queue = kinds.add_parser("queue", help="task queues").add_subparsers(dest="action", required=True)
    command(queue, "list", "queue_list", "queues holding tasks")
    command(queue, "describe", "queue_describe",
            "task counts by state (finished: succeeded and cancelled ones kept), and whether it is paused"
            ).add_argument("name")
    for verb, doing in (("pause", "stop leasing tasks (they keep arriving)"),
                        ("resume", "lease again, waking waiting workers")):
        cmd = command(queue, verb, f"queue_{verb}", doing)
        cmd.add_argument("name")
        cmd.add_argument("--group", default="", help=f"{verb} only this group's tasks")
    dead = command(queue, "dead", "queue_dead", "dead-lettered tasks")
    dead.add_argument("name")
    dead.add_argument("--limit", type=int, default=100)
    search = command(queue, "search", "queue_search",
                     "find tasks by id, type, state, error text or payload bytes, searched by the server over "
                     "the whole queue")
    search.add_argument("name")
    search.add_argument("--task-id", default="", help="only this task")
    search.add_argument("--type", default="", help="only tasks of this type")
    search.add_argument("--type-prefix", default="", help="only tasks whose type begins with this")
    search.add_argument("--state", action="append", default=[], choices=sorted(set(STATE_VALUES) - {"waiting"}),
                        help="only tasks in this state (repeat for several)")
    search.add_argument("--error", default="", help="only tasks whose last error holds this text (any case)")
    search.add_argument("--payload", default="", help="only tasks whose payload holds this text")
    search.add_argument("--limit", type=int, default=100, help="stop after this many matches (default 100)")
    retry = command(queue, "retry-dead", "queue_retry_dead", "make dead tasks ready again (all, or those named)")
    retry.add_argument("name")
    retry.add_argument("task_ids", nargs="*")
    retry.add_argument("--limit", type=int, default=1000)
    task = command(queue, "task", "queue_task", "one task in any state: times, attempts, progress, result or error")
    task.add_argument("name")
    task.add_argument("task_id")
    wait = command(queue, "wait", "queue_wait", "wait for a task to finish and print how it ended",
                   epilog=WAIT_EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    wait.add_argument("name")
    wait.add_argument("task_id")
    wait.add_argument("--timeout", dest="wait", type=_seconds, metavar="S",
                      help="seconds to wait (0: look once; default: until it finishes)")
    policy = command(queue, "policy", "queue_policy",
                     "show how many finished tasks the queue keeps, and for how long; the options change that",
                     description="Shows the queue's policy: the retention of finished tasks (succeeded and "
                     "cancelled ones; dead ones) and the retry policy. Options change the retention for tasks "
                     "that finish from then on, a lower limit at once; what no option names stays as it is.")
    policy.add_argument("name")
    for kind, what in (("succeeded", "succeeded and cancelled tasks"), ("dead", "dead tasks")):
        policy.add_argument(f"--keep-{kind}", type=_retention_count, metavar="N",
                            help=f"keep at most N {what} (0: none; {UNLIMITED}: no count limit)")
        policy.add_argument(f"--{kind}-for", type=_retention_age, metavar="DURATION",
                            help=f"keep each of the {what} this long, such as 90s, 1h30m, 7d "
                            f"(0 or {UNLIMITED}: no age limit)")

    command(queue, "schedules", "queue_schedules",
            "the queue's recurring schedules, soonest next run first (paused ones last)").add_argument("name")
    sched = command(queue, "schedule", "queue_schedule",
                    "show a recurring schedule; with --cron or --every create it, with --update change it",
                    description="Without options, shows the schedule. With --cron or --every, creates it: each "
                    "tick enqueues one task, exactly once however many servers run, never early on Redis's clock. "
                    "With --update, changes what the options name and keeps the rest; its next run is reckoned "
                    "from now.")
    sched.add_argument("name")
    sched.add_argument("schedule", metavar="SCHEDULE", help="the schedule's name")
    timing = sched.add_mutually_exclusive_group()
    timing.add_argument("--cron", metavar="EXPR",
                        help='a cron expression: 5 fields ("30 2 * * *"), 6 with seconds first, or @hourly, '
                        "@daily, @weekly, @monthly, @yearly")
    timing.add_argument("--every", type=parse_duration, metavar="DURATION",
                        help="a fixed interval: seconds, or such as 90s, 15m, 1h30m (1 s to a year)")
    sched.add_argument("--tz", metavar="ZONE",
                       help="the cron expression's IANA time zone (default UTC); a local time that daylight saving "
                       "skips runs right after the change, one it repeats runs once unless the hour field is *")
    sched.add_argument("--type", help="the type of the tasks it enqueues (default: the schedule's name)")
    sched.add_argument("--payload", metavar="TEXT", help="their payload, as UTF-8 text such as JSON (default: empty)")
    sched.add_argument("--priority", type=int, metavar="N", help="their priority, -1000 to 1000 (default 0)")
    sched.add_argument("--max-attempts", type=int, metavar="N", help="their attempts (default: the queue's)")
    sched.add_argument("--missed", choices=sorted(_MISSED),
                       help="ticks missed beyond the grace (no server could run them): run once for all of them "
                       "(the default), or skip them")
    sched.add_argument("--grace", type=parse_duration, metavar="DURATION",
                       help="how late a tick may run and still count as itself (default 10s, at most 1h)")
    sched.add_argument("--paused", action="store_true", help="create it paused (with --update: pause it)")
    sched.add_argument("--update", action="store_true", help="change an existing schedule instead of creating one")
    sched.set_defaults(check=lambda args: _check_schedule(sched, args))
    for name, handler, help in (("schedule-pause", "queue_schedule_pause", "stop a schedule's ticks"),
                                ("schedule-resume", "queue_schedule_resume",
                                 "start its ticks again from the next one after now (missed ones do not run)"),
                                ("schedule-delete", "queue_schedule_delete",
                                 "delete a schedule (the tasks it enqueued stay)")):
        sub = command(queue, name, handler, help)
        sub.add_argument("name")
        sub.add_argument("schedule", metavar="SCHEDULE")
