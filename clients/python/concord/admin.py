"""`concord`: the operator's command line, over the Python client.

    concord lock list | lock describe NAME | lock force-release NAME [--yes]
    concord semaphore list | semaphore describe NAME | semaphore set-limit NAME LIMIT
    concord queue list | queue describe NAME | queue dead NAME | queue retry-dead NAME [TASK_ID...]
    concord queue task NAME TASK_ID | queue wait NAME TASK_ID [--timeout S] | queue pause | resume NAME [--group G]
    concord queue policy NAME [--keep-succeeded N] [--succeeded-for DURATION] [--keep-dead N] [--dead-for DURATION]
    concord queue schedules NAME | queue schedule NAME SCHEDULE [--cron EXPR [--tz ZONE] | --every DURATION]
        [--type T] [--payload TEXT] [--priority N] [--max-attempts N] [--missed once|skip] [--grace DURATION]
        [--paused] [--update]
    concord queue schedule-pause | schedule-resume | schedule-delete NAME SCHEDULE
    concord chat list | chat describe CHAT | chat tail CHAT --as USER
    concord rwlock describe NAME
    concord election leader NAME | election observe NAME [--count N] [--after POSITION]
    concord election campaign NAME VALUE [--ttl D] [--timeout D] [--candidate C] [--grace D] -- COMMAND...
    concord election resign NAME [--term T] [--yes]
    concord autocomplete count INDEX [--prefix P] | autocomplete suggest INDEX PREFIX [--limit N] [--by-score]
    concord autocomplete recent USER [PREFIX] [--limit N] [--infix]
    concord files describe GROUP

Tables by default (durations in human units: 29.5s, 1h2m), ``--json`` for scripts
(integers are JSON numbers, durations and times as protobuf's JSON mapping writes
them: "29.500s"). The server is ``--target`` or $CONCORD_TARGET (default
127.0.0.1:50051). Exit codes: 0 ok, 1 error (one line on stderr, no traceback, ending
with the server's ErrorInfo reason: "(INVALID_ARGUMENT)"), 2 usage; ``queue wait`` adds
its own (WAIT_EXIT_CODES); ``election campaign`` exits with its command's status.
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import os
import re
import shlex
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import grpc
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from ._convert import duration
from ._version import __version__
from .autocomplete.v1 import autocomplete_pb2
from .chat.v1 import chat_pb2
from .client import DEFAULT_TARGET, Client
from .election.v1 import election_pb2
from .elections import Leader
from .errors import ConcordError, LeadershipLost, NotAMember, NotLeader, from_rpc_error
from .files.v1 import files_pb2
from .lock.v1 import lock_pb2
from .queue.v1 import queue_pb2
from .ratelimit.v1 import ratelimit_pb2
from .rwlock.v1 import rwlock_pb2
from .semaphore.v1 import semaphore_pb2
from .tasks import STATE_NAMES


class Failed(Exception):
    """An error worth one line to the operator (exit code 1)."""


# GetHistory's before_id that is above every message id: the newest messages first.
_NEWEST = 2**64 - 1

_INT64 = {FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_SINT64,
          FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_SFIXED64}


def _dict(message: Any) -> dict[str, Any]:
    """A message as JSON-ready data. protobuf writes 64-bit integers as strings
    ("fencing_token": "7") and 32-bit ones as numbers ("waiters": 0); every integer
    here is a number."""
    d = json_format.MessageToDict(message, preserving_proto_field_name=True,
                                  always_print_fields_with_no_presence=True)
    return _int64_numbers(message.DESCRIPTOR, d)


def _int64_numbers(descriptor: Descriptor, d: dict[str, Any]) -> dict[str, Any]:
    def fix(field: FieldDescriptor, value: Any) -> Any:
        if field.type in _INT64:
            return int(value)
        if field.message_type is not None and not field.message_type.full_name.startswith("google.protobuf."):
            return _int64_numbers(field.message_type, value)
        return value

    for f in descriptor.fields:
        if f.name not in d:
            continue
        value = d[f.name]
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            value_field = f.message_type.fields_by_name["value"]
            d[f.name] = {k: fix(value_field, v) for k, v in value.items()}
        elif isinstance(value, list):  # a repeated field
            d[f.name] = [fix(f, v) for v in value]
        else:
            d[f.name] = fix(f, value)
    return d


_JSON_DURATION = re.compile(r"-?\d+(?:\.\d+)?s")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
UNLIMITED = "unlimited"  # a retention option's value for "no limit", as `queue policy` shows it

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


def human_duration(seconds: float) -> str:
    """29.473 -> 29.5s, 0.25 -> 250ms, 3723 -> 1h2m3s, 86400 -> 1d."""
    if seconds < 0:
        return "-" + human_duration(-seconds)
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    if seconds < 60:
        return f"{round(seconds, 1):g}s"
    rest, parts = round(seconds), []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(parts)


def parse_duration(text: str) -> float:
    """Seconds in what human_duration writes: "90", "90s", "250ms", "1h30m", "1.5h", "7d"."""
    text = text.strip().lower()
    if text and not _DURATION_PART.sub("", text):
        return sum(float(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(text))
    return _seconds(text, "a duration (such as 90s, 250ms, 1h30m, 7d)")


def _seconds(text: str, what: str = "a number of seconds") -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
    return value


def _retention_age(text: str) -> float:
    """--succeeded-for / --dead-for: a duration, or "unlimited" (or 0): no age limit."""
    return 0.0 if text.strip().lower() == UNLIMITED else parse_duration(text)


def _semaphore_limit(text: str) -> int:
    """semaphore set-limit's LIMIT: a whole number, 1 or more (the server checks its maximum)."""
    try:
        limit = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= limit < 2**32:
        raise argparse.ArgumentTypeError(f"{limit} is not a limit (1 or more)")
    return limit


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


