"""One socket to one Redis node, owned by one object, that never reconnects.

Why not redis-py's Connection: it reconnects by itself inside ``send_packed_command``
when it finds itself disconnected, and its socket write runs as a separate task
under ``asyncio.wait_for``, whose cancellation Python 3.11 can swallow. A writer
task told to stop could therefore live on, reconnect the old connection in place
and send commands whose replies nobody read, while a new connection's reader
handed the next replies to the wrong callers (a lock's acquire reply to an
SMEMBERS, one chat id to two sends). Here a ``Link`` is the socket: it is opened
once (with its handshake read before anyone else can use it), owes replies in the
order it sent commands, and when anything goes wrong it fails every command still
owed with ConnectionError or TimeoutError (UNAVAILABLE to clients, retryable) and
is never used again. A replacement is a new Link that owes nothing.

``Endpoint`` is where and how to connect, parsed once from the Redis URL
(redis://, rediss:// with ``ssl_*`` query options, unix://, and redis+sentinel:// or
rediss+sentinel://, whose primary is asked of the Sentinels for every new link:
sentinel.py); a cluster node is the same endpoint at another host and port. A
``READONLY`` reply closes its link once the caller has it: the node was demoted by a
failover, and the next link finds the new primary. Replies are parsed by hiredis; error
replies become redis-py's exception classes (public API), so callers keep catching
NoScriptError, MovedError and the like.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import socket
import ssl
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import hiredis
from redis import exceptions as rexc

from .replica_acks import ReplicaAcks
from .sentinel import Sentinels, is_primary, primary_of

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 2.0  # seconds to open a socket and finish the handshake
REPLY_TIMEOUT = 5.0  # seconds the oldest command in flight may wait for its reply

# Error reply prefixes that mean more than "the command failed" (redis-py's classes).
_ERRORS: dict[str, type[rexc.ResponseError]] = {
    "NOSCRIPT": rexc.NoScriptError,
    "LOADING": rexc.BusyLoadingError,
    "READONLY": rexc.ReadOnlyError,
    "MOVED": rexc.MovedError,
    "ASK": rexc.AskError,
    "TRYAGAIN": rexc.TryAgainError,
    "CLUSTERDOWN": rexc.ClusterDownError,
    "NOPERM": rexc.NoPermissionError,
    "OOM": rexc.OutOfMemoryError,  # maxmemory reached under noeviction: the write was refused
    "WRONGPASS": rexc.AuthenticationError,  # type: ignore[dict-item]
    "NOAUTH": rexc.AuthenticationError,  # type: ignore[dict-item]
}


def error_from_reply(reply: hiredis.ReplyError) -> rexc.RedisError:
    message = str(reply)
    prefix, _, rest = message.partition(" ")
    cls = _ERRORS.get(prefix)
    if cls is None:
        return rexc.ResponseError(message)
    if cls in (rexc.MovedError, rexc.AskError):
        return cls(rest)  # "<slot> <host>:<port>"
    return cls(message)


def _flag(value: str) -> bool:
    return value.lower() in ("1", "true", "yes", "on")


@dataclasses.dataclass(frozen=True)
class Endpoint:
    host: str = "127.0.0.1"
    port: int = 6379
    path: str | None = None  # a unix socket instead of host and port
    username: str | None = None
    password: str | None = None
    db: int = 0
    ssl: ssl.SSLContext | None = None
    connect_timeout: float = CONNECT_TIMEOUT
    reply_timeout: float = REPLY_TIMEOUT
    sentinels: Sentinels | None = None  # redis+sentinel://: host and port are asked of these
    replica_acks: ReplicaAcks | None = None  # --redis-replica-acks: a change is answered once replicas have it

    @classmethod
    def from_url(cls, url: str, **overrides: Any) -> Endpoint:
        parts = urlsplit(url)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        if parts.scheme not in ("redis", "rediss", "unix", "redis+sentinel", "rediss+sentinel"):
            raise ValueError(f"unsupported Redis URL scheme {parts.scheme!r} (redis://, rediss://, unix://, "
                             "redis+sentinel:// or rediss+sentinel://)")
        if parts.scheme.endswith("+sentinel"):
            return cls._from_sentinel_url(parts, query, **overrides)
        db = int(query.get("db") or (parts.path.lstrip("/") if parts.scheme != "unix" else "") or 0)
        context = _tls(query) if parts.scheme == "rediss" else None
        return cls(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 6379,
            path=parts.path if parts.scheme == "unix" else None,
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else None,
            db=db,
            ssl=context,
            **overrides,
        )

    @classmethod
    def _from_sentinel_url(cls, parts: Any, query: dict[str, str], **overrides: Any) -> Endpoint:
        """redis+sentinel://[user:pass@]host:port[,host:port...]/service[/db]: the user and
        password are the data nodes'; ``sentinel_username`` and ``sentinel_password``
        (query) the Sentinels'; rediss+sentinel:// speaks TLS (``ssl_*`` options) to both."""
        userinfo, _, hosts = parts.netloc.rpartition("@")
        user, _, password = userinfo.partition(":")
        nodes = []
        for item in hosts.split(","):
            host, _, port = item.strip().rpartition(":")
            if not host or not port.isdigit():
                raise ValueError(f"a Sentinel must be host:port, not {item!r}")
            nodes.append((host.strip("[]"), int(port)))
        service, _, db = parts.path.strip("/").partition("/")
        if not service:
            raise ValueError("a redis+sentinel:// URL names the service after the hosts: .../service-name[/db]")
        sentinels = Sentinels(tuple(nodes), unquote(service), unquote(query.get("sentinel_username") or "") or None,
                              unquote(query.get("sentinel_password") or "") or None)
        return cls(host=nodes[0][0], port=nodes[0][1], username=unquote(user) or None,
                   password=unquote(password) if userinfo and password else None,
                   db=int(query.get("db") or db or 0), ssl=_tls(query) if parts.scheme == "rediss+sentinel" else None,
                   sentinels=sentinels, **overrides)

    def at(self, host: str, port: int) -> Endpoint:
        """The same credentials and TLS on another node (Redis Cluster)."""
        return dataclasses.replace(self, host=host, port=port, path=None)

    @property
    def name(self) -> str:
        if self.sentinels is not None:
            return f"the primary of {self.sentinels.service!r} via Sentinel"
        return self.path or f"{self.host}:{self.port}"


