"""Read-write lock invariants over a recorded history: many clients, three server
processes on one Redis, contention, random modes.

16 clients contend for 2 read-write locks for a few seconds, spread over three
concord-server replicas, with random modes, waits and hold times, short TTLs (holds
that outlive their TTL included), cancellations mid-wait, Hold streams whose channel
is closed mid-hold, and client processes SIGKILLed while holding through a Hold
stream. A monitor records each lock's queue (Describe, waiters in order) as it goes.
From the history:

- a writer never overlaps anyone: each grant's safe interval runs from the moment its
  reply arrived to the earlier of its release being sent (or its process killed) and
  its TTL counted from when its request was sent; no writer's interval intersects any
  other grant's (readers' may, and some do: they share);
- fencing tokens are unique per name and strictly increase in grant order: a grant
  whose reply arrived before another's request was sent has the smaller token, and of
  a writer and any other holder the one whose interval came first has the smaller;
- FIFO: a waiter that Describe showed queued before another request was even sent is
  granted before it (a smaller token), so a queued writer is never overtaken by a
  reader that asked later. Only the server's own queue order and one host's monotonic
  clock are compared (no slack to tune): Describe's reply arrived before the later
  request was sent, so the server had queued the first one before it saw the second.
  Only waiters granted before their own wait could run out in Redis are counted (a
  waiter whose wait ended in Redis may queue again at the back);
- every acquire answered within its wait limit (plus transport slack), and none failed;
- once all clients stop, nothing is held or queued, and no key but the fence is left.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import pairwise

import concord
import grpc
import pytest
from concord.rwlock.v1 import rwlock_pb2 as pb
from concord.rwlock.v1 import rwlock_pb2_grpc
from support import ServerProcess

# FIFO and answer-time checks under contention: run alone after the rest (make test); beside
# other test workers, stalls turned into retried (so re-queued) acquires.
pytestmark = pytest.mark.serial

NAMES = ["inv:rw:a", "inv:rw:b"]
CLIENTS = 16
RUN_SECONDS = 4.0
SLACK = 2.0  # transport and scheduling on a shared 2-core machine
REDIS_SLEW = 0.1  # s: Redis's clock against this host's monotonic one over a wait
KILLED = 2  # client processes SIGKILLed while holding


@dataclass
class Attempt:
    lock: str
    owner: str  # unique per attempt: how Describe's waiters name it
    mode: str  # "read" or "write"
    kind: str  # "acquire", "hold" (channel closed mid-hold) or "killed" (process SIGKILLed)
    sent: float
    wait: float
    ttl: float
    replied: float | None = None
    fence: int | None = None
    released: float | None = None
    cancelled: bool = False

    @property
    def safe(self) -> tuple[float, float]:
        assert self.replied is not None and self.released is not None
        return self.replied, min(self.released, self.sent + self.ttl)


@dataclass
class Queued:
    """When Describe first showed each owner queued (its reply's arrival)."""

    first_seen: dict[str, float] = field(default_factory=dict)

    def saw(self, owners: list[str], at: float) -> None:
        for o in owners:
            self.first_seen.setdefault(o, at)


@pytest.fixture(scope="module")
def replicas(concord_server, redis_server, tmp_path_factory) -> Iterator[list[ServerProcess]]:
    """The session's server and two more on the same Redis, started side by side."""
    logs = tmp_path_factory.mktemp("rw-replicas")
    extra = [ServerProcess("--redis-url", redis_server.url, "--log-level", "WARNING") for _ in range(2)]
    try:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda p: p[1].start(logs / f"replica{p[0]}.log"), enumerate(extra)))
        yield [concord_server, *extra]
    finally:
        for s in extra:
            assert s.stop() == 0, s.log_text()


async def client_loop(i: int, client: concord.AsyncClient, target: str, names: list[str], history: list[Attempt],
                      rng: random.Random, stop_at: float) -> None:
    n = 0
    while time.monotonic() < stop_at:
        n += 1
        name = rng.choice(names)
        mode = "read" if rng.random() < 0.6 else "write"
        ttl = rng.choice([0.05, 0.1, 0.3])
        wait = rng.choice([0.0, 0.05, 0.3, 1.0, 2.0])
        owner = f"c{i}-{n}"
        if rng.random() < 0.05:
            await hold_and_close(target, name, mode, owner, ttl, wait, history, rng)
            continue
        rw = client.rwlock(name, ttl=ttl, owner=owner)
        a = Attempt(name, owner, mode, "acquire", time.monotonic(), wait, ttl)
        history.append(a)
        try:
            if rng.random() < 0.15 and wait > 0:
                # Give up mid-wait: the gRPC call is cancelled under the server's feet.
                lease = await asyncio.wait_for(rw.acquire(mode, timeout=wait), rng.uniform(0.01, wait))
            else:
                lease = await rw.acquire(mode, timeout=wait)
        except TimeoutError:
            a.cancelled = True
            continue
        a.replied = time.monotonic()
        if lease is None:
            continue
        a.fence = lease.fencing_token
        # Hold for a while; sometimes past the TTL, so the hold expires under us.
        await asyncio.sleep(rng.choice([0.0, 0.005, 0.02, ttl * 0.5, ttl * 1.5]))
        a.released = time.monotonic()
        try:
            await lease.release()
        except concord.LockNotHeld:
            pass  # it expired first: the interval check accounts for it
        await asyncio.sleep(rng.uniform(0, 0.01))


