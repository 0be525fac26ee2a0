"""Queue faults: Redis restarting, a server killed under a Consume stream, a consumer
process killed, a server shutting down under blocked Dequeues. No task is lost."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading

import pytest

import concord
from support import ServerProcess, unless_unavailable, wait_until

CONSUMER_SCRIPT = """
import sys, concord
client = concord.Client(sys.argv[1])
with client.queue(sys.argv[2]).consume(lease_ttl=float(sys.argv[3]), prefetch=3) as tasks:
    for task in tasks:
        print(task.task_id, flush=True)
"""


def test_redis_restart_loses_no_task_and_wakes_blocked_gets(fresh_redis, tmp_path, name):
    server = ServerProcess("--redis-url", fresh_redis.url).start(tmp_path / "server.log")
    try:
        with concord.Client(server.target, timeout=5) as client:
            q = client.queue(name)
            before = {r.task_id for r in q.put_many([concord.NewTask("t", i) for i in range(10)])}
            leased = q.get(3, lease_ttl=120)
            other = client.queue(f"{name}:idle")
            woke: list[concord.Task] = []

            def blocked_get() -> None:
                while not woke:
                    try:
                        woke.extend(other.get(timeout=30))
                    except concord.Unavailable:
                        pass  # Redis is restarting: retry, as a worker would

            waiter = threading.Thread(target=blocked_get)
            waiter.start()

            fresh_redis.stop()
            with pytest.raises(concord.Unavailable):
                q.put("during")
            with pytest.raises(concord.Unavailable):
                q.get()
            fresh_redis.start()  # same port, same append-only file

            late = wait_until(lambda: unless_unavailable(other.put, "after"), message="service back after Redis restart")
            waiter.join(30)
            assert [t.task_id for t in woke] == [late]
            for t in leased:  # leases survive the restart
                t.ack()
            rest = q.get(10)
            assert {t.task_id for t in rest} | {t.task_id for t in leased} == before
            for t in rest:
                t.ack()
            assert q.stats().ready == 0
    finally:
        server.stop()


def test_a_server_killed_under_a_consume_stream_loses_no_task(redis_server, concord_server, tmp_path, name):
    doomed = ServerProcess("--redis-url", redis_server.url).start(tmp_path / "doomed.log")
    try:
        with concord.Client(concord_server.target) as survivor, concord.Client(doomed.target) as client:
            ids = {r.task_id for r in survivor.queue(name).put_many([concord.NewTask("t", i) for i in range(3)])}
            consumer = client.queue(name).consume(lease_ttl=1, prefetch=3)
            got = iter(consumer)
            held = {next(got).task_id for _ in range(3)}
            assert held == ids
            doomed.kill()  # SIGKILL: no hand-back, no drain
            # The leases run out and another server hands the tasks out again.
            again = wait_until(lambda: survivor.queue(name).get(3, timeout=5), message="tasks back after the lease")
            while len(again) < 3:
                again += survivor.queue(name).get(3 - len(again), timeout=5)
            assert {t.task_id for t in again} == ids and {t.attempt for t in again} == {2}
            for t in again:
                t.ack()
            with pytest.raises(concord.ConcordError):
                list(got)  # the stream reports the dead server
    finally:
        doomed.kill()


async def test_an_ack_on_a_consume_stream_whose_server_died_is_a_concord_error(redis_server, tmp_path, name):
    """The async consumer's ack after its stream ended says why (the stream's error),
    not grpc's 'InvalidStateError: RPC already finished'."""
    doomed = ServerProcess("--redis-url", redis_server.url).start(tmp_path / "doomed.log")
    try:
        async with concord.AsyncClient(doomed.target) as client:
            await client.queue(name).put("t", 1)
            consumer = client.queue(name).consume(lease_ttl=5)
            async with consumer:
                task = await anext(aiter(consumer))
                doomed.kill()
                with pytest.raises(concord.ConcordError):
                    async for _ in consumer:  # the stream reports the dead server
                        pass
                with pytest.raises(concord.ConcordError):
                    await consumer.ack(task)
    finally:
        doomed.kill()


def test_a_killed_consumer_process_keeps_its_leases_until_they_expire(concord_server, client, name):
    """The server cannot tell a consumer that died from one whose connection broke and
    that is still working (it settles by its lease later): either way the leases run
    out, and then the tasks come back for their next attempt, none lost."""
    q = client.queue(name)
    ids = {r.task_id for r in q.put_many([concord.NewTask("t", i) for i in range(3)])}
    proc = subprocess.Popen([sys.executable, "-c", CONSUMER_SCRIPT, concord_server.target, name, "3"],
                            stdout=subprocess.PIPE, text=True)
    try:
        seen = {proc.stdout.readline().strip() for _ in range(3)}
        assert seen == ids and q.stats().leased == 3
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        first_lease_ends = {t.task_id: t.lease_expires_at for t in q.peek("leased")}
        back = []
        while len(back) < 3:
            got = q.get(3 - len(back), timeout=10)
            assert got, "the leases expired and nothing came back"
            back += got
        for t in back:  # each task's second lease began only once its first had run out
            assert q.get_task(t.task_id).leased_at >= first_lease_ends[t.task_id]
        assert {t.task_id for t in back} == ids and all(t.attempt == 2 for t in back)
        for t in back:
            t.ack()
    finally:
        proc.kill()
        proc.wait()


def test_shutdown_ends_blocked_dequeues_with_unavailable(redis_server, redis_sync, tmp_path, name):
    server = ServerProcess("--redis-url", redis_server.url).start(tmp_path / "server.log")
    errors: list[Exception] = []
    with concord.Client(server.target) as client:
        def blocked() -> None:
            try:
                client.queue(name).get(timeout=60)
            except concord.ConcordError as exc:
                errors.append(exc)

        waiter = threading.Thread(target=blocked)
        waiter.start()
        channel = f"{{concord:queue:{name}}}:wake"
        wait_until(lambda: redis_sync.execute_command("PUBSUB", "SHARDNUMSUB", channel)[1] == 1,
                   message="the dequeue waiting on its queue's doorbell")
        server.signal(signal.SIGTERM)
        waiter.join(15)
        assert not waiter.is_alive()
    assert server.proc.wait(15) == 0  # exits by itself, cleanly (a second SIGTERM could race its exit)
    assert errors and isinstance(errors[0], concord.Unavailable)



WORKER_SCRIPT = """
import sys, time, concord
client = concord.Client(sys.argv[1])
worker = concord.Worker(client, [sys.argv[2]], concurrency=1, grace=20)

@worker.task("slow")
def slow(task):
    print("started", task.task_id, flush=True)
    time.sleep(1)
    print("finished", task.task_id, flush=True)

worker.run()
print("stopped", flush=True)
"""


def test_a_worker_stops_gracefully_on_sigterm_finishing_its_task(concord_server, client, name):
    q = client.queue(name)
    first, second = q.put("slow"), q.put("slow")
    proc = subprocess.Popen([sys.executable, "-c", WORKER_SCRIPT, concord_server.target, name],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().split() == ["started", first]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        assert proc.stdout.read().split() == ["finished", first, "stopped"]
    finally:
        proc.kill()
        proc.wait()
    # The running task was finished and acked; the other was never taken.
    stats = q.stats()
    assert (stats.ready, stats.leased) == (1, 0)
    assert [t.task_id for t in q.peek()] == [second]
