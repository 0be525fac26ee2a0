"""Lua scripts: loaded from lua/ once, run with EVALSHA, reloaded after a Redis restart.

A script file may begin with ``--! include other.lua`` lines; those files are
prepended, which is how the lock scripts share their helpers.
"""

from __future__ import annotations

import hashlib
from functools import cache
from importlib import resources
from typing import Any, Protocol

from redis.client import NEVER_DECODE
from redis.exceptions import NoScriptError

from .redis_client import unavailable_on_redis_errors

_INCLUDE = "--! include "


class Commands(Protocol):
    """What a script needs: redis.asyncio.Redis or autopipeline.AutoPipeline."""

    async def execute_command(self, *args: Any, **options: Any) -> Any: ...


def _read(name: str) -> str:
    return resources.files(__package__).joinpath("lua", name).read_text(encoding="utf-8")


class Script:
    """``raw`` scripts return bytes untouched (task payloads); others decode UTF-8."""

    def __init__(self, name: str, raw: bool = False) -> None:
        body = _read(name)
        parts = [_read(line[len(_INCLUDE) :].strip()) for line in body.splitlines() if line.startswith(_INCLUDE)]
        self.name = name
        self._options = {NEVER_DECODE: True} if raw else {}
        self.source = "\n".join([*parts, body])
        self.sha = hashlib.sha1(self.source.encode()).hexdigest()

    async def __call__(self, redis: Commands, keys: list[str], args: list[Any]) -> Any:
        with unavailable_on_redis_errors():
            try:
                return await redis.execute_command("EVALSHA", self.sha, len(keys), *keys, *args, **self._options)
            except NoScriptError:
                # First use on this Redis, or Redis restarted and lost its script cache.
                await self.load(redis)
                return await redis.execute_command("EVALSHA", self.sha, len(keys), *keys, *args, **self._options)

    async def load(self, redis: Commands) -> None:
        await redis.execute_command("SCRIPT", "LOAD", self.source)


@cache
def script(name: str, raw: bool = False) -> Script:
    """The registered script for lua/<name>; each file is read and hashed once."""
    return Script(name, raw)
