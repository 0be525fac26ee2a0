"""Leader election through the server with the Python client: terms, FIFO among
candidates, Proclaim/Refresh/Resign by term, Observe's history, the Lead stream
(hand-over when it ends or its client dies, LOST the moment the term ends), bad input."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

import concord
from concord.election.v1 import election_pb2 as pb
from concord.election.v1 import election_pb2_grpc
from support import async_wait_until, error_info, wait_until


def test_campaign_leader_resign_and_terms_grow(client, name):
    e = client.election(name, candidate="alice")
    won = e.elect(b"10.0.0.1:80")
    assert won is not None and won.term > 0
    leader = e.leader()
    assert (leader.candidate, leader.value, leader.term) == ("alice", b"10.0.0.1:80", won.term)
    assert client.election(name, candidate="bob").elect(b"x", timeout=0) is None
    e.resign(won.term)
    assert e.leader() is None
    again = client.election(name, candidate="bob").elect(b"y")
    assert again.term > won.term
    with pytest.raises(concord.NotLeader) as caught:
        e.resign(won.term)
    assert caught.value.reason == "NOT_LEADER"
    e.resign(again.term)


def test_proclaim_and_refresh_need_the_current_term(client, name):
    e = client.election(name, ttl=5)
    won = e.elect(b"v1")
    e.proclaim(won.term, b"v2")
    assert e.leader().value == b"v2"
    before = e.leader().expires_at
    assert e.refresh(won.term, ttl=30) > before
    for call in (lambda: e.proclaim(won.term + 1, b"x"), lambda: e.refresh(won.term - 1), lambda: e.resign(1)):
        with pytest.raises(concord.NotLeader):
            call()
    assert e.leader().value == b"v2"
    e.resign(won.term)


def test_candidates_lead_in_fifo_order(client, name):
    e = client.election(name, ttl=30)
    first = e.elect(b"first")
    order: list[str] = []
    threads = []
    for i in range(3):
        def candidate(i: int = i) -> None:
            won = client.election(name, ttl=30, candidate=f"c{i}").elect(f"c{i}".encode(), timeout=30)
            order.append(f"c{i}")
            client.election(name).resign(won.term)
        threads.append(threading.Thread(target=candidate))
        threads[-1].start()
        wait_until(lambda i=i: client._service("election").call_safe(
            "Leader", pb.LeaderRequest(election=name)).candidates == i + 1, message=f"candidate {i} queued")
    e.resign(first.term)
    for t in threads:
        t.join(30)
    assert order == ["c0", "c1", "c2"]


def test_observe_sees_every_change_in_order_and_resumes(client, name):
    e = client.election(name, ttl=30)
    seen: list[concord.Change] = []
    observer = e.observe()
    reader = threading.Thread(target=lambda: seen.extend(observer))
    reader.start()
    wait_until(lambda: len(seen) == 1, message="the state now")
    assert seen[0].leader is None

    a = client.election(name, ttl=30, candidate="a").elect(b"a1")
    b_won: list[concord.Leadership] = []
    b = threading.Thread(target=lambda: b_won.append(
        client.election(name, ttl=0.3, candidate="b").elect(b"b1", timeout=30)))
    b.start()
    wait_until(lambda: e._rpc.call_safe("Leader", pb.LeaderRequest(election=name)).candidates == 1,
               message="b queued")
    e.proclaim(a.term, b"a2")
    e.resign(a.term)  # b leads at once; its 0.3 s TTL then runs out with nobody to refresh it
    b.join(30)
    wait_until(lambda: len(seen) == 5, message="five changes")
    observer.close()
    reader.join(10)
    got = [(c.leader.candidate, c.leader.value, c.leader.term) if c.leader else None for c in seen[1:]]
    assert got == [("a", b"a1", a.term), ("a", b"a2", a.term), ("b", b"b1", b_won[0].term), None]
    positions = [c.position for c in seen]
    assert positions == sorted(positions) and len(set(positions[1:])) == 4 and not any(c.gap for c in seen)

    # Resuming after the second change gives exactly the ones after it.
    resumed: list[concord.Change] = []
    with e.observe(after=seen[2].position) as again:
        for change in again:
            resumed.append(change)
            if len(resumed) == 2:
                break
    assert [c.position for c in resumed] == positions[3:]


def test_terms_keep_growing_when_redis_loses_the_election(client, redis_sync, name):
    e = client.election(name)
    won = e.elect(b"")
    for key in redis_sync.scan_iter(match=f"*elect:{name}}}*"):
        redis_sync.delete(key)
    assert e.leader() is None
    again = e.elect(b"")
    assert again.term > won.term
    e.resign(again.term)


def test_campaign_block_hands_over_when_it_ends(client, name):
    e = client.election(name, ttl=30)
    elected = threading.Event()
    with e.campaign(b"one") as leadership:
        assert e.leader().term == leadership.term and not leadership.lost
        t = threading.Thread(target=lambda: e.campaign(b"two", timeout=30).__enter__() and elected.set())
        t.start()
        wait_until(lambda: e._rpc.call_safe("Leader", pb.LeaderRequest(election=name)).candidates == 1,
                   message="second candidate queued")
        assert not elected.is_set()
    t.join(10)  # elected long before the 30 s TTL: the stream's end resigned
    assert elected.is_set() and e.leader().value == b"two"


def test_campaign_block_learns_at_once_that_it_lost(client, name):
    e = client.election(name, ttl=30)
    with pytest.raises(concord.LeadershipLost):
        with e.campaign(b"v") as leadership:
            e.resign(leadership.term)  # as an operator, or a stale peer, could
            assert leadership.wait_lost(5)


async def test_async_campaign_and_observe(aclient, name):
    e = aclient.election(name, ttl=30)
    seen: list[concord.Change] = []

    async def observe() -> None:
        async for change in e.observe():
            seen.append(change)

    def seen_n(n: int):
        async def check() -> bool:
            return len(seen) == n
        return check

    watcher = asyncio.create_task(observe())
    await async_wait_until(seen_n(1), message="the state now")
    async with e.campaign(b"async") as leadership:
        await async_wait_until(seen_n(2), message="elected seen")
        assert seen[1].leader.term == leadership.term and not leadership.lost
    await async_wait_until(seen_n(3), message="resigned seen")
    assert seen[2].leader is None
    watcher.cancel()


LEADER_SCRIPT = """
import sys, grpc
from google.protobuf.duration_pb2 import Duration
from concord.election.v1 import election_pb2 as pb, election_pb2_grpc
stub = election_pb2_grpc.ElectionServiceStub(grpc.insecure_channel(sys.argv[1]))
for ev in stub.Lead(pb.LeadRequest(election=sys.argv[2], value=b"doomed", ttl=Duration(seconds=60),
                                   wait_timeout=Duration(seconds=60))):
    print(pb.LeadEvent.Name(ev.event), flush=True)