async def hold_and_close(target: str, name: str, mode: str, owner: str, ttl: float, wait: float,
                         history: list[Attempt], rng: random.Random) -> None:
    """A Hold stream on a channel of its own, which is closed mid-hold (no cancel)."""
    channel = grpc.aio.insecure_channel(target)
    req = pb.HoldRequest(name=name, mode=pb.MODE_READ if mode == "read" else pb.MODE_WRITE, owner=owner)
    req.ttl.FromMilliseconds(int(ttl * 1000))
    req.wait_timeout.FromMilliseconds(int(wait * 1000))
    a = Attempt(name, owner, mode, "hold", time.monotonic(), wait, ttl)
    history.append(a)
    try:
        stream = rwlock_pb2_grpc.ReadWriteLockServiceStub(channel).Hold(req, timeout=wait + 30)
        try:
            first = await stream.read()
        except grpc.aio.AioRpcError as err:
            assert err.code() == grpc.StatusCode.DEADLINE_EXCEEDED, err
            a.replied = time.monotonic()
            return
        a.replied = time.monotonic()
        assert first.event == pb.HOLD_EVENT_ACQUIRED
        a.fence = first.fencing_token
        await asyncio.sleep(rng.uniform(0.0, ttl * 1.5))
        a.released = time.monotonic()
    finally:
        await channel.close()


KILLED_CLIENT = """
import json, sys, time
import grpc
from concord.rwlock.v1 import rwlock_pb2 as pb, rwlock_pb2_grpc

target, name, mode, owner = sys.argv[1:5]
req = pb.HoldRequest(name=name, mode=int(mode), owner=owner)
req.ttl.FromMilliseconds(3000)
req.wait_timeout.FromMilliseconds(2000)
channel = grpc.insecure_channel(target)
sent = time.monotonic()
stream = rwlock_pb2_grpc.ReadWriteLockServiceStub(channel).Hold(req)
try:
    first = next(stream)
except grpc.RpcError as err:
    print(json.dumps({"sent": sent, "replied": time.monotonic(), "fence": None, "code": err.code().name}), flush=True)
    sys.exit(0)
print(json.dumps({"sent": sent, "replied": time.monotonic(), "fence": first.fencing_token}), flush=True)
for _ in stream:  # held until this process is killed
    pass
"""


async def killed_client(j: int, target: str, name: str, history: list[Attempt], rng: random.Random,
                        start_after: float) -> None:
    """A client process that holds the lock through a Hold stream and is SIGKILLed
    mid-hold; one that found no room within its wait tries again (a new process)."""
    await asyncio.sleep(start_after)
    mode = rng.choice(["read", "write"])
    give_up_at = time.monotonic() + 30
    for k in range(100):
        if await _killed_once(f"killed{j}-{k}", target, name, mode, history, rng):
            return
        assert time.monotonic() < give_up_at, f"killed client {j} never got {name}"


async def _killed_once(owner: str, target: str, name: str, mode: str, history: list[Attempt],
                       rng: random.Random) -> bool:
    # (Popen, not asyncio's subprocesses: a fork under uvloop with gRPC's threads running can crash the child.)
    proc = subprocess.Popen([sys.executable, "-c", KILLED_CLIENT, target, name, "1" if mode == "read" else "2", owner],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 30)
        if not line:
            proc.wait(10)
            pytest.fail(f"the client process died: {proc.stderr.read()}")
        got = json.loads(line)
        a = Attempt(name, owner, mode, "killed", got["sent"], 2.0, 3.0, got["replied"], got["fence"])
        history.append(a)
        assert got["fence"] is not None or got["code"] == "DEADLINE_EXCEEDED", got
        if a.fence is not None:
            await asyncio.sleep(rng.uniform(0.05, 0.4))
            # Its last moment as a holder: the server lets go only once it is dead.
            a.released = time.monotonic()
        return a.fence is not None
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        await asyncio.to_thread(proc.wait, 10)
        proc.stdout.close()
        proc.stderr.close()


async def monitor(client: concord.AsyncClient, name: str, seen: Queued, stop: asyncio.Event) -> None:
    rw = client.rwlock(name)
    while not stop.is_set():
        info = await rw.describe()
        seen.saw([w.owner for w in info.waiters], time.monotonic())
        await asyncio.sleep(0.005)