def _cell(value: Any) -> str:
    """A table cell: durations (protobuf JSON "29.473s") in human units."""
    text = str(value)
    return human_duration(float(text[:-1])) if _JSON_DURATION.fullmatch(text) else text


GROUPS_SHOWN = 100  # queue describe's group table
_WAITING = {queue_pb2.WAIT_REASON_GROUP_PAUSED: "paused", queue_pb2.WAIT_REASON_GROUP_AT_CAP: "at cap",
            queue_pb2.WAIT_REASON_GROUP_RATE_LIMITED: "rate limited"}


def _group_row(g: queue_pb2.Group) -> dict[str, Any]:
    e = g.effective
    rate = (f"{e.rate.limit}/{human_duration(e.rate.period.ToNanoseconds() / 1e9)} (burst {e.rate.burst})"
            if e.HasField("rate") else "-")
    return {"group": g.name, "ready": g.ready, "leased": g.leased,
            "cap": e.max_leased if e.HasField("max_leased") else "-", "weight": e.weight or 1, "rate": rate,
            "waiting": _WAITING.get(g.wait_reason, "-")}


def _table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    cells = [[_cell(r.get(c, "")) for c in columns] for r in rows]
    widths = [max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(columns, widths)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells]
    return "\n".join(lines)


def _fields(pairs: Sequence[tuple[str, str]]) -> str:
    """One "name  value" line each, the values aligned (a value's further lines too):
    for one thing with many fields."""
    width = max(len(name) for name, _ in pairs)
    indent = "\n" + " " * (width + 2)
    return "\n".join(f"{name.ljust(width)}  {indent.join(value.splitlines())}".rstrip() for name, value in pairs)


_SHOWN_BYTES = 200  # of a payload or result in a table; --json has them whole


def _bytes_text(data: bytes) -> str:
    """A payload or result for a human: its text when it is UTF-8 (JSON included),
    quoted when it spans lines, else (binary) its size and base64; long ones cut."""
    if not data:
        return "(empty)"
    try:
        text = data.decode()
    except UnicodeDecodeError:
        text = None
    if text is not None and not text.isprintable():
        printable = text.replace("\n", "").replace("\r", "").replace("\t", "").isprintable()
        text = json.dumps(text, ensure_ascii=False) if printable else None
    if text is None:
        text = f"{len(data)} bytes, base64 {base64.b64encode(data[:_SHOWN_BYTES]).decode()}"
    return text if len(text) <= _SHOWN_BYTES else f"{text[:_SHOWN_BYTES]}… ({len(data)} bytes; --json for all)"


def _time(message: Any, name: str) -> str:
    return getattr(message, name).ToJsonString() if message.HasField(name) else ""


def _age(message: Any, name: str, unset: str = UNLIMITED) -> str:
    """A Duration field for a table: human units, ``unset`` when absent or zero."""
    nanos = getattr(message, name).ToNanoseconds() if message.HasField(name) else 0
    return human_duration(nanos / 1e9) if nanos else unset


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


_MODE_NAMES = {rwlock_pb2.MODE_READ: "read", rwlock_pb2.MODE_WRITE: "write"}
_FILE_STATES = {files_pb2.FILE_STATE_UPLOADING: "uploading", files_pb2.FILE_STATE_COMPLETE: "complete"}


def _leader_dict(m: election_pb2.Leadership) -> dict[str, Any]:
    """A leader in JSON: its value is base64, as protobuf's JSON writes bytes."""
    return {**_dict(m), "expires_at": _time(m, "expires_at")}


def _leader_row(m: election_pb2.Leadership) -> dict[str, Any]:
    return {"candidate": m.candidate, "term": m.term, "expires_at": _time(m, "expires_at"),
            "value": _bytes_text(m.value)}


def _change_leader(leader: Leader | None) -> dict[str, Any] | None:
    """A leader seen by the client's observe() as `election leader` writes one in JSON."""
    if leader is None:
        return None
    m = election_pb2.Leadership(candidate=leader.candidate, value=leader.value, term=leader.term)
    if leader.expires_at is not None:
        m.expires_at.FromDatetime(leader.expires_at)
    return _leader_dict(m)


def _workers_text(workers: Sequence[str], shown: int = 3) -> str:
    """A file's pending workers for a table: their names, or how many when many."""
    if not workers:
        return "-"
    return ", ".join(workers) if len(workers) <= shown else f"{len(workers)} workers"


