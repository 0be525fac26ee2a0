"""The console's views of read-write locks, elections, chats, autocomplete indexes,
file groups and rate limits (console/views_*.py), its suggestion box's endpoint and
the rate limits' reset and delete, over HTTP with
aiohttp's client against a real server with tokens of three tenants (a chat keeps at
most 5 messages, so retention makes gaps): each snapshot part shows what was made
through the API with the right values, another tenant sees none of it, a read-only
token may view (and suggest), and every list stops at its cap (in a tenant of its
own, so the other tests' names are never cut off)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest

import concord
from concord_server.console import views_autocomplete, views_chats, views_coordination, views_files, views_limits
from console_support import Logins, snapshot
from support import ServerProcess, free_port

ADMIN, READER, WRITER, OTHER, CAPS = (f"views-{who}-0123456789abcdef"
                                      for who in ("acme-admin", "acme-reader", "acme-writer", "globex-admin", "caps"))
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
token = "{WRITER}"
tenant = "acme"

[[tokens]]
token = "{OTHER}"
tenant = "globex"
role = "admin"

[[tokens]]
token = "{CAPS}"
tenant = "initech"
"""
DEADLINE = 3.0  # seconds for a change made through the API to show in the console
KEPT = 5  # messages a chat keeps (--chat-max-messages)


@pytest.fixture(scope="module")
def views_server(redis_server, tmp_path_factory) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp("console-views")
    (folder / "tokens.toml").write_text(TOKENS)
    port = free_port()
    server = ServerProcess("--redis-url", redis_server.url, "--auth-tokens", str(folder / "tokens.toml"),
                           "--console-listen", f"127.0.0.1:{port}", "--chat-max-messages", str(KEPT),
                           "--file-group-bound", "1000000")
    server.console = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    server.start(folder / "server.log")
    yield server
    assert server.stop() == 0, server.log_text()


@pytest.fixture
async def session_of(views_server) -> AsyncIterator[Any]:
    logins = Logins()
    yield lambda token: logins(views_server.console, token)
    await logins.aclose()


def row(snap: dict[str, Any], part: str, name: str) -> dict[str, Any] | None:
    return next((r for r in snap[part]["items"] if r["name"] == name), None)


async def until(s: aiohttp.ClientSession, found: Any, what: str) -> Any:
    """Reads the snapshot until found(snapshot) is truthy (its value), within DEADLINE."""
    deadline = time.monotonic() + DEADLINE
    while not (value := found(await snapshot(s))):
        assert time.monotonic() < deadline, f"no {what} within {DEADLINE} s"
        await asyncio.sleep(0.05)
    return value


async def test_me_says_which_new_views_a_token_may_see(views_server, session_of):
    for token in (READER, ADMIN):
        s = await session_of(token)
        async with s.get("/api/me") as r:
            may = (await r.json())["may"]
        assert all(may[k] for k in ("list_rwlocks", "list_elections", "list_chats", "list_indexes",
                                    "list_file_groups", "suggest", "list_limits"))
        assert may["reset_limit"] is may["delete_limit"] is (token == ADMIN)
        snap = await snapshot(s)
        for part in ("rwlocks", "elections", "chats", "indexes", "file_groups", "limits"):
            assert "items" in snap[part], (part, snap[part])


async def test_rwlocks_show_the_writer_its_token_and_the_waiters_in_fifo_order(views_server, session_of, name):
    reader, other = await session_of(READER), await session_of(OTHER)
    async with concord.AsyncClient(views_server.target, token=WRITER) as client:
        writer = await client.rwlock(name, ttl=60, owner="writer-1").acquire("write")
        waiting = []
        try:
            for mode, who in (("read", "reader-1"), ("write", "writer-2")):  # each queued before the next asks
                waiting.append(asyncio.create_task(client.rwlock(name, ttl=60, owner=who).acquire(mode, timeout=30)))
                n = len(waiting)
                await until(reader, lambda snap: (r := row(snap, "rwlocks", name)) and r["waiters"] == n,
                            f"{n} waiters")
            lock = row(await snapshot(reader), "rwlocks", name)
            assert lock["state"] == "write" and lock["readers"] == 0
            assert lock["writer"]["owner"] == "writer-1"
            assert lock["writer"]["fencing_token"] == writer.fencing_token
            assert 0 < lock["writer"]["ttl_ms"] <= 60_000
            assert [(w["mode"], w["owner"]) for w in lock["queue"]] == [("read", "reader-1"), ("write", "writer-2")]
            waited = [w["waited_ms"] for w in lock["queue"]]
            assert waited == sorted(waited, reverse=True) and waited[0] < 60_000
            assert row(await snapshot(other), "rwlocks", name) is None  # another tenant sees nothing
        finally:
            await client.rwlock(name).release(writer)
            for task in waiting:
                await client.rwlock(name).release(await asyncio.wait_for(task, DEADLINE))
        # Readers now: the reader was granted, then the second writer: nothing left.
        await until(reader, lambda snap: row(snap, "rwlocks", name) is None, "the lock gone from the view")


