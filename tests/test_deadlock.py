"""Deadlock detection: a wait that closes a cycle of owners, each holding a lock the
next waits for, fails ABORTED / DEADLOCK with the cycle (the youngest wait in it),
the others go on; no false alarm without a cycle; across replicas."""

from __future__ import annotations

import threading
import time

import pytest

import concord
from support import ServerProcess, wait_until


def waiting_on(client, lock: str, n: int = 1) -> None:
    wait_until(lambda: client.lock(lock).describe().waiters == n, message=f"{n} waiting on {lock}")


def test_two_owners_crossing_locks(client, name):
    l1, l2 = f"{name}:1", f"{name}:2"
    a1 = client.lock(l1, ttl=30, owner="A").acquire()
    b2 = client.lock(l2, ttl=30, owner="B").acquire()
    got: list[concord.Lease | None] = []
    t = threading.Thread(target=lambda: got.append(client.lock(l2, ttl=30, owner="A").acquire(timeout=30)))
    t.start()
    waiting_on(client, l2)
    started = time.monotonic()
    with pytest.raises(concord.Deadlock) as caught:
        client.lock(l1, ttl=30, owner="B").acquire(timeout=30)
    assert time.monotonic() - started < 10  # not the 30 s wait
    err = caught.value
    assert err.code.name == "ABORTED" and err.reason == "DEADLOCK"
    assert err.metadata["cycle"] == f"B -[{l1}]-> A -[{l2}]-> B"
    assert client.lock(l1).describe().waiters == 0  # the victim left the queue
    # B, told, lets go of what it holds; A (still waiting) goes on.
    b2.release()
    t.join(10)
    assert got and got[0] is not None
    got[0].release()
    a1.release()


def test_three_owner_cycle_and_multilock(client, name):
    l1, l2, l3 = (f"{name}:{i}" for i in (1, 2, 3))
    held = {o: client.lock(lk, ttl=30, owner=o).acquire() for o, lk in (("A", l1), ("B", l2), ("C", l3))}
    results: dict[str, object] = {}

    def wait(owner: str, names: list[str]) -> None:
        try:
            results[owner] = client.multilock(names, ttl=30, owner=owner).acquire(timeout=30)
        except concord.Deadlock as exc:
            results[owner] = exc

    ta = threading.Thread(target=wait, args=("A", [l2]))
    tb = threading.Thread(target=wait, args=("B", [l3, f"{name}:free"]))
    ta.start()
    waiting_on(client, l2)
    tb.start()
    waiting_on(client, l3)
    with pytest.raises(concord.Deadlock) as caught:
        client.lock(l1, ttl=30, owner="C").acquire(timeout=30)
    assert caught.value.metadata["cycle"] == f"C -[{l1}]-> A -[{l2}]-> B -[{l3}]-> C"
    held["C"].release()
    tb.join(10)
    assert isinstance(results["B"], concord.MultiLease)
    client.multilock([l3, f"{name}:free"]).release(results["B"])
    held["B"].release()
    ta.join(10)
    assert isinstance(results["A"], concord.MultiLease)


def test_a_label_waiting_for_itself_is_no_deadlock(client, name):
    """Callers often share one owner label (every replica of a service): one of them
    waiting for a lock another holds is an ordinary wait."""
    held = client.lock(name, ttl=30, owner="billing").acquire()
    assert client.lock(name, ttl=30, owner="billing").acquire(timeout=1.5) is None
    held.release()


def test_no_cycle_no_alarm(client, name):
    l1, l2 = f"{name}:1", f"{name}:2"
    client.lock(l1, ttl=30, owner="A").acquire()
    client.lock(l2, ttl=30, owner="B").acquire()
    # B waits for A, who waits for nobody: a wait, not a deadlock.
    assert client.lock(l1, ttl=30, owner="B").acquire(timeout=1.5) is None
    # Without owner labels nobody is checked: this crossing just times out.
    x, y = client.lock(f"{name}:x", ttl=30).acquire(), client.lock(f"{name}:y", ttl=30).acquire()
    assert x and y and client.lock(f"{name}:x", ttl=30).acquire(timeout=1.5) is None


def test_a_cycle_closed_across_two_replicas_fails_one_wait(redis_server, tmp_path, name):
    servers = [ServerProcess("--redis-url", redis_server.url).start(tmp_path / f"s{i}.log") for i in range(2)]
    try:
        c1, c2 = (concord.Client(s.target, timeout=10) for s in servers)
        l1, l2 = f"{name}:1", f"{name}:2"
        held = {"A": c1.lock(l1, ttl=30, owner="A").acquire(), "B": c2.lock(l2, ttl=30, owner="B").acquire()}
        outcomes: dict[str, object] = {}

        def wait(client, owner: str, lock: str) -> None:
            try:
                outcomes[owner] = client.lock(lock, ttl=30, owner=owner).acquire(timeout=20)
            except concord.Deadlock as exc:
                outcomes[owner] = exc

        threads = [threading.Thread(target=wait, args=(c1, "A", l2)), threading.Thread(target=wait, args=(c2, "B", l1))]
        for t in threads:
            t.start()
        wait_until(lambda: len(outcomes) >= 1, timeout=10, message="one wait failed")
        victims = [o for o, r in outcomes.items() if isinstance(r, concord.Deadlock)]
        assert len(victims) == 1, outcomes
        held[victims[0]].release()  # the victim lets go; the other wait then succeeds
        for t in threads:
            t.join(25)
        survivor = "A" if victims == ["B"] else "B"
        assert isinstance(outcomes[survivor], concord.Lease)
    finally:
        for s in servers:
            s.stop()