def _command_text(command: Sequence[str], shown: int = 80) -> str:
    """A command line for a one-line message: quoted as a shell would, on one line, cut when long."""
    text = shlex.join(command).replace("\n", "\\n")
    return text if len(text) <= shown else text[:shown] + "…"


def _terminate(proc: subprocess.Popen, grace: float) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``grace`` seconds."""
    try:
        proc.terminate()
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    except ProcessLookupError:
        pass


def _exit_status(returncode: int) -> int:
    """A child's status as a shell gives it: 128 + N when signal N ended it."""
    return 128 - returncode if returncode < 0 else returncode

class Admin:
    def __init__(self, client: Client, as_json: bool, out: Any = sys.stdout) -> None:
        self.client, self.as_json, self.out = client, as_json, out

    def call(self, service: str, method: str, request: Any) -> Any:
        """One try of ``method`` of ``service`` (a proto package: "lock", "queue", ...)."""
        return self.client._service(service).call(method, request)

    def emit(self, data: Any, text: str) -> None:
        print(json.dumps(data, ensure_ascii=False) if self.as_json else text, file=self.out, flush=True)

    def names(self, service: str, method: str, request_type: Any) -> list[str]:
        """Every page of a List* RPC; a SCAN may repeat a name, so they are deduplicated."""
        names: set[str] = set()
        token = ""
        while True:
            page = self.call(service, method, request_type(page_token=token, page_size=1000))
            names.update(page.names)
            token = page.next_page_token
            if not token:
                return sorted(names)

    def list_names(self, kind: str, service: str, method: str, request_type: Any) -> None:
        names = self.names(service, method, request_type)
        self.emit(names, "\n".join(names) if names else f"(no {kind})")

    # locks

    def lock_list(self, args: argparse.Namespace) -> None:
        self.list_names("locks", "lock", "ListLocks", lock_pb2.ListLocksRequest)

    def lock_describe(self, args: argparse.Namespace) -> None:
        r = self.call("lock", "Describe", lock_pb2.DescribeRequest(name=args.name))
        d = {"name": args.name, **_dict(r)}
        if not r.held and not r.waiters:  # a lock is its holder: there is nothing else to show
            self.emit(d, f"lock {args.name!r} is not held (no holder, no waiters)")
            return
        self.emit(d, _table([d], ["name", "held", "owner", "fencing_token", "ttl_remaining", "waiters"]))

    def lock_force_release(self, args: argparse.Namespace) -> None:
        if not args.yes and not _confirm(f"Force-release lock {args.name!r}? Its holder is not told and may "
                                         "still be writing; only fencing tokens protect you. [y/N] "):
            raise Failed("aborted: nothing changed")
        r = self.call("lock", "ForceRelease", lock_pb2.ForceReleaseRequest(name=args.name))
        d = {"name": args.name, **_dict(r)}
        text = (f"released lock {args.name!r} (was held by {r.owner!r}, fencing token {r.fencing_token})"
                if r.released else f"lock {args.name!r} was not held")
        self.emit(d, text)

    # semaphores

    def semaphore_list(self, args: argparse.Namespace) -> None:
        self.list_names("semaphores", "semaphore", "ListSemaphores", semaphore_pb2.ListSemaphoresRequest)

    def semaphore_describe(self, args: argparse.Namespace) -> None:
        r = self.call("semaphore", "Describe", semaphore_pb2.DescribeRequest(name=args.name))
        d = {"name": args.name, **_dict(r)}
        if not r.holders and not r.waiters:
            limit = f"; limit {r.limit}" if r.limit else ""
            self.emit(d, f"semaphore {args.name!r} is not held (no holders, no waiters{limit})")
            return
        text = _table([d], ["name", "limit", "held", "waiters"])
        if r.holders:
            text += "\n\n" + _table(d["holders"], list(d["holders"][0]))
        self.emit(d, text)

    def semaphore_set_limit(self, args: argparse.Namespace) -> None:
        r = self.call("semaphore", "SetLimit", semaphore_pb2.SetLimitRequest(name=args.name, limit=args.limit))
        was = f"was {r.previous_limit}" if r.previous_limit else "had none"
        self.emit({"name": args.name, "limit": args.limit, "previous_limit": r.previous_limit},
                  f"semaphore {args.name!r}: limit {args.limit} ({was})")

    # rate limits

    def _limit_text(self, key: str, m: ratelimit_pb2.Limit) -> str:
        algorithm = ratelimit_pb2.Algorithm.Name(m.algorithm or ratelimit_pb2.ALGORITHM_GCRA)[len("ALGORITHM_"):]
        burst = f", burst {m.burst}" if m.burst else ""
        drain = ", drains over limit" if m.drain_over_limit else ""
        return (f"rate limit {key!r}: {m.rate} per {human_duration(m.period.ToNanoseconds() / 1e9)}{burst} "
                f"({algorithm.lower()}{drain})")

    def limit_show(self, args: argparse.Namespace) -> None:
        r = self.call("ratelimit", "GetLimit", ratelimit_pb2.GetLimitRequest(key=args.key))
        self.emit({"key": args.key, **_dict(r.limit)}, self._limit_text(args.key, r.limit))

    def limit_set(self, args: argparse.Namespace) -> None:
        limit = ratelimit_pb2.Limit(algorithm=ratelimit_pb2.Algorithm.Value("ALGORITHM_" + args.algorithm.upper()),
                                    rate=args.rate, burst=args.burst, drain_over_limit=args.drain)
        limit.period.FromNanoseconds(round(args.per * 1e9))
        r = self.call("ratelimit", "SetLimit", ratelimit_pb2.SetLimitRequest(key=args.key, limit=limit))
        was = self._limit_text(args.key, r.previous).split(": ", 1)[1] if r.HasField("previous") else "none"
        self.emit({"key": args.key, "limit": _dict(limit), "previous": _dict(r.previous) if r.HasField("previous")
                   else None}, f"{self._limit_text(args.key, limit)} (was {was})")

    def limit_check(self, args: argparse.Namespace) -> None:
        r = self.call("ratelimit", "Check", ratelimit_pb2.CheckRequest(key=args.key, hits=args.hits))
        d = {"key": args.key, "hits": args.hits, **_dict(r)}
        verdict = "allowed" if r.allowed else (
            f"refused, retry after {human_duration(r.retry_after.ToNanoseconds() / 1e9)}"
            if r.HasField("retry_after") else "refused: more than ever passes at once")
        self.emit(d, f"rate limit {args.key!r}: {args.hits} {verdict}; {r.remaining} left, full again in "
                     f"{human_duration(r.reset_after.ToNanoseconds() / 1e9)}")

    def limit_reset(self, args: argparse.Namespace) -> None:
        self.call("ratelimit", "Reset", ratelimit_pb2.ResetRequest(key=args.key))
        self.emit({"key": args.key, "reset": True}, f"rate limit {args.key!r}: reset (full again)")

    # queues

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

    def queue_retry_dead(self, args: argparse.Namespace) -> None:
        r = self.call("queue", "RetryDead",
                      queue_pb2.RetryDeadRequest(queue=args.name, task_ids=args.task_ids, limit=args.limit))
        self.emit({"queue": args.name, "retried": r.retried}, f"retried {r.retried} dead task(s) of {args.name!r}")

    # chats

    def chat_list(self, args: argparse.Namespace) -> None:
        self.list_names("chats", "chat", "ListAllChats", chat_pb2.ListAllChatsRequest)

    def latest_messages(self, chat_id: str, limit: int) -> list[chat_pb2.ChatMessage]:
        """The newest ``limit`` kept messages, oldest of them first (ChatNotFound if no such chat)."""
        r = self.call("chat", "GetHistory",
                      chat_pb2.GetHistoryRequest(chat_id=chat_id, before_id=_NEWEST, limit=limit))
        return sorted(r.messages, key=lambda m: m.message_id)

    def chat_describe(self, args: argparse.Namespace) -> None:
        messages = [_message_dict(m) for m in self.latest_messages(args.chat_id, args.limit)]
        d = {"chat_id": args.chat_id, "last_id": messages[-1]["message_id"] if messages else None,
             "messages": messages}
        text = f"chat {args.chat_id!r}, last message id {d['last_id']}; latest messages:\n"
        self.emit(d, text + (_table(messages, ["message_id", "sender", "sent_at", "body"]) if messages else "(none)"))

    def chat_tail(self, args: argparse.Namespace) -> None:
        """Messages sent to one chat from now on, until Ctrl-C (like ``tail -f``): a
        Subscribe as a member in explicit ack mode, so tailing never marks anything
        seen for that member; what the chat held before is not printed."""
        latest = self.latest_messages(args.chat_id, 1)
        after = latest[-1].message_id if latest else 0
        members_chats = self.call("chat", "ListChats", chat_pb2.ListChatsRequest(user=args.user))
        if args.chat_id not in {c.chat_id for c in members_chats.chats}:
            # Subscribe would wait for this user's chats forever without a word.
            raise NotAMember(f"{args.user!r} is not a member of chat {args.chat_id!r} (NOT_A_MEMBER); "
                             "--as must name a member", reason="NOT_A_MEMBER")
        for m in self._messages(args.user, ready=lambda: print(
                # On stderr, so --json output stays one message per line.
                f"tailing chat {args.chat_id!r}: messages after {after} (Ctrl-C to stop)", file=sys.stderr,
                flush=True)):
            if m.chat_id == args.chat_id and m.message_id > after:
                after = m.message_id
                d = _message_dict(m)
                self.emit(d, f"{d['message_id']}  {d['sent_at']}  {d['sender']}: {d['body']}")

    def _messages(self, user: str, ready: Callable[[], None]) -> Iterator[chat_pb2.ChatMessage]:
        """The user's messages, unseen ones first; ready() runs once the stream is live."""
        request = chat_pb2.SubscribeRequest(recipient=user, ack_mode=chat_pb2.ACK_MODE_EXPLICIT)
        call = self.client._service("chat").open("Subscribe")(request)
        live = False
        try:
            for response in call:
                yield from response.messages
                if response.caught_up and not live:
                    live = True
                    ready()
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None
        finally:
            call.cancel()

    # elections

    def election_leader(self, args: argparse.Namespace) -> None:
        r = self.call("election", "Leader", election_pb2.LeaderRequest(election=args.name))
        leader = _leader_dict(r.leader) if r.HasField("leader") else None
        d = {"election": args.name, "leader": leader, "candidates": r.candidates}
        waiting = f"{r.candidates} candidate(s) waiting"
        if leader is None:
            self.emit(d, f"election {args.name!r} has no leader ({waiting})")
            return
        self.emit(d, _table([{"election": args.name, **_leader_row(r.leader), "candidates": r.candidates}],
                            ["election", "candidate", "term", "expires_at", "candidates", "value"]))

    def election_observe(self, args: argparse.Namespace) -> None:
        """The leader now, then every change as it happens, until Ctrl-C or --count
        lines: the client's observe(), which resumes after the last change printed
        when the connection drops, so none is missed or printed twice."""
        shown = 0
        with self.client.election(args.name).observe(after=args.after) as changes:
            for change in changes:
                if not shown:  # the stream is live: on stderr, so --json output stays one change per line
                    print(f"observing election {args.name!r} (Ctrl-C to stop)", file=sys.stderr, flush=True)
                leader = _change_leader(change.leader)
                d = {"election": args.name, "position": change.position, "gap": change.gap, "leader": leader}
                who = (f"{leader['candidate']} leads, term {leader['term']}, value "
                       f"{_bytes_text(change.leader.value)}" if change.leader else "nobody leads")
                gap = " (changes before this one were no longer kept)" if change.gap else ""
                self.emit(d, f"{change.position}  {who}{gap}")
                shown += 1
                if args.count and shown >= args.count:
                    return

    def election_campaign(self, args: argparse.Namespace) -> int:
        """Campaigns (a Lead stream, which keeps the leadership while it is open),
        runs the command while leading, resigns when it exits and returns its exit
        status. A lost leadership terminates the command and fails."""
        election = self.client.election(args.name, ttl=args.ttl, candidate=args.candidate)
        now = self.call("election", "Leader", election_pb2.LeaderRequest(election=args.name))  # checks the name too
        if now.HasField("leader"):
            print(f"campaigning in election {args.name!r}, led by {now.leader.candidate!r} now, "
                  f"{now.candidates} other candidate(s) waiting" + (" (Ctrl-C to stop)" if args.wait is None else ""),
                  file=sys.stderr, flush=True)
        lost_while_running = threading.Event()
        try:
            with election.campaign(args.value.encode(), timeout=args.wait) as leadership:
                print(f"leading election {args.name!r}, term {leadership.term}: running "
                      f"{_command_text(args.command)}", file=sys.stderr, flush=True)
                env = {**os.environ, "CONCORD_ELECTION": args.name, "CONCORD_ELECTION_TERM": str(leadership.term)}
                try:
                    proc = subprocess.Popen(args.command, env=env)
                except OSError as exc:
                    raise Failed(f"cannot run {args.command[0]!r}: {exc.strerror}") from None

                def stop_when_lost() -> None:
                    leadership.wait_lost()
                    if proc.poll() is None:
                        lost_while_running.set()
                        _terminate(proc, args.grace)

                threading.Thread(target=stop_when_lost, daemon=True, name="concord-campaign-watch").start()
                try:
                    status = proc.wait()
                except KeyboardInterrupt:  # the command, in the same process group, got the Ctrl-C too
                    _terminate(proc, args.grace)
                    raise
                lost = lost_while_running.is_set()
                if not lost:
                    try:  # at once, so whoever looks next sees the next leader
                        election.resign(leadership.term)
                    except NotLeader:
                        lost = True
        except LeadershipLost:  # our own resign's LOST, seen by the stream as the block ended
            pass
        if lost_while_running.is_set():
            raise Failed(f"leadership of election {args.name!r} (term {leadership.term}) was lost: "
                         f"terminated {_command_text(args.command)} ({NotLeader.reason})")
        if lost:
            raise Failed(f"leadership of election {args.name!r} (term {leadership.term}) had ended when "
                         f"{_command_text(args.command)} exited (with {_exit_status(status)}): it may have run "
                         f"unprotected at its end ({NotLeader.reason})")
        return _exit_status(status)

    def election_resign(self, args: argparse.Namespace) -> None:
        """Ends a term from outside: the leader's Lead stream says LOST, and the next
        candidate leads. The term is the current leader's unless --term names one,
        so a leadership that changed meanwhile is left alone."""
        term = args.term
        if term is None:
            r = self.call("election", "Leader", election_pb2.LeaderRequest(election=args.name))
            if not r.HasField("leader"):
                self.emit({"election": args.name, "resigned": False, "term": None},
                          f"election {args.name!r} has no leader")
                return
            term, who = r.leader.term, f"term {r.leader.term} of {r.leader.candidate!r}"
        else:
            who = f"term {term}"
        if not args.yes and not _confirm(f"End {who} in election {args.name!r}? Its leader is told "
                                         "(its Lead stream ends) and the next candidate leads. [y/N] "):
            raise Failed("aborted: nothing changed")
        self.call("election", "Resign", election_pb2.ResignRequest(election=args.name, term=term))
        self.emit({"election": args.name, "resigned": True, "term": term},
                  f"ended {who} in election {args.name!r}")

    # read-write locks

    def rwlock_describe(self, args: argparse.Namespace) -> None:
        r = self.call("rwlock", "Describe", rwlock_pb2.DescribeRequest(name=args.name))
        d = {"name": args.name, "writer": None, **_dict(r)}  # null when no writer holds it
        if not r.HasField("writer") and not r.readers and not r.waiters:
            self.emit(d, f"rwlock {args.name!r} is not held (no writer, no readers, no waiters)")
            return
        holders = ([{"mode": "write", **_dict(r.writer)}] if r.HasField("writer") else []) + [
            {"mode": "read", **_dict(h)} for h in r.readers]
        text = f"rwlock {args.name!r}: " + ("held by a writer" if r.HasField("writer") else
                                              f"held by {len(r.readers)} reader(s)") + f", {len(r.waiters)} waiting"
        if holders:
            text += "\n\n" + _table(holders, ["mode", "owner", "fencing_token", "ttl_remaining"])
        if r.waiters:
            text += "\n\nwaiting, first in line first:\n" + _table(
                [{"position": i, "mode": _MODE_NAMES.get(w.mode, str(w.mode)), "owner": w.owner}
                 for i, w in enumerate(r.waiters, 1)], ["position", "mode", "owner"])
        self.emit(d, text)

    # autocomplete

    def autocomplete_count(self, args: argparse.Namespace) -> None:
        r = self.call("autocomplete", "Count", autocomplete_pb2.CountRequest(index=args.index, prefix=args.prefix))
        starting = f" starting with {args.prefix!r}" if args.prefix else ""
        self.emit({"index": args.index, "prefix": args.prefix, "count": r.count},
                  f"index {args.index!r}: {r.count} name(s){starting}")

    def autocomplete_suggest(self, args: argparse.Namespace) -> None:
        order = autocomplete_pb2.SUGGEST_ORDER_SCORE if args.by_score else autocomplete_pb2.SUGGEST_ORDER_NAME
        r = self.call("autocomplete", "Suggest", autocomplete_pb2.SuggestRequest(
            index=args.index, prefix=args.prefix, limit=args.limit, order=order))
        d = {"index": args.index, "prefix": args.prefix, **_dict(r)}
        rows = [{"name": s.name, "score": f"{s.score:g}"} for s in r.suggestions]
        text = _table(rows, ["name", "score"]) if rows else f"(no names in {args.index!r} start with {args.prefix!r})"
        if r.truncated:
            text += "\n(the best of the names examined, not necessarily of all: see the README's Autocomplete API)"
        self.emit(d, text)

    def autocomplete_recent(self, args: argparse.Namespace) -> None:
        r = self.call("autocomplete", "SuggestRecent", autocomplete_pb2.SuggestRecentRequest(
            user=args.user, prefix=args.prefix, limit=args.limit, include_infix=args.infix))
        self.emit({"user": args.user, "prefix": args.prefix, "contacts": list(r.contacts)},
                  "\n".join(r.contacts) if r.contacts else f"(no recent contacts of {args.user!r} match)")

    # files

    def files_describe(self, args: argparse.Namespace) -> None:
        """A group's files, the bytes they hold in Redis, and each worker's progress:
        the files it has not marked done yet (ListFiles knows no more of a worker)."""
        r = self.call("files", "ListFiles", files_pb2.ListFilesRequest(group=args.group))
        workers: dict[str, dict[str, Any]] = {}
        for f in r.files:
            for w in f.pending:
                row = workers.setdefault(w, {"worker": w, "pending_files": 0, "pending_bytes": 0})
                row["pending_files"] += 1
                row["pending_bytes"] += f.size
        d = {"group": args.group, "held_bytes": r.held_bytes, "files": [_dict(f) for f in r.files],
             "workers": sorted(workers.values(), key=lambda w: w["worker"])}
        head = (f"group {args.group!r}: {len(r.files)} file(s), {r.held_bytes} bytes held "
                "(uploads wait while the others hold more than the server's --file-group-bound)")
        if not r.files:
            self.emit(d, f"group {args.group!r} holds no files")
            return
        rows = [{"file_id": f.file_id, "name": f.name, "size": f.size, "state": _FILE_STATES.get(f.state, ""),
                 "gzip": "yes" if f.gzip else "no", "pending": _workers_text(f.pending),
                 "created_at": _time(f, "created_at")}
                for f in r.files]
        text = head + "\n\n" + _table(rows, ["file_id", "name", "size", "state", "gzip", "pending", "created_at"])
        if workers:
            text += "\n\nworkers, by what they have not finished:\n" + _table(
                d["workers"], ["worker", "pending_files", "pending_bytes"])
        self.emit(d, text)