async def test_elections_show_the_leader_candidates_and_the_history_of_leaders(views_server, session_of, name):
    reader, other = await session_of(READER), await session_of(OTHER)
    async with concord.AsyncClient(views_server.target, token=WRITER) as client:
        first = await client.election(name, ttl=60, candidate="host-a").elect(b"host-a:9090")
        second = asyncio.create_task(client.election(name, ttl=60, candidate="host-b").elect(b"\xff\x00", timeout=30))
        try:
            e = await until(reader, lambda snap: (r := row(snap, "elections", name)) and r["candidates"] == 1 and r,
                            "a candidate waiting")
            assert e["leader"]["candidate"] == "host-a" and e["leader"]["term"] == first.term
            assert e["leader"]["value"] == {"text": "host-a:9090", "bytes": 11, "cut": False}
            assert 0 < e["leader"]["ttl_ms"] <= 60_000
            assert [c["candidate"] for c in e["queue"]] == ["host-b"] and e["queue"][0]["waited_ms"] >= 0
            assert [(h["term"], h["candidate"]) for h in e["history"]] == [(first.term, "host-a")]
            assert row(await snapshot(other), "elections", name) is None
            await client.election(name).resign(first.term)
            won = await asyncio.wait_for(second, DEADLINE)
            e = await until(reader, lambda snap: (r := row(snap, "elections", name)) and r["leader"]
                            and r["leader"]["candidate"] == "host-b" and r, "the next leader")
            assert e["leader"]["term"] == won.term > first.term and e["candidates"] == 0
            assert e["leader"]["value"] == {"hex": "ff00", "bytes": 2, "cut": False}  # not UTF-8: hex
            assert [(h["term"], h["candidate"]) for h in e["history"]] == [(won.term, "host-b"), (first.term, "host-a")]
            assert e["history"][0]["at_ms"] >= e["history"][1]["at_ms"] > 0
        finally:
            with contextlib.suppress(concord.ConcordError):
                await client.election(name).resign(first.term)
            won = await asyncio.wait_for(second, DEADLINE)
            await client.election(name).resign(won.term)


async def test_chats_show_members_unread_counts_retention_and_gaps(views_server, session_of, name):
    reader, other = await session_of(READER), await session_of(OTHER)
    async with concord.AsyncClient(views_server.target, token=WRITER) as client:
        chat = client.chat
        await chat.create("alice", ["bob", "carol"], "hello", chat_id=name)  # message 1
        for i in range(2, 9):  # messages 2..8: only the last KEPT (4..8) are kept
            await chat.send(name, "alice", f"message {i}")
        await chat.ack("carol", name, 6)
        await chat.ack("alice", name, 8)
        c = await until(reader, lambda snap: (r := row(snap, "chats", name)) and r["last_id"] == 8 and r, "the chat")
        assert (c["first_id"], c["kept"], c["member_count"]) == (4, KEPT, 3)
        assert c["kept_bytes"] == sum(len(f"message {i}") for i in range(4, 9))
        members = {m["user"]: (m["seen"], m["unread"], m["missed"]) for m in c["members"]}
        # bob saw nothing: 5 unread are kept, 3 were dropped unseen (a gap); carol saw up to 6.
        assert members == {"bob": (0, KEPT, 3), "carol": (6, 2, 0), "alice": (8, 0, 0)}
        assert [m["user"] for m in c["members"]] == ["bob", "carol", "alice"]  # furthest behind first
        assert c["gaps"] == 1
        snap = await snapshot(reader)
        assert snap["chats"]["retention"]["max_messages"] == KEPT
        assert row(await snapshot(other), "chats", name) is None


