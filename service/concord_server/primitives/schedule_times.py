"""When a schedule ticks: cron expressions (croniter) in a time zone, or fixed intervals.

Times are ms since the epoch on Redis's clock; this module only does the calendar
arithmetic, and the scripts check every tick against Redis's now before enqueueing
it (queue_schedule_claim.lua), so nothing here can make a tick early.

Daylight saving follows Vixie cron, the behaviour cron users know: a time skipped
when clocks go forward runs at the first moment after the change (croniter's own
behaviour), and a wall-clock time that happens twice when clocks go back runs once,
unless the expression's hour field is a wildcard (``*``, every hour): then both runs
happen, since each is an hour of real time apart.

``plan`` decides what one claim enqueues. Ticks at most ``grace_ms`` late each run
(a short outage loses none); older ones are missed, and the schedule's ``missed``
policy says whether they are dropped ("skip") or rolled into one run ("once").

Cost. Every server's ticker plans every due tick, so the arithmetic must stay cheap
whatever a tenant writes: an expression is at most MAX_CRON_BYTES (checked before
anything parses it), it is parsed once per process and the parsed form kept
(``_compiled``), a plan looks at no more than MAX_RUNS_PER_CLAIM + 2 ticks however
long the outage or the grace, and callers on the event loop run the arithmetic in a
worker thread (``off_loop``): croniter's search for a rare or impossible date can
take tens of ms, which must not stall every other call of the process.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import functools
import re
import time
import zoneinfo
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from croniter import CroniterBadDateError, CroniterError, croniter

MAX_RUNS_PER_CLAIM = 100  # on-time ticks one claim enqueues; older ones count as missed
MAX_CRON_BYTES = 256  # a cron listing every second of a minute by hand is 170 bytes
MAX_ZONE_BYTES = 64  # the longest IANA name is 32 bytes
_ZONE = re.compile(r"[A-Za-z0-9_+-]+(?:/[A-Za-z0-9_+-]+)*")
_COMPILED_CACHE = 4096  # distinct (cron, seconds) pairs whose parse each process keeps

R = TypeVar("R")


class BadTiming(ValueError):
    """The cron expression, time zone or interval cannot be used."""


@functools.lru_cache(maxsize=_COMPILED_CACHE)
def _compiled(cron: str, seconds: bool) -> croniter:
    """The parsed expression, once per process: a template that ``_iterator`` copies
    and points at a start time (croniter keeps its parse in ``expanded``, which
    iteration only reads)."""
    try:
        return croniter(cron, 0.0, second_at_beginning=seconds)
    except (CroniterError, ValueError, KeyError, TypeError) as exc:
        raise BadTiming(f"bad cron expression {cron!r}: {exc}") from exc


@functools.lru_cache(maxsize=512)
def _zone(name: str) -> zoneinfo.ZoneInfo:
    """The time zone ``name``; only IANA-shaped names reach the file system (a
    directory such as "America" or an over-long name is an OSError there)."""
    if len(name) > MAX_ZONE_BYTES or not _ZONE.fullmatch(name):
        raise BadTiming("unknown time zone (an IANA name such as Europe/Berlin)")
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise BadTiming(f"unknown time zone {name!r} (an IANA name such as Europe/Berlin)") from exc


@dataclass(frozen=True)
class Timing:
    """A cron expression (5 fields, or 6 with seconds first; @daily and the like)
    in a time zone, or every ``every_ms`` from ``anchor_ms``.

    Making one checks its shape (cheap, bounded by the length limits); ``check``
    also parses it and makes sure it ever fires, which can take tens of ms: run it
    with ``off_loop``. ``stored`` makes one from what Redis holds without checks."""

    cron: str = ""
    timezone: str = "UTC"
    every_ms: int = 0
    anchor_ms: int = 0

    def __post_init__(self) -> None:
        self.check_shape()

    @classmethod
    def stored(cls, cron: str, timezone: str, every_ms: int, anchor_ms: int) -> Timing:
        """As a schedule's hash holds it, unchecked, so that Get and List still show a
        schedule an older server stored with an expression this one refuses; the
        ticker calls check_shape before planning one and pauses it if that fails."""
        t = object.__new__(cls)
        for field, value in (("cron", cron), ("timezone", timezone), ("every_ms", every_ms), ("anchor_ms", anchor_ms)):
            object.__setattr__(t, field, value)
        return t

    def check_shape(self) -> None:
        """Everything that needs no parse: one kind of timing, the expression's size
        and field count, the time zone. Costs microseconds whatever the input."""
        if bool(self.cron) == bool(self.every_ms):
            raise BadTiming("give a cron expression or an interval, not both")
        if self.cron:
            if len(self.cron) > MAX_CRON_BYTES or len(self.cron.encode("utf-8", "surrogatepass")) > MAX_CRON_BYTES:
                raise BadTiming(f"cron expression is longer than {MAX_CRON_BYTES} bytes")
            if not self.cron.startswith("@") and len(self.cron.split()) not in (5, 6):
                raise BadTiming(f"bad cron expression {self.cron!r}: give 5 fields, or 6 with seconds first")
            _zone(self.timezone)

    def check(self, now_ms: int | None = None) -> None:
        """check_shape, then parse the expression and find its next tick: an
        expression that never fires (``0 0 30 2 *``) is refused here. Blocking."""
        self.check_shape()
        if self.cron:
            self.next_after(int(time.time() * 1000) if now_ms is None else now_ms)

    def _iterator(self, after_ms: int) -> croniter:
        self.check_shape()  # never parse what an older server stored without limits
        it = copy.copy(_compiled(self.cron, len(self.cron.split()) == 6))
        it.set_current(datetime.datetime.fromtimestamp(after_ms / 1000, _zone(self.timezone)), force=True)
        return it

    def _step(self, it: croniter, backwards: bool) -> datetime.datetime:
        try:
            return it.get_prev(datetime.datetime) if backwards else it.get_next(datetime.datetime)
        except CroniterBadDateError as exc:
            raise BadTiming(f"cron expression {self.cron!r} never fires") from exc
        except (CroniterError, ValueError, OverflowError) as exc:
            raise BadTiming(f"bad cron expression {self.cron!r}: {exc}") from exc

    @staticmethod
    def _fixed_hour(it: croniter) -> bool:
        return it.expanded[1] != ["*"]

    @staticmethod
    def _second_pass(when: datetime.datetime) -> bool:
        return when.fold == 1 and when.replace(fold=0).utcoffset() != when.utcoffset()

    def ticks_after(self, after_ms: int) -> Iterator[int]:
        """Every tick strictly after after_ms, in order (an endless iterator)."""
        if self.every_ms:
            k = max(0, (after_ms - self.anchor_ms) // self.every_ms + 1)
            while True:
                yield self.anchor_ms + k * self.every_ms
                k += 1
        it = self._iterator(after_ms)
        fixed = self._fixed_hour(it)
        while True:
            when = self._step(it, backwards=False)
            if fixed and self._second_pass(when):
                continue  # the second pass of a repeated wall-clock time
            ms = round(when.timestamp() * 1000)
            if ms > after_ms:
                yield ms

    def ticks_at_or_before(self, at_ms: int) -> Iterator[int]:
        """Every tick at or before at_ms, latest first (ends at an interval's anchor)."""
        if self.every_ms:
            if at_ms < self.anchor_ms:
                return
            last = self.anchor_ms + (at_ms - self.anchor_ms) // self.every_ms * self.every_ms
            yield from range(last, self.anchor_ms - 1, -self.every_ms)
            return
        it = self._iterator(at_ms + 1)
        fixed = self._fixed_hour(it)
        while True:
            when = self._step(it, backwards=True)
            if fixed and self._second_pass(when):
                continue
            ms = round(when.timestamp() * 1000)
            if ms <= at_ms:
                yield ms

    def next_after(self, after_ms: int) -> int:
        return next(self.ticks_after(after_ms))

    def latest_at_or_before(self, at_ms: int, not_before_ms: int) -> int | None:
        """The last tick in [not_before_ms, at_ms], or None."""
        latest = next(self.ticks_at_or_before(at_ms), None)
        return latest if latest is not None and latest >= not_before_ms else None


@dataclass(frozen=True)
class Plan:
    runs: list[int]  # ticks to enqueue now, oldest first
    last_missed_ms: int | None  # the latest tick dropped or rolled into one run
    next_ms: int  # the tick after these


def plan(timing: Timing, due_ms: int, now_ms: int, grace_ms: int, missed: str) -> Plan:
    """What a claim at now_ms enqueues for a schedule whose next tick was due_ms.

    Walks back from now_ms, so it looks at MAX_RUNS_PER_CLAIM + 1 ticks at most
    however many fell due since due_ms (an every-second cron after an hour's outage
    with an hour's grace is 3,600), plus the one after now and the latest missed."""
    cutoff = now_ms - grace_ms  # ticks at or before this are missed
    lower = max(due_ms - 1, cutoff)  # the runs are the ticks in (lower, now_ms]
    recent: list[int] = []  # latest first
    for tick in timing.ticks_at_or_before(now_ms):
        if tick <= lower:
            break
        recent.append(tick)
        if len(recent) > MAX_RUNS_PER_CLAIM:
            break
    if len(recent) > MAX_RUNS_PER_CLAIM:  # more on-time ticks than one claim runs: older ones count as missed
        last_missed: int | None = recent.pop()
    else:
        last_missed = timing.latest_at_or_before(cutoff, due_ms) if due_ms <= cutoff else None
    runs = recent[::-1]
    if missed == "once" and last_missed is not None and len(runs) < MAX_RUNS_PER_CLAIM:
        runs.insert(0, last_missed)
    return Plan(runs, last_missed, timing.next_after(now_ms))


async def off_loop(fn: Callable[..., R], *args: object) -> R:
    """fn(*args) in a worker thread: calendar arithmetic that may take more than a
    millisecond must not hold up the other calls of this process's event loop."""
    return await asyncio.to_thread(fn, *args)
