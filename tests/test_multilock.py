"""Multi-locks (AcquireMany): all or none, waiting without holding a part, no
deadlock whatever the order of the names, one fencing token per name; on a Redis
Cluster, names in different slots taken slot by slot."""

from __future__ import annotations

import random
import threading
import time

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

import concord
from concord.lock.v1 import lock_pb2 as pb
from concord.lock.v1 import lock_pb2_grpc
from support import ServerProcess, error_info, wait_until


def holders(redis_sync, names: list[str]) -> dict[str, str | None]:
    """Who holds each lock, read in one MULTI/EXEC: a single instant's view."""
    pipe = redis_sync.pipeline(transaction=True)
    for n in names:
        pipe.hget(f"{{concord:lock:{n}}}:holder", "owner")
    return dict(zip(names, pipe.execute()))


def test_all_or_none(client, redis_sync, name):
    a, b = f"{name}:a", f"{name}:b"
    single = client.lock(a, ttl=30).acquire()
    assert client.multilock([a, b]).acquire(timeout=0) is None
    assert not client.lock(b).describe().held and client.lock(b).describe().waiters == 0
    single.release()
    lease = client.multilock([a, b], owner="m").acquire(timeout=0)
    assert set(lease.fencing_tokens) == {a, b}
    assert lease.fencing_tokens[a] > single.fencing_token
    assert holders(redis_sync, [a, b]) == {a: "m", b: "m"}
    client.multilock([a, b]).release(lease)
    assert holders(redis_sync, [a, b]) == {a: None, b: None}


def test_a_waiting_multilock_holds_no_part(client, redis_sync, name):
    a, b = f"{name}:a", f"{name}:b"
    held_a = client.lock(a, ttl=30).acquire()
    got: list[concord.MultiLease] = []
    t = threading.Thread(target=lambda: got.append(client.multilock([b, a], owner="m").acquire(timeout=30)))
    t.start()
    wait_until(lambda: client.lock(b).describe().waiters == 1, message="queued on b")
    # b is free and stays usable by everyone while the multilock waits for a.
    other = client.lock(b, ttl=30).acquire(timeout=0)
    assert other is not None and holders(redis_sync, [a, b])[b] != "m"
    other.release()
    assert holders(redis_sync, [a, b])[b] is None
    held_a.release()
    t.join(10)
    assert got and got[0] is not None and holders(redis_sync, [a, b]) == {a: "m", b: "m"}
    client.multilock([a, b]).release(got[0])


def test_release_many_names_what_it_did_not_hold_and_refresh_needs_all(client, name):
    a, b = f"{name}:a", f"{name}:b"
    m = client.multilock([a, b], ttl=30)
    lease = m.acquire()
    m.refresh(lease, 60)
    client.lock(b).release(concord.Lease(client.lock(b), lease.token, 0, lease.expires_at))
    with pytest.raises(concord.LockNotHeld) as caught:
        m.refresh(lease)
    assert caught.value.metadata["names"] == b
    with pytest.raises(concord.LockNotHeld) as caught:
        m.release(lease)
    assert caught.value.metadata["names"] == b
    assert not client.lock(a).describe().held


