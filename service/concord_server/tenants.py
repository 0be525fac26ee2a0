"""Tenants: each caller's keys live under its tenant's prefix (keys.KeySpace.tenant).

edge/auth.py sets ``current`` for the duration of each call. With auth on, every tenant
gets its own set of primitives, built on first use over the process's shared Redis
connection, waiters and doorbells. Giving each tenant its own instances (rather than
making KeySpace read the context) keeps everything a primitive shares between calls
per tenant too: chat_feeds' per-chat shared reads, background let-go and hand-back
tasks, counters such as chat and file ids. Waiters and doorbells are keyed by channel
names, which already carry the tenant's prefix.

Servicers are unchanged: they get a ``Routed`` stand-in per primitive, which forwards
each attribute to the current tenant's instance.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, TypeVar

from .keys import KeySpace

# The calling tenant; None outside calls (start-up, shutdown) and with auth off.
current: ContextVar[str | None] = ContextVar("concord_tenant", default=None)

P = TypeVar("P")  # what build() makes: a dataclass, one field per primitive (app.Primitives)


class Tenants:
    """Primitives per tenant, built by ``build(keyspace)`` on first use."""

    def __init__(self, keyspace: KeySpace, build: Callable[[KeySpace], Any]) -> None:
        self._keyspace = keyspace
        self._build = build
        self._shared = build(keyspace)  # calls without a tenant (none reach it with auth on)
        self._by_tenant: dict[str, Any] = {}

    def primitives(self) -> Any:
        tenant = current.get()
        if tenant is None:
            return self._shared
        found = self._by_tenant.get(tenant)
        if found is None:
            found = self._by_tenant[tenant] = self._build(self._keyspace.tenant(tenant))
        return found

    def every(self, field: str) -> list[Any]:
        return [getattr(p, field) for p in (self._shared, *self._by_tenant.values())]

    def routed(self) -> Any:
        """Like what build() makes, with a Routed stand-in in every field."""
        fields = dataclasses.fields(self._shared)
        return dataclasses.replace(self._shared, **{f.name: Routed(self, f.name) for f in fields})


class Routed:
    """Stands in for one primitive: attributes come from the current tenant's instance."""

    def __init__(self, tenants: Tenants, field: str) -> None:
        self._tenants = tenants
        self._field = field

    def __getattr__(self, name: str) -> Any:
        return getattr(getattr(self._tenants.primitives(), self._field), name)

    async def drain(self, timeout: float) -> None:
        """Every tenant's instance drains (at shutdown, outside any call)."""
        instances = [p for p in self._tenants.every(self._field) if hasattr(p, "drain")]
        await asyncio.gather(*(p.drain(timeout=timeout) for p in instances))


def route(keyspace: KeySpace, build: Callable[[KeySpace], P], tenanted: bool) -> P:
    """The primitives servicers use: plain ones for the shared key space, or Routed
    stand-ins when calls carry tenants (auth on). ``build`` returns a dataclass with
    one field per primitive."""
    if not tenanted:
        return build(keyspace)
    return Tenants(keyspace, build).routed()