"""


def test_a_crashed_leaders_stream_hands_over_at_once(concord_server, client, name):
    proc = subprocess.Popen([sys.executable, "-c", LEADER_SCRIPT, concord_server.target, name],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "LEAD_EVENT_ELECTED"
        won: list[concord.Leadership] = []
        t = threading.Thread(target=lambda: won.append(client.election(name, ttl=30).elect(b"next", timeout=30)))
        t.start()
        wait_until(lambda: client._service("election").call_safe(
            "Leader", pb.LeaderRequest(election=name)).candidates == 1, message="candidate queued")
        killed_at = time.monotonic()
        proc.kill()
        t.join(30)
        # The leader's TTL was 60 s: only the stream's end can have handed over.
        assert won and won[0] is not None and time.monotonic() - killed_at < 30
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("request_, field", [
    (pb.CampaignRequest(election="", ttl=Duration(seconds=1)), "election"),
    (pb.CampaignRequest(election="e", ttl=Duration(seconds=0)), "ttl"),
    (pb.CampaignRequest(election="e", ttl=Duration(seconds=1), value=b"x" * 70_000), "value"),
])
def test_bad_campaigns_are_invalid_argument(concord_server, redis_sync, request_, field):
    stub = election_pb2_grpc.ElectionServiceStub(grpc.insecure_channel(concord_server.target))
    with pytest.raises(grpc.RpcError) as caught:
        stub.Campaign(request_)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(caught.value).reason == "INVALID_ARGUMENT"


@pytest.mark.parametrize("call", ["Proclaim", "Refresh", "Resign"])
def test_term_zero_is_invalid_argument(concord_server, call):
    stub = election_pb2_grpc.ElectionServiceStub(grpc.insecure_channel(concord_server.target))
    request = getattr(pb, f"{call}Request")(election="e", term=0)
    with pytest.raises(grpc.RpcError) as caught:
        getattr(stub, call)(request)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_a_redis_restart_keeps_the_leader_its_queue_and_the_history(fresh_redis, tmp_path, name):
    from support import ServerProcess

    server = ServerProcess("--redis-url", fresh_redis.url).start(tmp_path / "server.log")
    try:
        with concord.Client(server.target, timeout=5) as client:
            e = client.election(name, ttl=60)
            first = e.elect(b"one")
            seen: list[concord.Change] = []
            observer = e.observe()
            reader = threading.Thread(target=lambda: seen.extend(observer))
            reader.start()
            wait_until(lambda: len(seen) == 1, message="the state now")
            won: list[concord.Leadership] = []
            t = threading.Thread(target=lambda: won.append(client.election(name, ttl=60).elect(b"two", timeout=60)))
            t.start()
            wait_until(lambda: client._service("election").call_safe(
                "Leader", pb.LeaderRequest(election=name)).candidates == 1, message="candidate queued")

            fresh_redis.stop()
            with pytest.raises(concord.Unavailable):
                client.election(f"{name}:other").elect(b"", timeout=0)
            fresh_redis.start()  # same port, same append-only file

            wait_until(lambda: _leads(e) == first.term, message="the same leader after the restart")
            e.resign(first.term)
            t.join(30)
            assert won and won[0] is not None and won[0].term > first.term
            wait_until(lambda: len(seen) == 2, message="the hand-over observed across the restart")
            observer.close()
            reader.join(10)
            assert seen[1].leader.term == won[0].term and seen[1].position == seen[0].position + 1
    finally:
        server.stop()


def _leads(e) -> int:
    try:
        leader = e.leader()
    except concord.Unavailable:
        return 0
    return leader.term if leader else 0
