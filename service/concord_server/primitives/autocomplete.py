"""Autocomplete: a user's recent contacts, and large name indexes searched by prefix.

Matching is on the normalized form of a text: NFKC, case folding, NFKC again (Unicode
"caseless matching"), so "ÉCOLE", "école" and "ｅｃｏｌｅ" all match the prefix "ec"
... "éc". Suggestions come back in their original spelling.

Recent contacts (the book's 6.1.1) are a short list per user: one script moves a
contact to the front; suggestions filter the list here, in Python.

A name index (the book's 6.1.2) is a sorted set whose members all have score 0, so
Redis orders them by bytes. Each member is the escaped normalized name, a separator
and the original name, so a prefix lookup is one ZRANGEBYLEX over the prefix's
range: O(log N + limit), with no temporary sentinel members and no WATCH, unlike the
book. Two names that normalize alike are distinct members, both kept. Escaping "\\0"
as "\\0\\1" and separating with "\\0\\0" keeps the order and lets any name, whatever
it contains, be split back out.

Loading costs what the book's does, within a small factor: a name without a score is
one member of that one zset, added by a plain ZADD of up to NAMES_PER_SCRIPT names
(one command: atomic per name, no script), and nothing else. Scores live in a second
sorted set that holds only the names whose score is not 0 (a name missing there
scores 0), so an unscored name costs no second entry; names given a score go through
names_add.lua.

A best-score Suggest ranks a prefix's names whole when at most RANK_WHOLE start with
it. Otherwise the positive-scored names come first: a third sorted set holds one
entry per positive-scored name, in name order with its score, read whole when at
most TOP_KEPT start with the prefix; a prefix with more keeps a cached list of its
TOP_KEPT best there (its `limit` first entries, one ZRANGEBYLEX). A list is built by
the first best-score Suggest that needs it (from those entries, or from the scores
best-first, whichever the counts say is cheaper), never by a load; the writes that
change a positive score keep the lists of the name's prefixes that exist exact, or
drop one that cannot be kept exact (the next Suggest rebuilds it); unscored names
never touch a list. Names scoring 0 or less come after the positive ones, read from
the range in name order. Keeping a list for every common prefix on every write (as
an earlier version did) cost a ZLEXCOUNT per character of each name loaded and made
a load 14 times slower than the book's (lua/names_common.lua, lua/names_best.lua).

Imports no grpc: api/autocomplete.py maps its errors to status codes.
"""

from __future__ import annotations

import asyncio
import unicodedata
from collections.abc import Awaitable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ..errors import NameNotFound
from ..keys import KeySpace, NameIndexKeys
from ..store.client import command
from ..store.reply_shapes import Codes, INT, Maybe, STR, Seq
from ..store.scripts import Commands, script
from .listing import noting, scan_summaries

# Each script's reply, by name: the shape is checked, then decoded here and only here.


class IncrementReply(NamedTuple):
    found: bool  # False: the index does not hold the name
    score: float = 0.0  # its new score


class BestReply(NamedTuple):
    truncated: bool  # the score scan stopped early (names_best.lua)
    members: list[bytes]  # best first
    scores: list[bytes]  # each member's stored score (minus its score)


_RECENT_ADD = script("recent_add.lua", INT)
_NAMES_ADD = script("names_add.lua", INT)
_NAMES_REMOVE = script("names_remove.lua", INT)
_NAMES_INCREMENT = script("names_increment.lua", Maybe(STR),
                          decode=lambda r: IncrementReply(False) if r is None else IncrementReply(True, 0.0 - float(r)))
# Slices, not a loop: the pairs are read in suggest_best's one pass.
_NAMES_BEST = script("names_best.lua", Seq(Codes(0, 1), each=(STR, STR)), raw=True,
                     decode=lambda r: BestReply(r[0] == 1, r[1::2], r[2::2]))

SCRIPTS = (_RECENT_ADD, _NAMES_ADD, _NAMES_REMOVE, _NAMES_INCREMENT, _NAMES_BEST)

# A best-score Suggest ranks a prefix's names whole up to RANK_WHOLE of them; a more
# common prefix answers from a cached list of its TOP_KEPT best positive-scored
# names, built by the first such Suggest and kept by the writes of scored names only.
# The lists cost about TOP_KEPT entries per prefix asked about.
RANK_WHOLE = 500
TOP_KEPT = 100
SCORE_SCAN = 20_000  # most names one best-score Suggest reads (building a list, or without one)
NAMES_PER_SCRIPT = 1000

