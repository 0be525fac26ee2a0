"""Concord: distributed locks (and more to come) over gRPC.

    import concord

    client = concord.Client("127.0.0.1:50051")
    with client.lock("orders:42", ttl=10) as lease:
        ...  # protected work; pass lease.fencing_token to the resource

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
    ResourceExhausted,
    Unavailable,
)
from .locks import AsyncLock, Lease, Lock, LockInfo

__all__ = [
    "AsyncClient",
    "AsyncLock",
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
    "ResourceExhausted",
    "Unavailable",
]
