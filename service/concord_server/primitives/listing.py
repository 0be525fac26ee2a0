"""Paging through the resources of one kind, for operators (the admin CLI).

SCAN over the kind's key pattern, one bounded page per call with Redis's cursor as
the page token; never KEYS, which would block Redis for the whole key space. SCAN's
guarantees carry over: every resource that exists for the whole listing is seen, a
name may come twice, one created or deleted meanwhile may or may not be. On a Redis
Cluster each primary holds its own keys, so the listing scans the primaries one
after another (in name order) and the token is "<primary index>:<cursor>"; a
resharding during a listing may skip or repeat names.
"""

from __future__ import annotations

from collections.abc import Collection

from ..keys import KeySpace
from ..redis_client import command, unavailable_on_redis_errors
from ..scripts import Commands


async def scan_names(redis: Commands, keyspace: KeySpace, kind: str, suffixes: Collection[str],
                     page_token: str, count: int) -> tuple[list[str], str]:
    """(names on this page, next page token or "" at the end). A resource is listed
    when one of its keys ending in ``suffixes`` exists (the keys that say it is live,
    not the ones kept after it, like a lock's last fencing token)."""
    scan = ("MATCH", keyspace.scan_pattern(kind), "COUNT", count)
    node = None
    if hasattr(redis, "on_each_primary"):  # cluster.ClusterCommands
        node, _, page_token = (page_token or "0:0").partition(":")
        node = int(node)
        with unavailable_on_redis_errors():
            reply, primaries = await redis.on_each_primary(node, "SCAN", page_token or "0", *scan)
        cursor, keys = reply if reply is not None else ("0", [])
    else:
        cursor, keys = await command(redis, "SCAN", page_token or "0", *scan)
    names = set()
    for key in keys:
        found = keyspace.resource_of(kind, key.decode() if isinstance(key, bytes) else key)
        if found and found[1] in suffixes:
            names.add(found[0])
    cursor = cursor.decode() if isinstance(cursor, bytes) else str(cursor)
    if node is None:
        return sorted(names), "" if cursor == "0" else cursor
    if cursor == "0":  # this primary is done: the next one, from its start
        node, cursor = node + 1, "0"
    return sorted(names), "" if node >= primaries else f"{node}:{cursor}"
