"""The listings of read-write locks, elections, autocomplete indexes, file groups and
stored rate limits (ListReadWriteLocks, ListElections, ListIndexes, ListFileGroups,
ListLimits), end to end through a real server: what each entry carries, that a resource appears once created and drops
out once gone, paging over several pages, bad paging input, and that a tenant's
listing shows nothing of another tenant's."""

from __future__ import annotations

import threading

import grpc
import pytest

import concord
from concord.autocomplete.v1 import autocomplete_pb2
from concord.election.v1 import election_pb2
from concord.files.v1 import files_pb2
from concord.ratelimit.v1 import ratelimit_pb2
from concord.rwlock.v1 import rwlock_pb2
from support import ServerProcess, error_info, wait_until

# service, method, request type, the response's repeated field, the entry's name field
KINDS = {
    "rwlock": ("rwlock", "ListReadWriteLocks", rwlock_pb2.ListReadWriteLocksRequest, "locks", "name"),
    "election": ("election", "ListElections", election_pb2.ListElectionsRequest, "elections", "election"),
    "index": ("autocomplete", "ListIndexes", autocomplete_pb2.ListIndexesRequest, "indexes", "index"),
    "files": ("files", "ListFileGroups", files_pb2.ListFileGroupsRequest, "groups", "group"),
    "limit": ("ratelimit", "ListLimits", ratelimit_pb2.ListLimitsRequest, "limits", "key"),
}


def pages(client: concord.Client, kind: str, page_size: int) -> tuple[dict[str, object], int]:
    """Every entry of a listing by name (a name may come twice: the last is kept) and
    how many pages it took."""
    service, method, request_type, field, key = KINDS[kind]
    found: dict[str, object] = {}
    token, count = "", 0
    while True:
        page = client._service(service).call(method, request_type(page_token=token, page_size=page_size))
        found.update((getattr(e, key), e) for e in getattr(page, field))
        count += 1
        token = page.next_page_token
        if not token or count > 1000:
            return found, count


def test_read_write_locks_are_listed_with_writer_readers_and_waiters(client, name):
    writer = client.rwlock(f"{name}-w", ttl=60, owner="the-writer").acquire("write")
    readers = [client.rwlock(f"{name}-r", ttl=60, owner=f"reader-{i}").acquire("read") for i in range(2)]
    # A writer queued behind the readers: a waiter.
    queued = client.rwlock(f"{name}-r", ttl=60, owner="queued-writer")
    got: list[object] = []
    waiting = threading.Thread(target=lambda: got.append(queued.acquire("write", timeout=30)))
    waiting.start()
    try:
        wait_until(lambda: any(s.name == f"{name}-r" and s.waiters == 1 for s in client.list_rwlocks()),
                   message="the queued writer to be counted")
        listed = {s.name: s for s in client.list_rwlocks() if s.name.startswith(name)}
        w, r = listed[f"{name}-w"], listed[f"{name}-r"]
        assert w.writer is not None and w.writer.owner == "the-writer"
        assert w.writer.fencing_token == writer.fencing_token and 0 < w.writer.ttl_remaining <= 60
        assert (w.readers, w.waiters) == (0, 0)
        assert (r.writer, r.readers, r.waiters) == (None, 2, 1)
    finally:
        for lease in readers:
            client.rwlock(f"{name}-r").release(lease)
        waiting.join(30)
    [handed] = got
    assert handed is not None
    listed = {s.name: s for s in client.list_rwlocks() if s.name.startswith(name)}
    assert listed[f"{name}-r"].writer.owner == "queued-writer" and listed[f"{name}-r"].readers == 0
    # Freed: both drop out.
    client.rwlock(f"{name}-r").release(handed)
    client.rwlock(f"{name}-w").release(writer)
    assert not [s for s in client.list_rwlocks() if s.name.startswith(name)]


async def test_the_async_client_lists_read_write_locks_and_elections(aclient, name):
    lease = await aclient.rwlock(f"{name}-rw", ttl=60).acquire("read")
    won = await aclient.election(f"{name}-el", ttl=60, candidate="async").elect(b"v")
    try:
        assert [(s.name, s.readers) for s in await aclient.list_rwlocks() if s.name.startswith(name)] == [
            (f"{name}-rw", 1)]
        assert [(s.election, s.leader.candidate) for s in await aclient.list_elections()
                if s.election.startswith(name)] == [(f"{name}-el", "async")]
    finally:
        await aclient.rwlock(f"{name}-rw").release(lease)
        await aclient.election(f"{name}-el").resign(won.term)


