"""Bearer tokens (``--auth-tokens FILE``): who may call, as which tenant, and what.

The file is TOML::

    [[tokens]]
    token = "acme-worker-7bd1..."        # or: sha256 = "<hex digest of the token>"
    tenant = "acme"                      # A-Z a-z 0-9 _ . -, at most 64
    services = ["lock", "queue"]         # optional: only these services (default: all)
    role = "read-write"                  # optional: read-only | read-write (default) | admin

    [tenants.acme]                       # optional: this tenant's limits (limits.py)
    rate = 100.0
    burst = 200
    max_blocked = 1000
    max_streams = 50
    max_request_bytes = 65536

A role decides which methods of its services a token may call (the table is
methods.METHOD_ROLES): read-only, only methods that change nothing (Describe,
Stats, Peek, List*, Get*, Suggest, WatchQueue, Observe...); read-write, all but the
admin methods; admin, also ForceRelease, SetLimit, Purge, RetryDead, PauseQueue,
ResumeQueue, SetQueuePolicy and SetGroupRules.

Only SHA-256 digests of the tokens are kept in memory, and a presented token's
digest is compared with every entry in constant time. ``reload()`` (on SIGHUP)
re-reads the file; a file that does not load leaves the old table in force. A
reload also ends every open call and stream whose token the new table no longer
knows, gives another tenant, or no longer allows the method (revocation.py).

Every call but health and reflection (those too with --auth-health) needs
``authorization: Bearer <token>``: missing or unknown -> UNAUTHENTICATED; a service
or method the token is not allowed -> PERMISSION_DENIED (metadata: service, method,
role). The decision is made from the call's headers, before its request message is
read (guard.refused), so a refused call holds nothing while a client dawdles. The
call then runs as its tenant (tenants.current), so it reaches only that tenant's keys.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import tomllib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from ..errors import ConcordError, PermissionDenied, Unauthenticated
from ..keys import validate_tenant
from ..tenants import current as current_tenant
from .guard import refused, wrap
from .limits import Limiter, LimitInterceptor, Quota, SharedRate
from .methods import DEFAULT_ROLE, ROLES, SERVICES, is_open_method, role_allows
from .revocation import OpenCalls

log = logging.getLogger(__name__)



@dataclass(frozen=True)
class Identity:
    tenant: str
    services: frozenset[str] | None  # full service names; None: all
    role: str = DEFAULT_ROLE  # methods.ROLES

    def refusal(self, method: str) -> PermissionDenied | None:
        """Why this token may not call the method, or None if it may."""
        service = method.split("/")[1] if method.count("/") >= 2 else ""
        if is_open_method(method):
            return None
        if self.services is not None and service not in self.services:
            return PermissionDenied(f"this token may not call {service}", service=service)
        if not role_allows(self.role, method):
            return PermissionDenied(f"a {self.role} token may not call {method}", service=service, method=method,
                                    role=self.role)
        return None


@dataclass(frozen=True)
class TokenTable:
    entries: tuple[tuple[bytes, Identity], ...]  # (sha256 of the token, who it is)
    tenant_limits: dict[str, dict[str, Any]]  # tenant -> limits.Quota overrides

    def identify(self, token: str) -> Identity | None:
        return self.by_digest(digest_of(token))

    def by_digest(self, digest: bytes) -> Identity | None:
        found = None
        for known, identity in self.entries:  # no early exit: time does not depend on which matched
            if hmac.compare_digest(known, digest):
                found = identity
        return found


def digest_of(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def load_tokens(path: str | Path) -> TokenTable:
    """Reads and checks a token file; ValueError says what is wrong with it."""
    try:
        doc = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"token file {path}: {exc}") from exc
    entries = []
    for i, entry in enumerate(doc.get("tokens", [])):
        where = f"token file {path}, tokens[{i}]"
        unknown = set(entry) - {"token", "sha256", "tenant", "services", "role"}
        if unknown or ("token" in entry) == ("sha256" in entry):
            raise ValueError(f"{where}: needs exactly one of token / sha256, and tenant, services, role; "
                             f"unknown keys {sorted(unknown)}")
        role = entry.get("role", DEFAULT_ROLE)
        if role not in ROLES:
            raise ValueError(f"{where}: role must be one of {', '.join(ROLES)}, not {role!r}")
        if "token" in entry:
            if len(entry["token"]) < 16:
                raise ValueError(f"{where}: a token must have at least 16 characters")
            digest = digest_of(entry["token"])
        else:
            digest = bytes.fromhex(entry["sha256"])
            if len(digest) != 32:
                raise ValueError(f"{where}: sha256 must be 64 hex digits")
        try:
            tenant = validate_tenant(entry.get("tenant", ""))
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        services = entry.get("services")
        if services is not None:
            bad = [s for s in services if s not in SERVICES and s not in SERVICES.values()]
            if bad:
                raise ValueError(f"{where}: unknown services {bad}; known: {sorted(SERVICES)}")
            services = frozenset(SERVICES.get(s, s) for s in services)
        entries.append((digest, Identity(tenant, services, role)))
    if not entries:
        raise ValueError(f"token file {path}: no [[tokens]]")
    tenant_limits = doc.get("tenants", {})
    for tenant, limits in tenant_limits.items():
        try:
            validate_tenant(tenant)
            Quota().overridden(limits)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"token file {path}, tenants.{tenant}: {exc}") from None
    return TokenTable(tuple(entries), tenant_limits)


def bearer(metadata: Any) -> str | None:
    for key, value in metadata or ():
        if key == "authorization" and isinstance(value, str):
            scheme, _, token = value.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    return None


class _AuthGuard:
    """Re-checks the call against the token table in force as it starts (a reload may
    have come since its headers), sets its tenant and keeps it in the open calls."""

    headers_first = True  # a revoked stream's status is sent from outside it (revocation.py)

    def __init__(self, auth: AuthInterceptor, digest: bytes, method: str) -> None:
        self._auth = auth
        self._digest = digest
        self._method = method

    def open(self, context: grpc.aio.ServicerContext, request: Any | None) -> contextlib.AbstractContextManager[Any]:
        identity = self._auth.table.by_digest(self._digest)
        if identity is None:
            raise Unauthenticated("invalid bearer token")
        refusal = identity.refusal(self._method)
        if refusal is not None:
            raise refusal
        # Stays set for the rest of this call's task (each call runs in a task of its own).
        current_tenant.set(identity.tenant)
        return self._auth.open_calls.open(self._digest, self._method, context)

    def requests(self, requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
        return requests


class AuthInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, path: str | Path, protect_health: bool = False) -> None:
        self.path = path
        self.table = load_tokens(path)
        self.protect_health = protect_health
        self.open_calls = OpenCalls()
        # Called with (old, new) after each reload that took: the console ends the
        # sessions of tokens that left (console/sessions.py).
        self.reload_listeners: list[Callable[[TokenTable, TokenTable], None]] = []

    def reload(self) -> None:
        """Re-reads the token file, then ends the open calls it no longer allows."""
        try:
            old, self.table = self.table, load_tokens(self.path)
            log.info("reloaded %d tokens from %s", len(self.table.entries), self.path)
        except ValueError as exc:
            log.error("token file not reloaded, the old tokens stay in force: %s", exc)
            return
        ended = self.open_calls.revoke(lambda digest, method: self._revoked(old, digest, method))
        if ended:
            log.info("token file reload ended %d open calls whose tokens it no longer allows", ended)
        for listener in self.reload_listeners:
            try:
                listener(old, self.table)
            except Exception:  # the reload took and the open calls were ended: a listener cannot undo that
                log.exception("a token file reload listener failed")

    def _revoked(self, old: TokenTable, digest: bytes, method: str) -> ConcordError | None:
        now, before = self.table.by_digest(digest), old.by_digest(digest)
        if now is None or (before is not None and now.tenant != before.tenant):
            return Unauthenticated("the bearer token was revoked")
        return now.refusal(method)

    def quota_overrides(self, tenant: str) -> dict[str, Any]:
        return self.table.tenant_limits.get(tenant, {})

    async def intercept_service(self, continuation: Any, details: grpc.HandlerCallDetails) -> Any:
        handler = await continuation(details)
        if handler is None or (is_open_method(details.method) and not self.protect_health):
            return handler
        token = bearer(details.invocation_metadata)
        if token is None:
            return refused(handler, Unauthenticated("missing 'authorization: Bearer <token>' metadata"))
        digest = digest_of(token)
        identity = self.table.by_digest(digest)
        if identity is None:
            return refused(handler, Unauthenticated("invalid bearer token"))
        refusal = identity.refusal(details.method)
        if refusal is not None:
            return refused(handler, refusal)
        return wrap(handler, _AuthGuard(self, digest, details.method))


def interceptors(settings: Any, shared: SharedRate | None = None
                 ) -> tuple[AuthInterceptor | None, list[grpc.aio.ServerInterceptor]]:
    """The authentication interceptor (None without --auth-tokens) and, in calling
    order, the interceptors to install: auth first, so limits know the tenant.
    ``shared``: the tenant rate across replicas (unless --tenant-rate-per-process)."""
    auth = AuthInterceptor(settings.auth_tokens, settings.auth_health) if settings.auth_tokens else None
    tenant_default = Quota(settings.tenant_rate, settings.tenant_burst, settings.tenant_max_blocked,
                           settings.tenant_max_streams, settings.tenant_max_request_bytes, settings.tenant_storage_bytes)
    peer = Quota(settings.peer_rate, settings.peer_burst, settings.peer_max_blocked, settings.peer_max_streams)
    chain: list[grpc.aio.ServerInterceptor] = [auth] if auth else []
    if auth or tenant_default != Quota() or peer != Quota():

        def tenant_quota(tenant: str) -> Quota:
            overrides = auth.quota_overrides(tenant) if auth else {}
            return tenant_default.overridden(overrides) if overrides else tenant_default

        chain.append(LimitInterceptor(Limiter(tenant_quota, peer,
                                              None if settings.tenant_rate_per_process else shared)))
    return auth, chain
