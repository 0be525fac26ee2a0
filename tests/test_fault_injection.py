"""Injected faults: a slow or cut link to Redis (support.TcpProxy), Redis replaced by
an empty one or killed and restarted from its append-only file, a concord-server
killed with SIGKILL under load, and a stream consumer that stops reading.

What test_faults.py, test_queue_faults.py and test_chat_faults.py already show
(Redis stopped and restarted cleanly under a held lock, a semaphore, queued and
leased tasks and a live subscription; a killed server's lock waiter, Consume stream
and subscription) is not repeated here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

import concord
from concord.errors import from_rpc_error
from concord.lock.v1 import lock_pb2, lock_pb2_grpc
from support import RedisServer, ServerProcess, TcpProxy, backend_binary, unless_unavailable, wait_until

MIB = 1024 * 1024


def duration(seconds: float) -> Duration:
    d = Duration()
    d.FromMilliseconds(int(seconds * 1000))
    return d


def hold(target: str, name: str, ttl: float, wait: float = 10) -> tuple[grpc.Channel, Any]:
    """A raw LockService.Hold stream (the client library renews with Refresh instead)."""
    channel = grpc.insecure_channel(target)
    stub = lock_pb2_grpc.LockServiceStub(channel)
    return channel, stub.Hold(lock_pb2.HoldRequest(name=name, ttl=duration(ttl), wait_timeout=duration(wait)))


def assert_redis_unavailable(call: Callable[[], Any], what: str) -> None:
    """call() (streams drained) fails UNAVAILABLE with reason REDIS_UNAVAILABLE: retryable,
    never UNKNOWN or INTERNAL."""
    with pytest.raises(concord.ConcordError) as err:
        result = call()
        if hasattr(result, "__iter__") and not isinstance(result, (str, bytes, list, tuple)):
            for _ in result:
                pass
    assert isinstance(err.value, concord.Unavailable), f"{what}: {type(err.value).__name__} {err.value}"
    assert err.value.reason == "REDIS_UNAVAILABLE", f"{what}: reason {err.value.reason!r}"


def _memory_kib(pid: int, field: str) -> int:
    """A field of /proc/<pid>/status in KiB (VmRSS: now, VmHWM: the peak so far)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