def test_elections_are_listed_with_their_leader_and_candidates(client, name):
    long_value = bytes(range(256)) * 8  # 2 KiB: a listing shows the first 1 KiB
    won = client.election(f"{name}-a", ttl=60, candidate="alice").elect(b"10.0.0.1:80")
    big = client.election(f"{name}-b", ttl=60, candidate="bob").elect(long_value)
    rival = client.election(f"{name}-a", ttl=60, candidate="carol")
    got: list[object] = []
    waiting = threading.Thread(target=lambda: got.append(rival.elect(b"carol's", timeout=30)))
    waiting.start()
    try:
        wait_until(lambda: any(s.election == f"{name}-a" and s.candidates == 1 for s in client.list_elections()),
                   message="the waiting candidate to be counted")
        listed = {s.election: s for s in client.list_elections() if s.election.startswith(name)}
        a, b = listed[f"{name}-a"], listed[f"{name}-b"]
        assert (a.leader.candidate, a.leader.value, a.leader.term) == ("alice", b"10.0.0.1:80", won.term)
        assert a.leader.expires_at is not None and not a.value_truncated
        assert b.leader.value == long_value[:1024] and b.value_truncated and b.candidates == 0
        assert client.election(f"{name}-b").leader().value == long_value  # Leader has it whole
    finally:
        client.election(f"{name}-a").resign(won.term)
        waiting.join(30)
    [carol] = got
    assert carol is not None
    listed = {s.election: s for s in client.list_elections() if s.election.startswith(name)}
    assert (listed[f"{name}-a"].leader.candidate, listed[f"{name}-a"].candidates) == ("carol", 0)
    # Nobody leads or waits any more: gone.
    client.election(f"{name}-a").resign(carol.term)
    client.election(f"{name}-b").resign(big.term)
    assert not [s for s in client.list_elections() if s.election.startswith(name)]


def test_autocomplete_indexes_are_listed_with_their_sizes(client, name):
    ac = client.autocomplete
    ac.add_names(f"{name}-people", ["Åsa", "asa", ("Astrid", 3.0)])
    ac.add_names(f"{name}-places", [("Oslo", 1.0)])
    ac.add_recent(f"{name}-user", "Thomas")  # recent contacts are no index
    assert [(s.index, s.size) for s in ac.list_indexes() if s.index.startswith(name)] == [
        (f"{name}-people", 3), (f"{name}-places", 1)]
    ac.remove_names(f"{name}-places", ["Oslo"])
    assert [s.index for s in ac.list_indexes() if s.index.startswith(name)] == [f"{name}-people"]
    ac.remove_names(f"{name}-people", ["Åsa", "asa", "Astrid"])
    assert not [s for s in ac.list_indexes() if s.index.startswith(name)]


def test_file_groups_are_listed_with_files_bytes_held_and_the_bound(client, name):
    group = client.chat.create(f"{name}-sender", [f"{name}-w1", f"{name}-w2"], "logs", chat_id=f"{name}-group")
    first = client.files.upload([b"a" * 1000], group, sender=f"{name}-sender", name="one.log")
    client.files.upload([b"b" * 500], group, sender=f"{name}-sender", name="two.log")
    [g] = [g for g in client.files.list_groups() if g.group == group]
    assert (g.files, g.held_bytes, g.bound_bytes) == (2, 1500, 64 * 1024 * 1024)  # the default --file-group-bound
    assert client._service("files").call("ListFiles", files_pb2.ListFilesRequest(group=group)).bound_bytes == g.bound_bytes
    for worker in (f"{name}-w1", f"{name}-w2"):
        client.files.mark_done(first.file_id, worker)
    [g] = [g for g in client.files.list_groups() if g.group == group]
    assert (g.files, g.held_bytes) == (1, 500)
    for f in client.files.list_files(group)[0]:
        for worker in (f"{name}-w1", f"{name}-w2"):
            client.files.mark_done(f.file_id, worker)
    assert not [g for g in client.files.list_groups() if g.group == group]  # no file left: gone


