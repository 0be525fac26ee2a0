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
"""

from __future__ import annotations

import datetime
import zoneinfo
from collections import deque
from dataclasses import dataclass

from croniter import CroniterError, croniter

MAX_RUNS_PER_CLAIM = 100  # on-time ticks one claim enqueues; older ones count as missed


class BadTiming(ValueError):
    """The cron expression, time zone or interval cannot be used."""


@dataclass(frozen=True)
class Timing:
    """A cron expression (5 fields, or 6 with seconds first; @daily and the like)
    in a time zone, or every ``every_ms`` from ``anchor_ms``."""

    cron: str = ""
    timezone: str = "UTC"
    every_ms: int = 0
    anchor_ms: int = 0

    def __post_init__(self) -> None:
        if bool(self.cron) == bool(self.every_ms):
            raise BadTiming("give a cron expression or an interval, not both")
        if self.cron:
            if not self.cron.startswith("@") and len(self.cron.split()) not in (5, 6):
                raise BadTiming(f"bad cron expression {self.cron!r}: give 5 fields, or 6 with seconds first")
            self._zone()
            self._iterator(0)  # parses it

    def _zone(self) -> zoneinfo.ZoneInfo:
        try:
            return zoneinfo.ZoneInfo(self.timezone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
            raise BadTiming(f"unknown time zone {self.timezone!r} (an IANA name such as Europe/Berlin)") from exc

    def _iterator(self, after_ms: int) -> croniter:
        start = datetime.datetime.fromtimestamp(after_ms / 1000, self._zone())
        try:
            return croniter(self.cron, start, second_at_beginning=len(self.cron.split()) == 6)
        except (CroniterError, ValueError, KeyError) as exc:
            raise BadTiming(f"bad cron expression {self.cron!r}: {exc}") from exc

    def _fixed_hour(self, it: croniter) -> bool:
        return it.expanded[1] != ["*"]

    def ticks_after(self, after_ms: int):
        """Every tick strictly after after_ms, in order (an endless iterator)."""
        if self.every_ms:
            k = max(0, (after_ms - self.anchor_ms) // self.every_ms + 1)
            while True:
                yield self.anchor_ms + k * self.every_ms
                k += 1
        it = self._iterator(after_ms)
        fixed = self._fixed_hour(it)
        while True:
            when = it.get_next(datetime.datetime)
            if fixed and when.fold == 1 and when.replace(fold=0).utcoffset() != when.utcoffset():
                continue  # the second pass of a repeated wall-clock time
            ms = round(when.timestamp() * 1000)
            if ms > after_ms:
                yield ms

    def next_after(self, after_ms: int) -> int:
        return next(self.ticks_after(after_ms))

    def latest_at_or_before(self, at_ms: int, not_before_ms: int) -> int | None:
        """The last tick in [not_before_ms, at_ms], or None."""
        if self.every_ms:
            if at_ms < self.anchor_ms:
                return None
            last = self.anchor_ms + (at_ms - self.anchor_ms) // self.every_ms * self.every_ms
            return last if last >= not_before_ms else None
        it = self._iterator(at_ms + 1)
        fixed = self._fixed_hour(it)
        while True:
            when = it.get_prev(datetime.datetime)
            ms = round(when.timestamp() * 1000)
            if ms < not_before_ms:
                return None
            if fixed and when.fold == 1 and when.replace(fold=0).utcoffset() != when.utcoffset():
                continue
            if ms <= at_ms:
                return ms


@dataclass(frozen=True)
class Plan:
    runs: list[int]  # ticks to enqueue now, oldest first
    last_missed_ms: int | None  # the latest tick dropped or rolled into one run
    next_ms: int  # the tick after these


def plan(timing: Timing, due_ms: int, now_ms: int, grace_ms: int, missed: str) -> Plan:
    """What a claim at now_ms enqueues for a schedule whose next tick was due_ms."""
    cutoff = now_ms - grace_ms  # ticks at or before this are missed
    last_missed = timing.latest_at_or_before(cutoff, due_ms) if due_ms <= cutoff else None
    runs: deque[int] = deque(maxlen=MAX_RUNS_PER_CLAIM)
    for tick in timing.ticks_after(max(due_ms - 1, cutoff)):
        if tick > now_ms:
            if missed == "once" and last_missed is not None and len(runs) < MAX_RUNS_PER_CLAIM:
                runs.appendleft(last_missed)
            return Plan(list(runs), last_missed, tick)
        if len(runs) == MAX_RUNS_PER_CLAIM:
            last_missed = runs[0]  # pushed out: counts as missed
        runs.append(tick)
    raise AssertionError("ticks_after never ends")
