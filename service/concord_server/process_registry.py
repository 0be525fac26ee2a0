"""The process registry: every concord-server process says, once a beat, who it is
and how it is doing, in Redis, so the console of any replica lists them all.

Each beat (BEAT seconds) is one script, lua/process_beat.lua: the process's record
(JSON: id, host, pid, addresses, version, start time, state, its Redis link's health,
and its figures from process_figures.py: calls per second by service and code,
blocked calls, open streams, event-loop lag, memory, CPU) is written with a TTL of
TTL_BEATS beats under ``{<prefix>#processes}:<id>``, and the index
``{<prefix>#processes}`` (process id -> last beat, Redis clock) notes it, drops
entries older than a record lives and keeps at most MAX_INDEXED. A process that dies
stops beating: its record expires within TTL_BEATS beats and the console no longer
lists it; one that stops cleanly beats once as ``draining`` when its shutdown starts
and deletes its record at the end. Both keys are the server's own (keys.ProcessKeys),
in no tenant's key space.

In the same event-loop turn (so in the same write on one Redis), the beat adds what
this process's calls counted per tenant since the last beat (tallies.py: lock
handoffs, deadlocks broken) to each tenant's lock activity (primitives/lock_activity.py).

Cost: per beat, one script of a few commands and one per tenant that had lock
activity; nothing per call. Reading (``processes``) is one script returning at most
MAX_LISTED records, newest beat first.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
from dataclasses import dataclass
from typing import Any

from . import __version__, tallies
from .keys import KeySpace
from .primitives.lock_activity import LockActivity
from .process_figures import ProcessFigures
from .store.reply_shapes import INT, STR, Seq
from .store.scripts import Commands, script

log = logging.getLogger(__name__)

BEAT = 2.0  # seconds between two beats of a process
TTL_BEATS = 3  # a record lives this many beats without another
MAX_INDEXED = 1000  # index entries kept (the most recent beats)
MAX_LISTED = 100  # records one reading returns
LEAVE_WITHIN = 1.0  # seconds a stopping process gives its last write

_BEAT = script("process_beat.lua", INT)
_LIST = script("process_list.lua", Seq(INT, each=(STR, INT, STR)))

SCRIPTS = (_BEAT, _LIST)


@dataclass(frozen=True)
class Listed:
    now_ms: int  # the Redis clock when read
    records: list[dict[str, Any]]  # each with "beat_ms", its last beat (Redis clock)


class ProcessRegistry:
    def __init__(self, commands: Commands, keyspace: KeySpace, process_id: str, figures: ProcessFigures,
                 redis_health: Any, *, listen: str, console: str | None, beat: float = BEAT) -> None:
        self._commands, self._keyspace, self.process_id = commands, keyspace, process_id
        self._keys = keyspace.processes
        self._figures, self._redis_health = figures, redis_health
        self.listen, self.console = listen, console  # addresses shown (set once bound)
        self.beat_s = beat
        self.ttl_ms = int(beat * TTL_BEATS * 1000)
        self.state = "serving"
        self._task: asyncio.Task[None] | None = None
        self._host = socket.gethostname()

    async def first_beat(self) -> None:
        """The first beat, before the process serves (bounded: a Redis away now is
        written by a later beat)."""
        self._figures.mark()
        try:
            await asyncio.wait_for(self.beat(), LEAVE_WITHIN)
        except Exception as exc:
            log.debug("process registry: first beat failed: %r", exc)

    def start(self) -> ProcessRegistry:
        self._figures.mark()
        self._task = asyncio.create_task(self._run(), name="process registry")
        return self

    async def _run(self) -> None:
        await asyncio.sleep(self.beat_s)  # first_beat wrote the first
        while True:
            try:
                await self.beat()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis away: the record expires, the next beat writes it again
                log.debug("process registry beat failed: %r", exc)
            await asyncio.sleep(self.beat_s)

    def record(self) -> dict[str, Any]:
        return {"id": self.process_id, "host": self._host, "listen": self.listen, "console": self.console,
                "version": __version__, "state": self.state,
                "redis_serving": bool(getattr(self._redis_health, "serving", True)), "beat_s": self.beat_s,
                **self._figures.read()}

    async def beat(self) -> None:
        record = json.dumps(self.record(), separators=(",", ":"))
        writes = [_BEAT.run(self._commands, [self._keys.index, self._keys.record(self.process_id)],
                            [self.process_id, record, self.ttl_ms, MAX_INDEXED, 0])]
        for tenant, counts in tallies.take().items():  # in the same loop turn: one write on one Redis
            space = self._keyspace.tenant(tenant) if tenant else self._keyspace
            writes.append(LockActivity(self._commands, space).add(counts))
        for outcome in await asyncio.gather(*writes, return_exceptions=True):
            if isinstance(outcome, BaseException):
                raise outcome

    async def processes(self, limit: int = MAX_LISTED) -> Listed:
        reply = await _LIST.run(self._commands, [self._keys.index], [self._keys.record_prefix, self.ttl_ms,
                                                                     min(limit, MAX_LISTED)])
        records = []
        for i in range(1, len(reply), 3):
            try:
                record = json.loads(reply[i + 2])
            except ValueError:
                continue
            if isinstance(record, dict):
                record["id"], record["beat_ms"] = reply[i], reply[i + 1]
                records.append(record)
        return Listed(reply[0], records)

    async def draining(self) -> None:
        """Shutdown started: one beat says so at once (bounded; beats go on meanwhile)."""
        self.state = "draining"
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.beat(), LEAVE_WITHIN)

    async def aclose(self) -> None:
        """Stops beating and deletes this process's record (bounded: else it expires)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(_BEAT.run(self._commands, [self._keys.index, self._keys.record(self.process_id)],
                                             [self.process_id, "", self.ttl_ms, MAX_INDEXED, 1]), LEAVE_WITHIN)
