"""Console sessions in Redis and the login throttle (console/sessions.py), against two
real server processes on one Redis (replicas behind a load balancer, as the console
sees them): a session made on one works on the other and survives a restart; logout
on one ends it on both; a revoked token's sessions end on both (and do not come back
with the token); a token holds at most MAX_PER_TOKEN sessions; Redis holds neither the
token nor the cookie; failed logins are answered 429 with Retry-After past the
threshold, on every replica, while another address logs in; bad cookies get 401."""

from __future__ import annotations

import asyncio
import hashlib
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from concord_server.console import sessions as store
from concord_server.console.auth import COOKIE
from concord_server.edge.auth import AuthInterceptor, digest_of
from concord_server.errors import LimitReached, Unauthenticated
from concord_server.keys import KeySpace
from concord_server.primitives.ratelimit import RateLimits
from concord_server.store.autopipeline import AutoPipeline
from concord_server.store.link import Endpoint
from support import ServerProcess, async_wait_until, free_port

PREFIX = "console-sessions-test"
ADMIN, READER, CAPPED, REVOKED = (f"sessions-{who}-0123456789abcdef" for who in ("admin", "reader", "capped", "revoked"))
TOKENS = f"""
[[tokens]]
token = "{ADMIN}"
tenant = "acme"
role = "admin"

[[tokens]]
token = "{READER}"
tenant = "acme"
role = "read-only"

[[tokens]]
token = "{CAPPED}"
tenant = "acme"

[[tokens]]
token = "{REVOKED}"
tenant = "globex"
"""
DEADLINE = 5.0


class Replica:
    def __init__(self, server: ServerProcess, console: str) -> None:
        self.server = server
        self.console = console


@pytest.fixture(scope="module")
def tokens_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("console-sessions") / "tokens.toml"
    path.write_text(TOKENS)
    return path


@pytest.fixture(scope="module")
def replicas(redis_server, tokens_file) -> Iterator[tuple[Replica, Replica]]:
    """Two server processes on one Redis with the same token file, each with its console."""
    started = []
    try:
        for i in range(2):
            port = free_port()
            server = ServerProcess("--redis-url", redis_server.url, "--key-prefix", PREFIX, "--auth-tokens",
                                   str(tokens_file), "--console-listen", f"127.0.0.1:{port}")
            server.start(tokens_file.parent / f"server-{i}.log")
            started.append(Replica(server, f"http://127.0.0.1:{port}"))
        yield started[0], started[1]
    finally:
        for replica in started:
            assert replica.server.stop() == 0, replica.server.log_text()


async def _request(base: str, method: str, path: str, cookie: str | None = None, body: Any = None,
                   source: str = "127.0.0.1") -> tuple[int, Any, aiohttp.ClientResponse]:
    """One request from the address source (a loopback address of this host), with the
    cookie given and no cookie jar; (status, JSON body, response)."""
    headers = {"Cookie": f"{COOKIE}={cookie}"} if cookie is not None else {}
    async with aiohttp.ClientSession(base, connector=aiohttp.TCPConnector(local_addr=(source, 0)),
                                     cookie_jar=aiohttp.DummyCookieJar()) as s:
        async with s.request(method, path, headers=headers, json=body) as r:
            return r.status, await r.json(), r


async def _login(base: str, token: str, source: str = "127.0.0.1") -> str:
    status, body, r = await _request(base, "POST", "/api/login", body={"token": token}, source=source)
    assert status == 200, body
    return r.cookies[COOKIE].value


async def _status(base: str, cookie: str) -> int:
    return (await _request(base, "GET", "/api/snapshot", cookie))[0]


async def test_a_session_works_on_every_replica_survives_a_restart_and_logout_ends_it_everywhere(replicas):
    a, b = replicas
    cookie = await _login(a.console, READER)
    for replica in (a, b):
        status, me, _ = await _request(replica.console, "GET", "/api/me", cookie)
        assert status == 200 and me["logged_in"] and (me["tenant"], me["role"]) == ("acme", "read-only"), me
        assert await _status(replica.console, cookie) == 200
    # A restart of the replica that made it loses nothing.
    assert a.server.stop() == 0, a.server.log_text()
    a.server.start(a.server.log_path)
    assert await _status(a.console, cookie) == 200
    # Logout on one replica ends the session on both, at once.
    status, body, r = await _request(b.console, "POST", "/api/logout", cookie, body={})
    assert status == 200 and body["logged_in"] is False
    for replica in (a, b):
        status, body, _ = await _request(replica.console, "GET", "/api/snapshot", cookie)
        assert status == 401 and body["reason"] == "UNAUTHENTICATED", body
        assert (await _request(replica.console, "GET", "/api/me", cookie))[1]["logged_in"] is False


