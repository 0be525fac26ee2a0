"""Lua scripts: loaded from lua/ once, run with EVALSHA, reloaded after a Redis restart.

Entry scripts live in lua/; a script file may begin with ``--! include other.lua``
lines, naming helper files in lua/include/ (shared helpers, and status.lua: the
reply statuses of statuses.py) that are prepended, in order.

Every script declares the shape of its reply (store/reply_shapes.py) beside its name, and
every reply is checked against it here, before any caller reads it: a reply of the
wrong shape fails the call UNAVAILABLE, drops the connection it came on, and is
logged at ERROR with the script's name. A script is also declared with a
``decode`` (the reply -> a NamedTuple with named fields, say); ``Script.run`` hands
its callers that typed value, so a reply's positions are read in one place, beside
the script's name, and primitives read fields by name. Calling the script itself
gives the checked wire reply (what tests poke at).
"""

from __future__ import annotations

import hashlib
import logging
from importlib import resources
from collections.abc import Callable
from typing import Any, Protocol

from redis.client import NEVER_DECODE
from redis.exceptions import NoScriptError

from ..errors import ReplicationTimeout, Unavailable
from .client import count_failure, unavailable_on_redis_errors
from .reply_shapes import Shape

log = logging.getLogger(__name__)

_INCLUDE = "--! include "


class Commands(Protocol):
    """What a script needs: autopipeline.AutoPipeline or cluster.ClusterCommands."""

    async def execute_command(self, *args: Any, **options: Any) -> Any: ...

    def reset(self, reason: str, key: Any = None) -> None:
        """Drops the connection (to the node serving key) that a bad reply came on."""

    async def confirm_seen(self, key: str) -> None:
        """With replica acks: returns once the replicas have what this connection has
        seen (a change another connection made); else at once."""


def _read(name: str, *folder: str) -> str:
    return resources.files("concord_server").joinpath("lua", *folder, name).read_text(encoding="utf-8")


class Script:
    """``raw`` scripts return bytes untouched (task payloads); others decode UTF-8."""

    def __init__(self, name: str, reply: Shape, raw: bool = False,
                 decode: Callable[[Any], Any] | None = None) -> None:
        body = _read(name)
        parts = [_read(line[len(_INCLUDE) :].strip(), "include")
                 for line in body.splitlines() if line.startswith(_INCLUDE)]
        self.name = name
        self.reply = reply
        self.decode = decode
        self._options = {NEVER_DECODE: True} if raw else {}
        self.source = "\n".join([*parts, body])
        self.sha = hashlib.sha1(self.source.encode()).hexdigest()

    async def __call__(self, redis: Commands, keys: list[str], args: list[Any]) -> Any:
        with unavailable_on_redis_errors():
            try:
                reply = await redis.execute_command("EVALSHA", self.sha, len(keys), *keys, *args, **self._options)
            except NoScriptError:
                # First use on this Redis, or Redis restarted and lost its script cache.
                await self.load(redis)
                reply = await redis.execute_command("EVALSHA", self.sha, len(keys), *keys, *args, **self._options)
        if not self.reply.fits(reply):
            self._misfit(redis, keys, reply)
        return reply

    async def run(self, redis: Commands, keys: list[str], args: list[Any]) -> Any:
        """The reply, shape checked, then decoded as declared (unchanged with no decode).
        A ReplicationTimeout's reply (the script ran, unconfirmed) is decoded the same way."""
        try:
            reply = await self(redis, keys, args)
        except ReplicationTimeout as exc:
            if exc.reply is not None:
                exc.reply = (exc.reply if self.decode is None else self.decode(exc.reply)) \
                    if self.reply.fits(exc.reply) else None
            raise
        return reply if self.decode is None else self.decode(reply)

    def _misfit(self, redis: Commands, keys: list[str], reply: Any) -> None:
        shown = repr(reply)
        log.error("BUG: script %s replied %s, which is not the shape it promises (%r); "
                  "dropping the Redis connection it came on", self.name,
                  shown if len(shown) <= 300 else shown[:300] + "...", self.reply)
        count_failure("reply-shape", ValueError(self.name))
        redis.reset(f"{self.name} replied out of shape", keys[0] if keys else None)
        raise Unavailable(f"Redis gave {self.name} a reply it cannot have sent; the connection was reset")

    async def load(self, redis: Commands) -> None:
        await redis.execute_command("SCRIPT", "LOAD", self.source)


_SCRIPTS: dict[str, Script] = {}


def script(name: str, reply: Shape, raw: bool = False, decode: Callable[[Any], Any] | None = None) -> Script:
    """The registered script for lua/<name>, whose replies have the shape ``reply``
    (and are handed over as ``decode(reply)`` when given); each file is read and
    hashed once."""
    if name in _SCRIPTS:
        raise ValueError(f"script {name} is declared twice")
    s = _SCRIPTS[name] = Script(name, reply, raw, decode)
    return s


def registered() -> dict[str, Script]:
    """Every script declared so far, by file name (tests check each has a shape)."""
    return dict(_SCRIPTS)
