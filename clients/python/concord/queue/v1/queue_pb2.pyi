import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TaskState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TASK_STATE_UNSPECIFIED: _ClassVar[TaskState]
    TASK_STATE_READY: _ClassVar[TaskState]
    TASK_STATE_DELAYED: _ClassVar[TaskState]
    TASK_STATE_LEASED: _ClassVar[TaskState]
    TASK_STATE_DEAD: _ClassVar[TaskState]
    TASK_STATE_WAITING: _ClassVar[TaskState]
    TASK_STATE_SUCCEEDED: _ClassVar[TaskState]
    TASK_STATE_CANCELLED: _ClassVar[TaskState]

class WaitReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WAIT_REASON_UNSPECIFIED: _ClassVar[WaitReason]
    WAIT_REASON_QUEUE_PAUSED: _ClassVar[WaitReason]
    WAIT_REASON_QUEUE_AT_CAP: _ClassVar[WaitReason]
    WAIT_REASON_QUEUE_RATE_LIMITED: _ClassVar[WaitReason]
    WAIT_REASON_GROUP_PAUSED: _ClassVar[WaitReason]
    WAIT_REASON_GROUP_AT_CAP: _ClassVar[WaitReason]
    WAIT_REASON_GROUP_RATE_LIMITED: _ClassVar[WaitReason]

