"""concord.queue.v1.QueueService: validates requests, calls primitives.queue, maps errors."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import AsyncIterator

from concord.queue.v1 import queue_pb2 as pb
from concord.queue.v1 import queue_pb2_grpc

from ..config import Settings
from ..errors import InvalidArgument
from ..primitives.queue import (MAX_PRIORITY, GroupInfo, GroupRules, NewTask, Policy, QueueEvent, Queues, Rate,
                                Retention, RetryPolicy, Settling, TaskRecord)
from ..primitives.task_search import DEFAULT_PAGE, MAX_NEEDLE_BYTES, MAX_PAGE, Cursor, SearchQuery
from ..primitives.schedule_times import MAX_CRON_BYTES, BadTiming, Timing, off_loop
from ..primitives.schedules import ScheduleRecord, Schedules, ScheduleSpec
from . import validation as v
from .consume import ConsumeStream, next_request
from .convert import duration, name_page, timestamp, wait_budget_ms
from .status import rpc

log = logging.getLogger(__name__)

DEFAULT_LEASE_MS = 30_000
MAX_DELAY_MS = 366 * 86_400_000  # delays, run-at times and dedupe windows: at most a year ahead
MAX_ERROR_BYTES = 4096
MAX_QUEUES = 16
MAX_ATTEMPTS = 100
DEFAULT_LIST = 100
MAX_LIST = 1000
MAX_RETRY_DEAD = 10_000
MAX_PROGRESS_JSON = 4096
MAX_RETAIN_COUNT = 1_000_000
MAX_RETAIN_AGE_MS = 366 * 86_400_000
MAX_KEEP_EVENTS = 1_000_000
MAX_LEASED = 1_000_000
MAX_RATE = 1_000_000
MAX_RATE_PERIOD_MS = 86_400_000
MAX_WEIGHT = 1000
MIN_EVERY_MS = 1000
MAX_GRACE_MS = 3_600_000
_MISSED = {pb.MISSED_TICKS_UNSPECIFIED: "once", pb.MISSED_TICKS_RUN_ONCE: "once", pb.MISSED_TICKS_SKIP: "skip"}
_MISSED_ENUM = {"once": pb.MISSED_TICKS_RUN_ONCE, "skip": pb.MISSED_TICKS_SKIP}

_STATES = {"ready": pb.TASK_STATE_READY, "delayed": pb.TASK_STATE_DELAYED, "leased": pb.TASK_STATE_LEASED,
           "dead": pb.TASK_STATE_DEAD, "waiting": pb.TASK_STATE_WAITING, "succeeded": pb.TASK_STATE_SUCCEEDED,
           "cancelled": pb.TASK_STATE_CANCELLED}
_STATE_NAMES = {v: k for k, v in _STATES.items()}
_WAIT_REASONS = {"paused": pb.WAIT_REASON_QUEUE_PAUSED, "queue_capped": pb.WAIT_REASON_QUEUE_AT_CAP,
                 "queue_limited": pb.WAIT_REASON_QUEUE_RATE_LIMITED, "group_paused": pb.WAIT_REASON_GROUP_PAUSED,
                 "group_capped": pb.WAIT_REASON_GROUP_AT_CAP, "group_limited": pb.WAIT_REASON_GROUP_RATE_LIMITED}


def task_message(t: TaskRecord) -> pb.Task:
    m = pb.Task(queue=t.queue, task_id=t.task_id, type=t.type, payload=t.payload, priority=t.priority,
                state=_STATES.get(t.state, pb.TASK_STATE_UNSPECIFIED), attempt=t.attempt,
                max_attempts=t.max_attempts, lease=t.lease, enqueued_at=timestamp(t.enqueued_ms),
                ready_at=timestamp(t.ready_ms), last_error=t.last_error, result=t.result,
                result_type=t.result_type, dead_reason=t.dead_reason, group=t.group,
                wait_reason=_WAIT_REASONS.get(t.wait_reason, pb.WAIT_REASON_UNSPECIFIED))
    if t.retry is not None:
        m.retry.CopyFrom(_retry_message(t.retry))
    if t.lease_expires_ms is not None:
        m.lease_expires_at.CopyFrom(timestamp(t.lease_expires_ms))
    if t.leased_ms is not None:
        m.leased_at.CopyFrom(timestamp(t.leased_ms))
    if t.finished_ms is not None:
        m.finished_at.CopyFrom(timestamp(t.finished_ms))
    if t.schedule:
        m.schedule = t.schedule
    if t.scheduled_ms is not None:
        m.scheduled_at.CopyFrom(timestamp(t.scheduled_ms))
    if t.progress is not None:
        m.progress.json = t.progress.json
        m.progress.reported_at.CopyFrom(timestamp(t.progress.reported_ms))
        if t.progress.value is not None:
            m.progress.value = t.progress.value
    return m


def schedule_message(s: ScheduleRecord) -> pb.Schedule:
    spec = s.spec
    m = pb.Schedule(queue=s.queue, name=s.name, paused=s.paused, last_task_id=s.last_task_id, runs=s.runs,
                    version=s.version, created_at=timestamp(s.created_ms), updated_at=timestamp(s.updated_ms))
    m.spec.type, m.spec.payload, m.spec.priority = spec.type, spec.payload, spec.priority
    m.spec.max_attempts, m.spec.missed = spec.max_attempts, _MISSED_ENUM[spec.missed]
    m.spec.grace.CopyFrom(duration(spec.grace_ms))
    if spec.timing.cron:
        m.spec.cron, m.spec.time_zone = spec.timing.cron, spec.timing.timezone
    else:
        m.spec.every.CopyFrom(duration(spec.timing.every_ms))
        m.spec.start_at.CopyFrom(timestamp(spec.timing.anchor_ms))
    for field, ms in (("next_run_at", s.next_ms), ("last_run_at", s.last_ms), ("last_missed_at", s.last_missed_ms)):
        if ms is not None:
            getattr(m, field).CopyFrom(timestamp(ms))
    return m


def _retention_message(r: Retention | None) -> pb.Retention:
    m = pb.Retention()
    if r is not None:
        if r.max_count is not None:
            m.max_count = r.max_count
        if r.max_age_ms:
            m.max_age.CopyFrom(duration(r.max_age_ms))
    return m


_BACKOFFS = {"fixed": pb.BACKOFF_FIXED, "exp": pb.BACKOFF_EXPONENTIAL}
_BACKOFF_NAMES = {v: k for k, v in _BACKOFFS.items()}


def _retry_message(r: RetryPolicy | None) -> pb.RetryPolicy:
    m = pb.RetryPolicy()
    if r is not None:
        m.max_attempts = r.max_attempts or 0
        m.backoff = _BACKOFFS.get(r.backoff or "", pb.BACKOFF_UNSPECIFIED)
        if r.initial_ms is not None:
            m.initial_delay.CopyFrom(duration(r.initial_ms))
        if r.cap_ms is not None:
            m.max_delay.CopyFrom(duration(r.cap_ms))
        if r.jitter is not None:
            m.jitter = r.jitter
    return m


def _rate_message(r: Rate | None) -> pb.LeaseRate | None:
    return None if r is None else pb.LeaseRate(limit=r.count, period=duration(r.period_ms), burst=r.burst)


def _policy_message(p: Policy) -> pb.QueuePolicy:
    return pb.QueuePolicy(succeeded=_retention_message(p.succeeded), dead=_retention_message(p.dead),
                          retry=_retry_message(p.retry), keep_events=p.keep_events, max_leased=p.max_leased,
                          rate=_rate_message(p.rate), group_max_leased=p.group_max_leased,
                          group_rate=_rate_message(p.group_rate))


def group_message(queue: str, g: GroupInfo) -> pb.Group:
    own = pb.GroupRules(max_leased=None if g.own.max_leased is None or g.own.max_leased < 0 else g.own.max_leased,
                        weight=g.own.weight, rate=_rate_message(g.own.rate))
    effective = pb.GroupRules(max_leased=g.max_leased, weight=g.own.weight or 1, rate=_rate_message(g.rate))
    return pb.Group(queue=queue, name=g.name, ready=g.ready, leased=g.leased, paused=g.paused, own=own,
                    effective=effective, wait_reason=_WAIT_REASONS.get(g.wait_reason, pb.WAIT_REASON_UNSPECIFIED))


_EVENT_KINDS = {"enqueued": pb.QUEUE_EVENT_KIND_ENQUEUED, "leased": pb.QUEUE_EVENT_KIND_LEASED,
                "progress": pb.QUEUE_EVENT_KIND_PROGRESS, "succeeded": pb.QUEUE_EVENT_KIND_SUCCEEDED,
                "failed": pb.QUEUE_EVENT_KIND_FAILED, "dead": pb.QUEUE_EVENT_KIND_DEAD,
                "cancelled": pb.QUEUE_EVENT_KIND_CANCELLED, "released": pb.QUEUE_EVENT_KIND_RELEASED,
                "retried": pb.QUEUE_EVENT_KIND_RETRIED, "gap": pb.QUEUE_EVENT_KIND_GAP,
                "caught_up": pb.QUEUE_EVENT_KIND_CAUGHT_UP, "held": pb.QUEUE_EVENT_KIND_HELD}


def event_message(e: QueueEvent) -> pb.QueueEvent:
    m = pb.QueueEvent(position=str(e.position), kind=_EVENT_KINDS.get(e.kind, pb.QUEUE_EVENT_KIND_UNSPECIFIED),
                      task_id=e.task_id, attempt=e.attempt, type=e.type, error=e.error, dead_reason=e.dead_reason,
                      schedule=e.schedule, group=e.group,
                      wait_reason=_WAIT_REASONS.get(e.wait_reason, pb.WAIT_REASON_UNSPECIFIED))
    if e.at_ms:
        m.at.CopyFrom(timestamp(e.at_ms))
    if e.ready_ms is not None:
        m.ready_at.CopyFrom(timestamp(e.ready_ms))
    if e.progress is not None:
        m.progress.json = e.progress.json
        m.progress.reported_at.CopyFrom(timestamp(e.progress.reported_ms))
        if e.progress.value is not None:
            m.progress.value = e.progress.value
    return m


def search_query(request: pb.SearchTasksRequest) -> SearchQuery:
    """SearchTasks' filters, each checked: a task id as the server hands them out, a type
    (or prefix) like a name, text and bytes of 1 to MAX_NEEDLE_BYTES."""
    if request.type and request.type_prefix:
        raise InvalidArgument("give type or type_prefix, not both", field="type_prefix")
    states = set()
    for state in request.states:
        name = _STATE_NAMES.get(state)
        if name is None:
            raise InvalidArgument("states holds an unknown state", field="states")
        states.add(name)
    if len(request.payload_contains) > MAX_NEEDLE_BYTES:
        raise InvalidArgument(f"payload_contains is longer than {MAX_NEEDLE_BYTES} bytes", field="payload_contains")
    return SearchQuery(task_id=v.token(request.task_id, "task_id") if request.task_id else "",
                       type=v.name(request.type, "type") if request.type else "",
                       type_prefix=v.label(request.type_prefix, "type_prefix"),
                       states=frozenset(states), error_contains=v.label(request.error_contains, "error_contains"),
                       payload_contains=request.payload_contains)


def _bad_timing(exc: BadTiming) -> InvalidArgument:
    field = "spec.time_zone" if "time zone" in str(exc) else "spec.cron"
    return InvalidArgument(f"{field}: {exc}", field=field)


class QueueServicer(queue_pb2_grpc.QueueServiceServicer):
    def __init__(self, queues: Queues, schedules: Schedules, settings: Settings) -> None:
        self._queues = queues
        self._schedules = schedules
        self._durations = v.Durations(settings.max_ttl, settings.max_wait)
        self._max_batch = settings.queue_max_batch
        self._max_payload = settings.queue_max_payload
        self._max_result = settings.queue_max_result

    # -- validation -------------------------------------------------------------

    def _new_task(self, t: pb.NewTask, i: int) -> NewTask:
        field = f"tasks[{i}]"
        if len(t.payload) > self._max_payload:
            raise InvalidArgument(f"{field}.payload is larger than {self._max_payload} bytes", field=f"{field}.payload")
        v.count(t.priority, f"{field}.priority", minimum=-MAX_PRIORITY, maximum=MAX_PRIORITY)
        if t.HasField("delay") and t.HasField("run_at"):
            raise InvalidArgument(f"{field}.delay and {field}.run_at: set one, not both", field=f"{field}.delay")
        delay = v.duration_ms(t, "delay", minimum_ms=0, maximum_ms=MAX_DELAY_MS, required=False, label=f"{field}.delay")
        run_at = v.timestamp_ms(t.run_at, f"{field}.run_at") if t.HasField("run_at") else None
        window = v.duration_ms(t, "dedupe_window", minimum_ms=0, maximum_ms=MAX_DELAY_MS, required=False,
                               label=f"{field}.dedupe_window")
        if window and not t.dedupe_key:
            raise InvalidArgument(f"{field}.dedupe_window needs a dedupe_key", field=f"{field}.dedupe_window")
        keyed = [k for k in ("dedupe_key", "throttle_key", "debounce_key") if getattr(t, k)]
        if len(keyed) > 1:
            raise InvalidArgument(f"{field}: set one of dedupe_key, throttle_key and debounce_key, not "
                                  f"{' and '.join(keyed)}", field=f"{field}.{keyed[1]}")
        throttle = v.duration_ms(t, "throttle_period", minimum_ms=1, maximum_ms=MAX_DELAY_MS,
                                 required=bool(t.throttle_key), label=f"{field}.throttle_period")
        if throttle and not t.throttle_key:
            raise InvalidArgument(f"{field}.throttle_period needs a throttle_key", field=f"{field}.throttle_period")
        if t.debounce_key and not (t.HasField("delay") or t.HasField("run_at")):
            raise InvalidArgument(f"{field}.debounce_key needs a delay or run_at: the time each later task "
                                  "pushes the run back to", field=f"{field}.debounce_key")
        retry = self._retry(t.retry, f"{field}.retry") if t.HasField("retry") else None
        if t.max_attempts and retry is not None and retry.max_attempts:
            raise InvalidArgument(f"{field}.max_attempts and {field}.retry.max_attempts: set one, not both",
                                  field=f"{field}.max_attempts")
        max_attempts = t.max_attempts or (retry.max_attempts if retry is not None else None) or 0
        if max_attempts:
            v.count(max_attempts, f"{field}.max_attempts", minimum=1, maximum=MAX_ATTEMPTS)
        return NewTask(
            type=v.name(t.type, f"{field}.type"), payload=t.payload, priority=t.priority,
            delay_ms=delay if t.HasField("delay") else None, run_at_ms=run_at,
            dedupe_key=v.label(t.dedupe_key, f"{field}.dedupe_key"), dedupe_window_ms=window,
            max_attempts=max_attempts, retry=retry,
            throttle_key=v.label(t.throttle_key, f"{field}.throttle_key"), throttle_ms=throttle,
            debounce_key=v.label(t.debounce_key, f"{field}.debounce_key"),
            group=v.name(t.group, f"{field}.group") if t.group else "",
        )

    @staticmethod
    def _retry(m: pb.RetryPolicy, field: str) -> RetryPolicy:
        if m.max_attempts:
            v.count(m.max_attempts, f"{field}.max_attempts", minimum=1, maximum=MAX_ATTEMPTS)
        if m.backoff not in (pb.BACKOFF_UNSPECIFIED, *_BACKOFF_NAMES):
            raise InvalidArgument(f"{field}.backoff must be BACKOFF_FIXED or BACKOFF_EXPONENTIAL",
                                  field=f"{field}.backoff")
        delays = [v.duration_ms(m, name, minimum_ms=0, maximum_ms=MAX_DELAY_MS, required=True, label=f"{field}.{name}")
                  if m.HasField(name) else None for name in ("initial_delay", "max_delay")]
        return RetryPolicy(m.max_attempts or None, _BACKOFF_NAMES.get(m.backoff), *delays,
                           m.jitter if m.HasField("jitter") else None)

    @staticmethod
    def _rate(m: pb.QueuePolicy | pb.GroupRules, name: str, field: str) -> Rate | None:
        if not m.HasField(name):
            return None
        r = getattr(m, name)
        limit = v.count(r.limit, f"{field}.limit", minimum=1, maximum=MAX_RATE)
        period = v.duration_ms(r, "period", minimum_ms=1, maximum_ms=MAX_RATE_PERIOD_MS, required=True,
                               label=f"{field}.period")
        burst = v.count(r.burst or limit, f"{field}.burst", minimum=1, maximum=MAX_RATE)
        return Rate(limit, period, burst)

    @staticmethod
    def _optional_count(m, name: str, field: str, minimum: int, maximum: int) -> int | None:
        return v.count(getattr(m, name), field, minimum=minimum, maximum=maximum) if m.HasField(name) else None

    def _queues_field(self, names) -> list[str]:
        queues = [v.name(q, "queues") for q in names]
        if not 1 <= len(queues) <= MAX_QUEUES:
            raise InvalidArgument(f"queues must list 1 to {MAX_QUEUES} queues", field="queues")
        if len(set(queues)) != len(queues):
            raise InvalidArgument("queues must not repeat a queue", field="queues")
        return queues

    def _lease_ms(self, request) -> int:
        if not request.HasField("lease_ttl"):
            return DEFAULT_LEASE_MS
        return self._durations.ttl(request, "lease_ttl")

    def _settle_args(self, request) -> tuple[str, str, str]:
        return v.name(request.queue, "queue"), v.token(request.task_id, "task_id"), v.token(request.lease, "lease")

    def _nack_args(self, request) -> tuple[int | None, str, bool]:
        delay = None
        if request.HasField("retry_delay"):
            delay = v.duration_ms(request, "retry_delay", minimum_ms=0, maximum_ms=MAX_DELAY_MS, required=True)
        if len(request.error.encode("utf-8", "surrogatepass")) > MAX_ERROR_BYTES:
            raise InvalidArgument(f"error is longer than {MAX_ERROR_BYTES} bytes", field="error")
        return delay, request.error, request.retryable if request.HasField("retryable") else True

    def _result_args(self, request: pb.AckRequest | pb.Settle) -> tuple[bytes, str]:
        if len(request.result) > self._max_result:
            raise InvalidArgument(f"result is larger than {self._max_result} bytes", field="result")
        return request.result, v.label(request.result_type, "result_type")

    def _settling(self, s: pb.Settle) -> tuple[str, Settling]:
        """A Consume stream's Settle, validated: its queue, and the ack, nack or release."""
        queue, task_id, lease = self._settle_args(s)
        if s.release:
            return queue, Settling(task_id, lease, "release")
        if s.failed:
            delay, error, retryable = self._nack_args(s)
            return queue, Settling(task_id, lease, "nack", -1 if delay is None else delay, error, retryable=retryable)
        result, kind = self._result_args(s)
        return queue, Settling(task_id, lease, "ack", -1, result, kind)

    def _task_args(self, request) -> tuple[str, str]:
        return v.name(request.queue, "queue"), v.token(request.task_id, "task_id")

    @staticmethod
    def _retention(request: pb.Retention, field: str) -> Retention | None:
        if not request.HasField("max_count") and not request.HasField("max_age"):
            return None
        count = None
        if request.HasField("max_count"):
            count = v.count(request.max_count, f"{field}.max_count", minimum=0, maximum=MAX_RETAIN_COUNT)
        age = v.duration_ms(request, "max_age", minimum_ms=0, maximum_ms=MAX_RETAIN_AGE_MS, required=False,
                            label=f"{field}.max_age")
        return Retention(count, age)

    def _schedule_spec(self, m: pb.ScheduleSpec) -> ScheduleSpec:
        if len(m.payload) > self._max_payload:
            raise InvalidArgument(f"spec.payload is larger than {self._max_payload} bytes", field="spec.payload")
        v.count(m.priority, "spec.priority", minimum=-MAX_PRIORITY, maximum=MAX_PRIORITY)
        if m.max_attempts:
            v.count(m.max_attempts, "spec.max_attempts", minimum=1, maximum=MAX_ATTEMPTS)
        if m.missed not in _MISSED:
            raise InvalidArgument("spec.missed must be MISSED_TICKS_RUN_ONCE or MISSED_TICKS_SKIP", field="spec.missed")
        grace = v.duration_ms(m, "grace", minimum_ms=0, maximum_ms=MAX_GRACE_MS, required=False, label="spec.grace")
        which = m.WhichOneof("timing")
        start = None
        try:
            if which == "cron":
                if m.HasField("start_at"):
                    raise InvalidArgument("spec.start_at is for intervals (spec.every)", field="spec.start_at")
                if len(m.cron) > MAX_CRON_BYTES:  # before strip or split look at it
                    raise BadTiming(f"cron expression is longer than {MAX_CRON_BYTES} bytes")
                timing = Timing(cron=m.cron.strip(), timezone=m.time_zone or "UTC")
            elif which == "every":
                if m.time_zone:
                    raise InvalidArgument("spec.time_zone is for cron expressions", field="spec.time_zone")
                every = v.duration_ms(m, "every", minimum_ms=MIN_EVERY_MS, maximum_ms=MAX_DELAY_MS, required=True,
                                      label="spec.every")
                timing = Timing(every_ms=every)
                if m.HasField("start_at"):
                    start = v.timestamp_ms(m.start_at, "spec.start_at")
            else:
                raise InvalidArgument("spec needs cron or every", field="spec.cron")
        except BadTiming as exc:
            raise _bad_timing(exc) from exc
        return ScheduleSpec(timing, v.name(m.type, "spec.type"), m.payload, m.priority, m.max_attempts,
                            _MISSED[m.missed], grace if m.HasField("grace") else 10_000, start)

    @staticmethod
    async def _usable(spec: ScheduleSpec) -> ScheduleSpec:
        """The spec, once its cron parses and ever fires (``0 0 30 2 *`` never does):
        croniter's search can take tens of ms, so it runs off the event loop."""
        try:
            await off_loop(spec.timing.check)
        except BadTiming as exc:
            raise _bad_timing(exc) from exc
        return spec

    def _schedule_args(self, request) -> tuple[str, str]:
        return v.name(request.queue, "queue"), v.name(request.name, "name")

    def _limit(self, value: int, default: int, maximum: int) -> int:
        return v.count(value or default, "limit", minimum=1, maximum=maximum)

    # -- RPCs -------------------------------------------------------------------

    @staticmethod
    def _group_args(request) -> tuple[str, str]:
        return v.name(request.queue, "queue"), v.name(request.group, "group") if request.group else ""

    @rpc
    async def PauseQueue(self, request: pb.PauseQueueRequest, context) -> pb.PauseQueueResponse:
        queue, group = self._group_args(request)
        return pb.PauseQueueResponse(was_paused=await self._queues.pause(queue, True, group))

    @rpc
    async def ResumeQueue(self, request: pb.ResumeQueueRequest, context) -> pb.ResumeQueueResponse:
        queue, group = self._group_args(request)
        return pb.ResumeQueueResponse(was_paused=await self._queues.pause(queue, False, group))

    @rpc
    async def SetGroupRules(self, request: pb.SetGroupRulesRequest, context) -> pb.SetGroupRulesResponse:
        queue, group = v.name(request.queue, "queue"), v.name(request.group, "group")
        r = request.rules
        rules = GroupRules(self._optional_count(r, "max_leased", "rules.max_leased", 0, MAX_LEASED),
                           self._optional_count(r, "weight", "rules.weight", 1, MAX_WEIGHT),
                           self._rate(r, "rate", "rules.rate"))
        return pb.SetGroupRulesResponse(group=group_message(queue, await self._queues.set_group(queue, group, rules)))

    @rpc
    async def GetGroup(self, request: pb.GetGroupRequest, context) -> pb.GetGroupResponse:
        queue, group = v.name(request.queue, "queue"), v.name(request.group, "group")
        return pb.GetGroupResponse(group=group_message(queue, await self._queues.get_group(queue, group)))

    @rpc
    async def ListGroups(self, request: pb.ListGroupsRequest, context) -> pb.ListGroupsResponse:
        queue = v.name(request.queue, "queue")
        size = v.count(request.page_size or DEFAULT_LIST, "page_size", minimum=1, maximum=MAX_LIST)
        after = v.name(request.page_token, "page_token") if request.page_token else ""
        groups = await self._queues.groups(queue, after, size)
        return pb.ListGroupsResponse(groups=[group_message(queue, g) for g in groups],
                                     next_page_token=groups[-1].name if len(groups) == size else "")

    @rpc
    async def ListQueues(self, request: pb.ListQueuesRequest, context) -> pb.ListQueuesResponse:
        return await name_page(self._queues.names, request, pb.ListQueuesResponse)

    @rpc
    async def Enqueue(self, request: pb.EnqueueRequest, context) -> pb.EnqueueResponse:
        queue = v.name(request.queue, "queue")
        if not 1 <= len(request.tasks) <= self._max_batch:
            raise InvalidArgument(f"tasks must hold 1 to {self._max_batch} tasks", field="tasks")
        tasks = [self._new_task(t, i) for i, t in enumerate(request.tasks)]
        results = await self._queues.enqueue(queue, tasks)
        return pb.EnqueueResponse(results=[pb.EnqueueResult(task_id=r.task_id, duplicate=r.duplicate,
                                                            debounced=r.debounced) for r in results])

    @rpc
    async def Dequeue(self, request: pb.DequeueRequest, context) -> pb.DequeueResponse:
        queues = self._queues_field(request.queues)
        max_tasks = v.count(request.max_tasks or 1, "max_tasks", minimum=1, maximum=self._max_batch)
        lease = self._lease_ms(request)
        wait = self._durations.wait(request)
        tasks = await self._queues.dequeue(queues, max_tasks, lease, wait_budget_ms(wait, context))
        return pb.DequeueResponse(tasks=[task_message(t) for t in tasks])

    @rpc
    async def Ack(self, request: pb.AckRequest, context) -> pb.AckResponse:
        await self._queues.ack(*self._settle_args(request), *self._result_args(request))
        return pb.AckResponse()

    @rpc
    async def ReportProgress(self, request: pb.ReportProgressRequest, context) -> pb.ReportProgressResponse:
        args = self._settle_args(request)
        value = request.value if request.HasField("value") else None
        if value is not None and not math.isfinite(value):
            raise InvalidArgument("value must be a finite number", field="value")
        if request.json:
            v.json_document(request.json, "json", max_bytes=MAX_PROGRESS_JSON)
        if value is None and not request.json:
            raise InvalidArgument("set value, json or both", field="value")
        lease = self._durations.ttl(request, "lease_ttl") if request.HasField("lease_ttl") else None
        expires = await self._queues.progress(*args, value, request.json, lease)
        return pb.ReportProgressResponse(lease_expires_at=timestamp(expires))

    @rpc
    async def GetTask(self, request: pb.GetTaskRequest, context) -> pb.GetTaskResponse:
        return pb.GetTaskResponse(task=task_message(await self._queues.get_task(*self._task_args(request))))

    @rpc
    async def WaitTask(self, request: pb.WaitTaskRequest, context) -> pb.WaitTaskResponse:
        queue, task_id = self._task_args(request)
        wait = wait_budget_ms(self._durations.wait(request), context)
        finished, task = await self._queues.wait_task(queue, task_id, wait)
        return pb.WaitTaskResponse(finished=finished, task=task_message(task))

    @rpc
    async def SetQueuePolicy(self, request: pb.SetQueuePolicyRequest, context) -> pb.SetQueuePolicyResponse:
        queue = v.name(request.queue, "queue")
        p = request.policy
        keep = None
        if p.HasField("keep_events"):
            keep = v.count(p.keep_events, "policy.keep_events", minimum=0, maximum=MAX_KEEP_EVENTS)
        policy = Policy(self._retention(p.succeeded, "policy.succeeded"), self._retention(p.dead, "policy.dead"),
                        self._retry(p.retry, "policy.retry") if p.HasField("retry") else None, keep,
                        self._optional_count(p, "max_leased", "policy.max_leased", 1, MAX_LEASED),
                        self._rate(p, "rate", "policy.rate"),
                        self._optional_count(p, "group_max_leased", "policy.group_max_leased", 0, MAX_LEASED),
                        self._rate(p, "group_rate", "policy.group_rate"))
        return pb.SetQueuePolicyResponse(policy=_policy_message(await self._queues.set_policy(queue, policy)))

    @rpc
    async def GetQueuePolicy(self, request: pb.GetQueuePolicyRequest, context) -> pb.GetQueuePolicyResponse:
        policy = await self._queues.get_policy(v.name(request.queue, "queue"))
        return pb.GetQueuePolicyResponse(policy=_policy_message(policy))

    @rpc
    async def CreateSchedule(self, request: pb.CreateScheduleRequest, context) -> pb.CreateScheduleResponse:
        queue, name = self._schedule_args(request)
        spec = await self._usable(self._schedule_spec(request.spec))
        s = await self._schedules.create(queue, name, spec, request.paused)
        return pb.CreateScheduleResponse(schedule=schedule_message(s))

    @rpc
    async def UpdateSchedule(self, request: pb.UpdateScheduleRequest, context) -> pb.UpdateScheduleResponse:
        queue, name = self._schedule_args(request)
        paused = request.paused if request.HasField("paused") else None
        spec = await self._usable(self._schedule_spec(request.spec))
        s = await self._schedules.update(queue, name, spec, paused)
        return pb.UpdateScheduleResponse(schedule=schedule_message(s))

    @rpc
    async def PauseSchedule(self, request: pb.PauseScheduleRequest, context) -> pb.PauseScheduleResponse:
        return pb.PauseScheduleResponse(schedule=schedule_message(
            await self._schedules.pause(*self._schedule_args(request))))

    @rpc
    async def ResumeSchedule(self, request: pb.ResumeScheduleRequest, context) -> pb.ResumeScheduleResponse:
        return pb.ResumeScheduleResponse(schedule=schedule_message(
            await self._schedules.resume(*self._schedule_args(request))))

    @rpc
    async def DeleteSchedule(self, request: pb.DeleteScheduleRequest, context) -> pb.DeleteScheduleResponse:
        await self._schedules.delete(*self._schedule_args(request))
        return pb.DeleteScheduleResponse()

    @rpc
    async def GetSchedule(self, request: pb.GetScheduleRequest, context) -> pb.GetScheduleResponse:
        return pb.GetScheduleResponse(schedule=schedule_message(
            await self._schedules.get(*self._schedule_args(request))))

    @rpc
    async def ListSchedules(self, request: pb.ListSchedulesRequest, context) -> pb.ListSchedulesResponse:
        queue = v.name(request.queue, "queue")
        if request.page_token and not re.fullmatch(r"(?:[0-9]{1,16}|inf) .+", request.page_token, re.S):
            raise InvalidArgument("page_token is not one this server issued", field="page_token")
        size = v.count(request.page_size or DEFAULT_LIST, "page_size", minimum=1, maximum=MAX_LIST)
        found, token = await self._schedules.list(queue, request.page_token, size)
        return pb.ListSchedulesResponse(schedules=[schedule_message(s) for s in found], next_page_token=token)

    @rpc
    async def WatchQueue(self, request: pb.WatchQueueRequest, context) -> AsyncIterator[pb.WatchQueueResponse]:
        queue = v.name(request.queue, "queue")
        after = None
        if request.after:
            if not (request.after.isdigit() and len(request.after) <= 18):
                raise InvalidArgument("after is not a position this server sent", field="after")
            if request.from_oldest:
                raise InvalidArgument("after and from_oldest: set one, not both", field="from_oldest")
            after = int(request.after)
        async for e in self._queues.watch(queue, after, request.from_oldest):
            yield pb.WatchQueueResponse(event=event_message(e))

    @rpc
    async def Nack(self, request: pb.NackRequest, context) -> pb.NackResponse:
        args = self._settle_args(request)
        outcome = await self._queues.nack(*args, *self._nack_args(request))
        return pb.NackResponse(state=_STATES[outcome.state], retry_at=timestamp(outcome.at_ms))

    @rpc
    async def ExtendLease(self, request: pb.ExtendLeaseRequest, context) -> pb.ExtendLeaseResponse:
        args = self._settle_args(request)
        lease = self._durations.ttl(request, "lease_ttl")
        return pb.ExtendLeaseResponse(lease_expires_at=timestamp(await self._queues.extend(*args, lease)))

    @rpc
    async def Release(self, request: pb.ReleaseRequest, context) -> pb.ReleaseResponse:
        await self._queues.release(*self._settle_args(request))
        return pb.ReleaseResponse()

    @rpc
    async def Stats(self, request: pb.StatsRequest, context) -> pb.StatsResponse:
        s = await self._queues.stats(v.name(request.queue, "queue"))
        return pb.StatsResponse(ready=s.ready, delayed=s.delayed, leased=s.leased, dead=s.dead,
                                oldest_ready_age=duration(s.oldest_ready_age_ms), paused=s.paused,
                                finished=s.finished)

    @rpc
    async def Peek(self, request: pb.PeekRequest, context) -> pb.PeekResponse:
        queue = v.name(request.queue, "queue")
        state = _STATE_NAMES.get(request.state or pb.TASK_STATE_READY)
        if state not in ("ready", "delayed", "leased"):
            raise InvalidArgument("state must be READY, DELAYED or LEASED (ListDead lists dead tasks)", field="state")
        tasks = await self._queues.peek(queue, state, self._limit(request.limit, DEFAULT_LIST, MAX_LIST))
        return pb.PeekResponse(tasks=[task_message(t) for t in tasks])

    @rpc
    async def Cancel(self, request: pb.CancelRequest, context) -> pb.CancelResponse:
        await self._queues.cancel(*self._task_args(request))
        return pb.CancelResponse()

    @rpc
    async def Purge(self, request: pb.PurgeRequest, context) -> pb.PurgeResponse:
        return pb.PurgeResponse(deleted=await self._queues.purge(v.name(request.queue, "queue"), request.include_dead))

    @rpc
    async def ListDead(self, request: pb.ListDeadRequest, context) -> pb.ListDeadResponse:
        queue = v.name(request.queue, "queue")
        tasks = await self._queues.peek(queue, "dead", self._limit(request.limit, DEFAULT_LIST, MAX_LIST),
                                        request.offset)
        return pb.ListDeadResponse(tasks=[task_message(t) for t in tasks])

    @rpc
    async def RetryDead(self, request: pb.RetryDeadRequest, context) -> pb.RetryDeadResponse:
        queue = v.name(request.queue, "queue")
        if len(request.task_ids) > MAX_RETRY_DEAD:
            raise InvalidArgument(f"task_ids may name at most {MAX_RETRY_DEAD} tasks", field="task_ids")
        ids = [v.token(t, "task_ids") for t in request.task_ids]
        limit = self._limit(request.limit, MAX_LIST, MAX_RETRY_DEAD)
        return pb.RetryDeadResponse(retried=await self._queues.retry_dead(queue, ids, limit))

    @rpc
    async def SearchTasks(self, request: pb.SearchTasksRequest, context) -> pb.SearchTasksResponse:
        queue = v.name(request.queue, "queue")
        page_size = v.count(request.page_size or DEFAULT_PAGE, "page_size", minimum=1, maximum=MAX_PAGE)
        cursor = Cursor.parse(request.page_token)
        page = await self._queues.search(queue, search_query(request), page_size, cursor)
        return pb.SearchTasksResponse(tasks=[task_message(t) for t in page.tasks],
                                      next_page_token=page.next.token() if page.next else "", examined=page.examined)

    @rpc
    async def Consume(self, request_iterator, context) -> AsyncIterator[pb.ConsumeResponse]:
        start = await next_request(request_iterator)
        if start is None or start.WhichOneof("kind") != "start":
            raise InvalidArgument("the first Consume request must be `start`", field="start")
        queues = self._queues_field(start.start.queues)
        lease = self._lease_ms(start.start)
        stream = ConsumeStream(self._queues, queues, lease, start.start.credits, batched=start.start.batched,
                               max_batch=self._max_batch, read_settle=self._settling, encode=task_message,
                               when_done=lambda then: context.add_done_callback(lambda c: then(c.cancelled())))
        async for response in stream.run(request_iterator):
            yield response