async def test_redis_holds_a_hash_of_the_cookie_and_the_token_digest_never_the_token(replicas, redis_sync):
    a, _ = replicas
    cookie = await _login(a.console, ADMIN)
    digest = digest_of(ADMIN)
    keys = KeySpace(PREFIX).server_console().console_sessions(store.token_id(digest))
    record = keys.session(hashlib.sha256(cookie.encode()).hexdigest())
    fields = redis_sync.hgetall(record)
    assert set(fields) == {"d", "t", "r", "c", "x", "a"}
    assert (fields["d"], fields["t"], fields["r"]) == (digest.hex(), "acme", "admin")
    assert 0 < redis_sync.pttl(record) <= store.IDLE_TTL * 1000
    created, ends = int(redis_sync.hget(record, "c")), int(redis_sync.hget(record, "x"))
    assert ends - created == store.LIFETIME * 1000
    held = list(redis_sync.scan_iter(match="{" + PREFIX + "*", count=1000))
    assert record in held
    secret = cookie.split(".")[1]
    assert not any(secret in k or ADMIN in k for k in held)
    assert not any(ADMIN in str(redis_sync.hgetall(k)) for k in held if redis_sync.type(k) == "hash")


async def test_a_token_holds_at_most_its_cap_of_sessions_the_oldest_ending(replicas, redis_sync):
    a, b = replicas
    cookies = [await _login(a.console if i % 2 else b.console, CAPPED) for i in range(store.MAX_PER_TOKEN + 2)]
    # Successful logins are never throttled: far more than the failures allowed, from one address.
    assert await _status(a.console, cookies[0]) == 401 and await _status(b.console, cookies[1]) == 401
    assert await _status(a.console, cookies[2]) == 200 and await _status(b.console, cookies[-1]) == 200
    keys = KeySpace(PREFIX).server_console().console_sessions(store.token_id(digest_of(CAPPED)))
    assert redis_sync.zcard(keys.index) == store.MAX_PER_TOKEN
    assert len(list(redis_sync.scan_iter(match=keys.record.replace("{", "\\{").replace("}", "\\}") + "*",
                                         count=1000))) == store.MAX_PER_TOKEN
    assert 0 < redis_sync.pttl(keys.index) <= store.LIFETIME * 1000
    # Logging in again with a cookie in hand ends that session: a browser holds one.
    status, _, r = await _request(a.console, "POST", "/api/login", cookies[-1], body={"token": CAPPED})
    assert status == 200 and await _status(a.console, cookies[-1]) == 401
    assert await _status(a.console, r.cookies[COOKIE].value) == 200


async def test_a_revoked_tokens_sessions_end_on_every_replica_and_do_not_come_back_with_it(replicas, tokens_file):
    a, b = replicas
    cookie = await _login(a.console, REVOKED)
    other = await _login(b.console, READER)
    async with aiohttp.ClientSession(b.console, cookie_jar=aiohttp.DummyCookieJar()) as s:
        async with s.get("/api/events", headers={"Cookie": f"{COOKIE}={cookie}"}) as events:
            assert (await events.content.readline()).startswith(b"retry:")
            try:
                tokens_file.write_text(TOKENS.replace(REVOKED, "sessions-someone-else-0123456789"))
                a.server.signal(signal.SIGHUP)  # only a: its reload ends the token's sessions in Redis
                await async_wait_until(lambda: _refused(a.console, cookie), DEADLINE, 0.05, "a refuses the session")
                await async_wait_until(lambda: _refused(b.console, cookie), DEADLINE, 0.05, "b refuses it too")
                # b's open event stream ends at its next event, though b has not reloaded.
                await asyncio.wait_for(events.content.read(), DEADLINE)
            finally:
                tokens_file.write_text(TOKENS)
                a.server.signal(signal.SIGHUP)
    await async_wait_until(lambda: _logs_in(a.console, REVOKED), DEADLINE, 0.05, "the token back on a")
    # The token is back, its old sessions are not; other tokens' sessions never ended.
    for replica in (a, b):
        assert await _status(replica.console, cookie) == 401
        assert await _status(replica.console, other) == 200


