"""Leader election: one leader per election name, FIFO among candidates, terms that
only grow, and a history of every change that observers follow.

An election is a lock (primitives/lock.py) whose holder is the leader: its scripts
(lua/election_*.lua) include lock_common.lua, so candidates wait in the lock's FIFO
queue with the same liveness rules, leadership is handed straight to the next live
candidate by the script that ends the last one, and a term is a fencing token: it
strictly increases across leaders, restarts and Redis data loss (at least the Redis
clock in us). What an election adds is a value per leader and a history: every
script that may change the leader ends by recording the change (a new leader, a
proclaimed value, nobody) in a capped stream in the same atomic step, and rings the
observers' channel. Observers read the stream from their position, so a change made
anywhere, by any replica, reaches every observer once and in order; a leadership
that ran out with no script running is recorded by the first script that looks,
which an observer runs itself when the leader's TTL ends.

Imports no grpc: api/election.py maps its errors to status codes.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass
from typing import NamedTuple

from ..errors import NotLeader, Unavailable
from ..keys import ElectionKeys, KeySpace
from ..store.reply_shapes import Codes, INT, STR, Seq, Tagged, Tup
from ..store.scripts import Commands, script
from ..statuses import ACQUIRE, HELD, WITHDRAW
from ..wakeups.doorbells import Doorbells
from ..wakeups.waiters import PollResult, Waiters
from .fifo_acquire import Attempt, Claim, FifoPrimitive, acquire_queued, keep_alive
from .listing import noting, scan_summaries
from .lock import _WAITERS as _LOCK_WAITERS

HISTORY_BATCH = 100  # changes read per script call
LISTED = "elect"  # the listing index's kind (primitives/listing.py): the keys' tag
LISTED_VALUE_BYTES = 1024  # of a leader's value (up to 64 KiB) a listing shows: a page of 1000 stays small
OBSERVE_WAIT = 10.0  # longest an observer sleeps without looking (the doorbell's safety ring covers it too)

# Each script's reply, by name: the shape is checked, then decoded here and only here.


class CampaignReply(NamedTuple):
    status: int  # ACQUIRE.*
    term: int
    ms: int  # ACQUIRED: the leadership's TTL; else the leader's remaining TTL
    now_ms: int


class WithdrawReply(NamedTuple):
    status: int  # WITHDRAW.*
    term: int = 0  # KEPT: the leadership's term, remaining TTL and the clock
    pttl_ms: int = 0
    now_ms: int = 0


class PollReply(NamedTuple):
    leader: str  # the leader's lease, or ''
    term: int
    pttl_ms: int
    now_ms: int
    dropped: list[str]


class HistoryReply(NamedTuple):
    last: int  # the last change's number (0: none)
    first_kept: int  # the oldest kept change's number (0: none kept)
    candidate: bytes
    value: bytes
    term: int  # 0: nobody leads
    pttl_ms: int
    waiting: int
    now_ms: int
    changes: list[list]  # [n, term, candidate, value]


class SummaryReply(NamedTuple):
    term: int  # 0: nobody leads
    candidate: bytes
    value: bytes  # its first LISTED_VALUE_BYTES
    value_cut: int  # 0/1
    pttl_ms: int
    candidates: int  # entries in the queue
    now_ms: int


_SUMMARY = script("election_summary.lua", Tup(INT, STR, STR, Codes(0, 1), INT, INT, INT), raw=True,
                  decode=SummaryReply._make)
_CAMPAIGN = script("election_campaign.lua", Tup(Codes(*ACQUIRE.codes()), INT, INT, INT), decode=CampaignReply._make)
_RESIGN = script("election_resign.lua", Codes(*HELD.codes()))
_REFRESH = script("election_refresh.lua", Tagged({HELD.NOT_HELD: Tup(), HELD.HELD: Tup(INT)}))
_PROCLAIM = script("election_proclaim.lua", Codes(*HELD.codes()))
_WITHDRAW = script("election_withdraw.lua",
                   Tagged({WITHDRAW.LEFT_QUEUE: Tup(), WITHDRAW.NOT_WAITING: Tup(), WITHDRAW.PASSED_ON: Tup(),
                           WITHDRAW.KEPT: Tup(INT, INT, INT)}),
                   decode=lambda r: WithdrawReply(*r))
_POLL = script("election_poll.lua", Seq(STR, INT, INT, INT, each=(STR,)), decode=lambda r: PollReply(*r[:4], r[4:]))
_HISTORY = script("election_history.lua", Seq(INT, INT, STR, STR, INT, INT, INT, INT, each=(Tup(INT, INT, STR, STR),)),
                  raw=True, decode=lambda r: HistoryReply(*r[:8], r[8:]))

_RECENT = script("election_recent.lua", Seq(INT, each=(INT, INT, STR, STR, Codes(0, 1), INT)), raw=True)

SCRIPTS = (_CAMPAIGN, _RESIGN, _REFRESH, _PROCLAIM, _WITHDRAW, _POLL, _HISTORY, _SUMMARY, _RECENT)


@dataclass(frozen=True)
class Term:
    """A won campaign."""

    term: int
    lease: str  # the candidate's place in the queue; Lead streams resign with it
    expires_at_ms: int  # Redis server clock


@dataclass(frozen=True)
class Leadership:
    candidate: str
    value: bytes
    term: int
    expires_at_ms: int


@dataclass(frozen=True)
class Change:
    """One change in an election's history, as an observer sees it."""

    position: int
    leader: Leadership | None  # None: nobody leads from here on
    gap: bool = False  # changes between the observer's position and this one were not kept


