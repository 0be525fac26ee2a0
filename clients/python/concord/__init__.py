"""Concord: locks, semaphores, task queues, group chat, autocomplete and file distribution over gRPC.

    import concord

    client = concord.Client("127.0.0.1:50051")
    with client.lock("orders:42", ttl=10) as lease:
        ...  # protected work; pass lease.fencing_token to the resource
    with client.semaphore("api:tenant-7", limit=5) as permit:
        ...  # at most 5 of these run at once, across every client
    client.queue("email").put("send_welcome", {"to": "ada@example.com"})
    client.queue("reports").schedule("nightly", cron="30 2 * * *", tz="Europe/Berlin")  # a task per tick
    client.chat.send(chat_id, "jeff", "Hey Joe")  # for msg in client.chat.subscribe("joe"): ...
    client.autocomplete.suggest("guild:7", "as")  # names by prefix, any case or script
    worker = concord.Worker(client, ["email"])  # @worker.task("send_welcome"), worker.run()

See concord.Client, concord.AsyncClient and concord.errors.
"""

from ._version import __version__ as __version__
from .autocomplete import AsyncAutocomplete, Autocomplete, Suggestion, Suggestions
from .chats import AsyncChat, AsyncSubscription, Chat, ChatMessage, ChatSummary, Gap, Subscription
from .client import AsyncClient, Client
from .errors import (
    AlreadyExists,
    ChatExists,
    ChatFull,
    ChatNotFound,
    ConcordError,
    CorruptFile,
    DeadlineExceeded,
    FailedPrecondition,
    FileNotComplete,
    FileNotFound,
    Internal,
    InvalidArgument,
    LineTooLong,
    LockLost,
    LockNotHeld,
    LockTimeout,
    NameNotFound,
    NotAMember,
    NotAWorker,
    NotFound,
    OffsetOutOfRange,
    PermissionDenied,
    PermitLost,
    PermitNotHeld,
    PermitsExceedLimit,
    ResourceExhausted,
    ScheduleExists,
    ScheduleNotFound,
    SemaphoreTimeout,
    TaskFinished,
    TaskLeased,
    TaskLeaseNotHeld,
    TaskNotFound,
    Unavailable,
)
from .files import Announced, FileInfo, Files, Line, Uploaded
from .locks import AsyncLock, Lease, Lock, LockInfo
from .queues import (AsyncQueue, AsyncTaskHandle, AsyncWatch, Enqueued, NackResult, NewTask, Queue, QueueEvent,
                     QueuePolicy, QueueStats,
                     Retention, RetryPolicy, Schedule, Task, TaskHandle, Watch)
from .tasks import Progress, TaskFailed
from .semaphores import AsyncSemaphore, Permit, Semaphore, SemaphoreInfo
from .worker import UnrecoverableError, Worker

__all__ = [
    "AlreadyExists",
    "Announced",
    "AsyncAutocomplete",
    "AsyncChat",
    "AsyncClient",
    "AsyncLock",
    "AsyncQueue",
    "AsyncSemaphore",
    "AsyncSubscription",
    "AsyncTaskHandle",
    "Autocomplete",
    "Chat",
    "ChatExists",
    "ChatFull",
    "ChatMessage",
    "ChatNotFound",
    "ChatSummary",
    "Client",
    "ConcordError",
    "CorruptFile",
    "DeadlineExceeded",
    "Enqueued",
    "FailedPrecondition",
    "FileInfo",
    "FileNotComplete",
    "FileNotFound",
    "Files",
    "Gap",
    "Internal",
    "InvalidArgument",
    "Lease",
    "Line",
    "LineTooLong",
    "Lock",
    "LockInfo",
    "LockLost",
    "LockNotHeld",
    "LockTimeout",
    "NackResult",
    "NameNotFound",
    "NewTask",
    "NotAMember",
    "NotAWorker",
    "NotFound",
    "OffsetOutOfRange",
    "PermissionDenied",
    "Permit",
    "PermitLost",
    "PermitNotHeld",
    "PermitsExceedLimit",
    "Progress",
    "Queue",
    "QueuePolicy",
    "QueueEvent",
    "Watch",
    "AsyncWatch",
    "QueueStats",
    "ResourceExhausted",
    "Retention",
    "RetryPolicy",
    "Schedule",
    "ScheduleExists",
    "ScheduleNotFound",
    "Semaphore",
    "SemaphoreInfo",
    "SemaphoreTimeout",
    "Subscription",
    "Suggestion",
    "Suggestions",
    "Task",
    "TaskFailed",
    "TaskFinished",
    "TaskHandle",
    "TaskLeaseNotHeld",
    "TaskLeased",
    "TaskNotFound",
    "Unavailable",
    "UnrecoverableError",
    "Uploaded",
    "Worker",
]
