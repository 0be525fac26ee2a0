"""Writes acknowledged by replicas (--redis-replica-acks N): a state change is
answered only once N replicas have it.

``WAIT`` (and ``WAITAOF``) return at once inside a script or MULTI, so they go on
the same connection after the commands they cover; one ``WAIT`` covers every write
sent before it on that connection. AutoPipeline sends a turn's commands in one write
on one Link, so ``Confirmations`` adds one ``WAIT`` after them, however many there
are (and while one ``WAIT`` is out, the changes sent meanwhile share the next), and
each script's reply is handed to its caller only once its ``WAIT`` says enough
replicas have it. Redis serves a connection's commands in order, so while a
``WAIT`` blocks, the connection's later commands wait behind it: with the replicas
healthy that is one replication round trip per batch; with fewer than N reachable,
each batch waits the ack timeout and its calls fail ``UNAVAILABLE`` /
``REPLICATION_TIMEOUT`` (errors.ReplicationTimeout).

What a failed confirmation means: the change was made on the primary and may or may
not survive a failover. A blocked call's scripts are let go as after any Redis
failure (primitives/letting_go.py), so a grant that could not be confirmed is
withdrawn rather than left to a caller who was told it failed.

``--redis-aof-acks`` adds ``WAITAOF 1 0`` before the ``WAIT``: the primary's own
append-only file fsynced too (Redis 7.2 and Valkey 7.2 or later; why not ``WAITAOF 1
N``: ReplicaAcks.commands).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING, Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from ..errors import ReplicationTimeout

if TYPE_CHECKING:
    from .link import Link

# Commands that change nothing; every other command is taken for a change and confirmed
# (erring towards one WAIT too many: a script, a ZADD of autocomplete, a listing note).
READS = frozenset({
    "GET", "MGET", "STRLEN", "EXISTS", "TYPE", "TTL", "PTTL", "HGET", "HMGET", "HGETALL", "HLEN", "HEXISTS",
    "HSCAN", "HRANDFIELD", "HKEYS", "HVALS", "SMEMBERS", "SISMEMBER", "SCARD", "SSCAN", "ZRANGE", "ZRANGEBYSCORE",
    "ZRANGEBYLEX", "ZREVRANGE", "ZREVRANGEBYSCORE", "ZSCORE", "ZMSCORE", "ZLEXCOUNT", "ZCARD", "ZCOUNT", "ZRANK",
    "ZSCAN", "LRANGE", "LLEN", "LINDEX", "XRANGE", "XREVRANGE", "XLEN", "XINFO", "SCAN", "DBSIZE", "PING", "INFO",
    "TIME", "ROLE", "MEMORY", "SCRIPT", "EVALSHA_RO", "EVAL_RO", "ASKING", "READONLY", "CLUSTER", "WAIT",
    "WAITAOF", "SPUBLISH", "PUBLISH"})


def changes(args: tuple[Any, ...]) -> bool:
    """Whether a command may change state (and so must be confirmed)."""
    return str(args[0]).upper() not in READS


@dataclasses.dataclass(frozen=True)
class ReplicaAcks:
    replicas: int  # N: replicas that must have a change before it is answered
    timeout_ms: int  # how long one WAIT may block
    aof: bool = False  # the primary's AOF fsynced too (WAITAOF 1 0 before the WAIT)

    def commands(self, timeout_ms: int | None = None) -> list[tuple[Any, ...]]:
        """What confirms a batch. Not ``WAITAOF 1 N``: Valkey 9.1 never counts a replica
        whose replication stream ends with an SPUBLISH (it is not written to the
        replica's AOF, so its fsynced offset stays short), and every Concord wake-up
        ends a script with one; so the primary's fsync is asked of WAITAOF and the
        replicas' copies of WAIT."""
        ms = self.timeout_ms if timeout_ms is None else timeout_ms
        wait = ("WAIT", self.replicas, ms)
        return [("WAITAOF", 1, 0, ms), wait] if self.aof else [wait]

    def shortfall(self, replies: list[Any]) -> str | None:
        """None when the replies confirm enough, else what is missing."""
        missing = []
        if self.aof and int(replies[0][0]) < 1:
            missing.append("the primary's append-only file was not fsynced")
        acked = int(replies[-1])
        if acked < self.replicas:
            missing.append(f"{acked} of {self.replicas} replicas confirmed")
        return "; ".join(missing) or None


DEGRADED_MS = 10  # a WAIT's timeout while the last one came back short (see Confirmations)


class Confirmations:
    """One WAIT in flight per Link at a time: the changes sent while it is out wait
    for the next one, sent as soon as it returns. So a WAIT covers every change sent
    since the one before it, however many calls they came from: under load the
    batches grow and the WAITs per change fall.

    While the replicas are missing (a failover's new primary before Sentinel has
    pointed the others at it), every WAIT would block the connection for the whole
    ack timeout and the calls behind it would pile up past their deadlines. So once a
    WAIT comes back short the next ones wait only DEGRADED_MS, failing fast, until one
    is confirmed again."""

    def __init__(self, acks: ReplicaAcks) -> None:
        self._acks = acks
        self._link: Link | None = None
        self._next: asyncio.Future[None] | None = None  # the confirmation changes sent since the last WAIT await
        self._in_flight = False
        self._degraded = False

    def after(self, link: Link) -> asyncio.Future[None]:
        """The confirmation of every change sent on ``link`` so far."""
        if link is not self._link:  # a new connection: what the old one still owed fails with it
            self._drop(self._next)
            self._link, self._next, self._in_flight = link, None, False
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
            self._next.add_done_callback(_retrieve)
            if not self._in_flight:
                asyncio.get_running_loop().call_soon(self._send, link)  # after this turn's changes
        return self._next

    def _send(self, link: Link) -> None:
        if link is not self._link:  # replaced meanwhile: after() failed what it owed
            return
        confirm, self._next = self._next, None
        if confirm is None:
            return
        self._in_flight = True
        timeout = min(DEGRADED_MS, self._acks.timeout_ms) if self._degraded else None
        waits = asyncio.gather(*(link.send(c) for c in self._acks.commands(timeout)))
        waits.add_done_callback(lambda done: self._settle(link, done, confirm))

    def _settle(self, link: Link, wait: asyncio.Future[Any], confirm: asyncio.Future[None]) -> None:
        self._answer(wait, confirm)
        if link is self._link:
            self._in_flight = False
            if self._next is not None:  # changes sent while this WAIT was out: their own WAIT now
                self._send(link)

    @staticmethod
    def _drop(confirm: asyncio.Future[None] | None) -> None:
        """A confirmation whose WAIT will never be sent (its connection was replaced)."""
        if confirm is not None and not confirm.done():
            confirm.set_exception(RedisConnectionError("the connection was replaced before its WAIT was sent"))

    def _answer(self, wait: asyncio.Future[Any], confirm: asyncio.Future[None]) -> None:
        if confirm.done():
            return
        if wait.cancelled():
            confirm.cancel()
        elif isinstance(error := wait.exception(), ResponseError):  # e.g. WAITAOF with appendonly off
            confirm.set_exception(ReplicationTimeout(f"Redis refused to confirm the change: {error}",
                                                     wanted=str(self._acks.replicas)))
        elif error is not None:
            confirm.set_exception(error)
        elif (missing := self._acks.shortfall(wait.result())) is not None:
            self._degraded = True
            confirm.set_exception(ReplicationTimeout(
                f"the change was made on the Redis primary but not confirmed within "
                f"{self._acks.timeout_ms} ms: {missing}; it may not survive a failover",
                wanted=str(self._acks.replicas)))
        else:
            self._degraded = False
            confirm.set_result(None)


def _retrieve(confirm: asyncio.Future[None]) -> None:
    """A confirmation nobody awaits (its script failed first) is not an unretrieved error."""
    if not confirm.cancelled():
        confirm.exception()
