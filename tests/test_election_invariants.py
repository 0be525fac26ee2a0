"""Election invariants over a recorded history, on three replicas of one Redis.

Candidates on every replica campaign with random waits, short TTLs (some leaders
let theirs run out), cancellations mid-wait, Lead streams closed at random, a
candidate process killed while it leads, and one replica killed mid-run; an
observer on each surviving replica records every change. From the history:

- at most one leader per term, and terms strictly increase from one leader to the next;
- leaderships never overlap: each one's safe interval (from its reply to the earlier
  of its resign being sent and its TTL counted from its request) is disjoint from
  every other's;
- every observer sees the same changes: the same content at each position, and from
  its first position on, every position (no change missed, none reordered);
- every term a candidate won appears in the observers' history.
"""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest

import concord
from support import ServerProcess

RUN_SECONDS = 6.0
SLACK = 2.0
LEADER_SCRIPT = """
import sys, grpc
from google.protobuf.duration_pb2 import Duration
from concord.election.v1 import election_pb2 as pb, election_pb2_grpc
stub = election_pb2_grpc.ElectionServiceStub(grpc.insecure_channel(sys.argv[1]))
for ev in stub.Lead(pb.LeadRequest(election=sys.argv[2], candidate="doomed", ttl=Duration(seconds=30),
                                   wait_timeout=Duration(seconds=30))):
    print(pb.LeadEvent.Name(ev.event), ev.term, flush=True)
"""


@dataclass
class Term:
    candidate: str
    term: int
    sent: float
    ttl: float
    replied: float
    ended: float | None = None  # resign sent / stream closed


async def candidate_loop(i: int, clients: list[concord.AsyncClient], election: str, won: list[Term],
                         rng: random.Random, stop_at: float) -> None:
    while time.monotonic() < stop_at:
        client = rng.choice(clients)
        who = f"c{i}"
        e = client.election(election, ttl=rng.choice([0.2, 0.5, 2.0]), candidate=who)
        sent = time.monotonic()
        try:
            if rng.random() < 0.5:
                # Unary: maybe cancelled mid-wait; maybe left to run out (no refresh).
                wait = rng.choice([0.0, 0.2, 1.0, 2.0])
                if rng.random() < 0.2 and wait > 0:
                    leadership = await asyncio.wait_for(e.elect(who.encode(), timeout=wait), rng.uniform(0.01, wait))
                else:
                    leadership = await e.elect(who.encode(), timeout=wait)
                if leadership is None:
                    continue
                t = Term(who, leadership.term, sent, e.ttl, time.monotonic())
                won.append(t)
                await asyncio.sleep(rng.uniform(0, e.ttl * 1.5))
                t.ended = time.monotonic()
                try:
                    await e.resign(leadership.term)
                except concord.NotLeader:
                    pass
            else:
                held = None
                try:
                    async with e.campaign(who.encode(), timeout=rng.choice([0.5, 2.0])) as leadership:
                        held = leadership
                        t = Term(who, leadership.term, sent, float("inf"), time.monotonic())
                        won.append(t)
                        await asyncio.sleep(rng.uniform(0, 0.3))
                        t.ended = time.monotonic()
                except concord.LeadershipLost:
                    # Lost while the block ran (its server was killed, say): the API
                    # protects the block only until the last renewal's expiry, and the
                    # next leader may be elected from then on, before the block ends.
                    if held is not None and held.expires_at is not None:
                        t.ended = min(t.ended, time.monotonic() + held.expires_at.timestamp() - time.time())
                    continue
        except (TimeoutError, concord.ElectionTimeout, concord.LeadershipLost):
            continue
        except concord.Unavailable:
            clients.remove(client) if len(clients) > 1 else None  # its replica was killed
            continue


async def observe(client: concord.AsyncClient, election: str, seen: list[concord.Change], stop: asyncio.Event) -> None:
    async with client.election(election).observe() as changes:
        stopper = asyncio.create_task(stop.wait())
        stopper.add_done_callback(lambda _: changes.close())
        async for change in changes:
            seen.append(change)


@pytest.fixture
def replicas(redis_server, tmp_path):
    servers = [ServerProcess("--redis-url", redis_server.url, "--log-level", "WARNING").start(tmp_path / f"r{i}.log")
               for i in range(3)]
    yield servers
    for s in servers:
        s.stop()


async def test_election_invariants_across_replicas_with_kills(replicas, name):
    clients = [concord.AsyncClient(s.target, timeout=5) for s in replicas]
    won: list[Term] = []
    seen: list[list[concord.Change]] = [[], []]
    stop = asyncio.Event()
    observers = [asyncio.create_task(observe(clients[i], name, seen[i], stop)) for i in range(2)]
    stop_at = time.monotonic() + RUN_SECONDS
    rng = random.Random(19)
    loops = [asyncio.create_task(candidate_loop(i, list(clients), name, won, random.Random(rng.random()), stop_at))
             for i in range(8)]
    doomed = subprocess.Popen([sys.executable, "-c", LEADER_SCRIPT, replicas[2].target, name],
                              stdout=subprocess.PIPE, text=True)
    try:
        elected = await asyncio.to_thread(doomed.stdout.readline)
        assert elected.startswith("LEAD_EVENT_ELECTED"), elected
        doomed_term = int(elected.split()[1])
        doomed.kill()  # leads with a 30 s TTL: only its stream's end hands over
        await asyncio.sleep(RUN_SECONDS / 2)
        replicas[2].kill()
        await asyncio.gather(*loops)
    finally:
        doomed.kill()
        doomed.wait()
    # Let the last leadership end (resigned or run out), then stop the observers.
    deadline = time.monotonic() + 10
    while (await clients[0].election(name).leader()) is not None:
        assert time.monotonic() < deadline, "a leader was left behind"
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.2)
    stop.set()
    await asyncio.gather(*observers)
    for c in clients[:2]:
        await c.close()

    # One candidate per term; terms strictly increase from each leader to the next.
    history = seen[0]
    by_position = {c.position: c for c in history}
    leaders = [c.leader for c in history if c.leader is not None]
    terms_seen: dict[int, str] = {}
    for leader in leaders:
        assert terms_seen.setdefault(leader.term, leader.candidate) == leader.candidate
    order = []
    for leader in leaders:
        if not order or order[-1] != leader.term:
            order.append(leader.term)
    assert order == sorted(order) and len(order) == len(set(order)), "terms go back or repeat"
    # Every won term, the killed client's too, is in the history with its candidate.
    for t in won:
        assert terms_seen.get(t.term) == t.candidate, t
    assert terms_seen.get(doomed_term) == "doomed"
    # Observers agree, and neither skips a position once it started.
    for obs in seen:
        positions = [c.position for c in obs]
        assert positions == list(range(positions[0], positions[0] + len(positions))), positions[:20]
        for c in obs[1:]:
            mine = by_position.get(c.position)
            if mine is not None:
                assert (mine.leader and (mine.leader.term, mine.leader.candidate, mine.leader.value)) == \
                    (c.leader and (c.leader.term, c.leader.candidate, c.leader.value))
    # Leaderships never overlap (safe intervals).
    intervals = sorted((t.replied, min(t.ended or float("inf"), t.sent + t.ttl)) for t in won)
    for (s1, e1), (s2, _) in zip(intervals, intervals[1:]):
        assert s2 >= e1 - 0.005, "two leaders at once"
    assert len(won) >= 10, "too little contention to mean anything"
