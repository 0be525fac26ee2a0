"""Console sessions, kept in Redis so that every replica knows them and a restart
loses none, and the throttle on failed logins.

A login with an API token (auth.py) gets a cookie ``<token id>.<secret>``: the token
id is a hash of the token's SHA-256 digest (it names the token's slot, nothing
more), the secret 32 random bytes (``secrets``). Redis keeps, in the console's own
key space (``KeySpace.server_console``: no tenant can build a key of it), per token:

    {<prefix>#console:token:<token id>}:sessions   zset: session -> created us (oldest first)
    {<prefix>#console:token:<token id>}:s:<hash>   hash: d (the token's SHA-256, hex), t tenant,
                                                   r role (at login), c created ms, x ends ms,
                                                   a last refreshed ms

where ``<hash>`` is the SHA-256 of the cookie: someone who reads Redis cannot replay a
session. A session ends after IDLE_TTL without a request (the record's TTL, slid
forward at most once per REFRESH by lua/console_session_touch.lua, so a page polling
every second writes once a minute), at LIFETIME after its login whatever happens, at
logout (the record is deleted: every replica sees it at once), when its token leaves
the token file (each request looks the digest up in this process's table in force,
and a reload deletes the sessions of tokens that left: lua/console_session_close.lua),
and when its token has opened MAX_PER_TOKEN newer ones (lua/console_session_open.lua
drops the oldest, so a script logging in in a loop holds at most that many records).
All of a token's keys share one hash tag, so each script touches one slot (Redis
Cluster too). A request costs one script (touch); a cookie of the wrong form, or of a
token the table does not know, is refused without a Redis call.

Failed logins are throttled (LoginThrottle) before the token is looked at: per client
address, in Redis (GCRA of primitives/ratelimit.py over ``KeySpace.server_limits``,
key ``console-login:<address>``, an IPv6 address counted by its /64), so every
replica and worker process counts an address's failures together and a restart does
not forget them; and per process, a token bucket in memory, which bounds the guesses
this process checks however many addresses they come from, at no Redis cost. Each
attempt takes a unit of both before the token is compared (concurrent guesses cannot
overshoot); a login that succeeds gives them back, so successful logins are never
counted. A refused attempt is 429 RESOURCE_EXHAUSTED with Retry-After and the token
is not compared; an address refused by Redis is remembered here until its retry time,
so hammering costs no Redis call.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import logging
import math
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from concord.error.v1.error_pb2 import REASON_RESOURCE_EXHAUSTED

from ..edge.auth import AuthInterceptor, Identity, TokenTable, digest_of
from ..errors import ConcordError, LimitReached, PermissionDenied, Unauthenticated
from ..keys import KeySpace
from ..primitives.ratelimit import Algorithm, Decision, Limit, RateLimits
from ..store.reply_shapes import INT, STR, Tagged, Tup
from ..store.scripts import Commands, script
from .auth import ANONYMOUS, COOKIE, Viewer, viewer_of

log = logging.getLogger("concord_server.console")

IDLE_TTL = 12 * 3600  # seconds without a request before a session ends
LIFETIME = 24 * 3600  # seconds after its login that a session ends, however busy
REFRESH = 60  # seconds: a session's idle TTL is written at most this often
MAX_PER_TOKEN = 100  # sessions one token may hold; a login past it ends the oldest
# Failed logins: per address (across replicas) a burst, then one per ADDRESS_EVERY seconds;
# per process a burst, then PROCESS_RATE per second.
ADDRESS_FAILURES = 5
ADDRESS_EVERY = 20
PROCESS_FAILURES = 50
PROCESS_RATE = 1.0
_REMEMBERED = 4096  # throttled addresses this process remembers (no Redis call for them)

_OPEN = script("console_session_open.lua", Tup(INT, INT))
_TOUCH = script("console_session_touch.lua", Tagged({0: Tup(), 1: Tup(STR, STR, STR, INT, INT)}))
_CLOSE = script("console_session_close.lua", INT)
SCRIPTS = (_OPEN, _TOUCH, _CLOSE)

_COOKIE_FORM = re.compile(r"([0-9a-f]{32})\.[A-Za-z0-9_-]{43}")
VIEWER = "concord.console.viewer"  # request key: the viewer (or why there is none), set by the middleware


def token_id(digest: bytes) -> str:
    """The name of a token's sessions in Redis and in its cookies (not its digest)."""
    return hashlib.sha256(b"concord console sessions\0" + digest).hexdigest()[:32]


