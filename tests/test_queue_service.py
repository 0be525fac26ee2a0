"""QueueService end to end: a real concord-server, the real Python client and Worker."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import datetime, timedelta, timezone

import grpc
import pytest

import concord
from support import wait_until, worker_running


@pytest.fixture
def queue(client, name):
    return client.queue(name)


def test_put_get_ack_with_json_payloads(queue):
    first = queue.put("send", {"to": "ada"})
    second = queue.put("send", "plain text", priority=3)
    assert queue.stats().ready == 2
    got = queue.get(5)
    assert [(t.task_id, t.type, t.attempt) for t in got] == [(second, "send", 1), (first, "send", 1)]
    assert got[0].payload == b"plain text" and got[1].json() == {"to": "ada"}
    assert got[0].lease_expires_at > datetime.now(timezone.utc)
    for t in got:
        t.ack()
    stats = queue.stats()
    assert (stats.ready, stats.leased, stats.dead) == (0, 0, 0)
    with pytest.raises(concord.TaskLeaseNotHeld) as err:
        got[0].ack()
    assert err.value.code == grpc.StatusCode.FAILED_PRECONDITION and err.value.reason == "TASK_LEASE_NOT_HELD"


def test_a_blocked_get_receives_a_task_put_by_another_client(concord_server, queue, name):
    got: list[concord.Task] = []
    t = threading.Thread(target=lambda: got.extend(queue.get(timeout=20)))
    t.start()
    with concord.Client(concord_server.target) as other:
        task_id = other.queue(name).put("wake")
    t.join(20)
    assert [x.task_id for x in got] == [task_id]


def test_run_at_and_delay_make_tasks_wait(queue):
    soon = queue.put("t", delay=0.3)
    later = queue.put("t", run_at=datetime.now(timezone.utc) + timedelta(hours=1))
    assert [t.task_id for t in queue.peek("delayed")] == [soon, later]
    assert queue.get() == []
    (t,) = queue.get(timeout=10)
    assert t.task_id == soon and t.ready_at - t.enqueued_at == timedelta(milliseconds=300)
    t.ack()


def test_dequeue_takes_from_queues_in_the_order_given(client, name):
    client.queue(f"{name}:low").put("low")
    client.queue(f"{name}:high").put("high")
    got = client.dequeue([f"{name}:high", f"{name}:low"], 5)
    assert [t.type for t in got] == ["high", "low"]
    for t in got:
        t.ack()


def test_nack_retries_then_dead_letters_and_retry_dead_revives(queue):
    queue.put("fails", max_attempts=2)
    (t,) = queue.get()
    result = t.nack("first", retry_delay=0)
    assert result.state == "ready"
    (t,) = queue.get()
    assert t.attempt == 2 and t.last_error == "first"
    assert t.nack("second").state == "dead"
    (dead,) = queue.dead()
    assert dead.task_id == t.task_id and dead.last_error == "second" and dead.state == "dead"
    assert queue.retry_dead() == 1
    (t,) = queue.get()
    assert t.attempt == 1
    t.ack()


def test_cancel_and_purge(queue):
    a = queue.put("t")
    queue.put("t", delay=60)
    queue.cancel(a)
    with pytest.raises(concord.TaskFinished):
        queue.cancel(a)
    with pytest.raises(concord.TaskNotFound):
        queue.cancel("0")
    assert queue.purge() == 1
    assert queue.stats().delayed == 0


def test_dedupe_returns_the_first_task(queue):
    first = queue.put("t", dedupe_key="order-42")
    assert queue.put("t", dedupe_key="order-42") == first
    results = queue.put_many([concord.NewTask("t", dedupe_key="order-42"), concord.NewTask("t", dedupe_key="x")])
    assert results[0] == concord.Enqueued(first, True) and not results[1].duplicate


def test_throttle_accepts_one_task_per_key_each_period(queue):
    first = queue.put("t", {"n": 1}, throttle_key="user-7", throttle_period=60)
    assert queue.put("t", {"n": 2}, throttle_key="user-7", throttle_period=60) == first
    results = queue.put_many([concord.NewTask("t", throttle_key="user-7", throttle_period=60),
                              concord.NewTask("t", throttle_key="user-8", throttle_period=0.3)])
    assert results[0] == concord.Enqueued(first, True) and not results[1].duplicate
    queue.get(max_tasks=2, lease_ttl=30)[0].ack()  # the period runs from acceptance, whatever becomes of the task
    # Within the period later ones name the first; after it, one is accepted again.
    later = wait_until(lambda: (r := queue.put_many([concord.NewTask("t", throttle_key="user-8",
                                                                     throttle_period=0.3)])[0]).duplicate is False
                       and r, message="the throttle period to end")
    assert later.task_id != results[1].task_id


def test_debounce_replaces_a_pending_task_and_pushes_its_run_back(queue):
    a = queue.put_many([concord.NewTask("t", {"v": 1}, delay=30, debounce_key="doc-1")])[0]
    b = queue.put_many([concord.NewTask("t2", {"v": 2}, delay=600, debounce_key="doc-1")])[0]
    assert (b.task_id, b.debounced, b.duplicate, a.debounced) == (a.task_id, True, False, False)
    task = queue.get_task(a.task_id)
    assert task.json() == {"v": 2} and task.type == "t2"
    assert (task.ready_at - task.enqueued_at).total_seconds() > 500  # pushed back to the later put's delay
    assert queue.stats().delayed == 1
    # Once it is leased (no longer pending), the next put is a new task.
    ready = queue.put_many([concord.NewTask("t", {"v": 3}, delay=0, debounce_key="doc-2")])[0]
    assert [t.task_id for t in queue.get(max_tasks=5, lease_ttl=30)] == [ready.task_id]
    fresh = queue.put_many([concord.NewTask("t", {"v": 4}, delay=0, debounce_key="doc-2")])[0]
    assert fresh.task_id != ready.task_id and not fresh.debounced
    with pytest.raises(concord.InvalidArgument):
        queue.put("t", debounce_key="doc-3")  # needs a delay
    with pytest.raises(concord.InvalidArgument):
        queue.put("t", dedupe_key="x", throttle_key="y", throttle_period=1)


def test_worker_runs_callbacks_concurrently_acks_nacks_and_dead_letters(client, queue, name):
    worker = concord.Worker(client, [name], concurrency=3, lease_ttl=5)
    seen, active, peak = [], [0], [0]
    lock = threading.Lock()
    gate = threading.Event()

    @worker.task("work")
    def work(task):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        gate.wait(10)
        with lock:
            active[0] -= 1
            seen.append(task.json())

    @worker.task("broken")
    def broken(task):
        raise RuntimeError("always fails")

    queue.put_many([concord.NewTask("work", i) for i in range(9)])
    queue.put("broken", max_attempts=1)
    queue.put("unknown-type", max_attempts=1)
    with worker_running(worker, join=10) as runner:
        try:
            wait_until(lambda: active[0] == 3, message="3 running")
            gate.set()
            wait_until(lambda: len(seen) == 9 and queue.stats().dead == 2, message="all settled")
        finally:
            gate.set()
    assert not runner.is_alive() and peak[0] == 3 and sorted(seen) == list(range(9))
    errors = sorted(t.last_error.splitlines()[0] for t in queue.dead())
    assert errors == ["RuntimeError: always fails", "no handler for task type 'unknown-type'"]
    stats = queue.stats()
    assert (stats.ready, stats.leased) == (0, 0)


def test_worker_renews_the_lease_of_a_long_task(client, queue, name):
    worker = concord.Worker(client, [name], concurrency=1, lease_ttl=0.6)
    runs: list[int] = []

    @worker.task("long")
    def long(task):
        runs.append(task.attempt)
        time.sleep(2)  # the work itself: more than three lease lengths

    queue.put("long")
    with worker_running(worker, join=10):
        wait_until(lambda: worker.processed == 1, message="the long task to finish")
    assert runs == [1]  # never handed out a second time
    assert queue.stats().leased == 0


def test_worker_stop_interrupts_a_waiting_fetch_promptly(client, name):
    worker = concord.Worker(client, [name])
    with worker_running(worker, join=5) as runner:
        wait_until(lambda: worker._stream is not None, message="worker waiting for tasks")
    assert not runner.is_alive()


def test_consume_pushes_tasks_within_credits_and_settles_over_the_stream(client, queue):
    ids = [r.task_id for r in queue.put_many([concord.NewTask("c", i) for i in range(5)])]
    received = []
    with queue.consume(prefetch=2) as tasks:
        for task in tasks:
            received.append(task.task_id)
            assert queue.stats().leased <= 2  # never more than the credits granted
            if len(received) == 3:
                task.nack("retry me", retry_delay=0)
            else:
                task.ack()
            if len(received) == 6:
                break
    assert sorted(set(received)) == sorted(ids) and len(received) == 6
    wait_until(lambda: queue.stats().leased == 0, message="nothing left leased")


def test_a_consume_stream_that_ends_returns_its_tasks_at_once(queue):
    queue.put("c")
    with queue.consume(lease_ttl=60) as tasks:
        first = next(iter(tasks))
        assert queue.stats().leased == 1
    # Well before the 60 s lease: the server handed the task back when the stream ended.
    wait_until(lambda: queue.stats().ready == 1, timeout=5, message="task returned")
    (again,) = queue.get()
    assert again.task_id == first.task_id and again.attempt == 2 and again.last_error == "consumer stream ended"
    again.ack()


async def test_async_queue_and_consume(aclient, name):
    q = aclient.queue(name)
    ids = [await q.put("a", i) for i in range(3)]
    async with q.consume(prefetch=3) as tasks:
        got = []
        async for task in tasks:
            got.append(task.json())
            await task.ack()
            if len(got) == 3:
                break
    assert got == [0, 1, 2]
    waiting = asyncio.create_task(q.get(timeout=10))
    other = await q.put("late")
    (t,) = await waiting
    assert t.task_id == other and t.task_id not in ids
    await t.ack()
    assert (await q.stats()).ready == 0


def test_a_paused_queue_leases_nothing_while_tasks_arrive_and_resume_wakes_every_waiter(concord_server, queue, name):
    assert queue.pause() is False and queue.pause() is True  # pausing twice changes nothing
    got: list[str] = []
    lock = threading.Lock()
    clients = [concord.Client(concord_server.target) for _ in range(4)]
    streams = [c.queue(name).consume(prefetch=2) for c in clients[:3]]

    def consume(tasks: concord.Consumer) -> None:
        with tasks:
            for task in tasks:
                task.ack()
                with lock:
                    got.append(task.task_id)

    def blocked_get() -> None:
        try:
            tasks = clients[3].queue(name).get(timeout=30)
        except concord.ConcordError:  # its client was closed once the consumers took every task
            return
        for task in tasks:
            task.ack()
            with lock:
                got.append(task.task_id)

    workers = [threading.Thread(target=consume, args=(stream,), daemon=True) for stream in streams]
    workers.append(threading.Thread(target=blocked_get, daemon=True))
    for w in workers:
        w.start()
    ids = [r.task_id for r in queue.put_many([concord.NewTask("p", i) for i in range(6)])]
    assert queue.get() == []  # try once
    assert queue.get(timeout=0.5) == []  # a blocked get waits out its timeout
    stats = queue.stats()
    assert stats.paused and (stats.ready, stats.leased) == (6, 0) and got == []

    assert queue.resume() is True and queue.stats().paused is False
    wait_until(lambda: sorted(got) == sorted(ids), timeout=20, message="every task leased once after resume")
    assert queue.resume() is False
    for stream in streams:
        stream.close()
    for w in workers:
        w.join(5)
    for c in clients:
        c.close()


async def test_async_pause_and_resume(aclient, name):
    q = aclient.queue(name)
    assert await q.pause() is False
    await q.put("a")
    waiting = asyncio.create_task(q.get(timeout=20))
    assert await q.get(timeout=0.3) == [] and (await q.stats()).paused
    assert await q.resume() is True
    (task,) = await waiting
    await task.ack()


def test_a_handle_returns_the_result_a_worker_returned(client, queue, name):
    worker = concord.Worker(client, [name], concurrency=2, lease_ttl=5)

    @worker.task("add")
    def add(task):
        task.progress(0.5, {"step": "adding"})
        return {"sum": sum(task.json())}

    @worker.task("text")
    def text(task):
        return "plain"

    @worker.task("nothing")
    def nothing(task):
        pass

    summed, plain, empty = queue.put("add", [1, 2, 3]), queue.put("text"), queue.put("nothing")
    with worker_running(worker, join=20):
        assert summed.result(timeout=20) == {"sum": 6}
        assert plain.result(timeout=20) == "plain"
        assert empty.result(timeout=20) is None
    info = queue.get_task(summed)
    assert (info.state, info.result_type, info.last_progress.value, info.last_progress.data) == (
        "succeeded", "application/json", 0.5, {"step": "adding"})
    assert info.finished and info.finished_at >= info.leased_at >= info.enqueued_at
    assert queue.stats().finished == 3


def test_a_handle_raises_task_failed_on_death_and_cancel_and_times_out(queue):
    doomed = queue.put("t", max_attempts=1)
    (task,) = queue.get()
    task.nack("no luck")
    with pytest.raises(concord.TaskFailed) as err:
        doomed.result(timeout=10)
    assert (err.value.task.state, err.value.task.dead_reason, err.value.task.last_error) == (
        "dead", "attempts", "no luck")
    later = queue.put("t", delay=3600)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        later.result(timeout=0.3)
    assert time.monotonic() - started >= 0.3
    waiting = queue.wait_task(later, timeout=0.2)
    assert (waiting.finished, waiting.state) == (False, "delayed")
    got: list = []
    t = threading.Thread(target=lambda: got.append(queue.wait_task(later, timeout=20)))
    t.start()
    wait_until(lambda: t.is_alive() and queue.get_task(later).state == "delayed")
    queue.cancel(later)
    t.join(20)
    assert got[0].state == "cancelled" and got[0].finished
    with pytest.raises(concord.TaskFailed):
        later.result(timeout=1)


def test_a_result_is_returned_exactly_as_acked_and_through_consume(client, queue, name):
    raw = bytes(range(256))
    a, b = queue.put("t"), queue.put("t")
    (task,) = queue.get()
    task.ack(raw)
    with queue.consume() as consumer:
        other = next(iter(consumer))
        consumer.ack(other, ["x", 1])
    assert a.result(timeout=10) == raw and queue.get_task(a).result_type == "application/octet-stream"
    assert b.result(timeout=10) == ["x", 1]


def test_queue_policy_round_trips_and_keeps_what_it_says(queue):
    default = queue.policy()
    assert (default.succeeded, default.dead) == (concord.Retention(1000, 86400.0), concord.Retention(None, None))
    assert default.retry == concord.RetryPolicy(3, "exponential", 1.0, 3600.0, False)
    policy = queue.set_policy(succeeded=concord.Retention(max_count=1), dead=concord.Retention(max_age=60))
    assert (policy.succeeded, policy.dead) == (concord.Retention(1, None), concord.Retention(None, 60.0))
    first, second = queue.put("t"), queue.put("t")
    for task in queue.get(2):
        task.ack(task.task_id)
    with pytest.raises(concord.TaskNotFound):
        queue.get_task(first)
    assert second.result(timeout=10) == second


async def test_async_handles_progress_and_policy(aclient, name):
    q = aclient.queue(name)
    handle = await q.put("t")
    assert isinstance(handle, concord.AsyncTaskHandle)
    waiter = asyncio.create_task(handle.result(timeout=20))
    (task,) = await q.get()
    await task.progress(data={"done": 1}, lease_ttl=60)
    assert (await handle.info()).last_progress.data == {"done": 1}
    await task.ack(b"async result")
    assert await waiter == b"async result"
    assert (await q.wait_task(handle, timeout=1)).finished
    assert (await q.set_policy(succeeded=concord.Retention(max_count=5))).succeeded == concord.Retention(5, None)
    assert (await q.policy()).succeeded.max_count == 5


def test_retry_policies_per_queue_and_per_task_and_unrecoverable_errors(client, queue, name):
    policy = queue.set_policy(retry=concord.RetryPolicy(max_attempts=4, backoff="fixed", initial_delay=600))
    assert policy.retry == concord.RetryPolicy(4, "fixed", 600.0, 3600.0, False)
    queued = queue.put("t")
    own = queue.put("t", retry=concord.RetryPolicy(backoff="exponential", initial_delay=120, max_attempts=2))
    by_queue = {t.task_id: t for t in queue.get(2)}
    assert (by_queue[queued].max_attempts, by_queue[own].max_attempts) == (4, 2)
    first, second = by_queue[queued].nack("x"), by_queue[own].nack("x")
    assert (first.state, second.state) == ("delayed", "delayed")
    assert timedelta(seconds=470) < first.retry_at - second.retry_at < timedelta(seconds=490)  # 600 s vs 120 s
    worker = concord.Worker(client, [name], lease_ttl=5)

    @worker.task("bad")
    def bad(task):
        raise concord.UnrecoverableError("malformed order")

    doomed = queue.put("bad")
    with worker_running(worker, join=20):
        with pytest.raises(concord.TaskFailed) as err:
            doomed.result(timeout=20)
    assert (err.value.task.dead_reason, err.value.task.attempt) == ("not_retryable", 1)
    assert "malformed order" in err.value.task.last_error


def test_groups_through_the_client_take_turns_wait_with_a_reason_and_report_it(queue):
    queue.set_policy(group_max_leased=1, rate=concord.LeaseRate(1000, 1.0))
    policy = queue.policy()
    assert (policy.group_max_leased, policy.rate) == (1, concord.LeaseRate(1000, 1.0, 1000))
    burst = [queue.put("t", group="burst") for _ in range(20)]
    quiet = queue.put("t", group="quiet")
    got = queue.get(5)
    assert sorted(t.group for t in got) == ["burst", "quiet"] and quiet in [t.task_id for t in got]
    assert queue.get_task(burst[1]).wait_reason == "group_at_cap"
    (burst_group,) = [g for g in queue.groups() if g.name == "burst"]
    assert (burst_group.ready, burst_group.leased, burst_group.max_leased, burst_group.wait_reason) == (
        19, 1, 1, "group_at_cap")
    watch = queue.watch(from_oldest=True)
    held = next(e for e in watch if e.kind == "held")
    watch.close()
    assert (held.group, held.wait_reason, held.task_id) == ("burst", "group_at_cap", "")
    assert queue.set_group("burst", max_leased=3, weight=2).max_leased == 3
    assert len(queue.get(5)) == 2  # burst now has 3 at once; quiet has nothing left