def test_random_name_orders_never_deadlock_or_show_a_partial_hold(client, redis_sync, name):
    names = [f"{name}:{i}" for i in range(4)]
    stop_at = time.monotonic() + 3.0
    done: list[int] = []
    partial: list[dict] = []
    rng = random.Random(7)
    asked: dict[str, set[str]] = {}

    def worker(i: int) -> None:
        count = 0
        while time.monotonic() < stop_at:
            picked = rng.sample(names, rng.randint(2, 4))
            asked[f"w{i}-{count}"] = set(picked)
            with client.multilock(picked, ttl=10, timeout=20, owner=f"w{i}-{count}"):
                pass
            count += 1
        done.append(count)

    def sampler() -> None:
        while time.monotonic() < stop_at:
            snapshot = holders(redis_sync, names)
            owners = {o for o in snapshot.values() if o}
            for o in owners:
                if {n for n, who in snapshot.items() if who == o} != asked[o]:  # all it asked for, or nothing
                    partial.append(snapshot)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)] + [threading.Thread(target=sampler)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(done) == 6 and all(c > 0 for c in done), done  # nobody stuck
    assert not partial, partial[:3]
    assert holders(redis_sync, names) == dict.fromkeys(names)
    assert all(client.lock(n).describe().waiters == 0 for n in names)


def test_hold_many_stream_releases_all_when_closed(concord_server, client, name):
    stub = lock_pb2_grpc.LockServiceStub(grpc.insecure_channel(concord_server.target))
    names = [f"{name}:a", f"{name}:b"]
    stream = stub.HoldMany(pb.HoldManyRequest(names=names, ttl=Duration(seconds=30)))
    first = next(stream)
    assert first.event == pb.HOLD_EVENT_ACQUIRED and len(first.fencing_tokens) == 2
    assert all(client.lock(n).describe().held for n in names)
    stream.cancel()
    wait_until(lambda: not any(client.lock(n).describe().held for n in names), message="released on close")


@pytest.mark.parametrize("names", [[], ["a", "a"], [f"n{i}" for i in range(65)], ["ok", ""]])
def test_bad_names_are_invalid_argument(concord_server, names):
    stub = lock_pb2_grpc.LockServiceStub(grpc.insecure_channel(concord_server.target))
    with pytest.raises(grpc.RpcError) as caught:
        stub.AcquireMany(pb.AcquireManyRequest(names=names, ttl=Duration(seconds=1)))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(caught.value).reason == "INVALID_ARGUMENT"


def test_names_in_different_cluster_slots(cluster_server, name):
    """On a Cluster each slot's names are taken atomically, the slots one after
    another in slot order; the whole still ends all or none."""
    names = [f"{name}:{i}" for i in range(5)]  # five names: several slots
    with concord.Client(cluster_server.target) as client:
        blocker = client.lock(names[3], ttl=30).acquire()
        assert client.multilock(names).acquire(timeout=0) is None
        assert not any(client.lock(n).describe().held for n in names if n != names[3])  # none kept
        got: list[concord.MultiLease] = []
        t = threading.Thread(target=lambda: got.append(client.multilock(list(reversed(names)), owner="m").acquire(timeout=30)))
        t.start()
        wait_until(lambda: client.lock(names[3]).describe().waiters == 1, message="waiting for the blocked slot")
        blocker.release()
        t.join(10)
        lease = got[0]
        assert lease is not None and all(client.lock(n).describe().owner == "m" for n in names)
        assert len(set(lease.fencing_tokens.values())) == 5
        client.multilock(list(reversed(names))).release(lease)
        assert not any(client.lock(n).describe().held for n in names)


MULTI_HOLDER = """
import sys, grpc
from google.protobuf.duration_pb2 import Duration
from concord.lock.v1 import lock_pb2 as pb, lock_pb2_grpc
stub = lock_pb2_grpc.LockServiceStub(grpc.insecure_channel(sys.argv[1]))
for ev in stub.HoldMany(pb.HoldManyRequest(names=sys.argv[2:], ttl=Duration(seconds=60), owner="doomed")):
    print(pb.HoldEvent.Name(ev.event), flush=True)
"""


def test_three_replicas_a_killed_holder_and_a_killed_replica(redis_server, redis_sync, tmp_path, name):
    """The random-order workload over three replicas, while a client holding some of
    the names through HoldMany is killed (they free at once, not at their 60 s TTL)
    and one replica is killed mid-run (its callers move to the others)."""
    import subprocess
    import sys

    servers = [ServerProcess("--redis-url", redis_server.url, "--log-level", "WARNING").start(tmp_path / f"r{i}.log")
               for i in range(3)]
    names = [f"{name}:{i}" for i in range(4)]
    doomed = subprocess.Popen([sys.executable, "-c", MULTI_HOLDER, servers[0].target, *names[:2]],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert doomed.stdout.readline().strip() == "HOLD_EVENT_ACQUIRED"
        clients = [concord.Client(s.target, timeout=5) for s in servers]
        stop_at = time.monotonic() + 4.0
        asked: dict[str, set[str]] = {}
        partial: list[dict] = []
        done: list[int] = []
        rng = random.Random(11)

        def worker(i: int) -> None:
            count = 0
            while time.monotonic() < stop_at:
                picked = rng.sample(names, rng.randint(2, 4))
                owner = f"w{i}-{count}"
                asked[owner] = set(picked)
                client = clients[(i + count) % 2] if i % 3 else clients[2]
                try:
                    with client.multilock(picked, ttl=5, timeout=20, owner=owner):
                        pass
                except concord.Unavailable:
                    pass  # its replica died under it; what it held is let go or runs out
                count += 1
            done.append(count)

        def sampler() -> None:
            while time.monotonic() < stop_at:
                snapshot = holders(redis_sync, names)
                for o in {o for o in snapshot.values() if o and o != "doomed"}:
                    if {n for n, who in snapshot.items() if who == o} != asked[o]:
                        partial.append(snapshot)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)] + [threading.Thread(target=sampler)]
        for t in threads:
            t.start()
        time.sleep(0.5)  # the workload queues behind the doomed holder's names
        doomed.kill()
        time.sleep(1.0)
        servers[2].kill()
        for t in threads:
            t.join(60)
        assert len(done) == 6 and not partial, partial[:3]
        wait_until(lambda: holders(redis_sync, names) == dict.fromkeys(names), timeout=10, message="all free")
    finally:
        doomed.kill()
        doomed.wait()
        for s in servers:
            s.stop()
