"""Riding out short outages: calls that are safe to repeat are retried while the
Concord server answers UNAVAILABLE (its Redis is restarting, failing over, or the
server is shutting down), with full-jitter exponential backoff (a pause drawn
uniformly from 0 to min(1 s, 50 ms x 2^n)), within the caller's own budget:

* a call that waits in the server (lock/semaphore ``acquire``, ``queue.get``,
  ``client.dequeue``) retries within its wait ``timeout``; each retry asks the
  server to wait only for what is left of it (None: retries for as long as it
  waits, i.e. forever; 0, "try once": no retry);
* any other retried call retries within the client's ``timeout``; each retry's
  gRPC deadline is what is left of it, and a retry is sent only while that is longer
  than the try that failed took, and than MIN_TRY (else its failure is raised: a retry
  cut off by the deadline would hide the server's UNAVAILABLE behind DEADLINE_EXCEEDED).

So a retried call never takes longer than it could before, and ``queue.get(timeout=3)``
during a one-second Redis restart returns the task instead of raising at once.
Only an UNAVAILABLE that the Concord server itself answered (it carries a
google.rpc.ErrorInfo) is retried; a transport failure (no server listening, a TLS
handshake refused) is raised at once, as are all other errors.

Retried, because a repeat cannot do harm:

* locks and semaphores: ``acquire`` (the server lets go of an acquire cut short by
  a Redis failure, leaving its queue place or passing on a grant that reached it,
  so a repeat never leaves two holders; at worst it waits behind the abandoned
  grant until that is let go), ``refresh`` (sets the TTL from now), ``release``
  (a second release changes nothing; if the first one reached Redis before its
  reply was lost, the repeat reports LockNotHeld/PermitNotHeld), ``describe``,
  semaphore ``set_limit`` (it sets the whole limit; a repeat whose first try took
  effect returns that limit as the previous one); background renewal retries only
  while the hold is still valid;
* queues: ``get``/``dequeue`` (a dequeue whose reply was lost leaves its tasks
  leased to nobody; they come back when that lease expires, so nothing is lost),
  ``ack``, ``nack``, ``extend``, ``release`` (each needs the task's lease, which
  the first success ends, so a repeat changes nothing and reports
  TaskLeaseNotHeld), ``progress`` (it needs the lease too, and records the same
  report again), ``wait_task`` and ``TaskHandle.result`` (they wait in the server
  like ``get``), ``get_task``, ``policy``, ``set_policy`` (it replaces the whole
  policy), ``stats``, ``peek``, ``dead``, ``get_schedule``, ``schedules``,
  ``update_schedule`` (it replaces the whole spec), ``pause_schedule`` and
  ``resume_schedule`` (a second one changes nothing), and ``put``/``put_many`` when
  every task has a ``dedupe_key`` (a repeat names the first task and reports it as
  a duplicate; give a ``dedupe_window`` if a worker may finish the task before the
  repeat arrives);
* chat: ``ack`` (seen positions only move forward), ``list_chats``, ``history``;
* autocomplete: ``suggest_recent``, ``suggest``, ``count``; files: ``list_files``.

Not retried, because a repeat could do something twice: ``chat.send`` and
``chat.create`` (a second message, or CHAT_EXISTS), ``put`` without a dedupe key
(a second task), ``queue.cancel``/``purge``/``retry_dead``, ``queue.schedule`` and
``delete_schedule`` (a repeat of one that took effect would report ScheduleExists
or ScheduleNotFound), chat join/leave, autocomplete writes, file uploads and marks,
and every stream (subscribe, fetch_pending, consume, download). Those raise Unavailable for the caller to decide.

One UNAVAILABLE is repeated for every call, safe or not: a stream the server's HTTP/2
layer refused (REFUSED_STREAM, ``refused``). The server caps the calls one connection
may have open (``--max-streams-per-connection``, its defence against rapid reset) and
counts a call until it has let go of it, a little after the client saw its answer; a
client with more calls in flight than the cap on one channel then sees some refused.
HTTP/2 promises a refused stream was not processed at all, so sending it again cannot
do anything twice; gRPC itself repeats it only once.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import grpc

from .errors import Unavailable

T = TypeVar("T")

BASE = 0.05  # seconds: the first pause is at most this
CAP = 1.0  # seconds: no pause is longer, so an outage's end is noticed within a second
# Seconds a retry of a call that does not wait in the server needs at least: with less,
# its answer would race its own deadline (DEADLINE_EXCEEDED instead of UNAVAILABLE).
MIN_TRY = 0.2
# timeout=None waits in server-side waits of this length; each keeps its FIFO place.
WAIT_CHUNK = 300.0


def backoff(attempt: int, rand: Callable[[], float] = random.random) -> float:
    """The pause before retry ``attempt`` (0 first): full jitter, so clients that
    failed together do not come back together."""
    return rand() * min(CAP, BASE * 2 ** min(attempt, 32))


class Budget:
    """Seconds a call may still spend, on the monotonic clock (None: unbounded)."""

    def __init__(self, seconds: float | None) -> None:
        self.deadline = math.inf if seconds is None else time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def chunk(self) -> float:
        """The next server-side wait: what is left, at most WAIT_CHUNK."""
        return min(self.left(), WAIT_CHUNK)


def refused(exc: grpc.RpcError) -> bool:
    """The server's HTTP/2 layer refused the call's stream (RST_STREAM code 7,
    REFUSED_STREAM): the server never saw the call. gRPC says so only in the text."""
    return exc.code() == grpc.StatusCode.UNAVAILABLE and "error code 7" in (exc.details() or "")


def _pause(exc: Unavailable, attempt: int, budget: Budget, needs: float) -> float | None:
    """How long to pause before retrying, or None to raise: the transport failed
    (no ErrorInfo: the server did not answer), or after the pause the budget would
    not leave the retry ``needs`` seconds (it could then only run out of time, and
    the caller would hear DEADLINE_EXCEEDED instead of the server's UNAVAILABLE)."""
    pause = backoff(attempt)
    return pause if exc.reason and pause + needs < budget.left() else None


def retry(call: Callable[[], T], budget: Budget, waits: bool = False) -> T:
    """call(), repeated while it raises a server's Unavailable and budget has room.
    A retry of a call that does not wait in the server needs as long as the try that
    failed took; one that ``waits`` asks the server to wait only what is left."""
    attempt = 0
    while True:
        started = time.monotonic()
        try:
            return call()
        except Unavailable as exc:
            needs = 0.0 if waits else max(MIN_TRY, time.monotonic() - started)
            if (pause := _pause(exc, attempt, budget, needs)) is None:
                raise
        time.sleep(pause)
        attempt += 1


async def retry_async(call: Callable[[], Awaitable[T]], budget: Budget, waits: bool = False) -> T:
    """retry() for coroutines: the pauses let the event loop run."""
    attempt = 0
    while True:
        started = time.monotonic()
        try:
            return await call()
        except Unavailable as exc:
            needs = 0.0 if waits else max(MIN_TRY, time.monotonic() - started)
            if (pause := _pause(exc, attempt, budget, needs)) is None:
                raise
        await asyncio.sleep(pause)
        attempt += 1