class LoginThrottle:
    """Failed logins per client address (Redis, every replica) and per process (here)."""

    def __init__(self, limits: RateLimits, *, address_failures: int = ADDRESS_FAILURES,
                 address_every: float = ADDRESS_EVERY, process_failures: int = PROCESS_FAILURES,
                 process_rate: float = PROCESS_RATE) -> None:
        self._limits = limits
        self._per_address = Limit(Algorithm.GCRA, 1, round(address_every * 1000), address_failures)
        self._burst = process_failures
        self._rate = process_rate
        self._tokens = float(process_failures)
        self._stamp = time.monotonic()
        self._refused_until: dict[str, float] = {}  # address key -> monotonic time Redis said to retry at

    async def take(self, address: str | None) -> tuple[str, Decision]:
        """One attempt's unit of the address's and the process's budget (LimitReached
        when either has none left); give it back with ``give_back`` if the login succeeds."""
        key = address_key(address)
        now = time.monotonic()
        until = self._refused_until.get(key)
        if until is not None:
            if now < until:
                raise _throttled("from this address", until - now)
            del self._refused_until[key]
        self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self._rate)
        self._stamp = now
        if self._tokens < 1:
            raise _throttled("on this server", (1 - self._tokens) / self._rate)
        self._tokens -= 1
        try:
            decision = await self._limits.check(key, self._per_address, 1)
        except BaseException:
            self._tokens = min(self._burst, self._tokens + 1)
            raise
        if not decision.allowed:
            self._tokens = min(self._burst, self._tokens + 1)  # the token was not compared: no guess spent
            delay = max(decision.retry_ms, 1) / 1000
            self._remember(key, now + delay)
            raise _throttled("from this address", delay)
        return key, decision

    async def give_back(self, taken: tuple[str, Decision]) -> None:
        self._tokens = min(self._burst, self._tokens + 1)
        key, decision = taken
        await self._limits.refund(key, self._per_address, 1, decision)

    def _remember(self, key: str, until: float) -> None:
        if len(self._refused_until) >= _REMEMBERED:
            now = time.monotonic()
            self._refused_until = {k: t for k, t in self._refused_until.items() if t > now}
            while len(self._refused_until) >= _REMEMBERED:  # still full: forget the oldest
                del self._refused_until[next(iter(self._refused_until))]
        self._refused_until[key] = until


def address_key(address: str | None) -> str:
    """The throttle's key of a client address: the address, an IPv6 one by its /64
    (one host usually holds a whole /64)."""
    try:
        ip = ipaddress.ip_address((address or "").split("%")[0])
    except ValueError:
        return "console-login:?"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        else:
            return f"console-login:{ipaddress.IPv6Network((ip, 64), strict=False)}"
    return f"console-login:{ip}"


def _throttled(where: str, delay: float) -> LimitReached:
    return LimitReached(f"too many failed logins {where}; try again in {math.ceil(delay)} s",
                        REASON_RESOURCE_EXHAUSTED, delay, limit="console_logins")


