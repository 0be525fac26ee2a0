"""Calls carried inside a stream: each Session request (locks, semaphores, read-write
locks) is admitted by the
edge's limits as the unary call it stands for (the same request rate and
blocked-call limits; every stream message's size is checked anyway), so a session
is no way around them.

edge/limits.py puts its admission for the stream's caller in ``admit`` when the
stream opens (in the call's own task, so the tasks the stream starts see it too);
the session enters ``admit(method)`` around each request and answers a
refusal (LimitReached) to that request alone. Without limits it admits everything.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any


def _admit_all(method: str) -> contextlib.AbstractContextManager[None]:
    return contextlib.nullcontext()


# admit(full method name, "/concord.lock.v1.LockService/Acquire"): held while it runs.
admit: ContextVar[Callable[[str], contextlib.AbstractContextManager[Any]]] = ContextVar(
    "concord_sub_calls", default=_admit_all)