def test_stored_rate_limits_are_listed_with_what_they_allow_and_their_waiters(client, name):
    api = client.rate_limit(f"{name}-api")
    assert api.set_limit(concord.Limit(10, 60.0, burst=5)) is None
    slots = client.rate_limit(f"{name}-slots")
    slots.set_limit(concord.Limit(2, 60.0, algorithm="concurrency"))
    client.rate_limit(f"{name}-carried", rate=5, per=1.0).check()  # its limit travels with the call: not listed
    assert api.check(3).allowed and api.check(2).allowed  # spent: 5 of burst 5
    held = [slots.check() for _ in range(2)]
    assert all(d.allowed for d in held)
    waited: list[object] = []
    waiter = threading.Thread(target=lambda: waited.append(slots.wait(1, timeout=30)))
    waiter.start()
    try:
        wait_until(lambda: any(s.key == f"{name}-slots" and s.waiters == 1 for s in client.list_rate_limits()),
                   message="the waiter to be counted")
        listed = {s.key: s for s in client.list_rate_limits() if s.key.startswith(name)}
        assert sorted(listed) == [f"{name}-api", f"{name}-slots"]
        a, b = listed[f"{name}-api"], listed[f"{name}-slots"]
        assert (a.limit, a.remaining, a.waiters) == (concord.Limit(10, 60.0, 5, "gcra"), 0, 0)
        assert 0 < a.reset_after <= 30  # 5 units back at one per 6 s
        assert (b.limit.algorithm, b.limit.rate, b.remaining, b.waiters) == ("concurrency", 2, 0, 1)
    finally:
        slots.release(held[0].permit)
        waiter.join(30)
    assert waited and waited[0].allowed  # the release let the waiter in
    # DeleteLimit: the limit and what it counted go, and the key leaves the listing.
    assert api.delete_limit() == concord.Limit(10, 60.0, 5, "gcra")
    assert api.delete_limit() is None
    with pytest.raises(concord.RateLimitNotFound):
        api.get_limit()
    with pytest.raises(concord.RateLimitNotFound):
        api.check()
    assert [s.key for s in client.list_rate_limits() if s.key.startswith(name)] == [f"{name}-slots"]
    api.set_limit(concord.Limit(10, 60.0, burst=5))
    assert api.check(5).allowed  # stored again: full, nothing of before counted


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("page_size, page_token, field", [(1001, "", "page_size"), (0, "not-a-cursor", "page_token")])
def test_bad_paging_is_invalid_argument(client, kind, page_size, page_token, field):
    service, method, request_type, _, _ = KINDS[kind]
    with pytest.raises(grpc.RpcError) as err:
        client._service(service).open(method)(request_type(page_token=page_token, page_size=page_size), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    info = error_info(err.value)
    assert (info.reason, info.domain, info.metadata["field"]) == ("INVALID_ARGUMENT", "concord", field)


TOKENS = {tenant: f"{tenant}-token-0123456789abcdef" for tenant in ("busy", "quiet")}
READER = "busy-reader-token-0123456789abcdef"  # the busy tenant's, read-only
MANY = 600  # more than a small hash's one-page HSCAN (hash-max-listpack-entries: 512 by default)


@pytest.fixture(scope="module")
def tenant_server(redis_server, tmp_path_factory):
    d = tmp_path_factory.mktemp("listings")
    # Admin tokens: storing a rate limit (the "limit" kind's resource) needs one.
    (d / "tokens.toml").write_text("".join(f'[[tokens]]\ntoken = "{t}"\ntenant = "{tenant}"\nrole = "admin"\n\n'
                                           for tenant, t in TOKENS.items())
                                   + f'[[tokens]]\ntoken = "{READER}"\ntenant = "busy"\nrole = "read-only"\n')
    server = ServerProcess("--redis-url", redis_server.url, "--key-prefix", "listings", "--auth-tokens",
                           str(d / "tokens.toml"), "--log-level", "WARNING").start(d / "server.log")
    yield server
    assert server.stop() == 0, server.log_text()


def _create(client: concord.Client, kind: str, name: str) -> None:
    """One resource of the kind, left in place."""
    if kind == "rwlock":
        assert client.rwlock(name, ttl=120).acquire("read") is not None
    elif kind == "election":
        assert client.election(name, ttl=120, candidate="c").elect(b"v") is not None
    elif kind == "index":
        client.autocomplete.add_names(name, ["x"])
    elif kind == "limit":
        client.rate_limit(name).set_limit(concord.Limit(5, 1.0))
    else:
        client.chat.create(f"{name}-s", [f"{name}-w"], "files", chat_id=name)
        client.files.upload([b"data"], name, sender=f"{name}-s", name="f")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_listing_pages_through_the_tenant_s_own_resources_only(tenant_server, kind, name):
    with concord.Client(tenant_server.target, token=TOKENS["busy"]) as busy, \
            concord.Client(tenant_server.target, token=TOKENS["quiet"]) as quiet:
        made = [f"{name}-{kind}-{i}" for i in range(MANY)]
        for n in made:
            _create(busy, kind, n)
        found, count = pages(busy, kind, 50)
        assert sorted(n for n in found if n.startswith(name)) == sorted(made)
        assert count > 1  # paged
        assert pages(quiet, kind, 1000) == ({}, 1)  # the other tenant sees nothing of it
        _create(quiet, kind, f"{name}-quiet")
        assert sorted(pages(quiet, kind, 10)[0]) == [f"{name}-quiet"]
        assert f"{name}-quiet" not in pages(busy, kind, 1000)[0]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_read_only_token_may_list(tenant_server, kind, name):
    """Listings are reads (edge/methods.METHOD_ROLES): a read-only token lists its
    tenant's resources, and is refused what creates one."""
    with concord.Client(tenant_server.target, token=TOKENS["busy"]) as busy, \
            concord.Client(tenant_server.target, token=READER) as reader:
        _create(busy, kind, f"{name}-{kind}")
        assert f"{name}-{kind}" in pages(reader, kind, 1000)[0]
        with pytest.raises(concord.PermissionDenied):
            _create(reader, kind, f"{name}-{kind}-refused")
