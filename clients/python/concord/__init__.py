"""Concord: distributed locks and counting semaphores over gRPC.

    import concord

    client = concord.Client("127.0.0.1:50051")
    with client.lock("orders:42", ttl=10) as lease:
        ...  # protected work; pass lease.fencing_token to the resource
    with client.semaphore("api:tenant-7", limit=5) as permit:
        ...  # at most 5 of these run at once, across every client

See concord.Client, concord.AsyncClient and concord.errors.
"""

from .client import AsyncClient, Client
from .errors import (
    ConcordError,
    DeadlineExceeded,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    LockLost,
    LockNotHeld,
    LockTimeout,
    NotFound,
    PermitLost,
    PermitNotHeld,
    PermitsExceedLimit,
    ResourceExhausted,
    SemaphoreTimeout,
    Unavailable,
)
from .locks import AsyncLock, Lease, Lock, LockInfo
from .semaphores import AsyncSemaphore, Permit, Semaphore, SemaphoreInfo

__all__ = [
    "AsyncClient",
    "AsyncLock",
    "AsyncSemaphore",
    "Client",
    "ConcordError",
    "DeadlineExceeded",
    "FailedPrecondition",
    "Internal",
    "InvalidArgument",
    "Lease",
    "Lock",
    "LockInfo",
    "LockLost",
    "LockNotHeld",
    "LockTimeout",
    "NotFound",
    "Permit",
    "PermitLost",
    "PermitNotHeld",
    "PermitsExceedLimit",
    "ResourceExhausted",
    "Semaphore",
    "SemaphoreInfo",
    "SemaphoreTimeout",
    "Unavailable",
]