def _tls(query: dict[str, str]) -> ssl.SSLContext:
    """The TLS context of a rediss:// URL, from its ``ssl_*`` query options."""
    context = ssl.create_default_context(cafile=query.get("ssl_ca_certs"))
    reqs = query.get("ssl_cert_reqs", "required").lower()
    context.check_hostname = _flag(query.get("ssl_check_hostname", "false")) and reqs == "required"
    context.verify_mode = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL}.get(reqs, ssl.CERT_REQUIRED)
    if query.get("ssl_certfile"):
        context.load_cert_chain(query["ssl_certfile"], query.get("ssl_keyfile"))
    return context


class Link(asyncio.Protocol):
    """One open connection; ``send`` returns a future for the reply.

    Commands sent in one event-loop turn leave in one write. The oldest command in
    flight must be answered within ``reply_timeout``; a paused or cut-off Redis
    therefore fails the link rather than leaving callers waiting on it forever.
    """

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._transport: asyncio.Transport | None = None
        self._parser = hiredis.Reader(encoding="utf-8", replyError=hiredis.ReplyError)
        # (future, raw) for each command sent, in order; a cancelled caller's
        # future keeps its place until its reply arrives.
        self._owed: collections.deque[tuple[asyncio.Future[Any], bool]] = collections.deque()
        self._outbox: list[bytes] = []
        self._on_push: Callable[[Any], None] | None = None  # pub/sub: every message goes here
        self.error: BaseException | None = None  # why it closed
        self._since = 0.0  # when the oldest owed reply started to be awaited
        self._watchdog: asyncio.TimerHandle | None = None
        self._lost: list[Callable[[BaseException], None]] = []

    @classmethod
    async def open(cls, endpoint: Endpoint, on_push: Callable[[Any], None] | None = None) -> Link:
        """Connects and authenticates; Redis failures raise ConnectionError or TimeoutError.
        With ``on_push`` the link is for pub/sub: every reply after the handshake goes there."""
        loop = asyncio.get_running_loop()
        via_sentinel = endpoint.sentinels is not None
        if via_sentinel:
            endpoint = await primary_of(endpoint)
        link = cls(endpoint)
        try:
            async with asyncio.timeout(endpoint.connect_timeout):
                if endpoint.path:
                    await loop.create_unix_connection(lambda: link, endpoint.path)
                else:
                    await loop.create_connection(lambda: link, endpoint.host, endpoint.port, ssl=endpoint.ssl,
                                                 server_hostname=endpoint.host if endpoint.ssl else None)
                for command in _handshake(endpoint):
                    await link.send(command)
                if via_sentinel and not is_primary(role := await link.send(("ROLE",))):
                    raise rexc.ConnectionError(f"{endpoint.name}, named by Sentinel, is not a primary "
                                               f"(ROLE {role[0] if role else role!r}); asking again")
        except BaseException as exc:
            link.close()
            if isinstance(exc, rexc.ResponseError) and not isinstance(exc, rexc.AuthenticationError):
                raise rexc.AuthenticationError(str(exc)) from exc
            if isinstance(exc, TimeoutError):
                raise rexc.TimeoutError(f"Timeout connecting to Redis at {endpoint.name}") from None
            if isinstance(exc, (OSError, ssl.SSLError)):
                raise rexc.ConnectionError(f"Cannot connect to Redis at {endpoint.name}: {exc}") from exc
            raise
        link._on_push = on_push
        return link

    @property
    def alive(self) -> bool:
        return self.error is None

    def on_lost(self, callback: Callable[[BaseException], None]) -> None:
        """callback(error) runs once when the link closes (at once if it already has)."""
        if self.error is not None:
            callback(self.error)
        else:
            self._lost.append(callback)

    def send(self, args: tuple[Any, ...], raw: bool = False) -> asyncio.Future[Any]:
        """Queues one command; the future gets its reply (bytes untouched when ``raw``).
        On a pub/sub link the future is done at once: confirmations arrive as pushes."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        if self.error is not None:
            fut.set_exception(self.error)
            fut.exception()  # as in close(): the caller may be cancelled before it reads it
            return fut
        if not self._outbox:
            loop.call_soon(self._flush)
        self._outbox.append(hiredis.pack_command(args))
        if self._on_push is not None:
            fut.set_result(None)
            return fut
        if not self._owed:
            self._since = time.monotonic()
            if self._watchdog is None:
                self._watchdog = loop.call_later(self.endpoint.reply_timeout, self._check)
        self._owed.append((fut, raw))
        return fut

    def _flush(self) -> None:
        if self.error is None and self._outbox and self._transport is not None:
            batch, self._outbox = self._outbox, []
            self._transport.writelines(batch)

    def _check(self) -> None:
        self._watchdog = None
        if not self._owed or self.error is not None:
            return
        late = time.monotonic() - self._since
        if late >= self.endpoint.reply_timeout:
            self.close(rexc.TimeoutError(f"Redis at {self.endpoint.name} did not answer for {late:.1f}s"))
        else:
            self._watchdog = asyncio.get_running_loop().call_later(self.endpoint.reply_timeout - late, self._check)

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None and not self.endpoint.path:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed(data)
            self._deliver()
        except rexc.RedisError as exc:
            self.close(exc)
        except (hiredis.ProtocolError, UnicodeDecodeError) as exc:
            self.close(rexc.ConnectionError(f"Unreadable reply from Redis at {self.endpoint.name}: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.close(rexc.ConnectionError(f"Connection to Redis at {self.endpoint.name} lost"
                                        + (f": {exc}" if exc else "")))

    def _deliver(self) -> None:
        parser, owed = self._parser, self._owed
        while True:
            if self._on_push is not None:
                reply = parser.gets()
                if reply is False:
                    return
                self._on_push(error_from_reply(reply) if isinstance(reply, hiredis.ReplyError) else reply)
                continue
            if not owed:
                if parser.gets() is not False:  # a reply to nothing: the stream is out of step
                    raise rexc.ConnectionError(f"Redis at {self.endpoint.name} sent a reply nobody asked for")
                return
            fut, raw = owed[0]
            reply = parser.gets(not raw)
            if reply is False:
                return
            owed.popleft()
            self._since = time.monotonic()
            if isinstance(reply, hiredis.ReplyError):
                error = error_from_reply(reply)
                if not fut.done():  # else its caller stopped waiting
                    fut.set_exception(error)
                if isinstance(error, rexc.ReadOnlyError):  # demoted by a failover: nothing more goes here
                    raise rexc.ConnectionError(f"Redis at {self.endpoint.name} is a replica now (READONLY)")
            elif not fut.done():
                fut.set_result(reply)

    def close(self, error: BaseException | None = None) -> None:
        """Closes the socket and fails whatever is still owed; idempotent."""
        if self.error is not None:
            return
        self.error = error or rexc.ConnectionError(f"Connection to Redis at {self.endpoint.name} closed")
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        if self._transport is not None:
            self._transport.abort()
        owed, self._owed = self._owed, collections.deque()
        for fut, _ in owed:
            if not fut.done():
                fut.set_exception(self.error)
                # Marked as seen: a caller cancelled in this same turn (a wait_for's timeout
                # racing the loss) never reads it, and asyncio would log it at ERROR.
                fut.exception()
        self._outbox = []
        lost, self._lost = self._lost, []
        for callback in lost:
            callback(self.error)


def _handshake(endpoint: Endpoint) -> list[tuple[Any, ...]]:
    """AUTH and SELECT, answered before the link is handed to anyone."""
    commands: list[tuple[Any, ...]] = []
    if endpoint.password is not None:
        commands.append(("AUTH", endpoint.username, endpoint.password) if endpoint.username
                        else ("AUTH", endpoint.password))
    if endpoint.db:
        commands.append(("SELECT", endpoint.db))
    return commands