LISTED = "names"  # the listing index's kind (primitives/listing.py): the keys' tag

SEPARATOR = b"\x00\x00"
_ABOVE_ANY_UTF8 = b"\xff"  # never occurs in UTF-8: caps a prefix range


def normalize(text: str) -> str:
    """The form names are matched on: NFKC, case folded, NFKC again."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


def _key(text: str) -> bytes:
    return normalize(text).encode("utf-8", "surrogatepass").replace(b"\x00", b"\x00\x01")


def member(name: str) -> bytes:
    """The index member for a name: sorts by normalized form, then by original bytes."""
    return _key(name) + SEPARATOR + name.encode("utf-8", "surrogatepass")


def name_of(m: bytes) -> str:
    return m[m.index(SEPARATOR) + len(SEPARATOR):].decode("utf-8", "surrogatepass")


def prefix_range(prefix: str) -> tuple[bytes, bytes]:
    """ZRANGEBYLEX bounds of every member whose name starts with prefix (normalized)."""
    if not prefix:
        return b"-", b"+"
    p = _key(prefix)
    return b"[" + p, b"[" + p + _ABOVE_ANY_UTF8


@dataclass(frozen=True)
class IndexSummary:
    """One name index as a listing shows it."""

    index: str
    size: int  # names it holds


@dataclass(frozen=True)
class Suggestion:
    name: str
    score: float


class Autocomplete:
    """Recent contacts and name indexes.

    ``recent_max``: contacts kept per user. ``rank_whole``, ``top_kept`` and
    ``score_scan`` bound a best-score Suggest (see above); tests make them small.
    """

    def __init__(self, redis: Commands, keyspace: KeySpace, *, recent_max: int = 100, rank_whole: int = RANK_WHOLE,
                 top_kept: int = TOP_KEPT, score_scan: int = SCORE_SCAN) -> None:
        self._redis = redis
        self._keys = keyspace
        self._recent_max = recent_max
        self._bounds = [rank_whole, min(top_kept, rank_whole)]
        self._score_scan = score_scan

    def _command(self, *args: object, raw: bool = False):
        return command(self._redis, *args, raw=raw)

    # -- recent contacts ---------------------------------------------------------

    async def add_recent(self, user: str, contact: str) -> int:
        """Moves contact to the front; returns how many the user has."""
        return await _RECENT_ADD(self._redis, [self._keys.recent(user)], [contact, self._recent_max])

    async def remove_recent(self, user: str, contact: str) -> bool:
        return await self._command("LREM", self._keys.recent(user), 0, contact) > 0

    async def recent(self, user: str) -> list[str]:
        return await self._command("LRANGE", self._keys.recent(user), 0, self._recent_max - 1)

    async def suggest_recent(self, user: str, prefix: str, limit: int, include_infix: bool) -> list[str]:
        """Recent contacts starting with prefix, most recent first; then, if asked,
        those containing it elsewhere."""
        p = normalize(prefix)
        starts, inside = [], []
        for contact in await self.recent(user):
            n = normalize(contact)
            if n.startswith(p):
                starts.append(contact)
            elif include_infix and p in n:
                inside.append(contact)
        return (starts + inside)[:limit]

    # -- name indexes ------------------------------------------------------------

    def _index(self, index: str) -> NameIndexKeys:
        return self._keys.name_index(index)

    async def _in_slices(self, calls: Iterable[Awaitable[int]]) -> int:
        """Runs a batch as consecutive commands of NAMES_PER_SCRIPT names each (a
        ZADD or a script): one then holds Redis for about a millisecond, not a whole
        batch's time, so other clients' commands go between them. Each is sent as
        soon as it is built (``calls`` builds them lazily), so Redis runs one while
        the next is built: only a matter of speed, the order of sending is kept either
        way. Each name's change is atomic; a batch as a whole is not (a reader may see
        part of it). Returns the sum of their counts."""
        sent: list[asyncio.Future[int]] = []
        try:
            for call in calls:
                sent.append(asyncio.ensure_future(call))
                await asyncio.sleep(0)  # the command's task queues it...
                await asyncio.sleep(0)  # ...and the connection writes it (AutoPipeline)
            counts = await asyncio.gather(*sent, return_exceptions=True)
            for c in counts:
                if isinstance(c, BaseException):
                    raise c
            return sum(counts)
        finally:
            for task in sent:
                if not task.done():
                    task.cancel()

    async def add_names(self, index: str, names: Sequence[tuple[str, float | None]]) -> int:
        """Adds (name, score or None) pairs; returns how many names were new. Names
        without a score go in with a plain ZADD (adding members is one atomic
        command); names with one go through names_add.lua (score and lists too)."""
        k = self._index(index)

        def calls() -> Iterator[Awaitable[int]]:
            noted = False
            for i in range(0, len(names), NAMES_PER_SCRIPT):
                plain: list[object] = []
                scored: list[object] = [*self._bounds]
                for name, score in names[i:i + NAMES_PER_SCRIPT]:
                    if score is None:
                        plain += (0, member(name))
                    else:
                        scored += (member(name), repr(float(score)))
                if plain:
                    yield self._noted(self._command("ZADD", k.lex, *plain), index, noted)
                    noted = True
                if len(scored) > len(self._bounds):
                    yield self._noted(_NAMES_ADD(self._redis, k.keys, scored), index, noted)
                    noted = True

        return await self._in_slices(calls())

    def _noted(self, write: Awaitable[int], index: str, already: bool) -> Awaitable[int]:
        """A batch's first write with the index's listing note sent right behind it
        (listing.noting: the note follows the write that may create the index, and
        one note per AddNames call is enough)."""
        return write if already else noting(write, self._redis, self._keys, LISTED, [index])

    async def summaries(self, page_token: str, count: int) -> tuple[list[IndexSummary], str]:
        """A page of the name indexes that hold names, each with its size (one ZCARD;
        listing.scan_summaries)."""
        return await scan_summaries(self._redis, self._keys, LISTED, page_token, count, self._summary)

    async def _summary(self, index: str) -> IndexSummary | None:
        size = await self._command("ZCARD", self._index(index).lex)
        return IndexSummary(index, size) if size else None  # emptied since it was found live

    async def remove_names(self, index: str, names: Sequence[str]) -> int:
        keys = self._index(index).keys
        return await self._in_slices(
            _NAMES_REMOVE(self._redis, keys, [*self._bounds, *map(member, names[i:i + NAMES_PER_SCRIPT])])
            for i in range(0, len(names), NAMES_PER_SCRIPT))

    async def increment(self, index: str, name: str, delta: float) -> float:
        reply = await _NAMES_INCREMENT.run(self._redis, self._index(index).keys,
                                           [*self._bounds, member(name), repr(float(delta))])
        if not reply.found:
            raise NameNotFound(f"index {index!r} has no name {name!r}", index=index)
        return reply.score

    async def suggest(self, index: str, prefix: str, limit: int) -> list[Suggestion]:
        """Names starting with prefix, in normalized-name order, with their scores."""
        k = self._index(index)
        low, high = prefix_range(prefix)
        members = await self._command("ZRANGEBYLEX", k.lex, low, high, "LIMIT", 0, limit, raw=True)
        if not members:
            return []
        scores = await self._command("ZMSCORE", k.scores, *members)
        return [Suggestion(name_of(m), 0.0 - float(s or 0)) for m, s in zip(members, scores)]

    async def suggest_best(self, index: str, prefix: str, limit: int) -> tuple[list[Suggestion], bool]:
        """The best-scored names starting with prefix, and whether the search was
        cut short (see names_best.lua)."""
        low, high = prefix_range(prefix)
        best = await _NAMES_BEST.run(
            self._redis, self._index(index).keys,
            [*self._bounds, low, high, _key(prefix) if prefix else b"", limit, self._score_scan])
        return [Suggestion(name_of(m), 0.0 - float(s)) for m, s in zip(best.members, best.scores)], best.truncated

    async def count(self, index: str, prefix: str = "") -> int:
        low, high = prefix_range(prefix)
        return await self._command("ZLEXCOUNT", self._index(index).lex, low, high)

    async def drain(self, timeout: float) -> None:
        """Nothing runs in the background; here for the server's shutdown loop."""
