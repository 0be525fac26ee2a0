"""Paging through the resources of one kind, for operators (the admin CLI), over a
per-key-space index, so a listing walks only the caller's own resources.

Each key space (one per tenant) keeps one index per kind: a hash ``{<prefix>:index:<kind>}``
(KeySpace.index) from resource name to a version, bumped (HINCRBY) by ``note`` after
every call that may create the resource (Enqueue, CreateSchedule, CreateChat, the
Acquires of locks, semaphores and read-write locks, Campaign, AddNames, Upload,
SetLimit). The
kinds are the resources' key tags (KeySpace.tag), so LIVE names their keys.
A listing pages through that hash with HSCAN (the cursor is the page token), keeps
the names whose resource is live (one of its keys ending in ``suffixes`` exists: the
keys that say it is live, not the ones kept after it, like a lock's last fencing
token), and drops from the index the ones that are not, unless they were noted again
meanwhile (lua/listing_prune.lua compares the version it read). So a listing costs
the caller's own index, never a walk over every tenant's keys (SCAN, before), and an
empty tenant's listing is one empty page.

Why a version and not just HDEL: a resource may be created again between the
listing's liveness check and its prune; the creator's note bumps the version, and the
prune leaves the entry. The note follows the creating script, so a resource that
exists always has an entry from a note made after it was created.

The index must not outgrow what exists when nobody lists (unique lock names, say):
every SWEEP_EVERY-th new name a process notes starts a background check of
SWEEP_SAMPLE random entries of that index, which prunes the gone ones, so dead entries are removed at least twice as fast
as notes add them while more than half the index is dead: an index holds at most
about twice the live resources noted, plus a few sweeps' worth of slack.

HSCAN's guarantees carry over: every resource that exists for the whole listing is
seen, a name may come twice, one created or deleted meanwhile may or may not be. The
index lives in its own slot on a Redis Cluster (one key), so no per-primary walk.
Resources created before the index existed (an upgrade) are listed once they are
written again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection
from typing import TypeVar

from ..keys import KeySpace
from ..store.client import command
from ..store.reply_shapes import INT
from ..store.scripts import Commands, script

log = logging.getLogger(__name__)

_PRUNE = script("listing_prune.lua", INT)

SWEEP_EVERY = 8  # notes of a process between two sweeps of one of its indexes
SWEEP_SAMPLE = 2 * SWEEP_EVERY  # entries a sweep checks: twice what the notes between sweeps add

# The keys that say a resource of each kind is live (what its listing asks for too):
# a lock, read-write lock or election while held or queued for, an autocomplete
# name index while it holds a name, a file group while it holds a file, a rate-limit
# key while it has a stored limit.
LIVE = {"lock": ("holder", "queue"), "sem": ("holders", "queue"), "chat": ("meta",),
        "queue": ("ready", "delayed", "leased", "dead", "done", "schedules"),
        "rw": ("holders", "queue"), "elect": ("holder", "queue"), "names": ("lex",), "files": ("files",),
        "rl": ("limit",)}

_new_names = 0  # names this process added to an index: only they can grow one
_sweeps: set[asyncio.Task[None]] = set()  # sweeps running in the background

T = TypeVar("T")
S = TypeVar("S")


async def note(redis: Commands, keyspace: KeySpace, kind: str, name: str) -> None:
    """Puts ``name`` in the key space's index of ``kind`` (after creating it)."""
    global _new_names
    index = keyspace.index(kind)
    if await command(redis, "HINCRBY", index, name, 1) != 1:
        return  # listed already: a lock taken again and again costs one HINCRBY, no sweep
    _new_names += 1
    if _new_names % SWEEP_EVERY == 0:  # in the background: the call that noted does not wait for it
        sweep = asyncio.create_task(_sweep(redis, keyspace, kind, index))
        _sweeps.add(sweep)
        sweep.add_done_callback(_sweeps.discard)


async def _sweep(redis: Commands, keyspace: KeySpace, kind: str, index: str) -> None:
    try:
        flat = await command(redis, "HRANDFIELD", index, SWEEP_SAMPLE, "WITHVALUES")
        await _prune_gone(redis, keyspace, kind, index, _pairs(flat))
    except Exception as exc:  # Redis away: the next sweep samples again
        log.debug("listing index sweep of %s failed: %r", index, exc)


async def noting(work: Awaitable[T], redis: Commands, keyspace: KeySpace, kind: str, names: Collection[str]) -> T:
    """``work`` (the script that may create the resources) with the notes of ``names``
    sent right behind it, in the same pipelined write: no extra round trip on the hot
    path, and Redis runs one connection's commands in order, so each note still
    follows the script (on a cluster the index may be on another node: a listing's
    prune racing that pair can leave a new resource unlisted until it is noted again).
    A note that fails (Redis full, say) leaves the name unlisted until its next note:
    it never fails a call whose script succeeded."""
    result, *_ = await asyncio.gather(work, *(note(redis, keyspace, kind, n) for n in set(names)),
                                      return_exceptions=True)
    if isinstance(result, BaseException):
        raise result
    return result


async def scan_names(redis: Commands, keyspace: KeySpace, kind: str, page_token: str, count: int
                     ) -> tuple[list[str], str]:
    """(live names on this page, next page token or "" at the end)."""
    index = keyspace.index(kind)
    cursor, flat = await command(redis, "HSCAN", index, page_token.rpartition(":")[2] or "0", "COUNT", count)
    live = await _prune_gone(redis, keyspace, kind, index, _pairs(flat))
    cursor = _text(cursor)
    return sorted(set(live)), "" if cursor == "0" else cursor


async def scan_summaries(redis: Commands, keyspace: KeySpace, kind: str, page_token: str, count: int,
                         summary: Callable[[str], Awaitable[S | None]]) -> tuple[list[S], str]:
    """(a summary of each live name on this page, next page token or "" at the end).
    ``summary`` reads one resource in a bounded number of steps (never a walk over its
    holders or waiters), so a page costs at most one such read per entry examined;
    the reads go out together, pipelined. It returns None for a resource gone since
    its liveness check, which the page then leaves out."""
    names, token = await scan_names(redis, keyspace, kind, page_token, count)
    found = await asyncio.gather(*(summary(name) for name in names))
    return [s for s in found if s is not None], token


async def _prune_gone(redis: Commands, keyspace: KeySpace, kind: str, index: str,
                      entries: list[tuple[str, str]]) -> list[str]:
    """The names of entries whose resource is live; the others leave the index
    (unless noted again since their version was read)."""

    async def live(name: str) -> bool:
        tag = keyspace.tag(kind, name)
        return await command(redis, "EXISTS", *(f"{tag}:{s}" for s in LIVE[kind])) > 0

    alive = await asyncio.gather(*(live(name) for name, _ in entries))
    gone = [x for (name, version), ok in zip(entries, alive) if not ok for x in (name, version)]
    if gone:
        await _PRUNE.run(redis, [index], gone)
    return [name for (name, _), ok in zip(entries, alive) if ok]


def _pairs(flat: list[bytes | str] | None) -> list[tuple[str, str]]:
    flat = flat or []
    return [(_text(flat[i]), _text(flat[i + 1])) for i in range(0, len(flat), 2)]


def _text(value: bytes | str | int) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
