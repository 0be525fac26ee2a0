"""The calls open under each token, so that a token file reload ends at once the
ones it no longer allows (auth.py).

A check made when a call starts is not enough: a lock Session, a Hold or a chat
Subscribe lives for hours, and kept granting and delivering after its token was
revoked. Each guarded call registers here with its token's digest, its method and
the task that runs it; ``revoke`` cancels the task of every call a new token table
refuses and sends the call the refusal's status (UNAUTHENTICATED or
PERMISSION_DENIED). The servicers already end cleanly on cancellation (it is what a
client going away does): waiters are given up, holds released, subscriptions closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator

import grpc

from ..api.status import to_status
from ..errors import ConcordError

log = logging.getLogger(__name__)


class OpenCall:
    __slots__ = ("method", "task", "context", "refusal")

    def __init__(self, method: str, task: asyncio.Task[object], context: grpc.aio.ServicerContext) -> None:
        self.method = method
        self.task = task
        self.context = context
        self.refusal: ConcordError | None = None  # set when revoked: the status the call ended with


class OpenCalls:
    """Token digest -> the calls open under it (in this process)."""

    def __init__(self) -> None:
        self._calls: dict[bytes, set[OpenCall]] = {}
        self._sending: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return sum(len(calls) for calls in self._calls.values())

    @contextlib.contextmanager
    def open(self, digest: bytes, method: str, context: grpc.aio.ServicerContext) -> Iterator[OpenCall]:
        """Registers the running call for as long as the block runs."""
        task = asyncio.current_task()
        assert task is not None, "a guarded call runs in a task"
        call = OpenCall(method, task, context)
        self._calls.setdefault(digest, set()).add(call)
        try:
            yield call
            if call.refusal is not None:  # a handler that ended quietly on the cancellation: its status is sent
                raise asyncio.CancelledError
        finally:
            calls = self._calls.get(digest)
            if calls is not None:
                calls.discard(call)
                if not calls:
                    del self._calls[digest]

    def revoke(self, refusal_of: Callable[[bytes, str], ConcordError | None]) -> int:
        """Ends every open call for which ``refusal_of(digest, method)`` is an error;
        returns how many.

        The call's task is cancelled at once (it grants and delivers nothing more),
        and its status is sent from a task of its own: the cancellation may land
        while the call is between two messages, outside any code of the call's own
        that could turn it into a status, and gRPC sends nothing for a cancelled
        handler. ``abort`` sends the status itself, from whatever task."""
        ended = 0
        for digest, calls in list(self._calls.items()):
            for call in list(calls):
                if call.refusal is not None:
                    continue
                refusal = refusal_of(digest, call.method)
                if refusal is not None:
                    call.refusal = refusal
                    call.task.cancel()
                    sending = asyncio.get_running_loop().create_task(self._end(call.context, refusal))
                    self._sending.add(sending)
                    sending.add_done_callback(self._sending.discard)
                    ended += 1
        return ended

    @staticmethod
    async def _end(context: grpc.aio.ServicerContext, refusal: ConcordError) -> None:
        try:
            await context.abort_with_status(to_status(refusal))
        except grpc.aio.AbortError:
            pass  # abort sent the status, then raised as it always does
        except Exception as exc:  # the call ended meanwhile (client gone): nothing to tell
            log.debug("revoked call already ended: %r", exc)