async def _refused(base: str, cookie: str) -> bool:
    status, body, _ = await _request(base, "GET", "/api/snapshot", cookie)
    return status == 401 and body["reason"] == "UNAUTHENTICATED"


async def _logs_in(base: str, token: str) -> bool:
    return (await _request(base, "POST", "/api/login", body={"token": token}))[0] == 200


async def test_bad_cookies_get_401(replicas):
    a, _ = replicas
    good = await _login(a.console, READER)
    tid, secret = good.split(".")
    flipped = secret[:-1] + ("A" if secret[-1] != "A" else "B")
    unknown_token = store.token_id(digest_of("sessions-nobody-0123456789abcdef"))
    for cookie in ("", "nonsense", good + "x", f"{tid}.{flipped}", f"{unknown_token}.{secret}", f"{tid}.",
                   f"{'0' * 32}.{'A' * 43}", good.replace(".", ":"), f"{tid}.{secret[:-1]}"):
        status, body, _ = await _request(a.console, "GET", "/api/snapshot", cookie)
        assert status == 401 and body == {"code": "UNAUTHENTICATED", "reason": "UNAUTHENTICATED",
                                          "message": body["message"]}, (cookie, body)
        assert (await _request(a.console, "GET", "/api/me", cookie))[1]["logged_in"] is False
        status, body, _ = await _request(a.console, "POST", "/api/locks/force-release", cookie, body={"name": "x"})
        assert status == 401, body
    assert await _status(a.console, good) == 200


async def test_failed_logins_are_throttled_per_address_on_every_replica_before_the_token_is_compared(replicas):
    a, b = replicas
    attacker, bystander = "127.0.0.2", "127.0.0.3"
    for _ in range(store.ADDRESS_FAILURES):
        status, body, _ = await _request(a.console, "POST", "/api/login", body={"token": "sessions-wrong-0123456789"},
                                         source=attacker)
        assert status == 401 and body["reason"] == "UNAUTHENTICATED", body
    for replica, token in ((a, "sessions-wrong-0123456789"), (a, ADMIN), (b, ADMIN)):
        # Past the threshold, on either replica, even a good token is not looked at.
        status, body, r = await _request(replica.console, "POST", "/api/login", body={"token": token}, source=attacker)
        assert status == 429, body
        assert (body["code"], body["reason"]) == ("RESOURCE_EXHAUSTED", "RESOURCE_EXHAUSTED")
        assert 1 <= int(r.headers["Retry-After"]) <= store.ADDRESS_EVERY
        assert COOKIE not in r.cookies
    # Another address logs in on both.
    assert await _status(a.console, await _login(a.console, ADMIN, source=bystander)) == 200
    assert await _status(b.console, await _login(b.console, ADMIN, source=bystander)) == 200
    assert "with an unknown token was refused" in a.server.log_text()


# -- the store and the throttle on their own, over a real Redis (tunable bounds, no server)


@pytest.fixture
async def pipe(redis_server):
    p = AutoPipeline(Endpoint.from_url(redis_server.url))
    yield p
    await p.aclose()