class Backoff(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BACKOFF_UNSPECIFIED: _ClassVar[Backoff]
    BACKOFF_FIXED: _ClassVar[Backoff]
    BACKOFF_EXPONENTIAL: _ClassVar[Backoff]

class MissedTicks(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MISSED_TICKS_UNSPECIFIED: _ClassVar[MissedTicks]
    MISSED_TICKS_RUN_ONCE: _ClassVar[MissedTicks]
    MISSED_TICKS_SKIP: _ClassVar[MissedTicks]

class QueueEventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    QUEUE_EVENT_KIND_UNSPECIFIED: _ClassVar[QueueEventKind]
    QUEUE_EVENT_KIND_ENQUEUED: _ClassVar[QueueEventKind]
    QUEUE_EVENT_KIND_LEASED: _ClassVar[QueueEventKind]
    QUEUE_EVENT_KIND_PROGRESS: _ClassVar[QueueEventKind]
    QUEUE_EVENT_KIND_SUCCEEDED: _ClassVar[QueueEventKind]
    QUEUE_EVENT_KIND_FAILED: _ClassVar[QueueEventKind]
    QUEUE_EVENT_KIND_DEAD: _ClassVar[QueueEventKind]
    QUEUE_EVENT_KIND_CANCELLED: _ClassVar[QueueEventKind]
    QUEUE_EVENT_KIND_RELEASED: _ClassVar[QueueEventKind]
    QUEUE_EVENT_KIND_RETRIED: _ClassVar[QueueEventKind]
    QUEUE_EVENT_KIND_GAP: _ClassVar[QueueEventKind]
    QUEUE_EVENT_KIND_CAUGHT_UP: _ClassVar[QueueEventKind]
    QUEUE_EVENT_KIND_HELD: _ClassVar[QueueEventKind]
TASK_STATE_UNSPECIFIED: TaskState
TASK_STATE_READY: TaskState
TASK_STATE_DELAYED: TaskState
TASK_STATE_LEASED: TaskState
TASK_STATE_DEAD: TaskState
TASK_STATE_WAITING: TaskState
TASK_STATE_SUCCEEDED: TaskState
TASK_STATE_CANCELLED: TaskState
WAIT_REASON_UNSPECIFIED: WaitReason
WAIT_REASON_QUEUE_PAUSED: WaitReason
WAIT_REASON_QUEUE_AT_CAP: WaitReason
WAIT_REASON_QUEUE_RATE_LIMITED: WaitReason
WAIT_REASON_GROUP_PAUSED: WaitReason
WAIT_REASON_GROUP_AT_CAP: WaitReason
WAIT_REASON_GROUP_RATE_LIMITED: WaitReason
BACKOFF_UNSPECIFIED: Backoff
BACKOFF_FIXED: Backoff
BACKOFF_EXPONENTIAL: Backoff
MISSED_TICKS_UNSPECIFIED: MissedTicks
MISSED_TICKS_RUN_ONCE: MissedTicks
MISSED_TICKS_SKIP: MissedTicks
QUEUE_EVENT_KIND_UNSPECIFIED: QueueEventKind
QUEUE_EVENT_KIND_ENQUEUED: QueueEventKind
QUEUE_EVENT_KIND_LEASED: QueueEventKind
QUEUE_EVENT_KIND_PROGRESS: QueueEventKind
QUEUE_EVENT_KIND_SUCCEEDED: QueueEventKind
QUEUE_EVENT_KIND_FAILED: QueueEventKind
QUEUE_EVENT_KIND_DEAD: QueueEventKind
QUEUE_EVENT_KIND_CANCELLED: QueueEventKind
QUEUE_EVENT_KIND_RELEASED: QueueEventKind
QUEUE_EVENT_KIND_RETRIED: QueueEventKind
QUEUE_EVENT_KIND_GAP: QueueEventKind
QUEUE_EVENT_KIND_CAUGHT_UP: QueueEventKind
QUEUE_EVENT_KIND_HELD: QueueEventKind

class NewTask(_message.Message):
    __slots__ = ("type", "payload", "priority", "delay", "run_at", "dedupe_key", "dedupe_window", "max_attempts", "retry", "throttle_key", "throttle_period", "debounce_key", "group")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    DELAY_FIELD_NUMBER: _ClassVar[int]
    RUN_AT_FIELD_NUMBER: _ClassVar[int]
    DEDUPE_KEY_FIELD_NUMBER: _ClassVar[int]
    DEDUPE_WINDOW_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    RETRY_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_KEY_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_PERIOD_FIELD_NUMBER: _ClassVar[int]
    DEBOUNCE_KEY_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    type: str
    payload: bytes
    priority: int
    delay: _duration_pb2.Duration
    run_at: _timestamp_pb2.Timestamp
    dedupe_key: str
    dedupe_window: _duration_pb2.Duration
    max_attempts: int
    retry: RetryPolicy
    throttle_key: str
    throttle_period: _duration_pb2.Duration
    debounce_key: str
    group: str
    def __init__(self, type: _Optional[str] = ..., payload: _Optional[bytes] = ..., priority: _Optional[int] = ..., delay: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., run_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., dedupe_key: _Optional[str] = ..., dedupe_window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_attempts: _Optional[int] = ..., retry: _Optional[_Union[RetryPolicy, _Mapping]] = ..., throttle_key: _Optional[str] = ..., throttle_period: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., debounce_key: _Optional[str] = ..., group: _Optional[str] = ...) -> None: ...

class LeaseRate(_message.Message):
    __slots__ = ("limit", "period", "burst")
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PERIOD_FIELD_NUMBER: _ClassVar[int]
    BURST_FIELD_NUMBER: _ClassVar[int]
    limit: int
    period: _duration_pb2.Duration
    burst: int
    def __init__(self, limit: _Optional[int] = ..., period: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., burst: _Optional[int] = ...) -> None: ...

class RetryPolicy(_message.Message):
    __slots__ = ("max_attempts", "backoff", "initial_delay", "max_delay", "jitter")
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_FIELD_NUMBER: _ClassVar[int]
    INITIAL_DELAY_FIELD_NUMBER: _ClassVar[int]
    MAX_DELAY_FIELD_NUMBER: _ClassVar[int]
    JITTER_FIELD_NUMBER: _ClassVar[int]
    max_attempts: int
    backoff: Backoff
    initial_delay: _duration_pb2.Duration
    max_delay: _duration_pb2.Duration
    jitter: bool
    def __init__(self, max_attempts: _Optional[int] = ..., backoff: _Optional[_Union[Backoff, str]] = ..., initial_delay: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_delay: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., jitter: _Optional[bool] = ...) -> None: ...

class EnqueueRequest(_message.Message):
    __slots__ = ("queue", "tasks")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    queue: str
    tasks: _containers.RepeatedCompositeFieldContainer[NewTask]
    def __init__(self, queue: _Optional[str] = ..., tasks: _Optional[_Iterable[_Union[NewTask, _Mapping]]] = ...) -> None: ...

class EnqueueResult(_message.Message):
    __slots__ = ("task_id", "duplicate", "debounced")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    DEBOUNCED_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    duplicate: bool
    debounced: bool
    def __init__(self, task_id: _Optional[str] = ..., duplicate: _Optional[bool] = ..., debounced: _Optional[bool] = ...) -> None: ...

class EnqueueResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[EnqueueResult]
    def __init__(self, results: _Optional[_Iterable[_Union[EnqueueResult, _Mapping]]] = ...) -> None: ...

class Task(_message.Message):
    __slots__ = ("queue", "task_id", "type", "payload", "priority", "state", "attempt", "max_attempts", "lease", "lease_expires_at", "enqueued_at", "ready_at", "last_error", "progress", "result", "result_type", "leased_at", "finished_at", "dead_reason", "retry", "schedule", "scheduled_at", "group", "wait_reason")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    ENQUEUED_AT_FIELD_NUMBER: _ClassVar[int]
    READY_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    RESULT_TYPE_FIELD_NUMBER: _ClassVar[int]
    LEASED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    DEAD_REASON_FIELD_NUMBER: _ClassVar[int]
    RETRY_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_AT_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    WAIT_REASON_FIELD_NUMBER: _ClassVar[int]
    queue: str
    task_id: str
    type: str
    payload: bytes
    priority: int
    state: TaskState
    attempt: int
    max_attempts: int
    lease: str
    lease_expires_at: _timestamp_pb2.Timestamp
    enqueued_at: _timestamp_pb2.Timestamp
    ready_at: _timestamp_pb2.Timestamp
    last_error: str
    progress: Progress
    result: bytes
    result_type: str
    leased_at: _timestamp_pb2.Timestamp
    finished_at: _timestamp_pb2.Timestamp
    dead_reason: str
    retry: RetryPolicy
    schedule: str
    scheduled_at: _timestamp_pb2.Timestamp
    group: str
    wait_reason: WaitReason
    def __init__(self, queue: _Optional[str] = ..., task_id: _Optional[str] = ..., type: _Optional[str] = ..., payload: _Optional[bytes] = ..., priority: _Optional[int] = ..., state: _Optional[_Union[TaskState, str]] = ..., attempt: _Optional[int] = ..., max_attempts: _Optional[int] = ..., lease: _Optional[str] = ..., lease_expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., enqueued_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., ready_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_error: _Optional[str] = ..., progress: _Optional[_Union[Progress, _Mapping]] = ..., result: _Optional[bytes] = ..., result_type: _Optional[str] = ..., leased_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., dead_reason: _Optional[str] = ..., retry: _Optional[_Union[RetryPolicy, _Mapping]] = ..., schedule: _Optional[str] = ..., scheduled_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., group: _Optional[str] = ..., wait_reason: _Optional[_Union[WaitReason, str]] = ...) -> None: ...

class Progress(_message.Message):
    __slots__ = ("value", "json", "reported_at")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    REPORTED_AT_FIELD_NUMBER: _ClassVar[int]
    value: float
    json: str
    reported_at: _timestamp_pb2.Timestamp
    def __init__(self, value: _Optional[float] = ..., json: _Optional[str] = ..., reported_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class DequeueRequest(_message.Message):
    __slots__ = ("queues", "max_tasks", "lease_ttl", "wait_timeout")
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    MAX_TASKS_FIELD_NUMBER: _ClassVar[int]
    LEASE_TTL_FIELD_NUMBER: _ClassVar[int]
    WAIT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    queues: _containers.RepeatedScalarFieldContainer[str]
    max_tasks: int
    lease_ttl: _duration_pb2.Duration
    wait_timeout: _duration_pb2.Duration
    def __init__(self, queues: _Optional[_Iterable[str]] = ..., max_tasks: _Optional[int] = ..., lease_ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., wait_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class DequeueResponse(_message.Message):
    __slots__ = ("tasks",)
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[Task]
    def __init__(self, tasks: _Optional[_Iterable[_Union[Task, _Mapping]]] = ...) -> None: ...

class AckRequest(_message.Message):
    __slots__ = ("queue", "task_id", "lease", "result", "result_type")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    RESULT_TYPE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    task_id: str
    lease: str
    result: bytes
    result_type: str
    def __init__(self, queue: _Optional[str] = ..., task_id: _Optional[str] = ..., lease: _Optional[str] = ..., result: _Optional[bytes] = ..., result_type: _Optional[str] = ...) -> None: ...

class AckResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class NackRequest(_message.Message):
    __slots__ = ("queue", "task_id", "lease", "retry_delay", "error", "retryable")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    RETRY_DELAY_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    task_id: str
    lease: str
    retry_delay: _duration_pb2.Duration
    error: str
    retryable: bool
    def __init__(self, queue: _Optional[str] = ..., task_id: _Optional[str] = ..., lease: _Optional[str] = ..., retry_delay: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., error: _Optional[str] = ..., retryable: _Optional[bool] = ...) -> None: ...

class NackResponse(_message.Message):
    __slots__ = ("state", "retry_at")
    STATE_FIELD_NUMBER: _ClassVar[int]
    RETRY_AT_FIELD_NUMBER: _ClassVar[int]
    state: TaskState
    retry_at: _timestamp_pb2.Timestamp
    def __init__(self, state: _Optional[_Union[TaskState, str]] = ..., retry_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ExtendLeaseRequest(_message.Message):
    __slots__ = ("queue", "task_id", "lease", "lease_ttl")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    LEASE_TTL_FIELD_NUMBER: _ClassVar[int]
    queue: str
    task_id: str
    lease: str
    lease_ttl: _duration_pb2.Duration
    def __init__(self, queue: _Optional[str] = ..., task_id: _Optional[str] = ..., lease: _Optional[str] = ..., lease_ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ExtendLeaseResponse(_message.Message):
    __slots__ = ("lease_expires_at",)
    LEASE_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    lease_expires_at: _timestamp_pb2.Timestamp
    def __init__(self, lease_expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ReleaseRequest(_message.Message):
    __slots__ = ("queue", "task_id", "lease")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    task_id: str
    lease: str
    def __init__(self, queue: _Optional[str] = ..., task_id: _Optional[str] = ..., lease: _Optional[str] = ...) -> None: ...

class ReleaseResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ConsumeStart(_message.Message):
    __slots__ = ("queues", "lease_ttl", "credits", "batched")
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    LEASE_TTL_FIELD_NUMBER: _ClassVar[int]
    CREDITS_FIELD_NUMBER: _ClassVar[int]
    BATCHED_FIELD_NUMBER: _ClassVar[int]
    queues: _containers.RepeatedScalarFieldContainer[str]
    lease_ttl: _duration_pb2.Duration
    credits: int
    batched: bool
    def __init__(self, queues: _Optional[_Iterable[str]] = ..., lease_ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., credits: _Optional[int] = ..., batched: _Optional[bool] = ...) -> None: ...

class Settle(_message.Message):
    __slots__ = ("queue", "task_id", "lease", "failed", "error", "retry_delay", "result", "result_type", "retryable", "release")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RETRY_DELAY_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    RESULT_TYPE_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    task_id: str
    lease: str
    failed: bool
    error: str
    retry_delay: _duration_pb2.Duration
    result: bytes
    result_type: str
    retryable: bool
    release: bool
    def __init__(self, queue: _Optional[str] = ..., task_id: _Optional[str] = ..., lease: _Optional[str] = ..., failed: _Optional[bool] = ..., error: _Optional[str] = ..., retry_delay: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., result: _Optional[bytes] = ..., result_type: _Optional[str] = ..., retryable: _Optional[bool] = ..., release: _Optional[bool] = ...) -> None: ...

class ConsumeRequest(_message.Message):
    __slots__ = ("start", "credit", "settle", "settles")
    START_FIELD_NUMBER: _ClassVar[int]
    CREDIT_FIELD_NUMBER: _ClassVar[int]
    SETTLE_FIELD_NUMBER: _ClassVar[int]
    SETTLES_FIELD_NUMBER: _ClassVar[int]
    start: ConsumeStart
    credit: int
    settle: Settle
    settles: SettleBatch
    def __init__(self, start: _Optional[_Union[ConsumeStart, _Mapping]] = ..., credit: _Optional[int] = ..., settle: _Optional[_Union[Settle, _Mapping]] = ..., settles: _Optional[_Union[SettleBatch, _Mapping]] = ...) -> None: ...

class SettleBatch(_message.Message):
    __slots__ = ("settles", "credit")
    SETTLES_FIELD_NUMBER: _ClassVar[int]
    CREDIT_FIELD_NUMBER: _ClassVar[int]
    settles: _containers.RepeatedCompositeFieldContainer[Settle]
    credit: int
    def __init__(self, settles: _Optional[_Iterable[_Union[Settle, _Mapping]]] = ..., credit: _Optional[int] = ...) -> None: ...

class TaskBatch(_message.Message):
    __slots__ = ("tasks",)
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[Task]
    def __init__(self, tasks: _Optional[_Iterable[_Union[Task, _Mapping]]] = ...) -> None: ...

class SettledBatch(_message.Message):
    __slots__ = ("settled",)
    SETTLED_FIELD_NUMBER: _ClassVar[int]
    settled: _containers.RepeatedCompositeFieldContainer[Settled]
    def __init__(self, settled: _Optional[_Iterable[_Union[Settled, _Mapping]]] = ...) -> None: ...

class Settled(_message.Message):
    __slots__ = ("task_id", "error_reason", "error_message")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_REASON_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    error_reason: str
    error_message: str
    def __init__(self, task_id: _Optional[str] = ..., error_reason: _Optional[str] = ..., error_message: _Optional[str] = ...) -> None: ...

class ConsumeResponse(_message.Message):
    __slots__ = ("task", "settled", "tasks", "settled_batch")
    TASK_FIELD_NUMBER: _ClassVar[int]
    SETTLED_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    SETTLED_BATCH_FIELD_NUMBER: _ClassVar[int]
    task: Task
    settled: Settled
    tasks: TaskBatch
    settled_batch: SettledBatch
    def __init__(self, task: _Optional[_Union[Task, _Mapping]] = ..., settled: _Optional[_Union[Settled, _Mapping]] = ..., tasks: _Optional[_Union[TaskBatch, _Mapping]] = ..., settled_batch: _Optional[_Union[SettledBatch, _Mapping]] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ("queue",)
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    def __init__(self, queue: _Optional[str] = ...) -> None: ...

class StatsResponse(_message.Message):
    __slots__ = ("ready", "delayed", "leased", "dead", "oldest_ready_age", "paused", "finished")
    READY_FIELD_NUMBER: _ClassVar[int]
    DELAYED_FIELD_NUMBER: _ClassVar[int]
    LEASED_FIELD_NUMBER: _ClassVar[int]
    DEAD_FIELD_NUMBER: _ClassVar[int]
    OLDEST_READY_AGE_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    ready: int
    delayed: int
    leased: int
    dead: int
    oldest_ready_age: _duration_pb2.Duration
    paused: bool
    finished: int
    def __init__(self, ready: _Optional[int] = ..., delayed: _Optional[int] = ..., leased: _Optional[int] = ..., dead: _Optional[int] = ..., oldest_ready_age: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., paused: _Optional[bool] = ..., finished: _Optional[int] = ...) -> None: ...

class PeekRequest(_message.Message):
    __slots__ = ("queue", "state", "limit")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    queue: str
    state: TaskState
    limit: int
    def __init__(self, queue: _Optional[str] = ..., state: _Optional[_Union[TaskState, str]] = ..., limit: _Optional[int] = ...) -> None: ...

class PeekResponse(_message.Message):
    __slots__ = ("tasks",)
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[Task]
    def __init__(self, tasks: _Optional[_Iterable[_Union[Task, _Mapping]]] = ...) -> None: ...

class CancelRequest(_message.Message):
    __slots__ = ("queue", "task_id")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    queue: str
    task_id: str
    def __init__(self, queue: _Optional[str] = ..., task_id: _Optional[str] = ...) -> None: ...

class CancelResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PurgeRequest(_message.Message):
    __slots__ = ("queue", "include_dead")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_DEAD_FIELD_NUMBER: _ClassVar[int]
    queue: str
    include_dead: bool
    def __init__(self, queue: _Optional[str] = ..., include_dead: _Optional[bool] = ...) -> None: ...

class PurgeResponse(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: int
    def __init__(self, deleted: _Optional[int] = ...) -> None: ...

class ListDeadRequest(_message.Message):
    __slots__ = ("queue", "limit", "offset")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    queue: str
    limit: int
    offset: int
    def __init__(self, queue: _Optional[str] = ..., limit: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class ListDeadResponse(_message.Message):
    __slots__ = ("tasks",)
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[Task]
    def __init__(self, tasks: _Optional[_Iterable[_Union[Task, _Mapping]]] = ...) -> None: ...

class RetryDeadRequest(_message.Message):
    __slots__ = ("queue", "task_ids", "limit")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    TASK_IDS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    queue: str
    task_ids: _containers.RepeatedScalarFieldContainer[str]
    limit: int
    def __init__(self, queue: _Optional[str] = ..., task_ids: _Optional[_Iterable[str]] = ..., limit: _Optional[int] = ...) -> None: ...

class RetryDeadResponse(_message.Message):
    __slots__ = ("retried",)
    RETRIED_FIELD_NUMBER: _ClassVar[int]
    retried: int
    def __init__(self, retried: _Optional[int] = ...) -> None: ...

class SearchTasksRequest(_message.Message):
    __slots__ = ("queue", "task_id", "type", "type_prefix", "states", "error_contains", "payload_contains", "page_size", "page_token")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TYPE_PREFIX_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    ERROR_CONTAINS_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_CONTAINS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    queue: str
    task_id: str
    type: str
    type_prefix: str
    states: _containers.RepeatedScalarFieldContainer[TaskState]
    error_contains: str
    payload_contains: bytes
    page_size: int
    page_token: str
    def __init__(self, queue: _Optional[str] = ..., task_id: _Optional[str] = ..., type: _Optional[str] = ..., type_prefix: _Optional[str] = ..., states: _Optional[_Iterable[_Union[TaskState, str]]] = ..., error_contains: _Optional[str] = ..., payload_contains: _Optional[bytes] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class SearchTasksResponse(_message.Message):
    __slots__ = ("tasks", "next_page_token", "examined")
    TASKS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    EXAMINED_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[Task]
    next_page_token: str
    examined: int
    def __init__(self, tasks: _Optional[_Iterable[_Union[Task, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., examined: _Optional[int] = ...) -> None: ...

class ListQueuesRequest(_message.Message):
    __slots__ = ("page_token", "page_size")
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    page_token: str
    page_size: int
    def __init__(self, page_token: _Optional[str] = ..., page_size: _Optional[int] = ...) -> None: ...

class ListQueuesResponse(_message.Message):
    __slots__ = ("names", "next_page_token")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    next_page_token: str
    def __init__(self, names: _Optional[_Iterable[str]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class PauseQueueRequest(_message.Message):
    __slots__ = ("queue", "group")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    queue: str
    group: str
    def __init__(self, queue: _Optional[str] = ..., group: _Optional[str] = ...) -> None: ...

class PauseQueueResponse(_message.Message):
    __slots__ = ("was_paused",)
    WAS_PAUSED_FIELD_NUMBER: _ClassVar[int]
    was_paused: bool
    def __init__(self, was_paused: _Optional[bool] = ...) -> None: ...

class ResumeQueueRequest(_message.Message):
    __slots__ = ("queue", "group")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    queue: str
    group: str
    def __init__(self, queue: _Optional[str] = ..., group: _Optional[str] = ...) -> None: ...

class ResumeQueueResponse(_message.Message):
    __slots__ = ("was_paused",)
    WAS_PAUSED_FIELD_NUMBER: _ClassVar[int]
    was_paused: bool
    def __init__(self, was_paused: _Optional[bool] = ...) -> None: ...

class GetTaskRequest(_message.Message):
    __slots__ = ("queue", "task_id")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    queue: str
    task_id: str
    def __init__(self, queue: _Optional[str] = ..., task_id: _Optional[str] = ...) -> None: ...

class GetTaskResponse(_message.Message):
    __slots__ = ("task",)
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: Task
    def __init__(self, task: _Optional[_Union[Task, _Mapping]] = ...) -> None: ...

class WaitTaskRequest(_message.Message):
    __slots__ = ("queue", "task_id", "wait_timeout")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    queue: str
    task_id: str
    wait_timeout: _duration_pb2.Duration
    def __init__(self, queue: _Optional[str] = ..., task_id: _Optional[str] = ..., wait_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class WaitTaskResponse(_message.Message):
    __slots__ = ("finished", "task")
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    finished: bool
    task: Task
    def __init__(self, finished: _Optional[bool] = ..., task: _Optional[_Union[Task, _Mapping]] = ...) -> None: ...

class ReportProgressRequest(_message.Message):
    __slots__ = ("queue", "task_id", "lease", "value", "json", "lease_ttl")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    LEASE_TTL_FIELD_NUMBER: _ClassVar[int]
    queue: str
    task_id: str
    lease: str
    value: float
    json: str
    lease_ttl: _duration_pb2.Duration
    def __init__(self, queue: _Optional[str] = ..., task_id: _Optional[str] = ..., lease: _Optional[str] = ..., value: _Optional[float] = ..., json: _Optional[str] = ..., lease_ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ReportProgressResponse(_message.Message):
    __slots__ = ("lease_expires_at",)
    LEASE_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    lease_expires_at: _timestamp_pb2.Timestamp
    def __init__(self, lease_expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Retention(_message.Message):
    __slots__ = ("max_count", "max_age")
    MAX_COUNT_FIELD_NUMBER: _ClassVar[int]
    MAX_AGE_FIELD_NUMBER: _ClassVar[int]
    max_count: int
    max_age: _duration_pb2.Duration
    def __init__(self, max_count: _Optional[int] = ..., max_age: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class QueuePolicy(_message.Message):
    __slots__ = ("succeeded", "dead", "retry", "keep_events", "max_leased", "rate", "group_max_leased", "group_rate")
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    DEAD_FIELD_NUMBER: _ClassVar[int]
    RETRY_FIELD_NUMBER: _ClassVar[int]
    KEEP_EVENTS_FIELD_NUMBER: _ClassVar[int]
    MAX_LEASED_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    GROUP_MAX_LEASED_FIELD_NUMBER: _ClassVar[int]
    GROUP_RATE_FIELD_NUMBER: _ClassVar[int]
    succeeded: Retention
    dead: Retention
    retry: RetryPolicy
    keep_events: int
    max_leased: int
    rate: LeaseRate
    group_max_leased: int
    group_rate: LeaseRate
    def __init__(self, succeeded: _Optional[_Union[Retention, _Mapping]] = ..., dead: _Optional[_Union[Retention, _Mapping]] = ..., retry: _Optional[_Union[RetryPolicy, _Mapping]] = ..., keep_events: _Optional[int] = ..., max_leased: _Optional[int] = ..., rate: _Optional[_Union[LeaseRate, _Mapping]] = ..., group_max_leased: _Optional[int] = ..., group_rate: _Optional[_Union[LeaseRate, _Mapping]] = ...) -> None: ...

class GroupRules(_message.Message):
    __slots__ = ("max_leased", "weight", "rate")
    MAX_LEASED_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    max_leased: int
    weight: int
    rate: LeaseRate
    def __init__(self, max_leased: _Optional[int] = ..., weight: _Optional[int] = ..., rate: _Optional[_Union[LeaseRate, _Mapping]] = ...) -> None: ...

class Group(_message.Message):
    __slots__ = ("queue", "name", "ready", "leased", "paused", "own", "effective", "wait_reason")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    LEASED_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    OWN_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_FIELD_NUMBER: _ClassVar[int]
    WAIT_REASON_FIELD_NUMBER: _ClassVar[int]
    queue: str
    name: str
    ready: int
    leased: int
    paused: bool
    own: GroupRules
    effective: GroupRules
    wait_reason: WaitReason
    def __init__(self, queue: _Optional[str] = ..., name: _Optional[str] = ..., ready: _Optional[int] = ..., leased: _Optional[int] = ..., paused: _Optional[bool] = ..., own: _Optional[_Union[GroupRules, _Mapping]] = ..., effective: _Optional[_Union[GroupRules, _Mapping]] = ..., wait_reason: _Optional[_Union[WaitReason, str]] = ...) -> None: ...

class SetGroupRulesRequest(_message.Message):
    __slots__ = ("queue", "group", "rules")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    RULES_FIELD_NUMBER: _ClassVar[int]
    queue: str
    group: str
    rules: GroupRules
    def __init__(self, queue: _Optional[str] = ..., group: _Optional[str] = ..., rules: _Optional[_Union[GroupRules, _Mapping]] = ...) -> None: ...

class SetGroupRulesResponse(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: Group
    def __init__(self, group: _Optional[_Union[Group, _Mapping]] = ...) -> None: ...

class GetGroupRequest(_message.Message):
    __slots__ = ("queue", "group")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    queue: str
    group: str
    def __init__(self, queue: _Optional[str] = ..., group: _Optional[str] = ...) -> None: ...

class GetGroupResponse(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: Group
    def __init__(self, group: _Optional[_Union[Group, _Mapping]] = ...) -> None: ...

class ListGroupsRequest(_message.Message):
    __slots__ = ("queue", "page_size", "page_token")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    queue: str
    page_size: int
    page_token: str
    def __init__(self, queue: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListGroupsResponse(_message.Message):
    __slots__ = ("groups", "next_page_token")
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[Group]
    next_page_token: str
    def __init__(self, groups: _Optional[_Iterable[_Union[Group, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class SetQueuePolicyRequest(_message.Message):
    __slots__ = ("queue", "policy")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    queue: str
    policy: QueuePolicy
    def __init__(self, queue: _Optional[str] = ..., policy: _Optional[_Union[QueuePolicy, _Mapping]] = ...) -> None: ...

class SetQueuePolicyResponse(_message.Message):
    __slots__ = ("policy",)
    POLICY_FIELD_NUMBER: _ClassVar[int]
    policy: QueuePolicy
    def __init__(self, policy: _Optional[_Union[QueuePolicy, _Mapping]] = ...) -> None: ...

class GetQueuePolicyRequest(_message.Message):
    __slots__ = ("queue",)
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    def __init__(self, queue: _Optional[str] = ...) -> None: ...

class GetQueuePolicyResponse(_message.Message):
    __slots__ = ("policy",)
    POLICY_FIELD_NUMBER: _ClassVar[int]
    policy: QueuePolicy
    def __init__(self, policy: _Optional[_Union[QueuePolicy, _Mapping]] = ...) -> None: ...

class ScheduleSpec(_message.Message):
    __slots__ = ("cron", "every", "time_zone", "start_at", "type", "payload", "priority", "max_attempts", "missed", "grace")
    CRON_FIELD_NUMBER: _ClassVar[int]
    EVERY_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    START_AT_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    MISSED_FIELD_NUMBER: _ClassVar[int]
    GRACE_FIELD_NUMBER: _ClassVar[int]
    cron: str
    every: _duration_pb2.Duration
    time_zone: str
    start_at: _timestamp_pb2.Timestamp
    type: str
    payload: bytes
    priority: int
    max_attempts: int
    missed: MissedTicks
    grace: _duration_pb2.Duration
    def __init__(self, cron: _Optional[str] = ..., every: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., time_zone: _Optional[str] = ..., start_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., type: _Optional[str] = ..., payload: _Optional[bytes] = ..., priority: _Optional[int] = ..., max_attempts: _Optional[int] = ..., missed: _Optional[_Union[MissedTicks, str]] = ..., grace: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class Schedule(_message.Message):
    __slots__ = ("queue", "name", "spec", "paused", "next_run_at", "last_run_at", "last_task_id", "runs", "last_missed_at", "created_at", "updated_at", "version")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    NEXT_RUN_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_RUN_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_TASK_ID_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    LAST_MISSED_AT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    queue: str
    name: str
    spec: ScheduleSpec
    paused: bool
    next_run_at: _timestamp_pb2.Timestamp
    last_run_at: _timestamp_pb2.Timestamp
    last_task_id: str
    runs: int
    last_missed_at: _timestamp_pb2.Timestamp
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    version: int
    def __init__(self, queue: _Optional[str] = ..., name: _Optional[str] = ..., spec: _Optional[_Union[ScheduleSpec, _Mapping]] = ..., paused: _Optional[bool] = ..., next_run_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_run_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_task_id: _Optional[str] = ..., runs: _Optional[int] = ..., last_missed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., version: _Optional[int] = ...) -> None: ...

class CreateScheduleRequest(_message.Message):
    __slots__ = ("queue", "name", "spec", "paused")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    queue: str
    name: str
    spec: ScheduleSpec
    paused: bool
    def __init__(self, queue: _Optional[str] = ..., name: _Optional[str] = ..., spec: _Optional[_Union[ScheduleSpec, _Mapping]] = ..., paused: _Optional[bool] = ...) -> None: ...

class CreateScheduleResponse(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class UpdateScheduleRequest(_message.Message):
    __slots__ = ("queue", "name", "spec", "paused")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    queue: str
    name: str
    spec: ScheduleSpec
    paused: bool
    def __init__(self, queue: _Optional[str] = ..., name: _Optional[str] = ..., spec: _Optional[_Union[ScheduleSpec, _Mapping]] = ..., paused: _Optional[bool] = ...) -> None: ...

class UpdateScheduleResponse(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class PauseScheduleRequest(_message.Message):
    __slots__ = ("queue", "name")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    queue: str
    name: str
    def __init__(self, queue: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class PauseScheduleResponse(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class ResumeScheduleRequest(_message.Message):
    __slots__ = ("queue", "name")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    queue: str
    name: str
    def __init__(self, queue: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class ResumeScheduleResponse(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class DeleteScheduleRequest(_message.Message):
    __slots__ = ("queue", "name")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    queue: str
    name: str
    def __init__(self, queue: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class DeleteScheduleResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetScheduleRequest(_message.Message):
    __slots__ = ("queue", "name")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    queue: str
    name: str
    def __init__(self, queue: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class GetScheduleResponse(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class ListSchedulesRequest(_message.Message):
    __slots__ = ("queue", "page_size", "page_token")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    queue: str
    page_size: int
    page_token: str
    def __init__(self, queue: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListSchedulesResponse(_message.Message):
    __slots__ = ("schedules", "next_page_token")
    SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    schedules: _containers.RepeatedCompositeFieldContainer[Schedule]
    next_page_token: str
    def __init__(self, schedules: _Optional[_Iterable[_Union[Schedule, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class WatchQueueRequest(_message.Message):
    __slots__ = ("queue", "after", "from_oldest")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    FROM_OLDEST_FIELD_NUMBER: _ClassVar[int]
    queue: str
    after: str
    from_oldest: bool
    def __init__(self, queue: _Optional[str] = ..., after: _Optional[str] = ..., from_oldest: _Optional[bool] = ...) -> None: ...

class WatchQueueResponse(_message.Message):
    __slots__ = ("event",)
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: QueueEvent
    def __init__(self, event: _Optional[_Union[QueueEvent, _Mapping]] = ...) -> None: ...

class QueueEvent(_message.Message):
    __slots__ = ("position", "kind", "task_id", "at", "attempt", "type", "ready_at", "error", "dead_reason", "progress", "schedule", "group", "wait_reason")
    POSITION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    READY_AT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    DEAD_REASON_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    WAIT_REASON_FIELD_NUMBER: _ClassVar[int]
    position: str
    kind: QueueEventKind
    task_id: str
    at: _timestamp_pb2.Timestamp
    attempt: int
    type: str
    ready_at: _timestamp_pb2.Timestamp
    error: str
    dead_reason: str
    progress: Progress
    schedule: str
    group: str
    wait_reason: WaitReason
    def __init__(self, position: _Optional[str] = ..., kind: _Optional[_Union[QueueEventKind, str]] = ..., task_id: _Optional[str] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., attempt: _Optional[int] = ..., type: _Optional[str] = ..., ready_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., error: _Optional[str] = ..., dead_reason: _Optional[str] = ..., progress: _Optional[_Union[Progress, _Mapping]] = ..., schedule: _Optional[str] = ..., group: _Optional[str] = ..., wait_reason: _Optional[_Union[WaitReason, str]] = ...) -> None: ...
