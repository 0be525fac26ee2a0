"""The prefix autocomplete of "Redis in Action" (section 6.1.2), written from the
book's algorithm over sync redis-py, for the autocomplete comparison.

One zset per guild, ``members:GUILD``, every name at score 0 (the book lower-cases
names and handles only a-z: find_prefix_range's sentinels are '`', the character
before 'a', and '{', the one after 'z'). autocomplete_on_prefix(prefix), as the book
writes it, in round trips:

 1. ZADD members:GUILD the two sentinels, PREFIX' + '{' + uuid and PREFIX + '{' + uuid,
    where PREFIX' is the prefix with its last letter replaced by the one before it  1
 2. WATCH members:GUILD                                                             1
 3. ZRANK of the start sentinel, then ZRANK of the end sentinel, each on its own    2
 4. MULTI, ZREM both sentinels, ZRANGE from the start sentinel's rank to at most 9
    further (and before the end sentinel), EXEC: one transaction                    1

5 in all; a WatchError (another client changed the zset between 2 and 4) repeats
2-4. Names containing '{' are filtered out of the reply (another caller's sentinels).
"""

from __future__ import annotations

import bisect
import uuid
from collections.abc import Iterable

import redis

VALID_CHARACTERS = "`abcdefghijklmnopqrstuvwxyz{"


def zset(guild: str) -> str:
    return f"members:{guild}"


def find_prefix_range(prefix: str) -> tuple[str, str]:
    posn = bisect.bisect_left(VALID_CHARACTERS, prefix[-1:])
    suffix = VALID_CHARACTERS[(posn or 1) - 1]
    return prefix[:-1] + suffix + "{", prefix + "{"


def join_guild(conn: redis.Redis, guild: str, users: Iterable[str]) -> int:
    """The book's join_guild (ZADD name 0), for many users in one ZADD."""
    return conn.zadd(zset(guild), dict.fromkeys(users, 0))


def autocomplete_on_prefix(conn: redis.Redis, guild: str, prefix: str) -> tuple[list[bytes], int]:
    """Up to 10 names starting with prefix (lower-case a-z), and how many WatchErrors
    were retried."""
    start, end = find_prefix_range(prefix)
    identifier = str(uuid.uuid4())
    start += identifier
    end += identifier
    name = zset(guild)
    conn.zadd(name, {start: 0, end: 0})
    retries = 0
    with conn.pipeline(True) as pipe:
        while True:
            try:
                pipe.watch(name)
                sindex = pipe.zrank(name, start)
                eindex = pipe.zrank(name, end)
                erange = min(sindex + 9, eindex - 2)
                pipe.multi()
                pipe.zrem(name, start, end)
                pipe.zrange(name, sindex, erange)
                items = pipe.execute()[-1]
                break
            except redis.exceptions.WatchError:
                retries += 1
    return [item for item in items if b"{" not in item], retries