class SessionStore:
    """The console's sessions of one server process, in Redis (see the module's doc)."""

    def __init__(self, auth: AuthInterceptor | None, commands: Commands, keyspace: KeySpace, *,
                 cluster: bool = False, throttle: LoginThrottle | None = None) -> None:
        self._auth = auth
        self._redis = commands
        self._keys = keyspace.server_console()
        self.throttle = throttle or LoginThrottle(RateLimits(commands, keyspace.server_limits(), cluster=cluster))
        self.idle_ms, self.lifetime_ms, self.refresh_ms, self.cap = (IDLE_TTL * 1000, LIFETIME * 1000,
                                                                     REFRESH * 1000, MAX_PER_TOKEN)
        self._table: TokenTable | None = None
        self._by_id: dict[str, tuple[bytes, Identity]] = {}
        self._ending: set[asyncio.Task[None]] = set()
        if auth is not None:
            auth.reload_listeners.append(self._reloaded)

    @property
    def needs_token(self) -> bool:
        return self._auth is not None

    @property
    def lifetime(self) -> int:
        """Seconds a session lasts at most (the cookie's Max-Age)."""
        return self.lifetime_ms // 1000

    def _tokens(self) -> dict[str, tuple[bytes, Identity]]:
        """Token id -> (digest, identity) of the token table in force (rebuilt after a reload)."""
        assert self._auth is not None
        table = self._auth.table
        if table is not self._table:
            self._by_id = {token_id(digest): (digest, identity) for digest, identity in table.entries}
            self._table = table
        return self._by_id

    async def login(self, token: str, address: str | None, replacing: str | None = None) -> tuple[str, Viewer]:
        """A new session cookie for a token the table knows; Unauthenticated otherwise,
        LimitReached (before the token is compared) after too many failures."""
        if self._auth is None:
            raise PermissionDenied("this server runs without --auth-tokens: no login needed")
        taken = await self.throttle.take(address)
        digest = digest_of(token)
        identity = self._auth.table.by_digest(digest)  # constant time (hmac.compare_digest)
        if identity is None:
            log.info("console: a login from %s with an unknown token was refused", address)
            raise Unauthenticated("unknown token")
        await self.throttle.give_back(taken)
        if replacing:  # the browser's session before this one: it holds one at a time
            await self.logout(replacing)
        tid = token_id(digest)
        cookie = f"{tid}.{secrets.token_urlsafe(32)}"
        keys, member = self._keys.console_sessions(tid), _hash(cookie)
        _, dropped = await _OPEN.run(self._redis, [keys.index, keys.session(member)], [
            keys.record, member, digest.hex(), identity.tenant, identity.role, self.idle_ms, self.lifetime_ms,
            self.cap])
        viewer = viewer_of(identity, digest)
        if dropped:
            log.info("console: %s has %d sessions open, its most: its oldest %d ended", viewer.who, self.cap, dropped)
        return cookie, viewer

    async def logout(self, cookie: str | None) -> None:
        found = _COOKIE_FORM.fullmatch(cookie or "")
        if found is not None:
            keys = self._keys.console_sessions(found[1])
            await _CLOSE.run(self._redis, [keys.index], [keys.record, _hash(found[0])])

    async def viewer(self, cookie: str | None) -> Viewer:
        """Who holds this session cookie; Unauthenticated if nobody (or the token is gone)."""
        if self._auth is None:
            return Viewer(ANONYMOUS, "anonymous (no --auth-tokens)", tenanted=False)
        found = _COOKIE_FORM.fullmatch(cookie or "")
        if found is None:
            raise Unauthenticated("log in with a token")
        known = self._tokens().get(found[1])
        if known is None:
            raise Unauthenticated("log in with a token (none, or the session's token was revoked)")
        digest, identity = known
        keys, member = self._keys.console_sessions(found[1]), _hash(found[0])
        session = await _TOUCH.run(self._redis, [keys.index, keys.session(member)],
                                   [member, self.idle_ms, self.refresh_ms])
        if session[0] == 0:
            raise Unauthenticated("log in with a token (the session ended)")
        if session[1] != digest.hex() or session[2] != identity.tenant:  # another token's, or moved tenant
            await _CLOSE.run(self._redis, [keys.index], [keys.record, member])
            raise Unauthenticated("the token of this session was revoked")
        return viewer_of(identity, digest)

    def _reloaded(self, old: TokenTable, new: TokenTable) -> None:
        """After a reload: the sessions of tokens that left the file (or moved to
        another tenant) are deleted in Redis, so they cannot come back with the token."""
        now = {digest: identity.tenant for digest, identity in new.entries}
        gone = {token_id(d) for d, identity in old.entries if now.get(d) != identity.tenant}
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not reloaded by the server's SIGHUP handler: nothing to run it on
            return
        if gone:
            task = loop.create_task(self._end_all(gone))
            self._ending.add(task)
            task.add_done_callback(self._ending.discard)

    async def _end_all(self, token_ids: set[str]) -> None:
        ended = 0
        for tid in token_ids:
            keys = self._keys.console_sessions(tid)
            try:
                ended += await _CLOSE.run(self._redis, [keys.index], [keys.record, ""])
            except ConcordError as exc:  # each request still refuses them: the table decides
                log.warning("console: the sessions of a revoked token were not deleted: %s", exc)
        if ended:
            log.info("console: %d sessions of revoked tokens ended", ended)

    async def aclose(self) -> None:
        if self._ending:
            await asyncio.wait(self._ending, timeout=2.0)


def _hash(cookie: str) -> str:
    return hashlib.sha256(cookie.encode()).hexdigest()


def middleware(store: SessionStore) -> Callable[..., Awaitable[web.StreamResponse]]:
    """Finds the viewer of each /api/ request (but login and logout) before its handler
    runs, so ``Console.viewer(request)`` is a plain lookup (or raises why there is none)."""

    @web.middleware
    async def sessions(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                       ) -> web.StreamResponse:
        if request.path.startswith("/api/") and request.path not in ("/api/login", "/api/logout"):
            try:
                request[VIEWER] = await store.viewer(request.cookies.get(COOKIE))
            except ConcordError as exc:
                request[VIEWER] = exc
        return await handler(request)

    return sessions


def viewer_of_request(request: web.Request) -> Viewer:
    found: Any = request.get(VIEWER)
    if isinstance(found, Viewer):
        return found
    raise found if isinstance(found, ConcordError) else Unauthenticated("log in with a token")