@dataclass(frozen=True)
class RecentChange:
    """One kept change of leadership, as the console lists them."""

    position: int
    term: int  # 0: nobody led from then on
    candidate: str
    value: bytes  # cut to the asked bytes (value_cut)
    value_cut: bool
    at_ms: int  # when it was recorded (Redis clock)


@dataclass(frozen=True)
class LeaderState:
    leader: Leadership | None
    candidates: int  # live candidates waiting
    position: int  # the last change's number


@dataclass(frozen=True)
class ElectionSummary:
    """One election as a listing shows it."""

    election: str
    leader: Leadership | None  # its value cut to LISTED_VALUE_BYTES (value_cut)
    value_cut: bool
    candidates: int  # entries in its queue (candidates of dead servers too, until skipped)


class Elections(FifoPrimitive):
    """The election primitive of one server process (see FifoPrimitive for
    process_id and liveness_ms). ``bells`` are broadcast doorbells: every observer
    of an election is rung on each change."""

    def __init__(self, redis: Commands, keyspace: KeySpace, waiters: Waiters, bells: Doorbells, *, process_id: str,
                 liveness_ms: int = 5000, term_retention_ms: int = 7 * 86_400_000) -> None:
        super().__init__(redis, keyspace, waiters, process_id=process_id, liveness_ms=liveness_ms)
        self._bells = bells
        self._retention_ms = term_retention_ms

    def _run(self, s, k: ElectionKeys, *args: object):
        return s.run(self._redis, k.keys, [k.channel, self._retention_ms, *args])

    async def campaign(self, election: str, candidate: str, value: bytes, ttl_ms: int, wait_ms: int) -> Term | None:
        """The won term, or None if another still led after wait_ms (0 = try once)."""
        k = self._keys.election(election)
        claim = _Candidacy(self, election, k, k.channel, secrets.token_hex(16), ttl_ms, wait_ms, candidate, value)
        return await acquire_queued(self._waiters, claim, wait_ms)

    async def resign(self, election: str, term: int) -> None:
        if await self._run(_RESIGN, self._keys.election(election), term) != HELD.HELD:
            raise _not_leader(election, term)

    async def refresh(self, election: str, term: int, ttl_ms: int) -> int:
        """Resets the leadership's TTL; returns its new end (Redis clock, ms)."""
        reply = await self._run(_REFRESH, self._keys.election(election), term, ttl_ms)
        if reply[0] != HELD.HELD:
            raise _not_leader(election, term)
        return reply[1] + ttl_ms

    async def proclaim(self, election: str, term: int, value: bytes) -> None:
        if await self._run(_PROCLAIM, self._keys.election(election), term, value) != HELD.HELD:
            raise _not_leader(election, term)

    async def leader(self, election: str) -> LeaderState:
        r = await self._run(_HISTORY, self._keys.election(election), 0, 0)
        return LeaderState(_leadership(r.candidate, r.value, r.term, r.now_ms + r.pttl_ms), r.waiting, r.last)

    async def summaries(self, page_token: str, count: int) -> tuple[list[ElectionSummary], str]:
        """A page of the elections that have a leader or candidates, each read by one
        O(1) script (listing.scan_summaries)."""
        return await scan_summaries(self._redis, self._keys, LISTED, page_token, count, self._summary)

    async def _summary(self, election: str) -> ElectionSummary | None:
        r = await self._run(_SUMMARY, self._keys.election(election), LISTED_VALUE_BYTES)
        if r.term == 0 and not r.candidates:
            return None  # nobody leads or waits any more: gone since the listing found it live
        leader = _leadership(r.candidate, r.value, r.term, r.now_ms + r.pttl_ms)
        return ElectionSummary(election, leader, r.value_cut == 1, r.candidates)

    async def candidates(self, election: str, limit: int = 50) -> tuple[int, list[tuple[str, int]]]:
        """The first live candidates waiting, in FIFO order (of the first ``limit``
        queue entries, at most 50): (Redis clock ms, [(candidate, waiting since ms)]).
        An election's queue is a lock's (keys.ElectionKeys), so this is the lock's
        bounded waiters script; the web console's read."""
        r = await _LOCK_WAITERS.run(self._redis, self._keys.election(election).keys[:5], ["", 0, limit])
        queue = r[1][5:]  # after the waiters' count and the holder's four
        return r[0], list(zip(queue[::2], queue[1::2]))

    async def recent(self, election: str, limit: int, value_bytes: int = LISTED_VALUE_BYTES
                     ) -> tuple[int, list[RecentChange]]:
        """The last ``limit`` (at most 50) changes of leadership, newest first, from the
        history the election keeps anyway (the last 1,000 changes, as long as its
        terms are kept), with the Redis clock (ms); values cut to ``value_bytes``. One
        bounded script, writes nothing; the web console's read."""
        r = await self._run(_RECENT, self._keys.election(election), limit, value_bytes)
        return r[0], [RecentChange(r[i], r[i + 1], r[i + 2].decode(errors="replace"), r[i + 3], r[i + 4] == 1,
                                   r[i + 5]) for i in range(1, len(r), 6)]

    async def observe(self, election: str, after: int = 0) -> AsyncIterator[Change]:
        """The leader now, then every change as it happens, in order. With ``after``
        (a position from an earlier observe), the changes after it instead; one with
        ``gap`` set stands for changes that were no longer kept."""
        k = self._keys.election(election)
        async with self._bells.watch([k.history]) as bell:
            bell.arm()
            r = await self._run(_HISTORY, k, after, HISTORY_BATCH)
            cursor = after
            if after == 0 or r.last < after or r.first_kept > after + 1:
                # From now on (or what the history no longer holds): the state now, then changes after it.
                yield Change(r.last, _leadership(r.candidate, r.value, r.term, r.now_ms + r.pttl_ms), gap=after != 0)
                cursor = r.last
                r = r._replace(changes=[])
            while True:
                for n, term, candidate, value in r.changes:
                    cursor = n
                    # A change's own TTL is not recorded: expires_at is the leader's now if it is still this term.
                    expires = r.now_ms + r.pttl_ms if term == r.term else 0
                    yield Change(n, _leadership(candidate, value, term, expires))
                if len(r.changes) < HISTORY_BATCH:
                    # Nothing more: wait for a ring, or for the leader's TTL to end (then look, which records it).
                    wait = OBSERVE_WAIT if r.term == 0 else min(OBSERVE_WAIT, (max(r.pttl_ms, 0) + 1) / 1000)
                    await bell.wait(wait)
                    bell.arm()
                r = await self._run(_HISTORY, k, cursor, HISTORY_BATCH)
                if r.last < cursor:  # the numbers started again: Redis lost the history
                    yield Change(r.last, _leadership(r.candidate, r.value, r.term, r.now_ms + r.pttl_ms), gap=True)
                    cursor = r.last
                    r = r._replace(changes=[])
                elif r.first_kept > cursor + 1:
                    yield Change(r.last, _leadership(r.candidate, r.value, r.term, r.now_ms + r.pttl_ms), gap=True)
                    cursor = r.last
                    r = r._replace(changes=[])

    async def keep_leading(self, election: str, term: Term, ttl_ms: int) -> AsyncIterator[int]:
        """Refreshes every ttl/3 and yields each new end of the leadership; ends the
        moment the term is no longer the leader's: a refresh says so, a change
        recorded in the history (a resign from elsewhere) shows it, or Redis could not
        confirm a refresh before the TTL ran out."""
        k = self._keys.election(election)
        loop = asyncio.get_running_loop()

        async def refresh() -> int:
            return await self.refresh(election, term.term, ttl_ms)

        async with self._bells.watch([k.history]) as bell:

            async def lost(within: float) -> bool:
                deadline = loop.time() + within
                while await bell.wait(max(0.0, deadline - loop.time())):
                    bell.arm()
                    try:
                        now = (await self.leader(election)).leader
                    except Unavailable:
                        continue
                    if now is None or now.term != term.term:
                        return True
                return False

            bell.arm()
            async for expires in keep_alive(refresh, NotLeader, ttl_ms, lost):
                yield expires

    def let_go(self, election: str, lease: str, within_ms: int) -> None:
        """Resigns or leaves the queue in the background, retrying while Redis is
        unreachable for up to within_ms."""
        k = self._keys.election(election)
        self._releaser.let_go(lambda: self._run(_WITHDRAW, k, lease, 1), within_ms, k.holder)

    async def _poll(self, k: ElectionKeys, queued: Collection[str]) -> PollResult:
        r = await self._run(_POLL, k, self._process_id, self._liveness_ms, *queued)
        granted = {r.leader: f"{r.term} {r.now_ms + r.pttl_ms}"} if r.leader else {}
        return PollResult(granted, (r.pttl_ms + 1) / 1000 if r.pttl_ms > 0 else None, r.dropped)


