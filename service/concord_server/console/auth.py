"""Who is looking: a console session made from an API token (edge/auth.py's table).

POST /api/login with ``{"token": "..."}``: a token the server's token table knows
gets a session cookie (HttpOnly, SameSite=Strict, Path=/); the session keeps only the
token's SHA-256 digest, and every request looks that digest up in the table in force,
so a token removed or demoted by a reload (SIGHUP) ends or narrows its sessions at
once. Without --auth-tokens there is nothing to log in with: every viewer is
``anonymous`` in the shared key space and may do what an unauthenticated gRPC call
may (everything). What a viewer may see and do is Identity.refusal of the gRPC method
that does the same (ListLocks, ForceRelease...), the same role table as the API.

Sessions live in this process only (a restart or another replica asks for the token
again); at most MAX_SESSIONS, the oldest dropped first, each for SESSION_TTL.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass

from ..edge.auth import AuthInterceptor, Identity, digest_of
from ..errors import PermissionDenied, Unauthenticated

COOKIE = "concord_console"
SESSION_TTL = 12 * 3600.0  # seconds
MAX_SESSIONS = 10_000
ANONYMOUS = Identity(tenant="", services=None, role="admin")  # without --auth-tokens: the API allows all


@dataclass(frozen=True)
class Viewer:
    identity: Identity
    who: str  # for the log: tenant, role and a short digest of the token, never the token
    tenanted: bool  # False without --auth-tokens: the shared key space

    @property
    def tenant(self) -> str | None:
        return self.identity.tenant if self.tenanted else None

    def may(self, method: str) -> bool:
        return self.identity.refusal(method) is None

    def check(self, method: str) -> None:
        """Raises PermissionDenied (edge/auth.py's, with its reason) unless the viewer may call method."""
        refusal = self.identity.refusal(method)
        if refusal is not None:
            raise refusal


class Sessions:
    def __init__(self, auth: AuthInterceptor | None, *, ttl: float = SESSION_TTL, limit: int = MAX_SESSIONS) -> None:
        self._auth = auth
        self._ttl = ttl
        self._limit = limit
        self._open: OrderedDict[str, tuple[bytes, float]] = OrderedDict()  # session id -> (token digest, expiry)

    @property
    def needs_token(self) -> bool:
        return self._auth is not None

    def login(self, token: str) -> tuple[str, Viewer]:
        """A new session id for a known token; Unauthenticated otherwise."""
        if self._auth is None:
            raise PermissionDenied("this server runs without --auth-tokens: no login needed")
        digest = digest_of(token)
        identity = self._auth.table.by_digest(digest)
        if identity is None:
            raise Unauthenticated("unknown token")
        session = secrets.token_urlsafe(32)
        self._open[session] = (digest, time.monotonic() + self._ttl)
        while len(self._open) > self._limit:
            self._open.popitem(last=False)
        return session, _viewer(identity, digest)

    def logout(self, session: str | None) -> None:
        if session:
            self._open.pop(session, None)

    def viewer(self, session: str | None) -> Viewer:
        """Who holds this session cookie; Unauthenticated if nobody (or the token is gone)."""
        if self._auth is None:
            return Viewer(ANONYMOUS, "anonymous (no --auth-tokens)", tenanted=False)
        found = self._open.get(session or "")
        if found is None or found[1] < time.monotonic():
            self.logout(session)
            raise Unauthenticated("log in with a token")
        identity = self._auth.table.by_digest(found[0])
        if identity is None:
            self.logout(session)
            raise Unauthenticated("the token of this session was revoked")
        return _viewer(identity, found[0])


def _viewer(identity: Identity, digest: bytes) -> Viewer:
    return Viewer(identity, f"tenant={identity.tenant} role={identity.role} token=sha256:{digest.hex()[:12]}",
                  tenanted=True)