class Retrying(threading.Thread):
    """A blocked call run as an application would: retried while UNAVAILABLE; records
    every outcome, ending at the first that is not UNAVAILABLE."""

    def __init__(self, call: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.call = call
        self.unavailable = 0
        self.result: Any = None
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        while True:
            try:
                self.result = self.call()
                return
            except concord.Unavailable:
                self.unavailable += 1
                time.sleep(0.05)  # an application's retry backoff
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                self.error = exc
                return


@pytest.fixture
def proxied(fresh_redis, tmp_path):
    """(proxy, server behind it, server on the same Redis directly)."""
    with TcpProxy(fresh_redis.port) as proxy:
        behind = ServerProcess("--redis-url", proxy.url).start(tmp_path / "behind.log")
        direct = ServerProcess("--redis-url", fresh_redis.url).start(tmp_path / "direct.log")
        try:
            yield proxy, behind, direct
        finally:
            behind.stop()
            direct.stop()


def test_calls_succeed_over_a_slow_link_to_redis(proxied, name):
    proxy, behind, _ = proxied
    proxy.delay(100)  # each way: every script round trip takes 200 ms or more
    with concord.Client(behind.target, timeout=10) as client:
        lease = client.lock(name, ttl=60).acquire()
        waiter = Retrying(lambda: client.lock(name, ttl=60).acquire(timeout=30))
        wait_until(lambda: client.lock(name).describe().waiters == 1, message="waiter queued")
        lease.release()
        waiter.join(30)
        assert waiter.result is not None and waiter.result.fencing_token > lease.fencing_token
        waiter.result.release()

        # A Hold stream's refreshes (every ttl/3) still confirm in time.
        channel, events = hold(behind.target, f"{name}:held", ttl=1.5)
        with channel:
            kinds = [lock_pb2.HoldEvent.Name(next(events).event) for _ in range(4)]
            assert kinds == ["HOLD_EVENT_ACQUIRED"] + ["HOLD_EVENT_REFRESHED"] * 3

        with client.semaphore(name, limit=2, ttl=60) as permit:
            assert [h.permit_id for h in client.semaphore(name, limit=2).describe().holders] == [permit.permit_id]

        q = client.queue(name)
        put = q.put_many([concord.NewTask("t", i) for i in range(5)])
        got = q.get(5)
        assert [t.task_id for t in got] == [r.task_id for r in put]
        for t in got:
            t.ack()
        assert q.stats().ready == q.stats().leased == 0

        chat_id = client.chat.create(f"{name}:a", [f"{name}:b"], "one")
        client.chat.send(chat_id, f"{name}:a", "two")
        with client.chat.subscribe(f"{name}:b") as feed:
            it = iter(feed)
            assert [next(it).body, next(it).body] == ["one", "two"]


def test_a_cut_link_to_redis_is_unavailable_and_heals_without_a_restart(proxied, name):
    proxy, behind, direct = proxied
    pid = behind.proc.pid
    with concord.Client(behind.target, timeout=5) as client, concord.Client(direct.target) as other:
        # Promises made before the cut.
        kept = client.lock(f"{name}:kept", ttl=60, owner="keeper").acquire()
        blocker = client.lock(name, ttl=60).acquire()
        waiter = Retrying(lambda: client.lock(name, ttl=60).acquire(timeout=60))
        q = client.queue(name)
        queued = q.put("queued-before")
        getter = Retrying(lambda: client.queue(f"{name}:empty").get(timeout=60))
        chat_id = client.chat.create(f"{name}:a", [f"{name}:b"], "before")
        channel, events = hold(behind.target, f"{name}:hold", ttl=1)
        assert next(events).event == lock_pb2.HOLD_EVENT_ACQUIRED
        wait_until(lambda: other.lock(name).describe().waiters == 1, message="lock waiter queued")

        proxy.cut()
        # The Hold stream cannot confirm a refresh within its TTL: it is told so.
        with channel:
            assert [e.event for e in events][-1:] == [lock_pb2.HOLD_EVENT_LOST]
        calls = {
            "lock acquire": lambda: client.lock(f"{name}:x", ttl=5).acquire(),
            "lock describe": lambda: client.lock(name).describe(),
            "semaphore acquire": lambda: client.semaphore(name, limit=1).acquire(),
            "queue put": lambda: q.put("during"),
            "queue get": lambda: q.get(),
            "queue stats": q.stats,
            "consume": lambda: iter(q.consume()),
            "chat send": lambda: client.chat.send(chat_id, f"{name}:a", "during"),
            "chat subscribe": lambda: iter(client.chat.subscribe(f"{name}:b")),
            "chat fetch_pending": lambda: client.chat.fetch_pending(f"{name}:b"),
            "autocomplete": lambda: client.autocomplete.add_recent(name, "x"),
            "files": lambda: client.files.list_files(name),
            "hold": lambda: _raising(hold(behind.target, f"{name}:y", ttl=5)[1]),
        }
        for what, call in calls.items():
            assert_redis_unavailable(call, what)

        proxy.resume()
        wait_until(lambda: _serves(client, f"{name}:after"), message="service back after the link healed")
        assert behind.proc.pid == pid and behind.proc.poll() is None
        info = client.lock(f"{name}:kept").describe()
        assert (info.held, info.owner, info.fencing_token) == (True, "keeper", kept.fencing_token)
        kept.release()
        blocker.release()
        waiter.join(30)
        assert waiter.error is None and waiter.result is not None, (waiter.error, waiter.result)
        assert waiter.result.fencing_token > blocker.fencing_token
        late = client.queue(f"{name}:empty").put("after")
        getter.join(30)
        assert getter.error is None and [t.task_id for t in getter.result] == [late]
        [task] = q.get(1)
        assert (task.task_id, task.attempt) == (queued, 1)
        task.ack()
        with client.chat.subscribe(f"{name}:b") as feed:
            assert next(iter(feed)).body == "before"


def _raising(stream):
    """A raw stub's stream, its failure raised as the client library's error."""
    try:
        yield from stream
    except grpc.RpcError as exc:
        raise from_rpc_error(exc) from None


def _serves(client: concord.Client, name: str) -> bool:
    try:
        return client.lock(name, ttl=5).acquire() is not None
    except concord.Unavailable:
        return False


def test_waiters_cut_off_past_their_liveness_still_get_the_resource_or_a_retryable_error(proxied, name):
    """While the link is cut the server cannot heartbeat, so after its liveness window
    its waiters count as dead and a release through another replica passes them by.
    Once the link heals they must still get the resource, or an error to retry on,
    not sit out their whole wait while the resource is free."""
    proxy, behind, direct = proxied
    with concord.Client(behind.target, timeout=5) as client, concord.Client(direct.target) as other:
        lease = other.lock(name, ttl=60).acquire()
        permit = other.semaphore(name, limit=1, ttl=60).acquire()
        lock_waiter = Retrying(lambda: client.lock(name, ttl=60).acquire(timeout=60))
        sem_waiter = Retrying(lambda: client.semaphore(name, limit=1, ttl=60).acquire(timeout=60))
        getter = Retrying(lambda: client.queue(name).get(timeout=60))
        wait_until(lambda: other.lock(name).describe().waiters == 1, message="lock waiter queued")
        wait_until(lambda: other.semaphore(name, limit=1).describe().waiters == 1, message="semaphore waiter queued")

        proxy.cut()
        # Describe counts live waiters only: these drop out once the server has been
        # silent past its liveness window.
        wait_until(lambda: other.lock(name).describe().waiters == 0, timeout=30, message="cut-off lock waiter dead")
        wait_until(lambda: other.semaphore(name, limit=1).describe().waiters == 0, timeout=30,
                   message="cut-off semaphore waiter dead")
        lease.release()
        permit.release()
        task = other.queue(name).put("while cut")
        proxy.resume()

        for waiter in (lock_waiter, sem_waiter, getter):
            waiter.join(30)
        assert lock_waiter.error is None and lock_waiter.result is not None, (lock_waiter.error, lock_waiter.result)
        assert lock_waiter.result.fencing_token > lease.fencing_token
        assert sem_waiter.error is None and sem_waiter.result is not None, (sem_waiter.error, sem_waiter.result)
        assert getter.error is None and [t.task_id for t in getter.result] == [task]


def test_redis_replaced_by_an_empty_one_reports_holds_lost_and_fences_keep_increasing(backend, fresh_redis,
                                                                                     tmp_path, name):
    server = ServerProcess("--redis-url", fresh_redis.url).start(tmp_path / "server.log")
    empty = RedisServer(backend_binary(backend), tmp_path / "empty", port=fresh_redis.port)
    try:
        with concord.Client(server.target, timeout=5) as client:
            names = [f"{name}:{i}" for i in range(3)]
            handed_out = []
            for n in names * 3:
                lease = client.lock(n, ttl=60).acquire()
                handed_out.append(lease.fencing_token)
                lease.release()
            channel, events = hold(server.target, f"{name}:hold", ttl=6)
            first = next(events)
            assert first.event == lock_pb2.HOLD_EVENT_ACQUIRED
            handed_out.append(first.fencing_token)

            # TTLs of 6 s: renewals every 2 s are refused by the empty Redis well
            # before the TTL could run out by itself.
            with pytest.raises(concord.PermitLost):
                with client.semaphore(name, limit=1, ttl=6) as permit:
                    with pytest.raises(concord.LockLost):
                        with client.lock(f"{name}:renewed", ttl=6) as lease:
                            handed_out.append(lease.fencing_token)
                            fresh_redis.kill()
                            empty.start()
                            wait_until(lambda: lease.lost and permit.lost, timeout=30, message="holds found lost")
                            with pytest.raises(concord.LockNotHeld):
                                lease.refresh()
                            with pytest.raises(concord.PermitNotHeld):
                                permit.refresh()
            with channel:
                assert [e.event for e in events] == [lock_pb2.HOLD_EVENT_LOST]

            # The fence keys are gone with the data; tokens still grow (seeded from the
            # Redis clock in microseconds).
            for n in [*names, f"{name}:hold", f"{name}:renewed"]:
                lease = wait_until(lambda: unless_unavailable(client.lock(n, ttl=5).acquire), message=f"{n} acquired")
                assert lease.fencing_token > max(handed_out), (n, lease.fencing_token, max(handed_out))
    finally:
        server.stop()
        empty.stop()


def test_everything_acknowledged_survives_redis_killed_with_sigkill(fresh_redis, tmp_path, name):
    """test_faults.py & co. stop Redis cleanly (SIGTERM writes everything out); here it
    dies at once, and the append-only file (appendfsync always) must hold every
    acknowledged change."""
    server = ServerProcess("--redis-url", fresh_redis.url).start(tmp_path / "server.log")
    a, b = f"{name}:a", f"{name}:b"
    try:
        with concord.Client(server.target, timeout=5) as client:
            lease = client.lock(name, ttl=300, owner="before").acquire()
            permit = client.semaphore(name, limit=3, permits=2, ttl=300).acquire()
            q = client.queue(name)
            q.put("doomed", max_attempts=1)
            [doomed] = q.get()
            doomed.nack("dies")
            q.put_many([concord.NewTask("ready", i) for i in range(4)] + [concord.NewTask("later", delay=3600)])
            leased = q.get(2, lease_ttl=300)
            chat_id = client.chat.create(a, [b], "m1")
            for body in ("m2", "m3"):
                client.chat.send(chat_id, a, body)
            client.chat.ack(b, chat_id, 2)
            client.autocomplete.add_names(name, ["Ada", "Adele", "Bob"])
            client.autocomplete.add_recent(a, "zed")
            before = _snapshot(client, name, chat_id, a, b)
            assert [len(before["queue"][s]) for s in ("ready", "delayed", "leased")] == [2, 1, 2]
            assert (before["dead"], before["names"], before["recent"]) == ([(doomed.task_id, "dies")], ["Ada", "Adele"],
                                                                           ["zed"])
            assert before["lock"][0] and len(before["semaphore"]) == 1 and len(before["chat"]) == 3
            assert before["seen"][b] == [(chat_id, 2, 1)]

            fresh_redis.kill()  # SIGKILL: no shutdown, no final write
            fresh_redis.start()  # same port, same append-only file
            after = wait_until(lambda: unless_unavailable(_snapshot, client, name, chat_id, a, b),
                               message="service back after Redis restarted")
            assert after == before
            for t in leased:  # the leases themselves survived: their holders still settle them
                t.ack()
            lease.release()
            permit.release()
            assert client.lock(name, ttl=5).acquire().fencing_token > lease.fencing_token
    finally:
        server.stop()


def _snapshot(client: concord.Client, name: str, chat_id: str, a: str, b: str) -> dict[str, Any]:
    lock = client.lock(name).describe()
    q = client.queue(name)
    return {
        "lock": (lock.held, lock.owner, lock.fencing_token),
        "semaphore": sorted((h.permit_id, h.permits) for h in client.semaphore(name, limit=3).describe().holders),
        "queue": {state: sorted((t.task_id, t.attempt) for t in q.peek(state))
                  for state in ("ready", "delayed", "leased")},
        "dead": [(t.task_id, t.last_error) for t in q.dead()],
        "chat": [(m.message_id, m.body) for m in client.chat.history(chat_id)],
        "seen": {u: [(c.chat_id, c.seen_id, c.unread) for c in client.chat.list_chats(u)] for u in (a, b)},
        "names": [s.name for s in client.autocomplete.suggest(name, "ad")],
        "recent": client.autocomplete.suggest_recent(a, ""),
    }


def test_a_server_killed_under_waiters_leases_and_streams_leaves_nothing_stuck(redis_server, concord_server, tmp_path,
                                                                                name):
    """test_faults.py and test_queue_faults.py kill a server under one lock waiter or
    one Consume stream; here it dies under all of them at once, and a server started
    on its port then serves its clients again."""
    doomed = ServerProcess("--redis-url", redis_server.url).start(tmp_path / "doomed.log")
    lock, sem, held = f"{name}:lock", f"{name}:sem", f"{name}:held"
    q_wait, q_consume, q_get = (f"{name}:{q}" for q in ("wait", "consume", "get"))
    a, b = f"{name}:a", f"{name}:b"
    replacement = None
    with concord.Client(concord_server.target) as alive, concord.Client(doomed.target, timeout=5) as client:
        lease = alive.lock(lock, ttl=60).acquire()
        permit = alive.semaphore(sem, limit=1, ttl=60).acquire()
        # Through the doomed server: first in both queues, a blocked Dequeue, a Hold
        # stream, a Consume stream and plain leases, a live subscription.
        their_lock = Retrying(lambda: client.lock(lock, ttl=60).acquire(timeout=60))
        their_sem = Retrying(lambda: client.semaphore(sem, limit=1, ttl=60).acquire(timeout=60))
        wait_until(lambda: alive.lock(lock).describe().waiters == 1, message="doomed lock waiter queued")
        wait_until(lambda: alive.semaphore(sem, limit=1).describe().waiters == 1, message="doomed sem waiter queued")
        their_get = Retrying(lambda: client.queue(q_wait).get(timeout=60))
        channel, events = hold(doomed.target, held, ttl=2)
        hold_token = next(events).fencing_token
        consumed_ids = {r.task_id for r in alive.queue(q_consume).put_many([concord.NewTask("c", i) for i in range(2)])}
        consumer = iter(client.queue(q_consume).consume(lease_ttl=2, prefetch=2))
        assert {next(consumer).task_id for _ in range(2)} == consumed_ids
        got_ids = {r.task_id for r in alive.queue(q_get).put_many([concord.NewTask("g", i) for i in range(2)])}
        assert {t.task_id for t in client.queue(q_get).get(2, lease_ttl=2)} == got_ids
        alive.chat.create(a, [b], "m1")
        feed = iter(client.chat.subscribe(b, ack_mode="explicit"))
        assert next(feed).body == "m1"
        # Through the live server: second in both queues.
        our_lock = Retrying(lambda: alive.lock(lock, ttl=60).acquire(timeout=60))
        our_sem = Retrying(lambda: alive.semaphore(sem, limit=1, ttl=60).acquire(timeout=60))
        wait_until(lambda: alive.lock(lock).describe().waiters == 2, message="live lock waiter queued")
        wait_until(lambda: alive.semaphore(sem, limit=1).describe().waiters == 2, message="live sem waiter queued")

        doomed.kill()  # SIGKILL: no drain, no release, no hand-back
        try:
            # The dead server's waiters stop counting within its liveness window (5 s) ...
            wait_until(lambda: alive.lock(lock).describe().waiters == 1, timeout=15, message="dead lock waiter skipped")
            wait_until(lambda: alive.semaphore(sem, limit=1).describe().waiters == 1, timeout=15,
                       message="dead semaphore waiter skipped")
            # ... so a release goes to the live waiter behind them.
            lease.release()
            permit.release()
            for w in (our_lock, our_sem):
                w.join(30)
                assert w.error is None and w.result is not None, (w.error, w.result)
            assert our_lock.result.fencing_token > lease.fencing_token
            # The dead Hold stream's lock ends with its TTL; leased tasks come back when
            # their leases run out, with the attempt counted.
            mine = alive.lock(held, ttl=60).acquire(timeout=30)
            assert mine is not None and mine.fencing_token > hold_token
            mine.release()
            for q, ids in ((q_consume, consumed_ids), (q_get, got_ids)):
                back: list[concord.Task] = []
                while len(back) < 2:
                    back += alive.queue(q).get(2 - len(back), timeout=30)
                assert {t.task_id for t in back} == ids and {t.attempt for t in back} == {2}
                for t in back:
                    t.ack()
            with pytest.raises(concord.ConcordError):
                next(consumer)
            with pytest.raises(concord.ConcordError):
                next(feed)
            with channel, pytest.raises(grpc.RpcError):
                next(events)

            # A server on the dead one's port serves the same clients again.
            replacement = ServerProcess("--redis-url", redis_server.url, port=doomed.port)
            replacement.start(tmp_path / "replacement.log")
            task = alive.queue(q_wait).put("late")
            their_get.join(30)
            assert their_get.error is None and [t.task_id for t in their_get.result] == [task]
            our_lock.result.release()
            our_sem.result.release()
            for w in (their_lock, their_sem):
                w.join(30)
                assert w.error is None and w.result is not None, (w.error, w.result)
                w.result.release()
            with client.chat.subscribe(b, ack_mode="explicit") as again:
                assert next(iter(again)).body == "m1"  # received before the crash, never acked
        finally:
            if replacement is not None:
                replacement.stop()


def test_a_subscriber_that_stops_reading_does_not_grow_server_memory(fresh_redis, tmp_path, name):
    """80 MiB of chat messages go to a subscriber that reads none of them: gRPC flow
    control must stop the server's stream (an async generator blocked in its yield),
    not let the server queue the messages in memory. The messages are sent through
    another server, so the measured one only streams."""
    limits = ["--chat-max-bytes", str(512 * MIB), "--chat-max-messages", "100000"]
    measured = ServerProcess("--redis-url", fresh_redis.url, *limits).start(tmp_path / "measured.log")
    sender = ServerProcess("--redis-url", fresh_redis.url, *limits).start(tmp_path / "sender.log")
    stalled, late, author = f"{name}:stalled", f"{name}:late", f"{name}:author"
    body = "x" * (64 * 1024)  # the largest body the default --chat-max-message-size allows
    count = 80 * MIB // len(body)
    try:
        with concord.Client(measured.target) as here, concord.Client(sender.target) as there:
            chat_id = there.chat.create(author, [stalled], "hello")
            stuck = here.chat.subscribe(stalled)  # auto ack: its seen id shows how far its stream got
            assert next(iter(stuck)).body == "hello"
            pid = measured.proc.pid
            peak_before = _memory_kib(pid, "VmHWM")

            for _ in range(count):
                there.chat.send(chat_id, author, body)
            # A barrier: the measured server streams a message sent after all of them
            # to a member who joined after them, so it has had every notification of
            # the chat (and, without flow control, time to push all of it).
            there.chat.join(chat_id, late)
            with here.chat.subscribe(late) as barrier:
                there.chat.send(chat_id, author, "end")
                assert next(iter(barrier)).body == "end"

            grown_mib = (_memory_kib(pid, "VmHWM") - peak_before) / 1024
            seen = {c.chat_id: c.seen_id for c in there.chat.list_chats(stalled)}[chat_id]
            assert seen < count // 2, f"the server pushed {seen} of {count + 2} messages at a reader that reads none"
            assert grown_mib < 64, f"server memory grew {grown_mib:.0f} MiB while a subscriber did not read"
            # Nothing was lost for the stalled one either: it gets the rest once it reads.
            ids = [m.message_id for _, m in zip(range(count + 1), iter(stuck))]
            assert ids == list(range(2, count + 3))
            stuck.close()
    finally:
        measured.stop()
        sender.stop()