async def test_indexes_show_their_size_and_the_suggestion_box_suggests_from_the_server(views_server, session_of,
                                                                                       name):
    reader, other = await session_of(READER), await session_of(OTHER)
    async with concord.AsyncClient(views_server.target, token=WRITER) as client:
        await client.autocomplete.add_names(name, ["Thomas", "thor", "Théo", "Zoe", ("Thea", 5.0)])
        ix = await until(reader, lambda snap: row(snap, "indexes", name), "the index")
        assert ix["size"] == 5
        assert row(await snapshot(other), "indexes", name) is None

    async def suggest(s: aiohttp.ClientSession, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        async with s.post("/api/autocomplete/suggest", json=body) as r:
            return r.status, await r.json()

    status, reply = await suggest(reader, {"index": name, "prefix": "TH"})  # a read: read-only tokens may
    assert status == 200 and [s["name"] for s in reply["suggestions"]] == ["Thea", "Thomas", "thor", "Théo"]
    status, reply = await suggest(reader, {"index": name, "prefix": "th", "order": "score", "limit": 1})
    assert status == 200 and reply["suggestions"] == [{"name": "Thea", "score": 5.0}]
    status, reply = await suggest(reader, {"index": name, "prefix": "thé"})
    assert [s["name"] for s in reply["suggestions"]] == ["Théo"]
    status, reply = await suggest(other, {"index": name, "prefix": "th"})  # the other tenant's index of that name
    assert status == 200 and reply["suggestions"] == []
    for bad in ({"index": name, "prefix": "t", "limit": views_autocomplete.MAX_SUGGESTIONS + 1},
                {"index": "", "prefix": "t"}, {"index": name, "prefix": "t", "order": "random"},
                {"index": name, "prefix": 7}):
        status, error = await suggest(reader, bad)
        assert status == 400 and error["reason"] == "INVALID_ARGUMENT", (bad, error)
    async with reader.post("/api/autocomplete/suggest", data={"index": name}) as r:  # not JSON: refused
        assert r.status == 400


def test_file_groups_show_bytes_against_the_bound_files_and_each_workers_progress(views_server, name):
    async def check() -> None:
        async with aiohttp.ClientSession(views_server.console, cookie_jar=aiohttp.CookieJar(unsafe=True)) as reader, \
                aiohttp.ClientSession(views_server.console, cookie_jar=aiohttp.CookieJar(unsafe=True)) as other:
            for s, token in ((reader, READER), (other, OTHER)):
                async with s.post("/api/login", json={"token": token}) as r:
                    assert r.status == 200
            g = await until(reader, lambda snap: (r := row(snap, "file_groups", name)) and r["files"] == 2 and all(
                w["downloads"] for w in r["workers"]) and r, "the group, with both workers' downloads noted")
            assert (g["held_bytes"], g["bound_bytes"]) == (len(b"a\nb\n") + len(b"c\n" * 10), 1_000_000)
            assert [(f["name"], f["state"], f["size"], f["pending"], f["done"]) for f in g["file_list"]] == [
                ("one.txt", "complete", 4, 1, 1), ("two.txt", "complete", 20, 2, 0)]
            assert g["file_list"][0]["sender"] == "sender" and g["file_list"][0]["created_ms"] > 0
            assert {w["worker"]: (w["done"], w["pending"], w["pending_files"]) for w in g["workers"]} == {
                "w1": (1, 1, ["two.txt"]), "w2": (0, 2, ["one.txt", "two.txt"])}
            assert not g["workers_sampled"]
            # Both named themselves downloading two.txt: w1 through a stream it keeps open
            # (its bytes), w2 to the end (its lines).
            downloads = {w["worker"]: w["downloads"] for w in g["workers"]}
            for worker, lines in (("w1", False), ("w2", True)):
                [seen] = downloads[worker]
                assert seen.pop("updated_ms") > 0
                assert seen == {"file_id": two.file_id, "file": "two.txt", "size": 20, "gzip": False, "offset": 20,
                                "lines": lines}, worker
            assert row(await snapshot(other), "file_groups", name) is None

    async def gone_once_done() -> None:
        async with aiohttp.ClientSession(views_server.console, cookie_jar=aiohttp.CookieJar(unsafe=True)) as reader:
            async with reader.post("/api/login", json={"token": READER}) as r:
                assert r.status == 200
            await until(reader, lambda snap: (r := row(snap, "file_groups", name)) and {
                w["worker"]: (w["pending"], len(w["downloads"])) for w in r["workers"]} == {"w1": (1, 1), "w2": (1, 0)},
                "w2's note gone with its MarkDone")

    with concord.Client(views_server.target, token=WRITER) as client:
        client.chat.create("sender", ["w1", "w2"], "files follow", chat_id=name)
        one = client.files.upload([b"a\nb\n"], name, sender="sender", name="one.txt")
        two = client.files.upload([b"c\n" * 10], name, sender="sender", name="two.txt")
        client.files.mark_done(one.file_id, "w1")
        assert len(list(client.files.lines(two.file_id, worker="w2"))) == 10  # noted before the stream ends
        kept_open = client.files.chunks(two.file_id, worker="w1")
        assert next(kept_open) == (b"c\n" * 10, 20)
        asyncio.run(check())
        client.files.mark_done(two.file_id, "w2")  # its note goes with it
        asyncio.run(gone_once_done())
        kept_open.close()


async def test_rate_limits_show_what_they_allow_and_an_admin_resets_and_deletes_them(views_server, session_of,
                                                                                    name):
    admin, reader, other = await session_of(ADMIN), await session_of(READER), await session_of(OTHER)
    async with concord.AsyncClient(views_server.target, token=ADMIN) as client:
        api = client.rate_limit(name)
        await api.set_limit(concord.Limit(10, 60.0, burst=4))
        assert (await api.check(3)).allowed
        limit = await until(reader, lambda snap: (r := row(snap, "limits", name)) and r["remaining"] == 1 and r,
                            "the limit")
        assert (limit["algorithm"], limit["rate"], limit["period_ms"], limit["burst"], limit["capacity"]) == (
            "gcra", 10, 60_000, 4, 4)
        assert 0 < limit["reset_ms"] <= 18_000 and limit["waiters"] == 0 and limit["drain"] is False
        assert row(await snapshot(other), "limits", name) is None  # another tenant sees nothing

        async def post(s: aiohttp.ClientSession, path: str) -> tuple[int, dict[str, Any]]:
            async with s.post(path, json={"key": name}) as r:
                return r.status, await r.json()

        for path in ("/api/limits/reset", "/api/limits/delete"):  # read-only: refused, nothing changed
            status, error = await post(reader, path)
            assert (status, error["reason"]) == (403, "PERMISSION_DENIED"), error
        assert (await api.check(0)).remaining == 1
        assert await post(admin, "/api/limits/reset") == (200, {"reset": True})
        assert (await api.check(0)).remaining == 4  # full again, its limit kept
        assert await post(admin, "/api/limits/delete") == (200, {"deleted": True})
        with pytest.raises(concord.RateLimitNotFound):
            await api.get_limit()
        await until(reader, lambda snap: row(snap, "limits", name) is None, "the limit gone from the view")
        assert await post(admin, "/api/limits/delete") == (200, {"deleted": False})
        async with admin.post("/api/limits/reset", json={"key": " "}) as r:
            assert (r.status, (await r.json())["reason"]) == (400, "INVALID_ARGUMENT")
    log = views_server.log_text()
    assert f"reset rate limit {name!r}" in log and f"deleted rate limit {name!r}" in log
    assert f"was refused deleting rate limit {name!r}" in log


async def test_every_list_stops_at_its_cap(views_server, session_of, name):
    """In a tenant of its own: one more of each kind than a view lists (and than a list
    in a row shows), all made through the API."""
    s = await session_of(CAPS)
    c = views_coordination
    async with concord.AsyncClient(views_server.target, token=CAPS) as client:
        held = await asyncio.gather(*(client.rwlock(f"{name}:{i:03}", ttl=60).acquire("write")
                                      for i in range(c.MAX_RWLOCKS + 1)))
        busy = f"{name}:000"
        waiting = [asyncio.create_task(client.rwlock(busy, ttl=60, owner=f"r{i}").acquire("read", timeout=30))
                   for i in range(c.MAX_WAITERS + 1)]
        terms = await asyncio.gather(*(client.election(f"{name}:{i:03}", ttl=60, candidate="a").elect(b"v")
                                       for i in range(c.MAX_ELECTIONS + 1)))
        voters = [asyncio.create_task(client.election(busy, ttl=60, candidate=f"c{i}").elect(b"", timeout=30))
                  for i in range(c.MAX_CANDIDATES + 1)]
        term = terms[0].term
        for i in range(c.HISTORY + 1):  # each proclaim is a change in the history
            await client.election(busy).proclaim(term, f"value {i}".encode())
        await client.chat.create("owner", [f"m{i:02}" for i in range(views_chats.MAX_MEMBERS + 1)], "hi",
                                 chat_id=busy)
        await asyncio.gather(*(client.chat.create("owner", ["x"], "hi", chat_id=f"{name}:{i:03}")
                               for i in range(1, views_chats.MAX_CHATS + 1)))
        await asyncio.gather(*(client.autocomplete.add_names(f"{name}:{i:03}", ["n"])
                               for i in range(views_autocomplete.MAX_INDEXES + 1)))
        try:
            snap = await until(s, lambda snap: all(len(snap[p]["items"]) == cap for p, cap in (
                ("rwlocks", c.MAX_RWLOCKS), ("elections", c.MAX_ELECTIONS), ("chats", views_chats.MAX_CHATS),
                ("indexes", views_autocomplete.MAX_INDEXES))) and (row(snap, "rwlocks", busy) or {}).get("waiters")
                == c.MAX_WAITERS + 1 and (row(snap, "elections", busy) or {}).get("candidates") == c.MAX_CANDIDATES + 1
                and snap, "full views")
            for part in ("rwlocks", "elections", "chats", "indexes"):
                assert snap[part]["more"] is True, part
            assert len(row(snap, "rwlocks", busy)["queue"]) == c.MAX_WAITERS
            e = row(snap, "elections", busy)
            assert len(e["queue"]) == c.MAX_CANDIDATES and len(e["history"]) == c.HISTORY
            assert e["history"][0]["value"]["text"] == f"value {c.HISTORY}"  # newest first
            chat = row(snap, "chats", busy)
            assert chat["member_count"] == views_chats.MAX_MEMBERS + 2
            assert len(chat["members"]) == views_chats.MAX_MEMBERS
            # The first MAX_RWLOCKS by name (shown with the ones waited for first): not the last.
            assert f"{name}:{c.MAX_RWLOCKS:03}" not in {r["name"] for r in snap["rwlocks"]["items"]}
        finally:
            for task in voters:
                task.cancel()
            for task in waiting:
                task.cancel()
            await asyncio.gather(*voters, *waiting, return_exceptions=True)
            await asyncio.gather(*(client.rwlock(f"{name}:{i:03}").release(h) for i, h in enumerate(held)),
                                 return_exceptions=True)
            await asyncio.gather(*(client.election(f"{name}:{i:03}").resign(t.term) for i, t in enumerate(terms)),
                                 return_exceptions=True)


def test_file_lists_stop_at_their_caps(views_server, name):
    f = views_files
    with concord.Client(views_server.target, token=CAPS) as client:
        for i in range(f.MAX_GROUPS + 1):
            client.chat.create("sender", ["w"], "files", chat_id=f"{name}:{i:03}")
            client.files.upload([b"x\n"], f"{name}:{i:03}", sender="sender", name="x.txt")
        busy = f"{name}:000"
        client.chat.create("sender", [f"w{i:02}" for i in range(f.MAX_WORKERS + 1)], "files", chat_id=f"{busy}:w")
        for i in range(f.MAX_FILES + 1):
            client.files.upload([b"y\n"], f"{busy}:w", sender="sender", name=f"{i:02}.txt")

    async def check() -> None:
        async with aiohttp.ClientSession(views_server.console, cookie_jar=aiohttp.CookieJar(unsafe=True)) as s:
            async with s.post("/api/login", json={"token": CAPS}) as r:
                assert r.status == 200
            snap = await snapshot(s)
            groups = snap["file_groups"]
            assert len(groups["items"]) == f.MAX_GROUPS and groups["more"] is True
            g = row(snap, "file_groups", f"{busy}:w")
            assert g is not None and g["files"] == f.MAX_FILES + 1 and len(g["file_list"]) == f.MAX_FILES
            assert all(x["pending"] == f.MAX_WORKERS + 1 for x in g["file_list"])
            assert g["workers_sampled"] and len(g["workers"]) <= f.MAX_WORKERS

    asyncio.run(check())
