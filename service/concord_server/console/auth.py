"""Who is looking: a console session made from an API token (edge/auth.py's table).

POST /api/login with ``{"token": "..."}``: a token the server's token table knows
gets a session cookie (HttpOnly, SameSite=Strict, Path=/); the session, kept in Redis
by sessions.py, names the token only by its SHA-256 digest, and every request looks
that digest up in the table in force, so a token removed or demoted by a reload
(SIGHUP) ends or narrows its sessions at once. Without --auth-tokens there is nothing
to log in with: every viewer is ``anonymous`` in the shared key space and may do what
an unauthenticated gRPC call may (everything). What a viewer may see and do is Identity.refusal of the gRPC method
that does the same (ListLocks, ForceRelease...), the same role table as the API.

Sessions and the login throttle: sessions.py.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..edge.auth import Identity
from ..errors import ConcordError, PermissionDenied

log = logging.getLogger("concord_server.console")

COOKIE = "concord_console"
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

    def may_act(self, method: str) -> bool:
        """Whether the console offers this viewer the action ``method`` does: people act
        in the console as operators, so an action needs an admin token, and one that
        may call the method."""
        return self.identity.role == "admin" and self.may(method)

    def check_act(self, method: str, remote: str | None, doing: str) -> None:
        """Raises PermissionDenied unless may_act(method); a refusal is logged with who asked."""
        try:
            self.check(method)
            if self.identity.role != "admin":
                raise PermissionDenied(f"console actions need an admin token, not a {self.identity.role} one",
                                       method=method, role=self.identity.role)
        except ConcordError:
            log.warning("console: %s from %s was refused %s (needs an admin token)", self.who, remote, doing)
            raise


def viewer_of(identity: Identity, digest: bytes) -> Viewer:
    return Viewer(identity, f"tenant={identity.tenant} role={identity.role} token=sha256:{digest.hex()[:12]}",
                  tenanted=True)