def _message_dict(m: chat_pb2.ChatMessage) -> dict[str, Any]:
    return {"chat_id": m.chat_id, "message_id": m.message_id, "sender": m.sender, "body": m.body,
            "sent_at": m.sent_at.ToJsonString() if m.HasField("sent_at") else ""}


def _confirm(prompt: str) -> bool:
    if not sys.stdin.isatty():
        print(prompt, end="", file=sys.stderr, flush=True)
    try:
        answer = input(prompt if sys.stdin.isatty() else "")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="concord", description="Inspect and repair a Concord server.")
    p.add_argument("--version", action="version", version=f"concord {__version__}")
    p.add_argument("--target", default=os.environ.get("CONCORD_TARGET", DEFAULT_TARGET),
                   help="host:port of the server (env CONCORD_TARGET; default %(default)s)")
    p.add_argument("--json", action="store_true", help="JSON output for scripts")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per call (default %(default)s)")
    env = os.environ.get
    p.add_argument("--token", default=env("CONCORD_TOKEN"),
                   help="bearer token, for a server run with --auth-tokens (env CONCORD_TOKEN)")
    p.add_argument("--tls", action="store_true", default=bool(env("CONCORD_TLS")),
                   help="connect over TLS, trusting the system's CAs (env CONCORD_TLS)")
    p.add_argument("--ca", default=env("CONCORD_CA"), help="PEM file of the CA to trust; implies --tls (env CONCORD_CA)")
    p.add_argument("--cert", default=env("CONCORD_CERT"),
                   help="PEM client certificate, for mutual TLS; with --key (env CONCORD_CERT)")
    p.add_argument("--key", default=env("CONCORD_KEY"), help="PEM key of --cert (env CONCORD_KEY)")
    kinds = p.add_subparsers(dest="kind", required=True,
                             metavar="{lock,semaphore,rwlock,election,limit,queue,chat,autocomplete,files}")

    def command(kind: argparse._SubParsersAction, name: str, handler: str, help: str,
                **more: Any) -> argparse.ArgumentParser:
        sub = kind.add_parser(name, help=help, **more)
        sub.set_defaults(handler=handler)
        return sub

    lock = kinds.add_parser("lock", help="locks").add_subparsers(dest="action", required=True)
    command(lock, "list", "lock_list", "locks held or waited for")
    command(lock, "describe", "lock_describe", "holder, fencing token, TTL, waiters").add_argument("name")
    fr = command(lock, "force-release", "lock_force_release",
                 "DANGEROUS: take the lock from its holder and give it to the next waiter")
    fr.add_argument("name")
    fr.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    sem = kinds.add_parser("semaphore", help="semaphores").add_subparsers(dest="action", required=True)
    command(sem, "list", "semaphore_list", "semaphores with holders or waiters")
    command(sem, "describe", "semaphore_describe", "limit, holders, waiters").add_argument("name")
    set_limit = command(sem, "set-limit", "semaphore_set_limit",
                        "set the semaphore's limit, kept until the next set-limit (the only way to change it)",
                        description="Sets the limit: an Acquire with another limit then fails "
                        "SEMAPHORE_LIMIT_MISMATCH. A lower limit takes no permit back (grants wait until the "
                        "held permits fit under it); a higher one admits the waiters that now fit at once.")
    set_limit.add_argument("name")
    set_limit.add_argument("limit", type=_semaphore_limit, metavar="LIMIT", help="most permits held at once (1 to the "
                           "server's --max-semaphore-limit)")

    rw = kinds.add_parser("rwlock", help="read-write locks").add_subparsers(dest="action", required=True)
    command(rw, "describe", "rwlock_describe", "the writer or the readers, and the waiters in line with their modes"
            ).add_argument("name")

    election = kinds.add_parser("election", help="leader elections").add_subparsers(dest="action", required=True)
    command(election, "leader", "election_leader", "the leader now: candidate, value, term, expiry; candidates waiting"
            ).add_argument("name")
    observe = command(election, "observe", "election_observe",
                      "print the leader now, then each change as it happens, until Ctrl-C")
    observe.add_argument("name")
    observe.add_argument("--count", type=int, default=0, metavar="N",
                         help="stop after N lines, the first being the leader now (default: until Ctrl-C)")
    observe.add_argument("--after", type=int, default=0, metavar="POSITION",
                         help="start after this change's position (as printed), not with the leader now")
    camp = command(election, "campaign", "election_campaign",
                   "lead, run COMMAND while leading, resign when it exits; exit with its status",
                   description="Waits to lead the election, then runs COMMAND with CONCORD_ELECTION and "
                   "CONCORD_ELECTION_TERM (pass the term to what it writes) in its environment. A Lead stream keeps "
                   "the leadership while COMMAND runs; when COMMAND exits the leadership is resigned and its exit "
                   "status is this command's. If the leadership is lost (its TTL ran out while the server could "
                   "not renew it, or someone resigned it), COMMAND is terminated (SIGTERM, then SIGKILL after "
                   "--grace) and this command fails with NOT_LEADER, exit 1.")
    camp.add_argument("name")
    camp.add_argument("value", help="the value the leader publishes (UTF-8 text, such as host:port)")
    camp.add_argument("command", nargs="+", metavar="-- COMMAND", help="the command to run while leading, after --")
    camp.add_argument("--ttl", type=parse_duration, default=10.0,
                      help="how long the leadership outlives a lost connection (default 10s)")
    camp.add_argument("--timeout", dest="wait", type=parse_duration, metavar="DURATION",
                      help="give up if not elected within this long (default: wait until elected)")
    camp.add_argument("--candidate", default="", help="a label observers see (default: this client's address)")
    camp.add_argument("--grace", type=parse_duration, default=10.0, metavar="DURATION",
                      help="after a lost leadership, how long COMMAND has to exit after SIGTERM (default 10s)")
    resign = command(election, "resign", "election_resign",
                     "end the leader's term from outside: it is told, and the next candidate leads")
    resign.add_argument("name")
    resign.add_argument("--term", type=int, help="end this term only (default: the current leader's)")
    resign.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    limit = kinds.add_parser("limit", help="rate limits").add_subparsers(dest="action", required=True)
    command(limit, "show", "limit_show", "the key's stored rate limit").add_argument("key")
    set_rate = command(limit, "set", "limit_set", "store the key's rate limit (the only way to change it)")
    set_rate.add_argument("key")
    set_rate.add_argument("rate", type=int, help="units per period")
    set_rate.add_argument("--per", type=parse_duration, default=1.0, help="the period (default 1s): 500ms, 1m, ...")
    set_rate.add_argument("--burst", type=int, default=0, help="GCRA and token bucket: units at once (default: rate)")
    set_rate.add_argument("--algorithm", default="gcra", choices=["gcra", "token_bucket", "sliding_log",
                                                                   "sliding_window", "fixed_window", "concurrency"])
    set_rate.add_argument("--drain", action="store_true", help="a refused check takes what is left")
    check = command(limit, "check", "limit_check", "peek at the key (or take --hits units) under its stored limit")
    check.add_argument("key")
    check.add_argument("--hits", type=int, default=0, help="units to take (default 0: peek)")
    command(limit, "reset", "limit_reset", "forget what the key counted (its stored limit stays)").add_argument("key")

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

    chat = kinds.add_parser("chat", help="chats").add_subparsers(dest="action", required=True)
    command(chat, "list", "chat_list", "every chat's id")
    desc = command(chat, "describe", "chat_describe", "last message id and the latest messages")
    desc.add_argument("chat_id")
    desc.add_argument("--limit", type=int, default=10)
    tail = command(chat, "tail", "chat_tail", "print messages sent from now on, until Ctrl-C")
    tail.add_argument("chat_id")
    tail.add_argument("--as", dest="user", required=True, help="a member to read as (nothing is marked seen)")

    ac = kinds.add_parser("autocomplete", help="name indexes and recent contacts").add_subparsers(
        dest="action", required=True)
    count = command(ac, "count", "autocomplete_count", "how many names an index holds (that start with --prefix)")
    count.add_argument("index")
    count.add_argument("--prefix", default="", help="count only the names that start with it")
    suggest = command(ac, "suggest", "autocomplete_suggest", "the names of an index that start with PREFIX")
    suggest.add_argument("index")
    suggest.add_argument("prefix", help='case-insensitive ("" matches every name)')
    suggest.add_argument("--limit", type=int, default=10, metavar="N", help="at most N names, 1-1000 (default 10)")
    suggest.add_argument("--by-score", action="store_true", help="best score first (default: in name order)")
    recent = command(ac, "recent", "autocomplete_recent", "a user's recent contacts that start with PREFIX")
    recent.add_argument("user")
    recent.add_argument("prefix", nargs="?", default="", help="(default: every recent contact, most recent first)")
    recent.add_argument("--limit", type=int, default=10, metavar="N", help="at most N contacts, 1-1000 (default 10)")
    recent.add_argument("--infix", action="store_true", help="then the contacts that contain PREFIX elsewhere")

    files = kinds.add_parser("files", help="file distribution").add_subparsers(dest="action", required=True)
    command(files, "describe", "files_describe",
            "a group's files (size, state, workers pending), the bytes they hold, each worker's pending files"
            ).add_argument("group", help="the group: a chat")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)  # exits 2 on bad usage
    if getattr(args, "check", None):
        args.check(args)  # usage argparse cannot check alone; exits 2 too
    try:
        with Client(args.target, timeout=args.timeout, tls=args.tls, root_certificates=args.ca,
                    client_cert=args.cert, client_key=args.key, token=args.token) as client:
            return getattr(Admin(client, args.json), args.handler)(args) or 0
    except KeyboardInterrupt:  # the way to stop `chat tail`; `queue wait` must not look like success
        return WAIT_INTERRUPTED if args.handler in INTERRUPTED_FAILS else 0
    except (Failed, ConcordError) as exc:
        print(_error_line(exc), file=sys.stderr)
        return 1
    except grpc.RpcError as exc:
        print(_error_line(from_rpc_error(exc)), file=sys.stderr)
        return 1


# Commands that Ctrl-C stops before they are done (exit 130), not the way to end them.
INTERRUPTED_FAILS = {"queue_wait", "election_campaign"}


def _error_line(exc: Exception) -> str:
    """``concord: MESSAGE (REASON)``: the ErrorInfo reason too, for scripts to match."""
    reason = getattr(exc, "reason", "")
    return f"concord: {exc} ({reason})" if reason and reason not in str(exc) else f"concord: {exc}"


if __name__ == "__main__":
    sys.exit(main())