def _not_leader(election: str, term: int) -> NotLeader:
    return NotLeader(f"election {election!r} is not led by this term (it resigned, ran out or was passed on)",
                     election=election, term=str(term))


def _leadership(candidate: bytes, value: bytes, term: int, expires_at_ms: int) -> Leadership | None:
    if term == 0:
        return None
    return Leadership(candidate.decode(), value, term, expires_at_ms)


class _Candidacy(Claim[Term]):
    """One Campaign's claim on an election; its token is the lease."""

    primitive = "election"
    of: Elections
    value: bytes

    def __init__(self, of: Elections, name: str, k: ElectionKeys, channel: str, token: str, ttl_ms: int,
                 wait_ms: int, owner: str, value: bytes) -> None:
        super().__init__(of, name, k, channel, token, ttl_ms, wait_ms, owner)
        self.value = value

    async def attempt(self) -> Attempt[Term]:
        r = await noting(self.of._run(_CAMPAIGN, self.k, self.token, self.ttl_ms, self.owner, self.value,
                                      *self.of._waiting_args(self.wait_ms)),
                         self.of._redis, self.of._keys, LISTED, self.to_note([self.name]))  # leads or queued: listed
        return Attempt(Term(r.term, self.token, r.now_ms + r.ms) if r.status == ACQUIRE.ACQUIRED else None,
                       r.ms, r.now_ms)

    def granted(self, payload: str) -> Term:
        term, expires_ms = payload.split()
        return Term(int(term), self.token, int(expires_ms))

    async def give_up(self) -> Term | None:
        kept = await self.of._run(_WITHDRAW, self.k, self.token, 0)
        return Term(kept.term, self.token, kept.now_ms + kept.pttl_ms) if kept.status == WITHDRAW.KEPT else None
