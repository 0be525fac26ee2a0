"""Every page of a server listing (ListReadWriteLocks, ListElections, ListIndexes,
ListFileGroups, ListLimits) as one list, for the sync and async clients.

A listing walks the tenant's index of names with HSCAN (the server's
primitives/listing.py), which may hand out a name twice; the last entry seen for a
name is kept, so each resource comes once. Entries come sorted by name.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

PAGE_SIZE = 1000  # index entries per page: the most the server examines per call


def every_page(call: Callable[[str, Any], Any], method: str, request_type: Any, field: str, key: str,
               entry: Callable[[Any], T]) -> list[T]:
    """``call`` is a Service's call_safe (a listing is a read, safe to retry); the
    rest is a kind's LISTING: the RPC, its request type, the response's repeated
    field, the entry's name field and what makes an entry of the client's."""
    found: dict[str, T] = {}
    token = ""
    while True:
        page = call(method, request_type(page_token=token, page_size=PAGE_SIZE))
        found.update((getattr(m, key), entry(m)) for m in getattr(page, field))
        token = page.next_page_token
        if not token:
            return [found[k] for k in sorted(found)]


async def every_page_async(call: Callable[[str, Any], Awaitable[Any]], method: str, request_type: Any, field: str,
                           key: str, entry: Callable[[Any], T]) -> list[T]:
    found: dict[str, T] = {}
    token = ""
    while True:
        page = await call(method, request_type(page_token=token, page_size=PAGE_SIZE))
        found.update((getattr(m, key), entry(m)) for m in getattr(page, field))
        token = page.next_page_token
        if not token:
            return [found[k] for k in sorted(found)]