async def test_rwlock_invariants_under_contention_across_replicas(replicas, redis_server, name):
    names = [f"{name}:{n}" for n in NAMES]
    targets = [s.target for s in replicas]
    history: list[Attempt] = []
    seen = {n: Queued() for n in names}
    rng = random.Random(name)
    clients = [concord.AsyncClient(t) for t in targets]
    stop = asyncio.Event()
    try:
        monitors = [asyncio.create_task(monitor(clients[k % len(clients)], n, seen[n], stop))
                    for k, n in enumerate(names)]
        stop_at = time.monotonic() + RUN_SECONDS
        await asyncio.gather(
            *(client_loop(i, clients[i % len(clients)], targets[i % len(targets)], names, history,
                          random.Random(rng.random()), stop_at) for i in range(CLIENTS)),
            *(killed_client(j, targets[1 + j % (len(targets) - 1)], names[j % len(names)], history,
                            random.Random(rng.random()), RUN_SECONDS * (j + 1) / (KILLED + 2))
              for j in range(KILLED)))
        stop.set()
        await asyncio.gather(*monitors)
        for n in names:
            await _until_idle(clients[0], n)
    finally:
        stop.set()
        for c in clients:
            await c.close()

    check_history(history, names, seen)
    await _until_no_keys_but_the_fence(redis_server, names)


def check_history(history: list[Attempt], names: list[str], seen: dict[str, Queued]) -> None:
    grants = [a for a in history if a.fence is not None]
    assert len(grants) > 50, f"too little traffic to mean anything: {len(grants)} grants"
    assert sum(a.kind == "killed" for a in grants) == KILLED, "a killed client never held the lock"
    shared = fifo_pairs = writer_behind = 0
    for n in names:
        mine = [a for a in grants if a.lock == n]
        fences = [a.fence for a in mine]
        assert len(set(fences)) == len(fences), f"{n}: a fencing token was handed out twice"

        # Exclusion: no writer's safe interval meets any other holder's.
        live = sorted((a for a in mine if a.safe[0] < a.safe[1]), key=lambda a: a.safe[0])
        starts = [a.safe[0] for a in live]
        for w in (a for a in live if a.mode == "write"):
            ws, we = w.safe
            for other in live[:bisect.bisect_left(starts, we)]:
                if other is w:
                    continue
                os_, oe = other.safe
                assert oe <= ws or we <= os_, f"{n}: writer {w.owner} ({w.fence}) overlaps {other.mode} " \
                                              f"{other.owner} ({other.fence})"
                first, second = (other, w) if oe <= ws else (w, other)
                assert first.fence < second.fence, f"{n}: {second.owner} held after {first.owner} " \
                                                   f"with a smaller token"
        readers = [a for a in live if a.mode == "read"]
        shared += sum(1 for x, y in pairwise(readers) if y.safe[0] < x.safe[1])

        # Fencing in grant order: a grant replied before another was asked has the smaller token.
        by_reply = sorted(mine, key=lambda a: a.replied)
        replies = [a.replied for a in by_reply]
        best = []
        for a in by_reply:
            best.append(max(best[-1] if best else (0, None), (a.fence, a.owner)))
        for y in mine:
            k = bisect.bisect_left(replies, y.sent)
            if k:
                top, who = best[k - 1]
                assert top < y.fence, f"{n}: {y.owner} asked after {who} was granted, yet got the smaller token"

        # FIFO: seen queued before the other was sent => granted first.
        queued_at = seen[n].first_seen
        early = sorted(((queued_at[a.owner], a) for a in mine
                        if a.owner in queued_at and a.replied < a.sent + a.wait - REDIS_SLEW), key=lambda e: e[0])
        early_times = [t for t, _ in early]
        for y in mine:
            for _, x in early[:bisect.bisect_left(early_times, y.sent)]:
                if x is y:
                    continue
                fifo_pairs += 1
                writer_behind += x.mode == "write" and y.mode == "read"
                assert x.fence < y.fence, f"{n}: {y.mode} {y.owner} (sent after {x.mode} {x.owner} was seen " \
                                          f"queued) was granted first"
    assert shared > 0, "readers never shared a lock"
    assert writer_behind > 0, f"no queued writer was ever followed by a reader ({fifo_pairs} FIFO pairs)"

    for a in history:
        if a.cancelled:
            continue
        assert a.replied is not None, f"{a.owner} never answered"
        assert a.replied - a.sent <= a.wait + SLACK, f"{a.owner} waited {a.replied - a.sent:.2f}s past its {a.wait}s"


async def _until_idle(client: concord.AsyncClient, name: str) -> None:
    deadline = time.monotonic() + 10
    while True:
        info = await client.rwlock(name).describe()
        if not info.held and not info.waiters:
            return
        assert time.monotonic() < deadline, f"{name} still busy after all clients stopped: {info}"
        await asyncio.sleep(0.02)


async def _until_no_keys_but_the_fence(redis_server, names: list[str]) -> None:
    """Holders that expired unseen are swept by the next script or vanish with their
    keys' TTL (the longest TTL here is 3 s); then only the fence keys remain."""
    r = redis_server.client()
    try:
        deadline = time.monotonic() + 10
        while True:
            left = [k for n in names for k in r.scan_iter(match=f"*:rw:{n}}}*") if not k.endswith(":fence")]
            if not left:
                return
            assert time.monotonic() < deadline, f"keys left behind: {left}"
            await asyncio.sleep(0.05)
    finally:
        r.close()