async def test_the_process_bucket_bounds_failed_logins_from_any_number_of_addresses(pipe, name):
    limits = RateLimits(pipe, KeySpace(f"throttle-{name.split(':')[1]}").server_limits())
    throttle = store.LoginThrottle(limits, address_failures=2, address_every=60, process_failures=3,
                                   process_rate=0.001)
    for i in range(3):  # failures (kept) from three addresses empty the process's bucket
        await throttle.take(f"10.0.0.{i}")
    with pytest.raises(LimitReached) as refused:
        await throttle.take("10.0.0.9")
    assert refused.value.reason == "RESOURCE_EXHAUSTED" and refused.value.retry_delay > 0
    # A success gives its units back: logins that succeed never use the budget up.
    throttle = store.LoginThrottle(limits, address_failures=2, address_every=60, process_failures=1,
                                   process_rate=0.001)
    for _ in range(5):
        await throttle.give_back(await throttle.take("10.0.1.1"))
    await throttle.take("10.0.1.1")  # a failure: the process's one unit
    with pytest.raises(LimitReached):
        await throttle.take("10.0.1.2")
    # An address's failures count in Redis: another process's throttle (a replica) refuses it too.
    first, replica = (store.LoginThrottle(limits, address_failures=2, address_every=60) for _ in range(2))
    for _ in range(2):
        await first.take("10.0.2.1")
    with pytest.raises(LimitReached) as refused:
        await replica.take("10.0.2.1")
    assert 0 < refused.value.retry_delay <= 60
    await replica.give_back(await replica.take("10.0.2.2"))
    # The address budget: an IPv6 address counts with its /64.
    assert store.address_key("2001:db8::1") == store.address_key("2001:db8::ffff:1") != store.address_key("2001:db9::1")
    assert store.address_key("::ffff:10.0.0.1") == store.address_key("10.0.0.1") == "console-login:10.0.0.1"


async def test_a_session_ends_at_its_lifetime_however_busy(pipe, tmp_path, name):
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(TOKENS)
    sessions = store.SessionStore(AuthInterceptor(tokens), pipe, KeySpace(f"life-{name.split(':')[1]}"))
    sessions.lifetime_ms, sessions.refresh_ms = 300, 0
    cookie, viewer = await sessions.login(READER, "10.0.0.1")
    assert (await sessions.viewer(cookie)).who == viewer.who

    async def ended() -> bool:
        try:
            await sessions.viewer(cookie)  # each look slides the idle TTL: only the lifetime ends it
        except Unauthenticated:
            return True
        return False

    await async_wait_until(ended, DEADLINE, 0.02, "the session's end at its lifetime")


async def test_an_idle_session_ends_at_its_idle_timeout(pipe, tmp_path, name):
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(TOKENS)
    sessions = store.SessionStore(AuthInterceptor(tokens), pipe, KeySpace(f"idle-{name.split(':')[1]}"))
    sessions.idle_ms = 300  # and the idle timer is written once a minute: these looks do not slide it
    cookie, _ = await sessions.login(READER, "10.0.0.1")
    await sessions.viewer(cookie)

    async def ended() -> bool:
        try:
            await sessions.viewer(cookie)
        except Unauthenticated:
            return True
        return False

    await async_wait_until(ended, DEADLINE, 0.02, "the session's end at its idle timeout")


async def test_sessions_and_the_throttle_work_on_a_redis_cluster(redis_cluster, tmp_path):
    """Each session script touches one slot (the token's hash tag), as on one node."""
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(TOKENS)
    port = free_port()
    server = ServerProcess("--redis-url", redis_cluster.url, "--redis-cluster", "--auth-tokens", str(tokens),
                           "--console-listen", f"127.0.0.1:{port}")
    server.start(tmp_path / "server.log")
    base = f"http://127.0.0.1:{port}"
    try:
        cookies = [await _login(base, token) for token in (ADMIN, READER, CAPPED, REVOKED)]
        assert [await _status(base, cookie) for cookie in cookies] == [200] * 4
        assert (await _request(base, "POST", "/api/logout", cookies[0], body={}))[0] == 200
        assert await _status(base, cookies[0]) == 401 and await _status(base, cookies[1]) == 200
        tokens.write_text(TOKENS.replace(REVOKED, "sessions-someone-else-0123456789"))
        server.signal(signal.SIGHUP)
        await async_wait_until(lambda: _refused(base, cookies[3]), DEADLINE, 0.05, "the revoked token's session ends")
        for _ in range(store.ADDRESS_FAILURES):
            assert (await _request(base, "POST", "/api/login", body={"token": "sessions-wrong-0123456789"},
                                   source="127.0.0.4"))[0] == 401
        assert (await _request(base, "POST", "/api/login", body={"token": ADMIN}, source="127.0.0.4"))[0] == 429
    finally:
        assert server.stop() == 0, server.log_text()
